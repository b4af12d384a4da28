"""A run: the traces of all ranks of one job, and :func:`load`."""

from __future__ import annotations

import os
import warnings as _warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor

import polars as pl

from ranksight.errors import RanksightWarning, UsageError
from ranksight.io.discovery import TraceFile, discover
from ranksight.io.kineto import DEFAULT_MAX_BYTES, decode
from ranksight.model.trace import Trace

__all__ = ["Run", "load"]

Progress = Callable[[int, int, str], None]


class Run:
    """The traces of one job, keyed by rank."""

    def __init__(self, traces: Iterable[Trace]) -> None:
        self._traces: dict[int, Trace] = {t.rank: t for t in sorted(traces, key=lambda t: t.rank)}

    @property
    def ranks(self) -> list[int]:
        """Ranks present, sorted."""
        return list(self._traces)

    def __getitem__(self, rank: int) -> Trace:
        try:
            return self._traces[rank]
        except KeyError:
            raise KeyError(f"rank {rank} not loaded; ranks: {self.ranks}") from None

    def __iter__(self) -> Iterator[Trace]:
        return iter(self._traces.values())

    def __len__(self) -> int:
        return len(self._traces)

    def __repr__(self) -> str:
        return f"Run(ranks={self.ranks})"

    @property
    def traces(self) -> list[Trace]:
        return list(self._traces.values())

    @property
    def warnings(self) -> list[str]:
        """Every trace's warnings, prefixed with its rank."""
        return [f"rank {t.rank}: {w}" for t in self for w in t.warnings]

    @property
    def world_size(self) -> int | None:
        sizes = {t.meta.world_size for t in self if t.meta.world_size}
        return max(sizes) if sizes else None

    def events(self, *kinds: str) -> pl.DataFrame:
        """Events of all ranks (optionally of some kinds) with a ``rank`` column."""
        frames = []
        for t in self:
            ev = t.events if not kinds else t.kind(*kinds)
            frames.append(ev.with_columns(pl.lit(t.rank, dtype=pl.Int32).alias("rank")))
        return pl.concat(frames, how="vertical_relaxed") if frames else pl.DataFrame()


def _load_one(f: TraceFile, strict: bool, max_bytes: int) -> Trace:
    with _warnings.catch_warnings():
        _warnings.simplefilter("ignore", RanksightWarning)
        d = decode(f.path, strict=strict, max_bytes=max_bytes)
    return Trace(d, rank=f.rank, rank_source=f.rank_source)


def load(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]] | Mapping[int, str | os.PathLike[str]],
    *,
    ranks: Iterable[int] | None = None,
    strict: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
    jobs: int | None = None,
    progress: Progress | None = None,
) -> Run:
    """Load traces into a :class:`Run`.

    Parameters
    ----------
    paths
        A trace file, a directory of rank files, a glob, a list of these, or ``{rank: path}``.
    ranks
        Load only these ranks.
    strict
        Refuse truncated traces instead of salvaging their complete events.
    max_bytes
        Refuse inputs that decompress to more than this (decompression-bomb guard).
    jobs
        Files decoded at once (each decode also uses every core). Default: number of cores.
    progress
        Called as ``progress(done, total, path)`` after each file.
    """
    files = discover(paths, ranks=ranks, max_bytes=max_bytes)
    if not files:
        raise UsageError("no trace selected")
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(files)))
    traces: list[Trace] = []
    if jobs == 1:
        for i, f in enumerate(files):
            traces.append(_load_one(f, strict, max_bytes))
            if progress:
                progress(i + 1, len(files), f.path)
    else:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = [pool.submit(_load_one, f, strict, max_bytes) for f in files]
            for i, (f, fut) in enumerate(zip(files, futures)):
                traces.append(fut.result())
                if progress:
                    progress(i + 1, len(files), f.path)
    for t in traces:
        for w in t.warnings:
            _warnings.warn(f"{t.path} (rank {t.rank}): {w}", RanksightWarning, stacklevel=2)
    return Run(traces)
