"""A run: the traces of all ranks of one job, and :func:`load`."""

from __future__ import annotations

import dataclasses
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
from ranksight.io.discovery import PROVISIONAL_SOURCES, TraceFile, declared_rank, discover
from ranksight.io.kineto import DEFAULT_MAX_BYTES, DEFAULT_MAX_EVENT_BYTES, DEFAULT_MAX_STRING_BYTES
from ranksight.io.kineto import limits as kineto_limits
from ranksight.model.cache import CACHE_WARNING, VERIFY_MODES, CacheConfig, fingerprint, sweep_tmp
from ranksight.model.engine import (
    IN_MEMORY_EVENTS,
    DaskEngine,
    Engine,
    LocalEngine,
    ProcessEngine,
    TraceSource,
    apply_many,
    batches,
    predecode,
)
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
    def small_ranks(self) -> bool:
        """Every rank is held in memory with fewer than :data:`~ranksight.model.engine.
        IN_MEMORY_EVENTS` events: its analyses run on polars' in-memory engine (issue 19)."""
        return bool(self._resident) and all(
            r in self._resident and self._resident[r].events_resident and self._resident[r].n_events < IN_MEMORY_EVENTS
            for r in self.ranks
        )

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
            return dict(zip(rs, apply_many(fn, [self[r] for r in rs], kwargs), strict=True))
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
    cache_verify: str | None = None,
    max_string_bytes: int | None = None,
    max_event_bytes: int | None = None,
    cycle: int | None = None,
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
    max_string_bytes, max_event_bytes
        Kineto traces: strings longer than ``max_string_bytes`` are cut (with a warning), an event
        longer than ``max_event_bytes`` once its strings are cut is refused; default: the
        environment (``RANKSIGHT_MAX_STRING``, ``RANKSIGHT_MAX_EVENT``), else 1 MiB and 64 MiB;
        0: no cap (docs/robustness.md).
    jobs
        Worker processes for decoding many large files and for :meth:`Run.map` (default: decode in
        this process, files in parallel threads, each decode using every core).
    progress
        Called as ``progress(done, total, path)`` after each file.
    cache
        ``None``/``True``: the default cache directory (:func:`~ranksight.model.cache.default_cache_dir`);
        a path: that directory; ``False``: no cache. Files under 1 MiB are never cached.
    cache_verify
        How a trace file is recognised in the cache: ``"sampled"`` (default: size, modification
        time and sampled blocks) or ``"full"`` (a hash of the whole file, for copies that kept
        their modification time); see :mod:`ranksight.model.cache`.
    client, scheduler
        A ``distributed.Client``, or a scheduler address (``tcp://host:port``): decode and per-rank
        work then run on the Dask cluster (the trace files must be readable by its workers).
    rank_by, step_range
        Nsight Systems exports only (docs/nsys.md): one rank per ``"process"`` or per ``"device"``
        instead of per (process, GPU); NVTX ranges named ``step_range`` become ProfilerSteps.
    cycle
        ``torch.profiler.tensorboard_trace_handler`` folders: the profiling cycle read for each
        worker (0 the oldest, -1 the latest; default the latest, with a note listing the cycles
        when a worker has several; :mod:`ranksight.io.discovery`).

    Notes
    -----
    A file's rank is the one its ``distributedInfo`` declares wherever it sits in the file (after
    ``traceEvents`` it is known once the file is decoded; the ranks are then resolved again), else
    the one in its name, else its order (:mod:`ranksight.io.discovery`).
    """
    wanted = None if ranks is None else [int(r) for r in ranks]
    discover_opts: dict[str, Any] = {"max_bytes": max_bytes, "rank_by": rank_by, "step_range": step_range}
    discover_opts["cycle"] = cycle
    notes: list[str] = []
    files = discover(paths, ranks=wanted, notes=notes, **discover_opts)
    if not files:
        raise UsageError("no trace selected")
    cfg = _cache_config(cache)
    if cfg is not None and cache_verify is not None and cache_verify != cfg.verify:
        if cache_verify not in VERIFY_MODES:
            raise UsageError(f"cache_verify must be one of {', '.join(VERIFY_MODES)}, not {cache_verify!r}")
        cfg = dataclasses.replace(cfg, verify=cache_verify)
    if cfg is not None:
        sweep_tmp(cfg)  # what killed writers left behind, once an hour old
    if any(os.path.getsize(f.path) >= BIG_FILE_BYTES for f in files):
        from ranksight import _core

        _core.set_mmap_threshold(128 << 10)

    caps = kineto_limits(max_string_bytes, max_event_bytes)
    default_caps = (DEFAULT_MAX_STRING_BYTES, DEFAULT_MAX_EVENT_BYTES)

    def source(f: TraceFile) -> TraceSource:
        size = os.path.getsize(f.path)
        key = fingerprint(f.path, full=cfg.verify == "full") if cfg is not None and size >= cfg.min_bytes else None
        if key is not None and f.nsys is not None:  # several ranks of one export: one entry each
            key = hashlib.blake2b(f"{key}:{f.nsys.cache_tag()}".encode(), digest_size=20).hexdigest()
        if key is not None and caps != default_caps:  # other caps decode other tables: their own entry
            key = hashlib.blake2b(f"{key}:caps{caps}".encode(), digest_size=20).hexdigest()
        return TraceSource(f.path, f.rank, f.rank_source, strict, max_bytes, cfg if key else None, key, f.nsys, caps)

    sources = [source(f) for f in files]
    total_bytes = sum(os.path.getsize(f.path) for f in files)
    engine = _engine(jobs, client, scheduler)
    #: per source (its index): the warnings of its decode and its distributedInfo as decoded
    seen: dict[int, tuple[list[str], Any]] = {}
    kept: dict[int, Trace] = {}  # traces held in memory, by source index

    def loaded(i: int, t: Trace, *, keep: bool) -> None:
        seen[i] = (list(t.warnings), t.meta.raw.get("distributedInfo"))
        if keep:
            kept[i] = t

    remote = (
        [i for i, s in enumerate(sources) if s.key is not None and not s.is_cached()]
        if not isinstance(engine, LocalEngine)
        else []
    )
    if isinstance(engine, DaskEngine):
        # decode on the cluster (workers write their cache); nothing is held here
        remote = list(range(len(sources)))
    done = 0
    if remote:
        for i, built in zip(remote, engine.build([sources[i] for i in remote]), strict=True):
            seen[i] = built
            done += 1
            if progress:
                progress(done, len(files), sources[i].path)
    lazy = isinstance(engine, DaskEngine) or total_bytes > RESIDENT_BYTES
    if not lazy:
        local = [i for i in range(len(sources)) if i not in remote]
        n_threads = max(1, min(os.cpu_count() or 1, len(local)))
        # each decode silences its own warnings with catch_warnings, which is not thread-safe: the
        # filters are restored here once every thread is done (else "ignore" can stay behind)
        with _warnings.catch_warnings(), ThreadPoolExecutor(max_workers=n_threads) as pool:
            for group in _decode_groups(sources, local):
                pre = predecode([sources[i] for i in group])
                jobs_ = [(sources[i], pre.pop(k, None)) for k, i in enumerate(group)]
                for i, t in zip(group, pool.map(lambda job: job[0].load(job[1]), jobs_), strict=True):
                    loaded(i, t, keep=True)
                    done += 1
                    if progress:
                        progress(done, len(files), sources[i].path)
        for i in remote:
            kept[i] = sources[i].load()
    elif not isinstance(engine, DaskEngine):
        # make sure every rank is decoded (and cached) once, holding one at a time; the last one
        # stays resident (a single huge rank is then not decoded twice when there is no cache)
        for i, s in enumerate(sources):
            if i not in remote:
                loaded(i, s.load(), keep=i == len(sources) - 1)
                done += 1
                if progress:
                    progress(done, len(files), s.path)
    late = {
        os.path.realpath(s.path): {"distributedInfo": seen[i][1]}
        for i, s in enumerate(sources)
        if i in seen and s.nsys is None and s.rank_source in PROVISIONAL_SOURCES and _declares(seen[i][1])
    }
    if late:  # a distributedInfo after traceEvents: the ranks are resolved again with it
        if wanted is not None and any(  # the other files' declarations count too (numbering, duplicates),
            s.rank_source == "order" or declared_rank(late.get(os.path.realpath(s.path), {})) not in (None, s.rank)
            for s in sources
        ):  # unless every selected file's name said the rank it declares
            chosen = {os.path.realpath(f.path) for f in files}
            for f in discover(paths, notes=[], **discover_opts):
                rp = os.path.realpath(f.path)
                if f.nsys is None and f.rank_source in PROVISIONAL_SOURCES and rp not in chosen:
                    info = source(f).load().meta.raw.get("distributedInfo")
                    if _declares(info):
                        late[rp] = {"distributedInfo": info}
        notes = []
        files = discover(paths, ranks=wanted, late_headers=late, notes=notes, **discover_opts)
        sources, seen, kept = _renumber(files, sources, seen, kept, source)
    run_warnings = [f"rank {sources[i].rank}: {w}" for i in sorted(seen) for w in seen[i][0]]
    run_warnings = _one_line_per_cache_problem(run_warnings)
    resident = [kept[i] for i in sorted(kept)]
    run = Run(resident, sources=sources, engine=engine, max_resident=None if not lazy else max(1, jobs or 2))
    for w in [*notes, *run_warnings]:
        _warnings.warn(w, RanksightWarning, stacklevel=2)
    run._warnings = [*notes, *run_warnings]
    return run


def _decode_groups(sources: Sequence[TraceSource], local: list[int]) -> Iterator[list[int]]:
    """``local`` in order, cut as :func:`~ranksight.model.engine.batches` cuts a task's ranks (each
    group is decoded in one native call and derived together)."""
    k = 0
    for b in batches([sources[i] for i in local], 0):
        yield local[k : k + len(b)]
        k += len(b)


def _declares(info: Any) -> bool:
    return isinstance(info, dict) and declared_rank({"distributedInfo": info}) is not None


def _renumber(
    files: list[TraceFile],
    sources: list[TraceSource],
    seen: dict[int, tuple[list[str], Any]],
    kept: dict[int, Trace],
    make: Callable[[TraceFile], TraceSource],
) -> tuple[list[TraceSource], dict[int, tuple[list[str], Any]], dict[int, Trace]]:
    """The sources of ``files`` (ranks resolved again), reusing what was loaded for each file."""
    by_file = {
        (os.path.realpath(s.path), s.nsys.cache_tag() if s.nsys is not None else None): i for i, s in enumerate(sources)
    }
    new_sources: list[TraceSource] = []
    new_seen: dict[int, tuple[list[str], Any]] = {}
    new_kept: dict[int, Trace] = {}
    for j, f in enumerate(files):
        i = by_file.get((os.path.realpath(f.path), f.nsys.cache_tag() if f.nsys is not None else None))
        if i is None:  # not loaded yet (a selection that changed): loaded on first use
            new_sources.append(make(f))
            continue
        new_sources.append(dataclasses.replace(sources[i], rank=f.rank, rank_source=f.rank_source))
        if i in seen:
            new_seen[j] = seen[i]
        t = kept.get(i)
        if t is not None:
            t.rank = t.meta.rank = f.rank
            t.meta.rank_source = f.rank_source
            new_kept[j] = t
    return new_sources, new_seen, new_kept


def _one_line_per_cache_problem(lines: list[str]) -> list[str]:
    """``rank N: cache: <same text>`` on several ranks → one line naming the ranks."""
    out: list[str] = []
    ranks_of: dict[str, list[str]] = {}
    for line in lines:
        head, sep, text = line.partition(": ")
        if sep and text.startswith(CACHE_WARNING) and head.startswith("rank "):
            if text not in ranks_of:
                ranks_of[text] = []
                out.append(text)
            ranks_of[text].append(head.removeprefix("rank "))
        else:
            out.append(line)
    return [
        (f"rank {ranks_of[x][0]}: {x}" if len(ranks_of[x]) == 1 else f"ranks {', '.join(ranks_of[x])}: {x}")
        if x in ranks_of
        else x
        for x in out
    ]
