"""``ranksight export TRACES -o DIR``: the canonical tables as Parquet, one file per rank;
``ranksight export TRACES --perfetto OUT.json.gz``: one merged trace of the whole job on aligned
clocks (:mod:`ranksight.report.perfetto`, docs/export.md)."""

from __future__ import annotations

import argparse
import os
import sys

import polars as pl

from ranksight.cli._common import Command, Context, add_output_arg, add_trace_args, load_run
from ranksight.errors import UsageError
from ranksight.io.kineto import TABLES
from ranksight.io.output import OutputError, check_output, staged_dir

__all__ = ["COMMAND", "export_run"]


def _write_parquet(df: pl.DataFrame | pl.LazyFrame, path: str) -> None:
    if isinstance(df, pl.LazyFrame):  # streamed: never the whole table in memory when it lives in the cache
        df.sink_parquet(path)
    else:
        df.write_parquet(path)


def export_run(run, out_dir: str, *, force: bool = False, tables: bool = False) -> list[str]:  # noqa: ANN001
    """Write ``rank<N>.events.parquet`` (and with ``tables`` each side table) into ``out_dir``.

    Every path is checked before anything is written; the files are written into a temporary
    folder and moved into ``out_dir`` only when all of them are complete, so a failure (a full
    disk half-way) leaves nothing behind (:func:`ranksight.io.output.staged_dir`)."""
    inputs = {os.path.realpath(t.path) for t in run}

    def names(rank: int) -> list[tuple[str | None, str]]:  # (table name, None for the events; file name)
        out: list[tuple[str | None, str]] = [(None, f"rank{rank}.events.parquet")]
        if tables:
            out += [(name, f"rank{rank}.{name}.parquet") for name in TABLES]
        return out

    if os.path.lexists(out_dir) and not os.path.isdir(out_dir):
        raise OutputError(f"cannot write into {out_dir}: it exists and is not a directory")
    for rank in run.ranks:
        for _, fname in names(rank):
            check_output(os.path.join(out_dir, fname), inputs=inputs, force=force)
    written = []
    with staged_dir(out_dir) as tmp:
        for t in run:  # one rank's tables at a time
            for name, fname in names(t.rank):
                _write_parquet(t.scan() if name is None else t.table(name), os.path.join(tmp, fname))
                written.append(os.path.join(out_dir, fname))
    return written


def _add(p: argparse.ArgumentParser) -> None:
    add_trace_args(p)
    add_output_arg(p, metavar="DIR", help="output directory for the Parquet tables", aliases=("--to",))
    p.add_argument("--tables", action="store_true", help="also write the side tables (kernel, op, collective, ...)")
    p.add_argument("--force", action="store_true", help="overwrite existing files")
    # ---- --perfetto (issue 20): the merged trace ----
    p.add_argument(
        "--perfetto",
        metavar="OUT.json.gz",
        help="write one merged trace of all ranks on aligned clocks (Perfetto UI, chrome://tracing)",
    )
    p.add_argument(
        "--step",
        type=int,
        action="append",
        dest="steps",
        metavar="N",
        help="--perfetto: only the events of ProfilerStep N (repeatable: from the first step's start to the last's)",
    )
    p.add_argument(
        "--counters",
        default="queue,bw",
        metavar="LIST",
        help="--perfetto: counter tracks (queue, bw, or none)",
    )


def _run(args: argparse.Namespace, ctx: Context) -> int:
    if not args.output and not args.perfetto:
        raise UsageError("give -o DIR (Parquet tables) or --perfetto OUT.json.gz (merged trace), or both")
    if args.perfetto and os.path.isdir(args.perfetto):
        raise OutputError(f"{args.perfetto} is a directory; give a file name (e.g. job.json.gz)")
    if args.steps and not args.perfetto:
        raise UsageError("--step applies to --perfetto only")
    run = load_run(args, ctx)
    if args.output:
        written = export_run(run, args.output, force=args.force, tables=args.tables)
        if not ctx.quiet:
            sys.stdout.write(f"Wrote {len(written)} Parquet files to {args.output}\n")
    if args.perfetto:
        from ranksight.report.perfetto import write_perfetto

        kinds = [k.strip() for k in args.counters.split(",") if k.strip() and k.strip() != "none"]
        res = write_perfetto(run, args.perfetto, steps=args.steps, counters=kinds, force=args.force)
        if not ctx.quiet:
            _print_perfetto(res)
    return 0


def _print_perfetto(res) -> None:  # noqa: ANN001
    n = sum(res.events.values())
    steps = (
        "all steps"
        if res.steps is None
        else "step" + ("s " if len(res.steps) > 1 else " ") + ", ".join(map(str, res.steps))
    )
    sys.stdout.write(
        f"Wrote {res.path} ({res.bytes / 1e6:.1f} MB): {len(res.ranks)} rank{'s' if len(res.ranks) != 1 else ''}, "
        f"{steps}, {n:,} events, {res.flows:,} collective flows, {sum(res.counters.values()):,} counter points, "
        f"{res.path_segments:,} critical-path segments\n"
    )
    for r in res.ranks:
        sys.stdout.write(
            f"  rank {r}: {res.events[r]:,} events, clock offset {res.offsets_ns[r] / 1e3:+.3f} µs, "
            f"{res.counters.get(r, 0):,} counter points\n"
        )
    for note in res.notes:
        sys.stdout.write(f"  note: {note}\n")


COMMAND = Command(
    "export",
    "write the canonical tables as Parquet, one file per rank, or one merged trace for Perfetto (--perfetto)",
    _add,
    _run,
    order=60,
)
