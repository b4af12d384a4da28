"""Where per-rank work runs: in this process, in a local process pool, or on a Dask cluster.

Per-rank work is a pure map step: ``fn(trace, **kwargs)`` for each rank, where ``fn`` is a
module-level function (so it can be sent to another process) returning something small (a few
tables). The engine gets each rank's :class:`TraceSource`, which knows how to load the trace
(from the cache when present), so traces never travel between processes; only results do.
"""

from __future__ import annotations

import multiprocessing
import os
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ranksight.io.kineto import DEFAULT_MAX_BYTES

if TYPE_CHECKING:
    from ranksight.io.kineto import DecodedTrace
    from ranksight.model.cache import CacheConfig
    from ranksight.model.trace import Trace

__all__ = [
    "TraceSource",
    "Engine",
    "LocalEngine",
    "ProcessEngine",
    "DaskEngine",
    "apply",
    "build_source",
    "build_batch",
    "batches",
    "load_many",
    "predecode",
]


@dataclass(frozen=True)
class TraceSource:
    """Everything needed to (re)load one rank's trace, in any process."""

    path: str
    rank: int
    rank_source: str
    strict: bool = False
    max_bytes: int = DEFAULT_MAX_BYTES
    cache: CacheConfig | None = None
    key: str | None = None
    #: the :class:`~ranksight.io.nsys.NsysUnit` of a rank read from an Nsight Systems export
    nsys: Any = None
    #: (per-string cap, per-event cap) for the Kineto decoder (None: ``kineto.limits()``)
    caps: tuple[int, int] | None = None

    def load(self, decoded: DecodedTrace | Trace | None = None) -> Trace:
        """Load from the cache entry if valid, else decode (and write the cache entry). A large
        trace (more than ``EVENTS_RESIDENT_MAX`` events) then reads its events and side tables
        back from the entry per query instead of holding them; if the entry vanishes meanwhile,
        the file is decoded again (once). ``decoded``: this file already decoded (many files
        are decoded in one native call, :func:`~ranksight.io.kineto.decode_many`, and derived
        together, :meth:`Trace.many`), used instead of the first decode."""
        from ranksight.model.trace import Trace

        if isinstance(decoded, Trace) and (decoded.grouped or self.cache is None or self.key is None):
            return decoded  # read from, or written to, a group entry (predecode), or not to cache
        decode: Callable[[], Trace] = self._decode if decoded is None else _Handed(self, decoded)
        if self.cache is None or self.key is None:
            return decode()
        from ranksight.model import cache as _cache

        return _cache.load_or_build(
            self.cache,
            self.key,
            path=self.path,
            rank=self.rank,
            rank_source=self.rank_source,
            decode=decode,
            accept=lambda t: _honours_guards(t, self.strict, self.max_bytes),
            spill=self.nsys is None,
        )

    def decodes_natively(self) -> bool:
        """Whether this source is a Kineto file that :func:`~ranksight.io.kineto.decode_many`
        decodes (not an Nsight Systems export)."""
        return self.nsys is None and not _is_sqlite(self.path)

    def _decode(self) -> Trace:
        """The trace decoded from its file (no cache)."""
        import warnings as _warnings

        from ranksight.errors import RanksightWarning
        from ranksight.io.kineto import decode
        from ranksight.model.trace import Trace

        with _warnings.catch_warnings():
            _warnings.simplefilter("ignore", RanksightWarning)
            if self.nsys is not None or _is_sqlite(self.path):
                from ranksight.io.nsys import decode_nsys

                d = decode_nsys(self.path, self.nsys, max_bytes=self.max_bytes)
            else:
                ms, me = self.caps if self.caps is not None else (None, None)
                d = decode(
                    self.path, strict=self.strict, max_bytes=self.max_bytes, max_string_bytes=ms, max_event_bytes=me
                )
        return Trace(d, rank=self.rank, rank_source=self.rank_source)

    def is_cached(self) -> bool:
        from ranksight.model import cache as _cache

        return (
            self.cache is not None
            and self.key is not None
            and _cache.is_valid(_cache.entry_dir(self.cache, self.path, self.key), self.key)
        )


class _Handed:
    """A source's decode that uses a file decoded beforehand the first time, and decodes the
    file again on later calls (a cache entry rebuilt after the events were spilled)."""

    def __init__(self, src: TraceSource, decoded: DecodedTrace | Trace) -> None:
        self.src = src
        self.decoded: DecodedTrace | Trace | None = decoded

    def __call__(self) -> Trace:
        if self.decoded is None:
            return self.src._decode()
        from ranksight.model.trace import Trace

        d, self.decoded = self.decoded, None
        return d if isinstance(d, Trace) else Trace(d, rank=self.src.rank, rank_source=self.src.rank_source)


def _is_sqlite(path: str) -> bool:
    from ranksight.io.nsys import is_sqlite

    return is_sqlite(path)


def _honours_guards(t: Trace, strict: bool, max_bytes: int) -> bool:
    """Whether a cached trace would pass this load's ``strict`` and ``max_bytes``; when not, the
    file is decoded again so that the refusal (truncated, too large) is raised as without a cache."""
    stats = getattr(t, "stats", {}) or {}
    if strict and (not stats.get("document_complete", 1) or stats.get("truncated_gzip", 0)):
        return False
    return not (max_bytes and t.meta.json_bytes > max_bytes)


def build_source(src: TraceSource) -> tuple[list[str], Any]:
    """Worker task: make sure the source is decoded into the cache; return its warnings and its
    ``distributedInfo`` as decoded (wherever it sits in the file: the rank it declares)."""
    t = src.load()
    return list(t.warnings), t.meta.raw.get("distributedInfo")


def _apply(src: TraceSource, fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    return apply(fn, src.load(), kwargs)


#: A trace with fewer events than this, held in memory, runs its per-rank work on polars'
#: in-memory engine: the streaming engine (polars' default) costs about 0.1 ms more per query,
#: which is most of the time of a small rank (issue 19: info on 1,024 small ranks, 21 s -> 14 s).
#: The answers are the same on either engine.
IN_MEMORY_EVENTS = 1 << 20


def apply(fn: Callable[..., Any], trace: Trace, kwargs: dict[str, Any]) -> Any:
    """``fn(trace, **kwargs)``, on polars' in-memory engine when the trace is small
    (:data:`IN_MEMORY_EVENTS`)."""
    # already so (a session over small ranks sets it for a whole analysis): a pl.Config scope
    # saves and restores every polars setting, ~0.2 ms, as much as a small rank's query
    if (
        trace.events_resident
        and trace.n_events < IN_MEMORY_EVENTS
        and os.environ.get("POLARS_ENGINE_AFFINITY") != "in-memory"
    ):
        import polars as pl

        with pl.Config(engine_affinity="in-memory"):
            return fn(trace, **kwargs)
    return fn(trace, **kwargs)


#: Ranks of one per-rank map that run on threads of this process (:func:`apply_many`); the
#: environment variable ``RANKSIGHT_RANK_THREADS`` sets it (1: one rank after the other).
RANK_THREADS_DEFAULT = 4
#: Fewer ranks than this run one after the other (a pool's start costs more than it saves).
RANK_THREADS_MIN_RANKS = 4


def rank_threads() -> int:
    """Threads for a per-rank map in this process: ``RANKSIGHT_RANK_THREADS`` when set (1 turns
    them off), else the smaller of the cores and :data:`RANK_THREADS_DEFAULT`."""
    env = os.environ.get("RANKSIGHT_RANK_THREADS", "").strip()
    if env:
        try:
            return max(1, int(env))
        except ValueError:
            return 1
    return max(1, min(os.cpu_count() or 1, RANK_THREADS_DEFAULT))


def apply_many(fn: Callable[..., Any], traces: Sequence[Trace], kwargs: dict[str, Any]) -> list[Any]:
    """``[fn(t, **kwargs) for t in traces]`` in this process. Small traces held in memory (each
    under :data:`IN_MEMORY_EVENTS`) run on a few threads (:func:`rank_threads`), on polars'
    in-memory engine set once for all of them (issue 19): a small rank's per-rank work is a few
    hundred polars queries of ~0.1 ms, and polars releases the GIL while a query runs, so another
    rank's Python runs meanwhile (the 64-rank report: 45 s -> 35 s on 2 cores). Each call gets
    its own trace, and per-rank functions read only their trace: the results are those of the
    loop, in the same order; the first error in trace order is raised, as the loop would."""
    n = min(rank_threads(), len(traces))
    small = all(t.events_resident and t.n_events < IN_MEMORY_EVENTS for t in traces)
    if n < 2 or len(traces) < RANK_THREADS_MIN_RANKS or not small:
        return [apply(fn, t, kwargs) for t in traces]
    import polars as pl

    def one(t: Trace) -> Any:
        return fn(t, **kwargs)

    if os.environ.get("POLARS_ENGINE_AFFINITY") == "in-memory":  # set for the whole analysis
        with ThreadPoolExecutor(max_workers=n, thread_name_prefix="ranksight-rank") as pool:
            return list(pool.map(one, traces))
    with pl.Config(engine_affinity="in-memory"), ThreadPoolExecutor(n, thread_name_prefix="ranksight-rank") as pool:
        return list(pool.map(one, traces))


def predecode(sources: Sequence[TraceSource]) -> dict[int, Trace]:
    """The sources (by index) that are Kineto files not read from their own cache entry, decoded
    in one native call (:func:`~ranksight.io.kineto.decode_many`: in parallel across files, no
    Python work per file until their columns are imported) and derived together
    (:meth:`Trace.many`); only files under :data:`SMALL_FILE_BYTES`. Those the cache holds (each
    with a key) are read from, or written to, one group entry
    (:func:`~ranksight.model.cache.write_group`: ten files for the group instead of ten per rank).
    Fewer than two such files: nothing (one file decodes as fast alone, in parallel within the
    file, and has its own entry). The sources of one load share their guards, caps and cache
    (those of the first are used)."""
    todo = [
        i
        for i, s in enumerate(sources)
        if s.decodes_natively() and _size(s.path) < SMALL_FILE_BYTES and not s.is_cached()
    ]
    if len(todo) < 2:
        return {}
    keyed = [i for i in todo if sources[i].key is not None and sources[i].cache is not None]
    out: dict[int, Trace] = {}
    if len(keyed) >= 2:
        out.update(_group(sources, keyed))
    # the others decoded together; a lone cacheable file keeps its own entry (its own load)
    plain = [i for i in todo if i not in out and not (len(keyed) == 1 and i == keyed[0])]
    if plain:
        out.update(zip(plain, _decode_together([sources[i] for i in plain]), strict=True))
    return out


#: Files from this size on are decoded one by one (in parallel within the file) and cached in an
#: entry of their own, whose side tables are read back when needed instead of held: what many
#: files share is the fixed cost per file, which a large file does not feel.
SMALL_FILE_BYTES = 16 << 20


def _decode_together(group: list[TraceSource]) -> list[Trace]:
    from ranksight.io.kineto import decode_many
    from ranksight.model.trace import Trace

    first = group[0]
    ms, me = first.caps if first.caps is not None else (None, None)
    decoded = decode_many(
        [s.path for s in group], strict=first.strict, max_bytes=first.max_bytes, max_string_bytes=ms, max_event_bytes=me
    )
    return Trace.many(decoded, [s.rank for s in group], [s.rank_source for s in group])


def _group(sources: Sequence[TraceSource], idx: list[int]) -> dict[int, Trace]:
    """The keyed sources ``idx`` from their group entry, else decoded together and written there
    (a trace that would not pass this load's guards is decoded again, as with one entry)."""
    from ranksight.model import cache as _cache

    group = [sources[i] for i in idx]
    cfg = group[0].cache
    assert cfg is not None
    paths = [s.path for s in group]
    key = _cache.group_key([str(s.key) for s in group], paths)
    problems: list[str] = []
    got = _cache.read_group(
        cfg, paths, key, ranks=[s.rank for s in group], rank_sources=[s.rank_source for s in group], problems=problems
    )
    if got is not None and all(_honours_guards(t, s.strict, s.max_bytes) for t, s in zip(got, group, strict=True)):
        for t in got:
            t.grouped = True
        return dict(zip(idx, got, strict=True))
    if problems:  # a damaged entry: out of the way of the new one, and said once per trace
        d = _cache.group_dir(cfg, paths, key)
        _cache.remove_entry(d)
    traces = _decode_together(group)
    from ranksight.model.trace import EVENTS_RESIDENT_MAX

    if any(t.n_events > EVENTS_RESIDENT_MAX for t in traces):
        # a trace that keeps its events in its cache entry has an entry of its own (its load
        # writes it, from the trace decoded here)
        return dict(zip(idx, traces, strict=True))
    _cache.store_group(cfg, traces, key)
    for t in traces:
        t.grouped = True
    if problems:
        for t in traces:
            t.warnings.append(
                f"{_cache.CACHE_WARNING}entry {d.name} was unusable ({problems[0]}): decoded again and rewritten"
            )
    return dict(zip(idx, traces, strict=True))


def load_many(sources: Sequence[TraceSource]) -> list[Trace]:
    """Each source's trace, as :meth:`TraceSource.load` gives it: from the cache entry when valid
    (and written there when not), the files to decode decoded together (:func:`predecode`)."""
    pre = predecode(sources)
    return [s.load(pre.pop(i, None)) for i, s in enumerate(sources)]


def _apply_batch(sources: list[TraceSource], fn: Callable[..., Any], kwargs: dict[str, Any]) -> list[Any]:
    """Worker task: ``fn`` on each trace of a batch of ranks (loaded together)."""
    return [apply(fn, t, kwargs) for t in load_many(sources)]


def build_batch(sources: list[TraceSource]) -> list[tuple[list[str], Any]]:
    """Worker task: :func:`build_source` of a batch of ranks (decoded together)."""
    return [(list(t.warnings), t.meta.raw.get("distributedInfo")) for t in load_many(sources)]


#: A task of the process pool or of Dask holds ranks of at most this many bytes (file size)
#: together, and at most this many ranks.
BATCH_BYTES = 256 << 20
BATCH_RANKS = 256


def batches(sources: Sequence[TraceSource], workers: int) -> list[list[TraceSource]]:
    """``sources`` in order, cut into contiguous batches (issue 19: a task holds many ranks, never
    one small file): about four batches per worker for balance, each of at most
    :data:`BATCH_BYTES` (a larger file alone) and :data:`BATCH_RANKS` ranks."""
    if not sources:
        return []
    sizes = [_size(s.path) for s in sources]
    target = min(BATCH_BYTES, max(1, sum(sizes) // max(1, 4 * workers)))
    out: list[list[TraceSource]] = [[]]
    acc = 0
    for s, b in zip(sources, sizes, strict=True):
        if out[-1] and (acc + b > target or len(out[-1]) >= BATCH_RANKS):
            out.append([])
            acc = 0
        out[-1].append(s)
        acc += b
    return out


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


class Engine:
    """Runs ``fn(trace, **kwargs)`` for each source."""

    name = "engine"

    def map(self, fn: Callable[..., Any], sources: Sequence[TraceSource], kwargs: dict[str, Any]) -> list[Any]:
        raise NotImplementedError

    def build(self, sources: Sequence[TraceSource]) -> list[tuple[list[str], Any]]:
        """Decode sources into the cache; returns each one's warnings and ``distributedInfo``."""
        return build_batch(list(sources))


class LocalEngine(Engine):
    """In this process (traces already resident are reused by :class:`~ranksight.model.run.Run`)."""

    name = "local"

    def map(self, fn: Callable[..., Any], sources: Sequence[TraceSource], kwargs: dict[str, Any]) -> list[Any]:
        return [_apply(s, fn, kwargs) for s in sources]


class ProcessEngine(Engine):
    """A local process pool (spawned workers; polars is not fork-safe). The pool is started on
    first use and kept for the engine's life (one start for every map of a session, not one per
    analysis); :meth:`close` or garbage collection shuts it down."""

    name = "process"

    def __init__(self, jobs: int | None = None) -> None:
        self.jobs = max(1, jobs or os.cpu_count() or 1)
        self._executor: ProcessPoolExecutor | None = None

    def _pool(self) -> ProcessPoolExecutor:
        if self._executor is None:
            ex = ProcessPoolExecutor(max_workers=self.jobs, mp_context=multiprocessing.get_context("spawn"))
            weakref.finalize(self, ex.shutdown, wait=True)
            self._executor = ex
        return self._executor

    def close(self) -> None:
        """Shut the worker processes down (a later map starts new ones)."""
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    def map(self, fn: Callable[..., Any], sources: Sequence[TraceSource], kwargs: dict[str, Any]) -> list[Any]:
        if not sources:
            return []
        bs = batches(sources, self.jobs)
        return [r for part in self._pool().map(_apply_batch, bs, [fn] * len(bs), [kwargs] * len(bs)) for r in part]

    def build(self, sources: Sequence[TraceSource]) -> list[tuple[list[str], Any]]:
        if len(sources) <= 1:
            return super().build(sources)
        bs = batches(sources, self.jobs)
        return [r for part in self._pool().map(build_batch, bs) for r in part]


class DaskEngine(Engine):
    """A Dask distributed cluster: ``client`` is a ``distributed.Client``."""

    name = "dask"

    def __init__(self, client: Any) -> None:
        self.client = client

    def _workers(self) -> int:
        try:
            return max(1, sum(self.client.nthreads().values()))
        except Exception:  # noqa: BLE001 - an old or odd client: batches sized for one worker
            return 1

    def map(self, fn: Callable[..., Any], sources: Sequence[TraceSource], kwargs: dict[str, Any]) -> list[Any]:
        bs = batches(sources, self._workers())
        futures = [self.client.submit(_apply_batch, b, fn, kwargs, pure=False) for b in bs]
        return [r for part in self.client.gather(futures) for r in part]

    def build(self, sources: Sequence[TraceSource]) -> list[tuple[list[str], Any]]:
        bs = batches(sources, self._workers())
        futures = [self.client.submit(build_batch, b, pure=False) for b in bs]
        return [r for part in self.client.gather(futures) for r in part]
