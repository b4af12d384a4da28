"""``ranksight summary TRACES``: headline numbers per rank, top kernels and top findings."""

from __future__ import annotations

import argparse
import json
import sys

from ranksight.cli._common import Command, Context, add_format_arg, add_trace_args, load_run, step
from ranksight.report.terminal import print_tables

__all__ = ["COMMAND", "print_summary"]


def _findings_text(df) -> str:  # noqa: ANN001
    """Findings as short plain-text paragraphs (trace text is never parsed as markup)."""
    if df.height == 0:
        return "findings: none (no diagnose rule crossed its threshold)\n"
    out = ["findings (worst first; `ranksight diagnose` for evidence, the report links each to its section):"]
    for r in df.iter_rows(named=True):
        ranks = f" · ranks {r['ranks']}" if r["ranks"] else ""
        out.append(f"  {str(r['severity']).upper():<6} {r['title']}{ranks}")
        out.append(f"         {r['summary']}")
        if r["fix"]:
            out.append(f"         fix: {r['fix']}")
    return "\n".join(out) + "\n"


def print_summary(doc, fmt: str, table: str | None = None) -> None:  # noqa: ANN001
    """Write a :class:`~ranksight.report.headline.SummaryDoc` as rich tables, CSV (one table:
    ``table``, default per_rank) or JSON."""
    if fmt == "json":
        sys.stdout.write(json.dumps(doc.to_json_doc(), indent=1, default=str) + "\n")
        return
    if fmt == "csv":
        print_tables(doc.tables, fmt, notes=doc.notes, table=table)
        return
    tables = {k: v for k, v in doc.tables.items() if k != "findings"}
    print_tables(tables, fmt, notes=doc.notes)
    if "findings" in doc.tables:
        sys.stdout.flush()
        sys.stdout.write("\n" + _findings_text(doc.tables["findings"]))


def _add(p: argparse.ArgumentParser) -> None:
    add_trace_args(p)
    add_format_arg(p)
    p.add_argument("--top", type=int, default=5, help="top kernels per rank (default: 5)")
    p.add_argument("--findings", type=int, default=5, help="top findings shown (default: 5)")


def _run(args: argparse.Namespace, ctx: Context) -> int:
    from ranksight.report.headline import build_summary

    run = load_run(args, ctx)
    with step(ctx, "computing the summary"):
        doc = build_summary(run, ranks=args.ranks, top=args.top, findings=args.findings)
    print_summary(doc, args.format, args.table)
    return 0


COMMAND = Command(
    "summary",
    "headline numbers per rank (every available analysis), top kernels and top findings",
    _add,
    _run,
    order=20,
)
