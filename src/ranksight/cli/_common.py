"""Shared pieces of the CLI: the command type, trace arguments, loading with progress, output."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ranksight.errors import UsageError

__all__ = [
    "Command",
    "Context",
    "FORMATS",
    "add_trace_args",
    "add_format_arg",
    "add_output_arg",
    "deprecated",
    "load_run",
    "parse_size",
    "step",
]


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


#: Every output format a command may offer (``ranksight.report.terminal.FORMATS``: one set of
#: names): ``table`` (terminal), ``markdown``, ``csv`` (one table), ``json`` (every table).
FORMATS = ("table", "markdown", "csv", "json")

#: Old names of formats, still accepted (with a deprecation note on stderr): ``diagnose --format text``.
_FORMAT_ALIASES = {"text": "table"}


def deprecated(old: str, new: str) -> None:
    """Say on stderr that the option spelling ``old`` is deprecated in favour of ``new``."""
    sys.stderr.write(f"ranksight: warning: {old} is deprecated; use {new}\n")


def _format_name(text: str) -> str:
    if text in _FORMAT_ALIASES:
        deprecated(f"--format {text}", f"--format {_FORMAT_ALIASES[text]}")
        return _FORMAT_ALIASES[text]
    return text


def add_format_arg(
    p: argparse.ArgumentParser,
    formats: tuple[str, ...] = ("table", "markdown", "csv", "json"),
    *,
    default: str = "table",
    table: bool = True,
    help: str | None = None,
) -> None:
    """``--format`` (names from :data:`FORMATS`; old names as hidden aliases) and, with
    ``table``, ``--table NAME`` (the table that ``--format csv`` writes)."""
    unknown = set(formats) - set(FORMATS)
    if unknown:
        raise ValueError(f"unknown formats {sorted(unknown)}")
    p.add_argument(
        "--format",
        type=_format_name,
        choices=formats,
        default=default,
        metavar="{" + ",".join(formats) + "}",
        help=help or f"output format (default: {default}; csv writes one table, see --table)",
    )
    if table:
        p.add_argument(
            "--table",
            default=None,
            metavar="NAME",
            help="the table to write with --format csv (default: the first, main table); with the other formats, "
            "only this table",
        )


class _DeprecatedAlias(argparse.Action):
    """An old spelling of an option: stores like the new one, says on stderr that it is deprecated."""

    def __init__(self, option_strings: list[str], dest: str, new: str = "", **kw: Any) -> None:
        self.new = new
        super().__init__(option_strings, dest, **kw)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, opt: Any = None):  # noqa: ANN204
        deprecated(str(opt), self.new)
        setattr(namespace, self.dest, values)


def add_output_arg(
    p: argparse.ArgumentParser,
    *,
    metavar: str,
    help: str,
    required: bool = False,
    aliases: tuple[str, ...] = (),
) -> None:
    """``-o/--output`` (one spelling for every command; ``args.output``) and its old spellings
    (``aliases``, e.g. ``--to``) as hidden aliases that say they are deprecated."""
    target: Any = p.add_mutually_exclusive_group(required=True) if required and aliases else p
    target.add_argument("-o", "--output", metavar=metavar, default=None, help=help, required=required and not aliases)
    for old in aliases:
        target.add_argument(
            old, dest="output", metavar=metavar, action=_DeprecatedAlias, new="-o/--output", help=argparse.SUPPRESS
        )


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


#: A step that has run this long (seconds) shows a spinner on stderr (a terminal only; not with -q).
PROGRESS_AFTER_S = 1.0


@contextlib.contextmanager
def step(ctx: Context, label: str, *, after: float | None = None) -> Iterator[None]:
    """Show ``label`` with a spinner and the elapsed time on stderr while the block runs, once it
    has run ``after`` seconds (default :data:`PROGRESS_AFTER_S`): analyses, the report, the
    summary. Nothing when stderr is not a terminal or with ``-q``; the line is removed at the end."""
    if ctx.quiet or not sys.stderr.isatty():
        yield
        return
    import threading

    state: dict[str, Any] = {"bar": None, "done": False}
    lock = threading.Lock()
    err = sys.stderr

    def start() -> None:
        from rich.console import Console
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        with lock:
            if state["done"]:
                return
            # stdout/stderr stay ours: a live display that redirects them outlives a step that
            # raised and sends later output through its terminal console (escape codes in a pipe)
            bar = Progress(
                SpinnerColumn(),
                TextColumn(label),
                TimeElapsedColumn(),
                transient=True,
                console=Console(file=err),
                redirect_stdout=False,
                redirect_stderr=False,
            )
            bar.add_task(label, total=None)
            bar.start()
            state["bar"] = bar

    timer = threading.Timer(PROGRESS_AFTER_S if after is None else after, start)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        with lock:
            state["done"] = True
            timer.cancel()
            if state["bar"] is not None:
                state["bar"].stop()


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
