"""Render tables for the terminal (rich), or as CSV / JSON text."""

from __future__ import annotations

import json
import math
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any

import polars as pl
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ranksight.errors import UsageError
from ranksight.report.cells import format_columns, format_value
from ranksight.report.markdown import tables_to_markdown

__all__ = [
    "console",
    "print_tables",
    "tables_to_json",
    "analysis_doc",
    "format_value",
    "select_table",
    "table_csv",
    "write_tables",
    "FORMATS",
    "ANALYSIS_SCHEMA",
    "ANALYSIS_SCHEMA_VERSION",
]

#: The output formats, one set of names for every command (each offers the ones that make sense):
#: ``table`` (the terminal), ``markdown`` (pull-request comments), ``csv`` (one table, for
#: ``pandas.read_csv`` / ``polars.read_csv``), ``json`` (every table, with a versioned schema).
FORMATS = ("table", "markdown", "csv", "json")

#: ``analyze --format json`` follows ``docs/analysis-schema.json``: bumped when a field is removed
#: or changes meaning; adding fields (or tables and columns to an analysis) keeps the version.
ANALYSIS_SCHEMA = "ranksight-analysis"
ANALYSIS_SCHEMA_VERSION = 1


#: Width of tables written to a file or a pipe (not a terminal) when ``COLUMNS`` is not set.
PIPE_WIDTH = 250


def console(file: IO[str] | None = None) -> Console:
    """A console for tables: the terminal's width on a terminal, else ``$COLUMNS`` when set, else
    :data:`PIPE_WIDTH` (so that output to a file or a pipe is not cut at 80 columns)."""
    f = file or sys.stdout
    is_tty = hasattr(f, "isatty") and f.isatty()
    width: int | None = None
    if not is_tty:
        cols = os.environ.get("COLUMNS", "")
        width = int(cols) if cols.isdigit() and int(cols) > 0 else PIPE_WIDTH
    if is_tty:
        return Console(file=f, width=width, soft_wrap=False, highlight=False)
    # not a terminal: never an escape code, whatever rich infers from the environment or from a
    # live display started elsewhere in the process
    return Console(file=f, width=width, soft_wrap=False, highlight=False, force_terminal=False, color_system=None)


#: C0/C1 control characters (ESC included): trace text must not drive the terminal.
_CONTROL = {c: f"\\x{c:02x}" for c in [*range(0x20), *range(0x7F, 0xA0)]}


def safe_text(s: str) -> Text:
    """Trace-derived text for the terminal: never parsed as rich markup, control characters
    shown as ``\\xNN`` escapes."""
    return Text(s.translate(_CONTROL))


#: A text column is never made narrower than this (nor than its header) to fit the width; its text
#: is cut with "…".
MIN_TEXT_WIDTH = 12


def _fit(widths: list[int], least: list[int], numeric: list[bool], room: int) -> tuple[list[int], int]:
    """Column widths that fit ``room`` characters: numbers keep their full width; text columns give
    up width (the widest first, down to ``least``: their header, at least :data:`MIN_TEXT_WIDTH`);
    when even that is too wide, columns are left out from the right (never the first). Returns the
    widths of the columns kept and how many are kept."""
    keep = len(widths)

    def narrowest(n: int) -> int:  # the narrowest the first n columns can be, with borders
        return sum(w if num else lo for w, lo, num in zip(widths[:n], least[:n], numeric[:n], strict=True)) + 3 * n + 1

    while keep > 1 and narrowest(keep) > room:
        keep -= 1
    out = widths[:keep]
    excess = sum(out) + 3 * keep + 1 - room
    while excess > 0:
        text = [i for i in range(keep) if not numeric[i] and out[i] > least[i]]
        if not text:
            break
        i = max(text, key=lambda j: out[j])
        cut = min(excess, out[i] - least[i])
        out[i] -= cut
        excess -= cut
    return out, keep


def _rich_table(title: str, df: pl.DataFrame, max_rows: int, width: int | None = None) -> Table:
    """One table for the terminal: durations and sizes in human units (:mod:`ranksight.report.cells`),
    numbers right-aligned and never wrapped, text cut with "…" to fit ``width`` (default: the
    console's); columns that still do not fit are left out, and the caption says which."""
    if width is None:
        width = console().width
    shown = df.head(max_rows)
    cells = format_columns(shown)
    names = list(df.columns)
    numeric = [dt.is_numeric() for dt in df.schema.values()]
    natural = [max([len(n), *(len(r[i]) for r in cells)]) for i, n in enumerate(names)]
    least = [min(w, max(MIN_TEXT_WIDTH, len(n))) for w, n in zip(natural, names, strict=True)]
    widths, keep = _fit(natural, least, numeric, width)
    t = Table(title=safe_text(title), title_justify="left", show_lines=False)
    for i in range(keep):
        if numeric[i]:
            t.add_column(safe_text(names[i]), justify="right", no_wrap=True, width=widths[i], overflow="ellipsis")
        else:
            t.add_column(safe_text(names[i]), justify="left", no_wrap=True, width=widths[i], overflow="ellipsis")
    for row in cells:
        t.add_row(*(safe_text(v) for v in row[:keep]))
    captions = []
    if df.height > max_rows:
        captions.append(f"{df.height - max_rows} more rows (use --format csv for all)")
    if keep < len(names):
        left = names[keep:]
        captions.append(
            f"not shown at {width} columns: {', '.join(left)} (a wider terminal, COLUMNS=N, or --format csv)"
        )
    if captions:
        t.caption = "; ".join(captions)
        t.caption_justify = "left"
    return t


def _jsonable(v: Any) -> Any:
    """A value for JSON: NaN and ±inf (not JSON) are null, in nested values too."""
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    if isinstance(v, list | tuple):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    return v


def tables_to_json(
    tables: Mapping[str, pl.DataFrame], notes: Sequence[str] = (), extra: Mapping[str, Any] | None = None
) -> str:
    doc: dict[str, Any] = dict(extra or {})
    doc["tables"] = {
        n: [{k: _jsonable(v) for k, v in r.items()} for r in df.iter_rows(named=True)] for n, df in tables.items()
    }
    doc["notes"] = list(notes)
    return json.dumps(doc, indent=1, default=str)


def select_table(tables: Mapping[str, pl.DataFrame], name: str | None) -> str:
    """The table ``name`` (the first, the analysis' main table, when None); a
    :class:`~ranksight.errors.UsageError` naming the tables when there is no such table."""
    if name is None:
        if not tables:
            raise UsageError("no table to write")
        return next(iter(tables))
    if name not in tables:
        raise UsageError(f"no table {name!r}; tables: {', '.join(tables) or 'none'}")
    return name


def print_tables(
    tables: Mapping[str, pl.DataFrame],
    fmt: str = "table",
    *,
    notes: Sequence[str] = (),
    file: IO[str] | None = None,
    max_rows: int = 50,
    table: str | None = None,
) -> None:
    """Write tables in one of :data:`FORMATS`. ``csv`` writes ONE table (``table``, default the
    first) so that the output is a plain CSV file; ``json`` and the others write every table
    (only ``table`` when given). The notes go with ``table``, ``markdown`` and ``json``; the caller
    says them elsewhere for ``csv``."""
    out = file or sys.stdout
    if fmt == "csv":
        out.write(table_csv(tables[select_table(tables, table)]))
        return
    if table is not None:
        tables = {table: tables[select_table(tables, table)]}
    if fmt == "json":
        out.write(tables_to_json(tables, notes) + "\n")
        return
    if fmt == "markdown":
        out.write(tables_to_markdown(tables, notes, max_rows=max_rows))
        return
    con = console(out)
    for name, df in tables.items():
        con.print(_rich_table(name, df, max_rows))
    for n in notes:
        con.print(safe_text(f"note: {n}"))


def analysis_doc(
    analysis: str,
    tables: Mapping[str, pl.DataFrame],
    notes: Sequence[str] = (),
    *,
    ranks: Sequence[int] = (),
    options: Mapping[str, Any] | None = None,
    missing: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The versioned JSON document of one analysis (``docs/analysis-schema.json``): its tables as
    lists of row objects, every column's type (so that a table without rows still says its
    columns), the notes, and ``missing`` (kind and reason) when the traces lack what it needs."""
    from ranksight import __version__

    doc: dict[str, Any] = {
        "schema": ANALYSIS_SCHEMA,
        "schema_version": ANALYSIS_SCHEMA_VERSION,
        "ranksight_version": __version__,
        "analysis": analysis,
        "ranks": list(ranks),
        "options": {k: _jsonable(v) for k, v in (options or {}).items()},
        "columns": {n: {c: str(dt) for c, dt in df.schema.items()} for n, df in tables.items()},
        "tables": {n: _rows(df) for n, df in tables.items()},
        "notes": list(notes),
    }
    if missing is not None:
        doc["missing"] = dict(missing)
    return doc


def _rows(df: pl.DataFrame) -> list[dict[str, Any]]:
    return [{k: _jsonable(v) for k, v in r.items()} for r in df.iter_rows(named=True)]


def table_csv(df: pl.DataFrame) -> str:
    """One table as CSV text (header and rows; nested values as JSON text; a value that could not
    be computed is an empty cell)."""
    flat = df.with_columns(
        pl.col(c).cast(pl.String) for c, dt in df.schema.items() if isinstance(dt, (pl.Categorical, pl.Enum))
    )
    # a value that could not be computed is an empty cell, as in the other formats
    flat = flat.with_columns(
        pl.when(pl.col(c).is_finite()).then(pl.col(c)).alias(c) for c, dt in flat.schema.items() if dt.is_float()
    )
    nested = [c for c, dt in flat.schema.items() if isinstance(dt, (pl.List, pl.Struct, pl.Array))]
    if nested:
        flat = flat.with_columns(
            pl.col(c).map_elements(
                lambda v: json.dumps(v.to_list() if hasattr(v, "to_list") else v), return_dtype=pl.String
            )
            for c in nested
        )
    return flat.write_csv()


#: File name extension of each format written by :func:`write_tables`.
_EXT = {"csv": "csv", "json": "json", "markdown": "md"}


def _file_stem(name: str) -> str:
    """A table name as a file name (``events by kind`` -> ``events_by_kind``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "table"


def write_tables(
    tables: Mapping[str, pl.DataFrame],
    out_dir: str,
    fmt: str = "csv",
    *,
    force: bool = False,
    inputs: Sequence[str] = (),
    doc: Callable[[Mapping[str, pl.DataFrame]], dict[str, Any]] | None = None,
) -> list[str]:
    """Every table as its own file ``out_dir/<table>.<csv|json|md>``; returns the paths. Every
    path is checked first (no input, no existing file without ``force``), then the files are
    written into a staging folder and moved into place together (:func:`ranksight.io.output.staged_dir`):
    a failure leaves nothing half-written. ``doc(tables)`` builds a JSON file's document (default:
    the tables and nothing else)."""
    from ranksight.io.output import OutputError, check_output, staged_dir

    if fmt not in _EXT:
        raise UsageError(f"-o DIR writes csv, json or markdown files, not {fmt!r}")
    files: dict[str, str] = {}
    for name in tables:
        fname = f"{_file_stem(name)}.{_EXT[fmt]}"
        if fname in files.values():
            raise UsageError(f"tables {name!r} and another one would both be written to {fname}")
        files[name] = fname
    if os.path.lexists(out_dir) and not os.path.isdir(out_dir):
        raise OutputError(f"cannot write into {out_dir}: it exists and is not a directory")
    for fname in files.values():
        check_output(os.path.join(out_dir, fname), inputs=inputs, force=force)
    written = []
    with staged_dir(out_dir) as tmp:
        for name, df in tables.items():
            one = {name: df}
            if fmt == "csv":
                text = table_csv(df)
            elif fmt == "json":
                text = json.dumps(doc(one) if doc else {"tables": {name: _rows(df)}}, indent=1, default=str) + "\n"
            else:
                text = tables_to_markdown(one, max_rows=df.height)
            with open(os.path.join(tmp, files[name]), "w", encoding="utf-8", newline="") as f:
                f.write(text)
            written.append(os.path.join(out_dir, files[name]))
    return written
