"""Shared pieces of the CLI: the command type, trace arguments, loading with progress, output."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ranksight.errors import UsageError

__all__ = ["Command", "Context", "add_trace_args", "add_format_arg", "load_run", "parse_size"]


@dataclass
class Context:
    verbose: bool = False
    quiet: bool = False


@dataclass(frozen=True)
class Command:
    """A subcommand: ``add_arguments(parser)`` then ``run(args, ctx) -> exit code``."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, Context], int]
    description: str | None = None
    order: int = 50


def parse_size(text: str) -> int:
    """``500MB``, ``2GiB``, ``1e9`` → bytes."""
    t = text.strip().upper().replace("IB", "B")
    mult = 1
    for suffix, m in (("KB", 1 << 10), ("MB", 1 << 20), ("GB", 1 << 30), ("TB", 1 << 40), ("B", 1)):
        if t.endswith(suffix):
            mult = m
            t = t[: -len(suffix)]
            break
    try:
        return int(float(t) * mult)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r}") from None


def add_trace_args(p: argparse.ArgumentParser, *, nargs: str | int = "+") -> None:
    p.add_argument("traces", nargs=nargs, metavar="TRACES", help="trace files, directories of rank files, or globs")
    p.add_argument("--rank", type=int, action="append", dest="ranks", metavar="N", help="only this rank (repeatable)")
    p.add_argument("--strict", action="store_true", help="refuse truncated traces instead of salvaging them")
    p.add_argument(
        "--max-size",
        type=parse_size,
        default=None,
        metavar="SIZE",
        help="refuse inputs that decompress to more than SIZE (default 64GB)",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help="worker processes for decoding and per-rank work (default: this process, all cores)",
    )
    p.add_argument(
        "--cache-dir",
        default=None,
        metavar="DIR",
        help="cache of decoded traces (default: $RANKSIGHT_CACHE_DIR or ~/.cache/ranksight)",
    )
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    p.add_argument(
        "--cache-verify",
        choices=("sampled", "full"),
        default="sampled",
        help="how a trace file is recognised in the cache: sampled blocks, size and mtime (default), or a hash of "
        "the whole file (for copies that kept their mtime: cp -p, rsync -t)",
    )
    p.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDR",
        help="run decoding and per-rank work on a Dask cluster (tcp://host:port)",
    )
    p.add_argument(
        "--rank-by",
        choices=("process", "device"),
        default=None,
        help="Nsight Systems .sqlite exports: one rank per process or per GPU (default: per process and GPU)",
    )
    p.add_argument(
        "--step-range",
        default=None,
        metavar="NAME",
        help="Nsight Systems .sqlite exports: NVTX ranges named NAME (or NAME N) are the steps",
    )
    p.add_argument(
        "--cycle",
        type=int,
        default=None,
        metavar="N",
        help="tensorboard_trace_handler folders: the profiling cycle read for each worker, 0 the oldest, -1 the "
        "latest (default: the latest)",
    )


def add_format_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=("table", "csv", "json"), default="table", help="output format")


class _Progress:
    """A rich progress bar on stderr, shown once loading has taken a second, on a terminal only."""

    def __init__(self, ctx: Context) -> None:
        import threading

        self.enabled = not ctx.quiet and sys.stderr.isatty()
        self.done = 0
        self.total: int | None = None
        self.label = "loading traces"
        self.bar: Any = None
        self.task: Any = None
        self._lock = threading.Lock()
        self._timer = threading.Timer(1.0, self._start) if self.enabled else None
        if self._timer:
            self._timer.daemon = True
            self._timer.start()

    def _start(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        with self._lock:
            if self.bar is not None or self._timer is None:
                return
            self.bar = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                BarColumn(),
                TimeElapsedColumn(),
                transient=True,
                console=Console(file=sys.stderr),
            )
            self.bar.start()
            self.task = self.bar.add_task(self.label, total=self.total, completed=self.done)

    def __call__(self, done: int, total: int, path: str) -> None:
        with self._lock:
            self.done, self.total = done, total
            self.label = f"loaded {os.path.basename(path)} ({done}/{total})"
            if self.bar is not None:
                self.bar.update(self.task, completed=done, total=total, description=self.label)

    def close(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self.bar is not None:
                self.bar.stop()
                self.bar = None


def load_run(args: argparse.Namespace, ctx: Context) -> Any:
    """Load the traces named on the command line."""
    from ranksight import load
    from ranksight.io.kineto import DEFAULT_MAX_BYTES

    if not args.traces:
        raise UsageError("no trace given")
    prog = _Progress(ctx)
    try:
        return load(
            args.traces,
            ranks=args.ranks,
            strict=args.strict,
            max_bytes=args.max_size or DEFAULT_MAX_BYTES,
            jobs=args.jobs,
            progress=prog,
            cache=False if args.no_cache else (args.cache_dir or None),
            cache_verify=getattr(args, "cache_verify", None),
            scheduler=args.scheduler,
            rank_by=getattr(args, "rank_by", None),
            step_range=getattr(args, "step_range", None),
            cycle=getattr(args, "cycle", None),
        )
    finally:
        prog.close()
