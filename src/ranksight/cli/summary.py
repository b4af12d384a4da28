"""``ranksight summary TRACES``: headline numbers per rank, top kernels and top findings."""

from __future__ import annotations

import argparse
import json
import sys

from ranksight.cli._common import Command, Context, add_format_arg, add_trace_args, load_run
from ranksight.report.terminal import print_tables

__all__ = ["COMMAND", "print_summary"]


def print_summary(doc, fmt: str) -> None:  # noqa: ANN001
    """Write a :class:`~ranksight.report.headline.SummaryDoc` as rich tables, CSV or JSON."""
    if fmt == "json":
        sys.stdout.write(json.dumps(doc.to_json_doc(), indent=1, default=str) + "\n")
    else:
        print_tables(doc.tables, fmt, notes=doc.notes)


def _add(p: argparse.ArgumentParser) -> None:
    add_trace_args(p)
    add_format_arg(p)
    p.add_argument("--top", type=int, default=5, help="top kernels per rank (default: 5)")
    p.add_argument("--findings", type=int, default=5, help="top findings shown (default: 5)")


def _run(args: argparse.Namespace, ctx: Context) -> int:
    from ranksight.report.headline import build_summary

    run = load_run(args, ctx)
    doc = build_summary(run, ranks=args.ranks, top=args.top, findings=args.findings)
    print_summary(doc, args.format)
    return 0


COMMAND = Command(
    "summary",
    "headline numbers per rank (every available analysis), top kernels and top findings",
    _add,
    _run,
    order=20,
)
