"""How a :class:`~ranksight.analyses.diff.DiffResult` is shown: terminal, Markdown, HTML sections.

:func:`diff_sections` is the one place that decides what a reader sees of a diff; the terminal,
Markdown and HTML renderers all take its output. Shape (a list, in display order)::

    [
      {"id": "diff-summary",      # stable slug
       "title": "Step time and breakdown",
       "text": "test is 20.6% faster per step than base (...)",   # may be ""
       "table": pl.DataFrame | None,  # display columns only (CSV/JSON keep every column)
       "rows": 20 | None},        # rows to show (None = all)
      ...
    ]

Sections: ``diff-summary`` (verdict + summary table), ``diff-contributors``, ``diff-ops``,
``diff-kernels``, ``diff-collectives`` (only when a side has collectives), ``diff-op_perf_categories`` and
``diff-op_perf`` (operators side by side, when op-perf runs on both sides), ``diff-method``
(significance method and notes as text, no table).
"""

from __future__ import annotations

import sys
from typing import IO, TYPE_CHECKING, Any

import polars as pl

from ranksight.report.markdown import md_escape, table_to_markdown
from ranksight.report.terminal import console, safe_text

if TYPE_CHECKING:
    from ranksight.analyses.diff import DiffResult

__all__ = ["diff_sections", "diff_markdown", "print_diff", "DISPLAY_COLUMNS"]

#: Columns shown per table on screens (every column stays in CSV and JSON).
DISPLAY_COLUMNS: dict[str, tuple[str, ...]] = {
    "op_perf": (
        "op",
        "category",
        "shapes",
        "base_calls",
        "test_calls",
        "base_us_per_call",
        "test_us_per_call",
        "ratio",
        "delta_us",
        "base_tflop_per_s",
        "test_tflop_per_s",
        "base_pct_of_roofline",
        "test_pct_of_roofline",
        "only",
    ),
    "summary": (
        "metric",
        "unit",
        "base_median",
        "base_iqr",
        "test_median",
        "test_iqr",
        "delta",
        "delta_pct",
        "ci_low",
        "ci_high",
        "p_value",
        "change",
    ),
    "contributors": (
        "kind",
        "name",
        "op",
        "base_us",
        "test_us",
        "delta_us",
        "share_of_change_pct",
        "q_value",
        "change",
    ),
    "ops": (
        "kind",
        "name",
        "base_calls",
        "test_calls",
        "base_us",
        "test_us",
        "delta_us",
        "delta_pct",
        "q_value",
        "change",
    ),
    "kernels": (
        "kind",
        "kernel",
        "test_kernel",
        "op",
        "match",
        "base_calls",
        "test_calls",
        "base_us",
        "test_us",
        "delta_us",
        "delta_pct",
        "change",
    ),
    "collectives": (
        "coll_type",
        "base_calls",
        "test_calls",
        "base_mb",
        "test_mb",
        "base_us",
        "test_us",
        "base_busbw_gbps",
        "test_busbw_gbps",
        "delta_us",
        "q_value",
        "change",
    ),
}

_TITLES = {
    "op_perf": "Operators side by side (op-perf: per call and per rank, matched by op, shapes, dtypes)",
    "op_perf_categories": "Operator categories that explain the difference (op-perf)",
    "summary": "Step time and breakdown (per step)",
    "contributors": "Top contributors to the step-time change",
    "ops": "Operators, annotations and runtime calls (per step)",
    "kernels": "Kernels, memcpys and memsets (per step)",
    "collectives": "Collectives by type (per step)",
}

_TEXT = {
    "op_perf": "Kernel time of each operator group over the whole trace per rank; ratio = test µs/call ÷ base "
    "µs/call; cudnn_/miopen_ ops matched as one (docs/diff.md).",
    "op_perf_categories": "share_of_delta_pct = the category's delta ÷ the total operator-time delta.",
    "contributors": "Kernels by GPU time; CPU ops and runtime calls by exposed time (self time while the GPU is idle). "
    "share_of_change_pct = delta / step-time delta.",
    "ops": "Inclusive time per step; names normalised; sorted by |delta|.",
    "kernels": "Keyed by kernel name and launching op; test_kernel is set when the kernels were matched through their "
    "op.",
}


def _display(name: str, df: pl.DataFrame) -> pl.DataFrame:
    cols = [c for c in DISPLAY_COLUMNS.get(name, tuple(df.columns)) if c in df.columns]
    return df.select(cols) if cols else df


def diff_sections(result: DiffResult, *, rows: int | None = 20) -> list[dict[str, Any]]:
    """The sections of a diff in display order (shape in the module doc)."""
    out: list[dict[str, Any]] = []
    for name in ("summary", "contributors", "ops", "kernels", "collectives", "op_perf_categories", "op_perf"):
        if name not in result.tables:
            continue
        df = result.tables[name]
        text = result.verdict if name == "summary" else _TEXT.get(name, "")
        if name == "contributors" and df.height == 0:
            text = "No kernel, operator or runtime call changed beyond step-to-step noise."
        out.append(
            {
                "id": f"diff-{name}",
                "title": _TITLES[name],
                "text": text,
                "table": _display(name, df),
                "rows": None if name in ("summary", "contributors") else rows,
            }
        )
    out.append(
        {"id": "diff-method", "title": "Method and notes", "text": "\n".join(result.notes), "table": None, "rows": None}
    )
    return out


def diff_markdown(result: DiffResult, *, rows: int | None = 20) -> str:
    """A Markdown report for a pull-request comment."""
    labels = result.labels
    parts = [f"## ranksight diff: {md_escape(labels[1])} vs {md_escape(labels[0])}"]
    for sec in diff_sections(result, rows=rows):
        if sec["id"] == "diff-method":
            body = "\n".join(f"- {md_escape(n)}" for n in result.notes)
            parts.append(f"<details><summary>{sec['title']}</summary>\n\n{body}\n\n</details>")
            continue
        block = [f"### {sec['title']}"]
        if sec["text"]:
            block.append(f"**{md_escape(sec['text'])}**" if sec["id"] == "diff-summary" else md_escape(sec["text"]))
        if sec["table"] is not None and sec["table"].height:
            block.append(table_to_markdown(sec["table"], max_rows=sec["rows"]))
        parts.append("\n\n".join(block))
    return "\n\n".join(parts) + "\n"


def print_diff(result: DiffResult, *, file: IO[str] | None = None, rows: int | None = 20) -> None:
    """The terminal view: verdict, tables (display columns), notes."""
    from ranksight.report.terminal import _rich_table  # one table style for every command

    con = console(file or sys.stdout)
    for sec in diff_sections(result, rows=rows):
        if sec["id"] == "diff-method":
            for n in result.notes:
                con.print(safe_text(f"note: {n}"))
            continue
        if sec["id"] == "diff-summary" and sec["text"]:
            con.print(safe_text(sec["text"]))
        if sec["table"] is not None and (sec["table"].height or sec["id"] == "diff-contributors"):
            con.print(
                _rich_table(
                    sec["title"], sec["table"], sec["rows"] if sec["rows"] is not None else max(sec["table"].height, 1)
                )
            )
        if sec["id"] == "diff-contributors" and sec["table"].height == 0:
            con.print(safe_text(sec["text"]))
