"""The trace model: one :class:`Trace` per rank, with typed columns and derived links."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import polars as pl

from ranksight.io.kineto import TABLES, DecodedTrace, extract_events, scan_spans
from ranksight.model.derive import build_steps, derive, derive_many, with_gpu_spans
from ranksight.model.kinds import GPU_KINDS, LAUNCH_KINDS
from ranksight.model.meta import TraceMeta, build_meta

__all__ = ["Trace", "LazyTables", "SPANS_RESIDENT_MAX", "EVENTS_RESIDENT_MAX"]

#: A trace with more events than this does not keep its byte spans (12 bytes per event) in memory:
#: they are scanned again from the file when needed (``raw_events``, counter rewrites), or read
#: from the cache entry.
SPANS_RESIDENT_MAX = 4_000_000

#: A trace with more events than this, once written to the cache, does not keep its events table
#: in memory (about 90 bytes per event): :meth:`Trace.scan` reads the columns and rows a query
#: needs from the cache entry (Parquet, projection and predicate pushed down).
EVENTS_RESIDENT_MAX = 4_000_000


class LazyTables(Mapping[str, pl.DataFrame]):
    """Side tables loaded on first access (from the cache) or held in memory. With ``keep=False``
    a table read by its loader is not held: each access reads it again (a trace whose events stay
    in the cache entry: its kernel and op tables alone are ~0.2 GB on a 3 GB trace)."""

    def __init__(self, loaders: Mapping[str, Callable[[], pl.DataFrame] | pl.DataFrame], *, keep: bool = True) -> None:
        self._loaders = dict(loaders)
        self._frames: dict[str, pl.DataFrame] = {}
        self.keep = keep

    def __getitem__(self, name: str) -> pl.DataFrame:
        if name not in self._frames:
            src = self._loaders[name]
            if isinstance(src, pl.DataFrame):
                return src
            df = src()
            if not self.keep:
                return df
            self._frames[name] = df
        return self._frames[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._loaders)

    def __len__(self) -> int:
        return len(self._loaders)

    def spill(self, name: str, loader: Callable[[], pl.DataFrame]) -> None:
        """Let go of a held table: ``loader()`` reads it on next use."""
        self._frames.pop(name, None)
        self._loaders[name] = loader


class Trace:
    """One rank's trace.

    Attributes
    ----------
    events
        One row per trace event (polars DataFrame). Decoded columns: ``ph``, ``cat``, ``name``
        (categorical), ``pid``, ``tid``, ``ts_ns``, ``dur_ns`` (int64 ns, exact), ``correlation``,
        ``external_id``, ``stream``, ``device``; derived: ``row``, ``kind``, ``end_ns``,
        ``kernel_class``, ``launch_row``, ``gpu_count``, ``step``.
    meta
        :class:`~ranksight.model.meta.TraceMeta`.
    tables
        Side tables of typed args keyed by ``row`` (see :meth:`table`).
    """

    def __init__(self, decoded: DecodedTrace, *, rank: int, rank_source: str = "user") -> None:
        # the decoded table is handed over in a box: derive holds its only reference, so a column
        # it replaces (stream, device, correlation) is freed instead of kept twice
        spans: pl.DataFrame | Callable[[], pl.DataFrame] = decoded.spans
        if isinstance(spans, pl.DataFrame) and "offset" in spans.columns and spans.height > SPANS_RESIDENT_MAX:
            path = decoded.path
            spans = lambda: scan_spans(path)  # noqa: E731
            decoded.spans = None  # type: ignore[assignment] # freed before derive's temporaries
        box, decoded.events = [decoded.events], None  # type: ignore[assignment]
        events = derive(box, decoded.tables)
        self._init(
            path=decoded.path,
            rank=rank,
            rank_source=rank_source,
            events=events,
            tables=LazyTables(decoded.tables),
            spans=spans,
            raw_meta=decoded.meta,
            id_names=decoded.id_names,
            stats=decoded.stats,
            warnings=decoded.warnings,
        )

    @classmethod
    def many(cls, decoded: list[DecodedTrace], ranks: list[int], rank_sources: list[str]) -> list[Trace]:
        """The traces of several decoded files, derived together (:func:`~ranksight.model.derive.
        derive_many`: one pass of the column work over all of them); equal to ``Trace(d, ...)``
        of each. ``decoded`` is emptied (the traces hold the only references to the columns)."""
        ds = [decoded.pop(0) for _ in range(len(decoded))]
        for d in ds:
            if (
                isinstance(d.spans, pl.DataFrame)
                and "offset" in d.spans.columns
                and d.spans.height > SPANS_RESIDENT_MAX
            ):
                return [cls(d, rank=r, rank_source=s) for d, r, s in zip(ds, ranks, rank_sources, strict=True)]
        box = [d.events for d in ds]
        for d in ds:
            d.events = None  # type: ignore[assignment]
        extras: dict[str, Any] = {}
        derived = derive_many(box, [d.tables for d in ds], extras)
        out = []
        for i, (d, ev, r, s) in enumerate(zip(ds, derived, ranks, rank_sources, strict=True)):
            t = cls.__new__(cls)
            t._init(
                path=d.path,
                rank=r,
                rank_source=s,
                events=ev,
                tables=LazyTables(d.tables),
                spans=d.spans,
                raw_meta=d.meta,
                id_names=d.id_names,
                stats=d.stats,
                warnings=d.warnings,
                devices_used=extras["devices_used"][i],
                runtime_names=extras["runtime_names"][i],
                steps=extras["steps"][i],
            )
            out.append(t)
        return out

    @classmethod
    def from_parts(
        cls,
        *,
        path: str,
        rank: int,
        rank_source: str,
        events: pl.DataFrame,
        tables: LazyTables,
        spans: pl.DataFrame | Callable[[], pl.DataFrame],
        raw_meta: dict[str, Any],
        id_names: dict[int, str],
        stats: dict[str, int],
        warnings: list[str],
        devices_used: list[int] | None = None,
        runtime_names: set[str] | None = None,
        steps: pl.DataFrame | None = None,
    ) -> Trace:
        """A trace from already-derived parts (used by the cache)."""
        self = cls.__new__(cls)
        self._init(
            path=path,
            rank=rank,
            rank_source=rank_source,
            events=events,
            tables=tables,
            spans=spans,
            raw_meta=raw_meta,
            id_names=id_names,
            stats=stats,
            warnings=warnings,
            devices_used=devices_used,
            runtime_names=runtime_names,
            steps=steps,
        )
        return self

    def _init(
        self,
        *,
        path: str,
        rank: int,
        rank_source: str,
        events: pl.DataFrame,
        tables: LazyTables,
        spans: pl.DataFrame | Callable[[], pl.DataFrame],
        raw_meta: dict[str, Any],
        id_names: dict[int, str],
        stats: dict[str, int],
        warnings: list[str],
        devices_used: list[int] | None = None,
        runtime_names: set[str] | None = None,
        steps: pl.DataFrame | None = None,
    ) -> None:
        self.rank = rank
        self.path = path
        #: read from, or written to, a group cache entry (:func:`ranksight.model.engine.predecode`)
        self.grouped = False
        self._memos: dict[str, Any] = {}
        if steps is not None:  # found with other traces' (steps_many): equal to the property's own
            self.__dict__["steps"] = steps
        self.warnings: list[str] = list(warnings)
        self.tables: Mapping[str, pl.DataFrame] = tables
        self._events: pl.DataFrame | None = events
        self._events_file: Path | None = None
        self._events_fallback: Callable[[], pl.DataFrame] | None = None
        self.n_events = events.height
        self._spans = spans
        self.stats = dict(stats)
        if devices_used is None:  # select first: a filter copies every column it keeps
            gpu = events.select("kind", "device").filter(pl.col("kind").is_in(list(GPU_KINDS)))
            devices_used = sorted(int(d) for d in gpu["device"].drop_nulls().unique().to_list())
        if runtime_names is None:
            runtime_names = set(
                events.lazy()
                .filter(pl.col("kind").is_in(list(LAUNCH_KINDS)))
                .select(pl.col("name").unique())
                .collect()["name"]
                .cast(pl.String)
                .to_list()
            )
        self._runtime_names = runtime_names
        self.meta: TraceMeta = build_meta(
            path=path,
            rank=rank,
            rank_source=rank_source,
            raw=raw_meta,
            id_names=id_names,
            devices_used=devices_used,
            runtime_names=runtime_names,
            stats=stats,
        )

    def __repr__(self) -> str:
        return f"Trace(rank={self.rank}, events={self.stats.get('events', self.n_events)}, path={self.path!r})"

    # ---- the events table ----------------------------------------------------------------------

    @property
    def events(self) -> pl.DataFrame:
        """The whole events table. On a trace whose events live in its cache entry (see
        :meth:`spill_events`) each access reads every column back: prefer :meth:`scan`."""
        if self._events is None:
            return self.scan().collect()
        return self._events

    @events.setter
    def events(self, df: pl.DataFrame) -> None:
        self._events, self._events_file, self._events_fallback = df, None, None
        self.n_events = df.height

    def with_events(self, events: pl.DataFrame) -> Trace:
        """A trace like this one (same rank, path, metadata and side tables) whose events table is
        ``events`` (e.g. a filtered copy); nothing derived from the old events is carried over."""
        out = Trace.__new__(Trace)
        out.__dict__.update({k: v for k, v in self.__dict__.items() if k not in ("steps", "_memos")})
        out._memos = {}
        out.events = events
        out.warnings = list(self.warnings)
        return out

    def memo(self, key: str, compute: Callable[[], Any]) -> Any:
        """``compute()`` once per ``key`` for this trace: where views keep what they derive from
        the events (``key`` names the view and its options, e.g. ``"gpu_work:hta"``). Memos hold
        small or compact tables only; a trace made by :meth:`with_events` starts with none."""
        if key not in self._memos:
            self._memos[key] = compute()
        return self._memos[key]

    def has_memo(self, key: str) -> bool:
        """Whether :meth:`memo` holds ``key`` already (a run-wide pass seeds only the traces
        that lack it)."""
        return key in self._memos

    @property
    def events_resident(self) -> bool:
        """Whether the events table is held in memory (else read from the cache entry per query)."""
        return self._events is not None

    def spill_events(self, file: Path, fallback: Callable[[], pl.DataFrame]) -> None:
        """Drop the in-memory events table; queries read ``file`` (this trace's events, as
        written to its cache entry) from now on. ``fallback()`` rebuilds the table (held in
        memory from then on) if the file has gone or changed size meanwhile."""
        self._events_size = file.stat().st_size
        self._events_file, self._events_fallback, self._events = file, fallback, None
        if isinstance(self.tables, LazyTables):  # side tables read back per use too
            self.tables.keep = False

    def spill_table(self, name: str, loader: Callable[[], pl.DataFrame]) -> None:
        """Drop the held side table ``name``; ``loader()`` reads it (from the cache entry) on use."""
        if isinstance(self.tables, LazyTables):
            self.tables.spill(name, loader)

    def spill_spans(self, loader: Callable[[], pl.DataFrame]) -> None:
        """Drop the held byte spans; ``loader()`` reads them (from the cache entry) on use."""
        self._spans = loader

    @property
    def runtime_names(self) -> set[str]:
        """Names of the runtime/driver launch calls in this trace."""
        return set(self._runtime_names)

    def scan(self) -> pl.LazyFrame:
        """The events table as a polars LazyFrame: select and filter before ``collect()`` so
        that only the needed columns and rows are materialised (read from the cache entry when
        the table is not held in memory)."""
        if self._events is not None:
            return self._events.lazy()
        f = self._events_file
        assert f is not None and self._events_fallback is not None
        try:
            ok = f.stat().st_size == self._events_size
        except OSError:
            ok = False
        if not ok:  # the entry was removed or rewritten by another run: decode again, once
            self.events = self._events_fallback()
            return self.scan()
        return pl.scan_parquet(f)

    def column(self, name: str) -> pl.Series:
        """One column of the events table (the only one read when it lives in the cache)."""
        if self._events is not None:
            return self._events[name]
        return self.scan().select(name).collect().to_series()

    def distinct_names(self) -> list[str]:
        """The distinct event names (strings), computed once per trace (test a pattern on these,
        then filter with ``pl.col("name").is_in(...)``: no string per event)."""
        names = self.memo(
            "distinct_names",
            lambda: (
                self.scan().select(pl.col("name").unique().drop_nulls()).collect().to_series().cast(pl.String).to_list()
            ),
        )
        return list(names)

    # ---- views -------------------------------------------------------------------------------

    def table(self, name: str) -> pl.DataFrame:
        """A side table of typed args keyed by ``row``: one of
        ``kernel, transfer, op, collective, memory, sync, meta, flow``."""
        if name not in TABLES:
            raise KeyError(f"no table {name!r}; choose from {', '.join(TABLES)}")
        return self.tables[name]

    def with_args(self, df: pl.DataFrame, *names: str) -> pl.DataFrame:
        """``df`` (which has a ``row`` column) left-joined with the named side tables."""
        out = df
        for n in names:
            t = self.table(n)
            dup = [c for c in t.columns if c != "row" and c in out.columns]
            out = out.join(t.rename({c: f"{n}_{c}" for c in dup}), on="row", how="left", maintain_order="left")
        return out

    def kind(self, *kinds: str, columns: Sequence[str] | None = None) -> pl.DataFrame:
        """Events of the given kinds; with ``columns``, only those columns (the filter then copies
        only them: on a multi-million-event trace, a fraction of the memory)."""
        pred = pl.col("kind").is_in(list(kinds))
        if columns is None:
            if self._events is not None:
                return self._events.filter(pred)
            return self.scan().filter(pred).collect()
        return self.scan().filter(pred).select(list(columns)).collect()

    @property
    def gpu_events(self) -> pl.DataFrame:
        """Kernels, memcpys and memsets (GPU work; sync events excluded)."""
        return self.kind(*GPU_KINDS)

    @cached_property
    def steps(self) -> pl.DataFrame:
        """ProfilerSteps: ``step, name, row, tid, start_ns, end_ns`` (CPU span), plus
        ``gpu_start_ns, gpu_end_ns`` of the GPU work they launched, ``kernel_count`` and
        ``incomplete`` (fewer than 80 % of the previous step's kernels)."""
        return with_gpu_spans(build_steps(self.scan()), self.scan(), [])

    @property
    def spans(self) -> pl.DataFrame:
        """Byte offset and length of each event in the (decompressed) JSON text."""
        if not isinstance(self._spans, pl.DataFrame):
            self._spans = self._spans()
        return self._spans

    def raw_events(self, rows: list[int] | pl.Series) -> list[dict[str, Any]]:
        """The complete JSON objects of the given rows, every arg included (reads the file again).
        For an Nsight Systems export: every column of each event's SQLite row (``args``)."""
        rows = [int(r) for r in rows]
        sp = self.spans
        if "source_table" in sp.columns:
            from ranksight.io.nsys import extract_rows

            return extract_rows(self.path, sp[rows])
        offsets = sp["offset"].gather(rows).to_list()
        lengths = sp["length"].gather(rows).to_list()
        return extract_events(self.path, offsets, lengths)

    @property
    def span_ns(self) -> tuple[int, int] | None:
        """First start and last end over timed events (metadata excluded); memoised."""
        span: tuple[int, int] | None = self.memo("span_ns", self._span_ns)
        return span

    def _span_ns(self) -> tuple[int, int] | None:
        r = (
            self.scan()
            .filter(pl.col("ts_ns").is_not_null() & ~pl.col("kind").is_in(["metadata"]))
            .select(pl.len().alias("n"), pl.col("ts_ns").min().alias("lo"), pl.col("end_ns").max().alias("hi"))
            .collect()
            .row(0)
        )  # aggregated lazily: no copy of the events
        return None if r[0] == 0 else (int(r[1]), int(r[2]))
