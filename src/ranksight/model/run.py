"""A run: the traces of all ranks of one job, and :func:`load`."""

from __future__ import annotations

import hashlib
import os
import warnings as _warnings
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import polars as pl

from ranksight.errors import RanksightWarning, UsageError
from ranksight.io.discovery import discover
from ranksight.io.kineto import DEFAULT_MAX_BYTES
from ranksight.model.cache import CacheConfig, fingerprint
from ranksight.model.engine import DaskEngine, Engine, LocalEngine, ProcessEngine, TraceSource
from ranksight.model.trace import Trace

__all__ = ["Run", "load"]

Progress = Callable[[int, int, str], None]

#: Keep every trace in memory when the inputs together are below this many bytes (file size);
#: otherwise keep a few and reload the others from the cache when needed.
RESIDENT_BYTES = 2 << 30
#: From this file size on, glibc keeps every block over 128 KiB in its own mapping for the rest of
#: the process (``_core.set_mmap_threshold``): freed column-sized temporaries then leave the
#: process instead of staying resident (docs/scale.md).
BIG_FILE_BYTES = 1 << 30


class Run:
    """The traces of one job, keyed by rank.

    A run built by :func:`load` knows each rank's :class:`~ranksight.model.engine.TraceSource`:
    traces are kept in memory when they are small together, and otherwise reloaded on demand
    (from the cache) so that memory stays bounded. :meth:`map` runs per-rank work on the run's
    engine (this process, a process pool, or Dask).
    """

    def __init__(
        self,
        traces: Iterable[Trace] = (),
        *,
        sources: Sequence[TraceSource] = (),
        engine: Engine | None = None,
        max_resident: int | None = None,
    ) -> None:
        self._resident: OrderedDict[int, Trace] = OrderedDict((t.rank, t) for t in sorted(traces, key=lambda t: t.rank))
        self._sources: dict[int, TraceSource] = {s.rank: s for s in sources}
        self.engine: Engine = engine or LocalEngine()
        self.max_resident = max_resident
        self._warnings: list[str] | None = None  # set by load(): the warnings of every rank's decode

    @property
    def ranks(self) -> list[int]:
        """Ranks present, sorted."""
        return sorted(set(self._resident) | set(self._sources))

    def __getitem__(self, rank: int) -> Trace:
        t = self._resident.get(rank)
        if t is not None:
            self._resident.move_to_end(rank)
            return t
        src = self._sources.get(rank)
        if src is None:
            raise KeyError(f"rank {rank} not loaded; ranks: {self.ranks}")
        t = src.load()
        self._resident[rank] = t
        if self.max_resident is not None:
            while len(self._resident) > self.max_resident:
                old = next(iter(self._resident))
                if old == rank or old not in self._sources:
                    break
                del self._resident[old]
        return t

    def __iter__(self) -> Iterator[Trace]:
        for r in self.ranks:
            yield self[r]

    def __len__(self) -> int:
        return len(self.ranks)

    def __repr__(self) -> str:
        return f"Run(ranks={self.ranks}, engine={self.engine.name})"

    @property
    def traces(self) -> list[Trace]:
        return list(self)

    @property
    def warnings(self) -> list[str]:
        """Every trace's warnings, prefixed with its rank (as collected while loading, without
        loading any trace again)."""
        if self._warnings is not None:
            return list(self._warnings)
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

    def map(self, fn: Callable[..., Any], ranks: Sequence[int] | None = None, **kwargs: Any) -> dict[int, Any]:
        """``{rank: fn(trace, **kwargs)}`` for the selected ranks, on this run's engine.

        ``fn`` must be a module-level function returning something small: on a process pool or a
        Dask cluster each rank's trace is loaded where ``fn`` runs, and only results come back.
        Traces already in this process are reused when the engine is local.
        """
        rs = list(ranks) if ranks is not None else self.ranks
        local = isinstance(self.engine, LocalEngine) or not all(r in self._sources for r in rs)
        if isinstance(self.engine, ProcessEngine) and not all(self._sources[r].key for r in rs):
            local = True  # uncached (small) traces would be decoded again in every worker
        if local:
            return {r: fn(self[r], **kwargs) for r in rs}
        results = self.engine.map(fn, [self._sources[r] for r in rs], kwargs)
        return dict(zip(rs, results, strict=True))


def _cache_config(cache: bool | str | os.PathLike[str] | CacheConfig | None) -> CacheConfig | None:
    if cache is False:
        return None
    if cache is None or cache is True:
        return CacheConfig.default()
    if isinstance(cache, CacheConfig):
        return cache
    return CacheConfig(Path(cache))


def _engine(jobs: int | None, client: Any, scheduler: str | None) -> Engine:
    if client is None and scheduler:
        try:
            from distributed import Client
        except ImportError:
            raise UsageError("--scheduler needs Dask: pip install 'ranksight[dask]'") from None
        client = Client(scheduler)
    if client is not None:
        return DaskEngine(client)
    if jobs is not None and jobs > 1:
        return ProcessEngine(jobs)
    return LocalEngine()


def load(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]] | Mapping[int, str | os.PathLike[str]],
    *,
    ranks: Iterable[int] | None = None,
    strict: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
    jobs: int | None = None,
    progress: Progress | None = None,
    cache: bool | str | os.PathLike[str] | CacheConfig | None = None,
    client: Any = None,
    scheduler: str | None = None,
    rank_by: str | None = None,
    step_range: str | None = None,
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
        Worker processes for decoding many large files and for :meth:`Run.map` (default: decode in
        this process, files in parallel threads, each decode using every core).
    progress
        Called as ``progress(done, total, path)`` after each file.
    cache
        ``None``/``True``: the default cache directory (:func:`~ranksight.model.cache.default_cache_dir`);
        a path: that directory; ``False``: no cache. Files under 1 MiB are never cached.
    client, scheduler
        A ``distributed.Client``, or a scheduler address (``tcp://host:port``): decode and per-rank
        work then run on the Dask cluster (the trace files must be readable by its workers).
    rank_by, step_range
        Nsight Systems exports only (docs/nsys.md): one rank per ``"process"`` or per ``"device"``
        instead of per (process, GPU); NVTX ranges named ``step_range`` become ProfilerSteps.
    """
    files = discover(paths, ranks=ranks, max_bytes=max_bytes, rank_by=rank_by, step_range=step_range)
    if not files:
        raise UsageError("no trace selected")
    cfg = _cache_config(cache)
    if any(os.path.getsize(f.path) >= BIG_FILE_BYTES for f in files):
        from ranksight import _core

        _core.set_mmap_threshold(128 << 10)
    sources = []
    total_bytes = 0
    for f in files:
        size = os.path.getsize(f.path)
        total_bytes += size
        key = fingerprint(f.path) if cfg is not None and size >= cfg.min_bytes else None
        if key is not None and f.nsys is not None:  # several ranks of one export: one entry each
            key = hashlib.blake2b(f"{key}:{f.nsys.cache_tag()}".encode(), digest_size=20).hexdigest()
        sources.append(TraceSource(f.path, f.rank, f.rank_source, strict, max_bytes, cfg if key else None, key, f.nsys))
    engine = _engine(jobs, client, scheduler)
    run_warnings: list[str] = []
    resident: list[Trace] = []
    remote = (
        [s for s in sources if s.key is not None and not s.is_cached()] if not isinstance(engine, LocalEngine) else []
    )
    if isinstance(engine, DaskEngine):
        # decode on the cluster (workers write their cache); nothing is held here
        remote = list(sources)
    done = 0
    if remote:
        for s, ws in zip(remote, engine.build(remote), strict=True):
            run_warnings.extend(f"rank {s.rank}: {w}" for w in ws)
            done += 1
            if progress:
                progress(done, len(files), s.path)
    lazy = isinstance(engine, DaskEngine) or total_bytes > RESIDENT_BYTES
    if not lazy:
        local = [s for s in sources if s not in remote]
        n_threads = max(1, min(os.cpu_count() or 1, len(local)))
        with ThreadPoolExecutor(max_workers=n_threads) as pool:
            for s, t in zip(local, pool.map(TraceSource.load, local), strict=True):
                resident.append(t)
                run_warnings.extend(f"rank {t.rank}: {w}" for w in t.warnings)
                done += 1
                if progress:
                    progress(done, len(files), s.path)
        for s in remote:
            resident.append(s.load())
    run = Run(resident, sources=sources, engine=engine, max_resident=None if not lazy else max(1, jobs or 2))
    if lazy and not isinstance(engine, DaskEngine):
        # make sure every rank is decoded (and cached) once, holding one at a time; the last one
        # stays resident (a single huge rank is then not decoded twice when there is no cache)
        for i, s in enumerate(sources):
            if s not in remote:
                t = run[s.rank] if i == len(sources) - 1 else s.load()
                run_warnings.extend(f"rank {t.rank}: {w}" for w in t.warnings)
                done += 1
                if progress:
                    progress(done, len(files), s.path)
    for w in run_warnings:
        _warnings.warn(w, RanksightWarning, stacklevel=2)
    run._warnings = run_warnings
    return run
