"""``ranksight summary TRACES``: headline numbers per rank."""

from __future__ import annotations

import argparse

from ranksight.analyses import run_analysis
from ranksight.cli._common import Command, Context, add_format_arg, add_trace_args, load_run
from ranksight.report.terminal import print_tables

__all__ = ["COMMAND"]


def _add(p: argparse.ArgumentParser) -> None:
    add_trace_args(p)
    add_format_arg(p)
    p.add_argument("--top", type=int, default=5, help="top kernels per rank")


def _run(args: argparse.Namespace, ctx: Context) -> int:
    run = load_run(args, ctx)
    res = run_analysis("summary", run, ranks=args.ranks, top=args.top)
    print_tables(res.tables, args.format, notes=res.notes)
    return 0


COMMAND = Command("summary", "per-rank GPU busy/idle and top kernels", _add, _run, order=20)
