"""``ranksight demo``: the main job on the built-in example (8 ranks of a real DLRM step)."""

from __future__ import annotations

import argparse
import sys

from ranksight.cli._common import Command, Context
from ranksight.data import example_path
from ranksight.report.terminal import print_tables

__all__ = ["COMMAND"]


def _add(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=("table", "csv", "json"), default="table", help="output format")


def _run(args: argparse.Namespace, ctx: Context) -> int:
    from ranksight import load
    from ranksight.analyses import run_analysis

    path = example_path("dlrm")
    if not ctx.quiet and args.format == "table":
        sys.stdout.write(f"ranksight demo: 8-rank DLRM training step ({path})\n\n")
    run = load(path)
    res = run_analysis("summary", run, top=3)
    print_tables(res.tables, args.format, notes=res.notes)
    return 0


COMMAND = Command("demo", "analyse the built-in 8-rank DLRM example", _add, _run, order=1)
