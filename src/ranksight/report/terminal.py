"""Render tables for the terminal (rich), or as CSV / JSON text."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping, Sequence
from typing import IO, Any

import polars as pl
from rich.console import Console
from rich.table import Table
from rich.text import Text

__all__ = ["console", "print_tables", "tables_to_json", "format_value"]

FORMATS = ("table", "csv", "json")


def console(file: IO[str] | None = None) -> Console:
    """A console that does not wrap tables when output is not a terminal."""
    f = file or sys.stdout
    is_tty = hasattr(f, "isatty") and f.isatty()
    return Console(file=f, width=None if is_tty else 250, soft_wrap=False, highlight=False)


MAX_TEXT = 80

#: C0/C1 control characters (ESC included): trace text must not drive the terminal.
_CONTROL = {c: f"\\x{c:02x}" for c in [*range(0x20), *range(0x7F, 0xA0)]}


def safe_text(s: str) -> Text:
    """Trace-derived text for the terminal: never parsed as rich markup, control characters
    shown as ``\\xNN`` escapes."""
    return Text(s.translate(_CONTROL))


def format_value(v: Any) -> str:
    """A cell as text. A value that could not be computed (None, NaN, ±inf) is empty, as
    ``--format json`` writes it null; the notes say why."""
    if v is None:
        return ""
    if isinstance(v, str):
        return v if len(v) <= MAX_TEXT else v[: MAX_TEXT - 1] + "…"
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return ""
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        if abs(v) >= 1 or v == 0:
            return f"{v:,.2f}"
        return f"{v:.3g}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return str(v)


def _rich_table(title: str, df: pl.DataFrame, max_rows: int) -> Table:
    t = Table(title=safe_text(title), title_justify="left", show_lines=False)
    for c, dt in df.schema.items():
        t.add_column(safe_text(c), justify="right" if dt.is_numeric() else "left", overflow="fold")
    for row in df.head(max_rows).iter_rows():
        t.add_row(*(safe_text(format_value(v)) for v in row))
    if df.height > max_rows:
        t.caption = f"{df.height - max_rows} more rows (use --format csv for all)"
    return t


def _jsonable(v: Any) -> Any:
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
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


def print_tables(
    tables: Mapping[str, pl.DataFrame],
    fmt: str = "table",
    *,
    notes: Sequence[str] = (),
    file: IO[str] | None = None,
    max_rows: int = 50,
) -> None:
    """Write tables in one of :data:`FORMATS`."""
    out = file or sys.stdout
    if fmt == "json":
        out.write(tables_to_json(tables, notes) + "\n")
        return
    if fmt == "csv":
        many = len(tables) > 1
        for name, df in tables.items():
            if many:
                out.write(f"# {name}\n")
            out.write(_csv(df))
            if many:
                out.write("\n")
        return
    con = console(out)
    for name, df in tables.items():
        con.print(_rich_table(name, df, max_rows))
    for n in notes:
        con.print(safe_text(f"note: {n}"))


def _csv(df: pl.DataFrame) -> str:
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
