"""Render tables as GitHub-flavoured Markdown (pull-request comments, issue reports)."""

from __future__ import annotations

import polars as pl

from ranksight.report.terminal import format_value

__all__ = ["md_escape", "table_to_markdown"]

_CONTROL = {c: None for c in [*range(0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0)]}


def md_escape(text: str) -> str:
    """Trace-derived text made inert in Markdown: no HTML tags (``<T>`` in kernel names would be
    swallowed as tags), no table breaks, no control characters."""
    t = text.translate(_CONTROL).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")
    return t.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("`", "\\`").replace("*", "\\*")


def _cell(v: object) -> str:
    return md_escape(format_value(v))


def table_to_markdown(df: pl.DataFrame, *, max_rows: int | None = None) -> str:
    """One pipe table; numbers right-aligned; ``max_rows`` cuts it with a line saying so."""
    cols = df.columns
    align = ["---:" if dt.is_numeric() else ":---" for dt in df.schema.values()]
    lines = ["| " + " | ".join(_cell(c) for c in cols) + " |", "| " + " | ".join(align) + " |"]
    shown = df if max_rows is None else df.head(max_rows)
    for row in shown.iter_rows():
        lines.append("| " + " | ".join(_cell(v) for v in row) + " |")
    if max_rows is not None and df.height > max_rows:
        lines.append("")
        lines.append(f"*{df.height - max_rows} more rows (use `--format csv` for all)*")
    return "\n".join(lines)
