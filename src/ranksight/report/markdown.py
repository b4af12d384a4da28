"""Render tables as GitHub-flavoured Markdown (pull-request comments, issue reports)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import polars as pl

from ranksight.report.cells import format_columns, format_value

__all__ = ["md_escape", "table_to_markdown", "tables_to_markdown"]

_CONTROL = {c: None for c in [*range(0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0)]}


def md_escape(text: str) -> str:
    """Trace-derived text made inert in Markdown: no HTML tags (``<T>`` in kernel names would be
    swallowed as tags), no table breaks, no control characters."""
    t = text.translate(_CONTROL).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")
    return t.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("`", "\\`").replace("*", "\\*")


def _cell(v: object) -> str:
    return md_escape(format_value(v))


def table_to_markdown(df: pl.DataFrame, *, max_rows: int | None = None) -> str:
    """One pipe table; numbers right-aligned, durations and sizes in human units
    (:mod:`ranksight.report.cells`); ``max_rows`` cuts it with a line saying so."""
    cols = df.columns
    align = ["---:" if dt.is_numeric() else ":---" for dt in df.schema.values()]
    lines = ["| " + " | ".join(_cell(c) for c in cols) + " |", "| " + " | ".join(align) + " |"]
    shown = df if max_rows is None else df.head(max_rows)
    for row in format_columns(shown):
        lines.append("| " + " | ".join(md_escape(v) for v in row) + " |")
    if max_rows is not None and df.height > max_rows:
        lines.append("")
        lines.append(f"*{df.height - max_rows} more rows (use `--format csv` for all)*")
    return "\n".join(lines)


def tables_to_markdown(tables: Mapping[str, pl.DataFrame], notes: Sequence[str] = (), *, max_rows: int = 50) -> str:
    """Every table as a Markdown section (``#### name`` and a pipe table), then the notes."""
    parts = [f"#### {md_escape(name)}\n\n{table_to_markdown(df, max_rows=max_rows)}" for name, df in tables.items()]
    if notes:
        parts.append("\n".join(f"- note: {md_escape(n)}" for n in notes))
    return "\n\n".join(parts) + "\n" if parts else ""
