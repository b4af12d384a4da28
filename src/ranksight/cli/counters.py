"""``ranksight counters TRACES -o OUT``: copies of the traces with counter tracks added."""

from __future__ import annotations

import argparse
import os
import sys

from ranksight.cli._common import Command, Context, add_output_arg, add_trace_args, load_run
from ranksight.io.output import OutputError, check_output, staged_dir
from ranksight.report.counters import KINDS, output_name, write_counters

__all__ = ["COMMAND"]


def _add(p: argparse.ArgumentParser) -> None:
    add_trace_args(p)
    add_output_arg(p, metavar="DIR", help="output folder (created if missing)", required=True, aliases=("--out",))
    p.add_argument(
        "--counters",
        default=",".join(KINDS),
        metavar="LIST",
        help="counter families: queue (queue length per stream), bw (memcpy/memset bandwidth per kind)",
    )
    p.add_argument("--force", action="store_true", help="overwrite existing outputs (never an input)")


def _run(args: argparse.Namespace, ctx: Context) -> int:
    run = load_run(args, ctx)
    kinds = [k.strip() for k in args.counters.split(",") if k.strip()]
    if os.path.lexists(args.output) and not os.path.isdir(args.output):
        raise OutputError(f"cannot write into {args.output}: it exists and is not a directory")
    inputs = [t.path for t in run]
    for t in run:  # every output checked before anything is written
        check_output(os.path.join(args.output, output_name(t.path)), inputs=inputs, force=args.force)
    # written into a temporary folder, moved into place when every rank's file is complete
    with staged_dir(args.output) as tmp:
        done = write_counters(run, tmp, kinds=kinds, force=args.force)
    if not ctx.quiet:
        for rank, path, counts in done:
            what = ", ".join(f"{n} {k}" for k, n in counts.items())
            out = os.path.join(args.output, os.path.basename(path))
            sys.stdout.write(f"rank {rank}: {out} ({what} counter events)\n")
    return 0


COMMAND = Command(
    "counters",
    "write each rank's trace with counter tracks (queue length per stream, memcpy bandwidth) for Perfetto",
    _add,
    _run,
    order=62,
)
