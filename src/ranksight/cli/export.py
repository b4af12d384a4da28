"""``ranksight export TRACES --to DIR``: the canonical tables as Parquet, one file per rank."""

from __future__ import annotations

import argparse
import os
import sys

import polars as pl

from ranksight.cli._common import Command, Context, add_trace_args, load_run
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
