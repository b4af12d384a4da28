"""``ranksight health TRACES``: is the trace complete and consistent enough to trust?

Prints the checks that are not ``ok`` (``--all`` for every check) from
:mod:`ranksight.analyses.health`. Exit code 0, or 1 with ``--fail-on-warning`` when a check
warns (for CI gates); 2 on bad input as everywhere. ``--format json`` writes the ``health``
analysis' versioned document (``docs/analysis-schema.json``) holding the table shown
(``problems``, or ``checks`` with ``--all``).
"""

from __future__ import annotations

import argparse
import json
import sys

from ranksight.analyses.health import health
from ranksight.cli._common import Command, Context, add_format_arg, add_trace_args, load_run
from ranksight.errors import EXIT_FAILED_GATE
from ranksight.report.terminal import analysis_doc, print_tables, select_table

__all__ = ["COMMAND"]


def _add(p: argparse.ArgumentParser) -> None:
    add_trace_args(p)
    add_format_arg(p)
    p.add_argument("--all", action="store_true", help="show every check, not only the ones that are not ok")
    p.add_argument(
        "--noise-us",
        type=float,
        default=5.0,
        metavar="US",
        help="overlaps and crossings below this many µs count as timestamp noise (default 5)",
    )
    p.add_argument("--fail-on-warning", action="store_true", help="exit 1 when any check warns")


def _run(args: argparse.Namespace, ctx: Context) -> int:
    run = load_run(args, ctx)
    res = health(run, ranks=args.ranks, noise_us=args.noise_us)
    name = "checks" if args.all else "problems"
    if args.format == "json":
        tables = {name: res[name]}
        if args.table is not None:
            tables = {args.table: tables[select_table(tables, args.table)]}
        ranks = list(args.ranks) if args.ranks else run.ranks
        doc = analysis_doc("health", tables, res.notes, ranks=ranks, options={"noise_us": args.noise_us})
        sys.stdout.write(json.dumps(doc, indent=1, default=str) + "\n")
    else:
        print_tables({name: res[name]}, args.format, notes=res.notes, table=args.table)
    if args.fail_on_warning and (res["checks"]["status"] == "warning").any():
        return EXIT_FAILED_GATE
    return 0


COMMAND = Command(
    "health",
    "trace health: dropped records, overlaps, nesting, time base, incomplete steps, odd ranks",
    _add,
    _run,
    order=15,
)
