"""``ranksight demo``: the main job on the built-in example (8 ranks of a real DLRM step).

Prints the per-rank summary (as ``ranksight summary``) and writes the HTML report of the example
to ``ranksight-demo.html`` (or ``-o FILE``), ending with its path.
"""

from __future__ import annotations

import argparse
import os
import sys

from ranksight.cli._common import Command, Context, step
from ranksight.data import example_path
from ranksight.errors import UsageError

__all__ = ["COMMAND", "DEFAULT_OUTPUT"]

DEFAULT_OUTPUT = "ranksight-demo.html"


def _is_our_report(path: str) -> bool:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            head = f.read(4096)
    except OSError:
        return False
    return '<meta name="generator" content="ranksight' in head


def _add(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=("table", "csv", "json"), default="table", help="output format of the summary")
    p.add_argument("-o", "--output", metavar="FILE", default=None, help=f"report file (default: {DEFAULT_OUTPUT})")
    p.add_argument("--no-report", action="store_true", help="print the summary only")
    p.add_argument("--force", action="store_true", help="overwrite FILE even if it is not a ranksight report")


def _run(args: argparse.Namespace, ctx: Context) -> int:
    from ranksight import load
    from ranksight.cli.summary import print_summary
    from ranksight.report.headline import build_summary

    path = example_path("dlrm")
    out = args.output or DEFAULT_OUTPUT
    if not args.no_report:
        if os.path.isdir(out):
            raise UsageError(f"{out} is a directory; give a file name with -o")
        # the demo may replace its own earlier report, nothing else
        if os.path.exists(out) and not args.force and not _is_our_report(out):
            raise UsageError(f"{out} exists and is not a ranksight report; use --force to overwrite")
    if not ctx.quiet and args.format == "table":
        sys.stdout.write(f"ranksight demo: 8-rank DLRM training step ({path})\n\n")
    from ranksight.analyses import Session

    session = Session(load(path))  # the report reuses what the summary computed
    with step(ctx, "computing the summary"):
        doc = build_summary(session, top=3)
    print_summary(doc, args.format)
    if args.no_report:
        return 0
    from ranksight.report.html import write_report

    with step(ctx, f"writing the report {out}"):
        rep = write_report(session, out, title="ranksight demo: 8-rank DLRM training step")
    shown = sum(1 for s in rep["sections"] if s["shown"])
    # stdout stays pure JSON/CSV with --format json/csv; the path then goes to stderr
    stream = sys.stdout if args.format == "table" else sys.stderr
    if args.format == "table":
        stream.write(f"\nReport ({shown} sections, {os.path.getsize(out) / 1e6:.2f} MB), open it in a browser:\n")
    stream.write(f"{out}\n")
    return 0


COMMAND = Command("demo", "analyse the built-in 8-rank DLRM example and write its HTML report", _add, _run, order=1)
