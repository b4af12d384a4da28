"""``ranksight export TRACES --to DIR``: the canonical tables as Parquet, one file per rank."""

from __future__ import annotations

import argparse
import os
import sys

import polars as pl

from ranksight.cli._common import Command, Context, add_trace_args, load_run
from ranksight.io.kineto import TABLES
from ranksight.io.output import atomic_path, check_output

__all__ = ["COMMAND", "export_run"]


def _atomic_parquet(df: pl.DataFrame | pl.LazyFrame, path: str) -> None:
    with atomic_path(path, suffix=".parquet") as tmp:
        if isinstance(df, pl.LazyFrame):  # streamed: never the whole table in memory when it lives in the cache
            df.sink_parquet(tmp)
        else:
            df.write_parquet(tmp)


def export_run(run, out_dir: str, *, force: bool = False, tables: bool = False) -> list[str]:  # noqa: ANN001
    """Write ``rank<N>.events.parquet`` (and with ``tables`` each side table) into ``out_dir``."""
    os.makedirs(out_dir, exist_ok=True)
    inputs = {os.path.realpath(t.path) for t in run}

    def paths(rank: int) -> list[tuple[str | None, str]]:  # (table name, None for the events; path)
        out: list[tuple[str | None, str]] = [(None, os.path.join(out_dir, f"rank{rank}.events.parquet"))]
        if tables:
            out += [(name, os.path.join(out_dir, f"rank{rank}.{name}.parquet")) for name in TABLES]
        return out

    for rank in run.ranks:  # every path is checked before anything is written
        for _, path in paths(rank):
            check_output(path, inputs=inputs, force=force)
    written = []
    for t in run:  # one rank's tables at a time
        for name, path in paths(t.rank):
            _atomic_parquet(t.scan() if name is None else t.table(name), path)
            written.append(path)
    return written


def _add(p: argparse.ArgumentParser) -> None:
    add_trace_args(p)
    p.add_argument("--to", required=True, metavar="DIR", help="output directory")
    p.add_argument("--tables", action="store_true", help="also write the side tables (kernel, op, collective, ...)")
    p.add_argument("--force", action="store_true", help="overwrite existing files")


def _run(args: argparse.Namespace, ctx: Context) -> int:
    run = load_run(args, ctx)
    written = export_run(run, args.to, force=args.force, tables=args.tables)
    if not ctx.quiet:
        sys.stdout.write(f"Wrote {len(written)} Parquet files to {args.to}\n")
    return 0


COMMAND = Command("export", "write the canonical tables as Parquet, one file per rank", _add, _run, order=60)
