"""``ranksight info TRACES``: what the traces hold (the ``info`` analysis, shown as text).

``--format json`` writes the ``info`` analysis' versioned document (``docs/analysis-schema.json``),
the same as ``ranksight analyze info TRACES --format json``: every table with raw numbers
(``steps``, ``first_step``, ``last_step`` as integers, not the text the terminal shows)."""

from __future__ import annotations

import argparse
import json
import sys

import polars as pl

from ranksight.analyses import AnalysisResult, run_analysis
from ranksight.cli._common import Command, Context, add_format_arg, add_trace_args, load_run
from ranksight.report.terminal import analysis_doc, print_tables, select_table

__all__ = ["COMMAND", "info_tables"]

#: The columns of the ``info`` analysis' ``files`` table that the command prints (``steps`` as text).
COLUMNS = (
    "rank",
    "file",
    "rank_from",
    "json_mb",
    "events",
    "gpu",
    "devices",
    "world_size",
    "steps",
    "span_ms",
    "time_base",
)


def info_tables(run) -> tuple[dict[str, pl.DataFrame], list[str]]:  # noqa: ANN001
    """What ``ranksight info`` prints: the ``info`` analysis' files (steps as ``N (#first–#last)``)
    and events-by-kind tables, and its notes."""
    res: AnalysisResult = run_analysis("info", run)
    f = res["files"]
    steps = (
        pl.when(pl.col("steps") > 0)
        .then(pl.format("{} (#{}–#{})", pl.col("steps"), pl.col("first_step"), pl.col("last_step")))
        .otherwise(pl.lit("0"))
    )
    files = f.with_columns(steps.alias("steps")).select(COLUMNS)
    return {"files": files, "events by kind": res["events by kind"]}, list(res.notes)


def _add(p: argparse.ArgumentParser) -> None:
    add_trace_args(p)
    add_format_arg(p)


def _run(args: argparse.Namespace, ctx: Context) -> int:
    run = load_run(args, ctx)
    if args.format == "json":
        res: AnalysisResult = run_analysis("info", run)
        every = res.tables
        if args.table is not None:
            every = {args.table: every[select_table(every, args.table)]}
        doc = analysis_doc("info", every, res.notes, ranks=run.ranks, options={})
        sys.stdout.write(json.dumps(doc, indent=1, default=str) + "\n")
        return 0
    tables, notes = info_tables(run)
    if args.format == "table":  # the run context heads the text output ("context: training, bf16, …")
        context = [n for n in notes if n.startswith("context: ")]
        if context:
            sys.stdout.write(context[0] + "\n")
            sys.stdout.flush()
            notes = [n for n in notes if n not in context]
    print_tables(tables, args.format, notes=notes, table=args.table)
    return 0


COMMAND = Command("info", "files, ranks, GPUs, events by kind, steps, time span, warnings", _add, _run, order=10)
