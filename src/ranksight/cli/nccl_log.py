"""``ranksight nccl-log FILES [--traces TRACES ...]``: NCCL_DEBUG=INFO/TRACE logs as tables, joined to
the traced collectives when traces are given (the ``nccl-log`` analysis). ``--format json`` writes
the analysis' versioned document (``docs/analysis-schema.json``), as ``ranksight analyze nccl-log``
does."""

from __future__ import annotations

import argparse
import json
import sys

from ranksight.analyses import run_analysis
from ranksight.cli._common import Command, Context, add_format_arg, add_trace_args, load_run
from ranksight.report.terminal import analysis_doc, print_tables, select_table

__all__ = ["COMMAND"]


def _add(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILES", help="NCCL_DEBUG log files (plain or .gz) or folders of them")
    p.add_argument(
        "--traces",
        nargs="+",
        metavar="TRACES",
        default=None,
        help="trace files/folders: join log operations to traced collectives",
    )
    p.add_argument("--operations", action="store_true", help="also list every logical operation")
    p.add_argument("--topology", action="store_true", help="also list every ring, tree and transport connection")
    add_format_arg(p)


def _run(args: argparse.Namespace, ctx: Context) -> int:
    run = None
    if args.traces:
        tp = argparse.ArgumentParser(add_help=False)
        add_trace_args(tp)
        run = load_run(tp.parse_args(args.traces), ctx)  # the shared trace options, at their defaults
    opts = {"logs": list(args.files), "operations": args.operations, "topology": args.topology}
    res = run_analysis("nccl-log", run, **opts)
    if args.format == "json":
        tables = res.tables
        if args.table is not None:
            tables = {args.table: tables[select_table(tables, args.table)]}
        doc = analysis_doc("nccl-log", tables, res.notes, ranks=run.ranks if run is not None else [], options=opts)
        sys.stdout.write(json.dumps(doc, indent=1, default=str) + "\n")
        return 0
    print_tables(res.tables, args.format, notes=res.notes, table=args.table)
    return 0


COMMAND = Command(
    "nccl-log",
    "parse NCCL_DEBUG logs (topology, transports, algorithm/protocol per op); join to traces",
    _add,
    _run,
    order=60,
)
