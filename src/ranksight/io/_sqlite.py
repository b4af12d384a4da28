"""Small, read-only helpers over the stdlib ``sqlite3`` module for the Nsight Systems reader.

Every table is read with one ``SELECT`` whose columns are named (never ``*`` by position), in
chunks of rows handed to polars at once: no Python object is built per row beyond the tuple the
``sqlite3`` cursor returns.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from urllib.request import pathname2url

import polars as pl

from ranksight.errors import TraceFormatError

__all__ = ["SQLITE_MAGIC", "is_sqlite", "connect", "columns", "read_table", "ColumnSpec"]

#: The first 16 bytes of every SQLite 3 database file.
SQLITE_MAGIC = b"SQLite format 3\x00"

#: Rows fetched per chunk (bounds the Python tuples alive at once).
CHUNK_ROWS = 500_000

#: ``output name -> (SQL expression over the table's columns, polars dtype)``; a plain column name
#: whose column is absent from the table becomes NULL.
ColumnSpec = Mapping[str, tuple[str, pl.DataType]]


def is_sqlite(path: str | Path) -> bool:
    """Whether the file starts with the SQLite 3 header."""
    try:
        with open(path, "rb") as f:
            return f.read(16) == SQLITE_MAGIC
    except OSError:
        return False


def connect(path: str | Path) -> sqlite3.Connection:
    """A read-only connection (the export is never modified, no journal is created)."""
    uri = "file:" + pathname2url(str(Path(path).resolve())) + "?mode=ro"
    try:
        con = sqlite3.connect(uri, uri=True, check_same_thread=False)
        con.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
    except sqlite3.DatabaseError as err:
        raise TraceFormatError(f"not a readable SQLite database: {err}", path=str(path)) from None
    return con


def tables(con: sqlite3.Connection) -> set[str]:
    """Names of the tables in the database."""
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def columns(con: sqlite3.Connection, table: str) -> list[str] | None:
    """Column names of ``table`` in declaration order, None when the table is absent."""
    rows = con.execute(f'PRAGMA table_info("{_ident(table)}")').fetchall()
    return [r[1] for r in rows] if rows else None


def _ident(name: str) -> str:
    if not name.replace("_", "").isalnum():
        raise ValueError(f"not an identifier: {name!r}")
    return name


def read_table(
    con: sqlite3.Connection,
    table: str,
    spec: ColumnSpec,
    *,
    where: str = "",
    params: Sequence[object] = (),
    rowid: bool = True,
) -> pl.DataFrame:
    """``SELECT`` the columns of ``spec`` (plus ``rowid`` as ``__rowid``) into a typed frame.

    An expression that is a bare column name absent from the table is selected as NULL, so
    optional columns (added or dropped between export schema versions) never fail the read.
    """
    have = set(columns(con, table) or [])
    exprs = []
    for out, (expr, _dtype) in spec.items():
        if expr.isidentifier() and expr not in have:
            expr = "NULL"
        elif expr.isidentifier():
            expr = f'"{expr}"'
        exprs.append(f'{expr} AS "{out}"')
    schema: dict[str, pl.DataType] = {k: dt for k, (_e, dt) in spec.items()}
    if rowid:
        exprs.insert(0, 'rowid AS "__rowid"')
        schema = {"__rowid": pl.Int64(), **schema}
    sql = f'SELECT {", ".join(exprs)} FROM "{_ident(table)}"' + (f" WHERE {where}" if where else "")
    cur = con.execute(sql, tuple(params))
    frames = []
    while True:
        rows = cur.fetchmany(CHUNK_ROWS)
        if not rows:
            break
        frames.append(pl.DataFrame(rows, schema=schema, orient="row"))
    if not frames:
        return pl.DataFrame(schema=schema)
    return frames[0] if len(frames) == 1 else pl.concat(frames)


def placeholders(n: int) -> str:
    """``?, ?, ...`` for an ``IN`` list of ``n`` parameters."""
    return ", ".join("?" * n)
