"""HTA facade: ``TraceAnalysis.t`` (HTA's ``Trace`` object) and
``get_gpu_kernels_with_user_annotations``.

HTA v0.6 keeps each rank's events in a pandas frame whose ``name`` and ``cat`` (and, in
``get_gpu_kernels_with_user_annotations``, ``user_annotation``) are ids into a symbol table shared
by all ranks, built in the order a process pool hands the symbols over. ranksight has no symbol
table: those columns hold the strings themselves, and the ``s_*`` columns HTA adds with
``expand_names=True`` hold the same strings (shortened with ``shorten_names``), so ``s_name``,
``s_cat`` and ``s_user_annotation`` are HTA's cell for cell. Every other column is ranksight's
event table on HTA's view (:meth:`TraceAnalysisBase._hta_run`: the last ProfilerStep dropped unless
``include_last_profiler_step``): ``index`` is the event's position in ``traceEvents`` (HTA's
``index``), ``ts`` µs since the earliest event of all ranks (HTA's ``Trace.min_ts``), ``-1`` where a
stream, correlation, external id, linked row or step is absent (HTA's fill value). Argument
columns HTA copies from ``args`` (``bytes``, ``input_dims``, collective sizes, …) are not
repeated here; ranksight's analyses read them (docs/hta.md).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from ranksight.analyses.annotations import kernel_annotations
from ranksight.errors import RanksightWarning, UsageError
from ranksight.model.kinds import GPU_KINDS
from ranksight.views.gpu_work import hta_round, needs_hta_rounding
from ranksight.views.names import hta_short_name

if TYPE_CHECKING:
    import pandas as pd

    from ranksight.analyses import Session
    from ranksight.model.run import Run
    from ranksight.model.trace import Trace

__all__ = ["FacadeTrace", "TraceMixin"]

#: The event columns the frames are made of.
_EVENT_COLUMNS = (
    "row",
    pl.col("cat").cast(pl.String),
    pl.col("name").cast(pl.String),
    pl.col("kind").cast(pl.String),
    "pid",
    "tid",
    "ts_ns",
    "dur_ns",
    "stream",
    "correlation",
    "external_id",
    "launch_row",
    "step",
)

#: The events of HTA's frame: complete events without the profiler's own span (HTA's parser drops
#: cat ``Trace``).
_COMPLETE = (
    pl.col("dur_ns").is_not_null()
    & pl.col("ts_ns").is_not_null()
    & (pl.col("cat").cast(pl.String) != "Trace").fill_null(True)
)

#: HTA's ``GPUKernelFilter`` also keeps these device-wide sync events (stream -1).
_HTA_DEVICE_SYNCS = ("Event Sync", "Context Sync")

#: HTA's memory-kernel names (``MemoryKernelGroupingPattern``): never shortened.
_HTA_MEMORY = re.compile(r"(^(hip)?Memcpy)|(^(hip)?Memset)|(^dma)")


def _short(names: list[str], shorten: bool) -> dict[str, str]:
    return {n: (hta_short_name(n, is_memory=bool(_HTA_MEMORY.match(n))) if shorten else n) for n in names}


def _times(trace: Trace, df: pl.DataFrame, hta_compat: bool) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) in ns of the frame's events: exact, or HTA's µs rounding on ns traces."""
    ts, dur = df["ts_ns"].to_numpy(), df["dur_ns"].to_numpy()
    if hta_compat and needs_hta_rounding(trace) and df.height:
        return hta_round(ts, dur, trace.meta.base_time_ns or 0)
    return ts, ts + dur


def _step_at(trace: Trace, start_ns: np.ndarray, hta_compat: bool) -> np.ndarray:
    """The ProfilerStep whose CPU span holds each start (``step.ts <= ts < step.end``; the last
    listed one where several do, as HTA's ``add_iteration``), ``-1`` for none."""
    out = np.full(len(start_ns), -1, dtype=np.int64)
    st = trace.steps.filter(pl.col("start_ns").is_not_null() & pl.col("end_ns").is_not_null()).sort("row")
    if st.height == 0 or len(start_ns) == 0:
        return out
    spans = st.select(pl.col("start_ns").alias("ts_ns"), (pl.col("end_ns") - pl.col("start_ns")).alias("dur_ns"))
    s0, s1 = _times(trace, spans, hta_compat)
    for step, a, b in zip(st["step"].to_list(), s0, s1, strict=True):
        out[(start_ns >= a) & (start_ns < b)] = int(step)
    return out


class FacadeTrace:
    """HTA's ``Trace`` (``TraceAnalysis.t``) over the facade's run: the methods notebooks call on
    it. Frames are HTA's layout (module docstring); ``symbol_table`` does not exist (names are
    strings)."""

    def __init__(self, owner: TraceMixin) -> None:
        self._owner = owner
        self._frames: dict[int, pd.DataFrame] = {}
        self.is_parsed = True

    @property
    def trace_files(self) -> dict[int, str]:
        """rank → trace file path."""
        return {t.rank: t.path for t in self._owner.run}

    @property
    def min_ts(self) -> int | float:
        """HTA's ``min_ts``: the earliest event start of all ranks in the files' µs (the value
        subtracted from every ``ts``)."""
        us = self._owner._min_ts_us()
        return int(us) if float(us).is_integer() else us

    @property
    def meta_data(self) -> dict[int, dict[str, Any]]:
        """rank → the trace's top-level metadata (every key but ``traceEvents``), as HTA's
        ``meta_data``."""
        return {t.rank: dict(t.meta.raw) for t in self._owner.run}

    @property
    def traces(self) -> dict[int, pd.DataFrame]:
        """rank → event frame (built on first use)."""
        return self.get_all_traces()

    def get_ranks(self) -> list[int]:
        return sorted(self._owner._hta_run().ranks)

    def get_trace(self, rank: int) -> pd.DataFrame:
        """One rank's complete events (``ph`` X: what HTA's frame holds) in HTA's columns:
        ``index, cat, name, pid, tid, ts, dur, stream, correlation, external_id,
        index_correlation, iteration``. Raises :class:`~ranksight.errors.UsageError` for a rank
        that is not loaded (HTA: ``ValueError``)."""
        if rank not in self.get_ranks():
            raise UsageError(f"no trace for rank {rank}; ranks: {self.get_ranks()}")
        if rank not in self._frames:
            self._frames[rank] = self._owner._event_frame(rank).to_pandas()
        return self._frames[rank]

    def get_all_traces(self) -> dict[int, pd.DataFrame]:
        return {r: self.get_trace(r) for r in self.get_ranks()}

    def get_iterations(self, rank: int | None = None) -> list[int]:
        """The ProfilerStep numbers of ``rank`` (default: the first), ``[]`` for an unknown rank."""
        ranks = self.get_ranks()
        r = ranks[0] if rank is None and ranks else rank
        if r not in ranks:
            return []
        steps = self._owner._hta_run()[r].steps["step"]
        return sorted(int(s) for s in steps.to_list() if s is not None and s >= 0)

    def get_trace_duration(self, rank: int | None = None) -> int | float:
        """Last event start − first event start of ``rank`` (default: the first), µs, as HTA."""
        ranks = self.get_ranks()
        df = self.get_trace(ranks[0] if rank is None else rank)
        return df["ts"].max() - df["ts"].min() if len(df) else 0

    def get_trace_start_unixtime_ns(self, rank: int) -> int:
        """Unix time (ns) of :attr:`min_ts` on ``rank``'s clock (its ``baseTimeNanoseconds``
        when the file has one, else ``min_ts`` read as epoch µs)."""
        if rank not in self.get_ranks():
            raise UsageError(f"no trace for rank {rank}; ranks: {self.get_ranks()}")
        base = self._owner._hta_run()[rank].meta.base_time_ns or 0
        return self._owner._min_ts_ns_hta() + int(base)

    def get_raw_trace_for_one_rank(self, rank: int = 0) -> dict[str, Any]:
        """The rank's file as JSON (every event, unfiltered), as HTA."""
        import json

        from ranksight.io.rewrite import read_text

        files = self.trace_files
        if rank not in files:
            raise UsageError(f"no trace for rank {rank}; ranks: {sorted(files)}")
        doc: dict[str, Any] = json.loads(read_text(files[rank]))
        return doc

    def get_device_type(self) -> str:
        """``device_type`` of the first rank's metadata, else from the GPU vendor ranksight read
        (``NVIDIA GPU``, ``AMD GPU``), else ``UNKNOWN``."""
        run = self._owner._hta_run()
        if not run.ranks:
            return "UNKNOWN"
        meta = run[run.ranks[0]].meta
        given = meta.raw.get("device_type")
        if isinstance(given, str):
            return given
        vendor = (meta.gpu_vendor or "").upper()
        return {"NVIDIA": "NVIDIA GPU", "AMD": "AMD GPU"}.get(vendor, "UNKNOWN")


class TraceMixin:
    """``t`` and ``get_gpu_kernels_with_user_annotations``."""

    run: Run
    hta_compat: bool
    _hta_run: Callable[[], Run]
    _session: Callable[[], Session]
    _min_ts_ns: Callable[[], int]
    _t_cache: FacadeTrace | None = None

    @property
    def t(self) -> FacadeTrace:
        """HTA's ``TraceAnalysis.t``: the loaded traces as HTA's ``Trace`` presents them."""
        if self._t_cache is None:
            self._t_cache = FacadeTrace(self)
        return self._t_cache

    def _min_ts_ns_hta(self) -> int:
        """HTA's ``min_ts`` in ns (files' own time base); rounded up to a whole µs like HTA's
        loader with ``hta_compat`` on ns traces."""
        lo = self._min_ts_ns()
        if self.hta_compat and any(needs_hta_rounding(t) for t in self.run):
            return -(-lo // 1000) * 1000
        return lo

    def _min_ts_us(self) -> float:
        return self._min_ts_ns_hta() / 1000

    def _rebase(self, trace: Trace, ts_ns: np.ndarray) -> pl.Series:
        """ns on the trace's clock → µs since HTA's ``min_ts`` (int64 when every value is whole;
        the subtraction is done in int64 ns: epoch µs as float64 keep only quarter-µs)."""
        rel = np.asarray(ts_ns, dtype=np.int64) - int(trace.meta.base_time_ns or 0) - self._min_ts_ns_hta()
        if rel.size and not (rel % 1000).any():
            return pl.Series(rel // 1000)
        return pl.Series(rel / 1000)

    def _event_frame(self, rank: int) -> pl.DataFrame:
        trace = self._hta_run()[rank]
        ev = (
            trace.scan()
            # complete events, without the profiler's own span (HTA's parser drops cat "Trace")
            .filter(_COMPLETE)
            .select(*_EVENT_COLUMNS)
            .collect()
        )
        return self._hta_columns(trace, ev)

    def _hta_columns(self, trace: Trace, ev: pl.DataFrame) -> pl.DataFrame:
        """HTA's frame columns from ranksight's event columns; ``-1`` for no value."""
        start, end = _times(trace, ev, self.hta_compat)
        ts = self._rebase(trace, start)
        dur = pl.Series((end - start) / 1000)
        if dur.len() and (dur == dur.round(0)).all():
            dur = dur.cast(pl.Int64)
        stream = pl.col("stream").fill_null(-1).cast(pl.Int64)
        if self.hta_compat:  # HTA keeps a stream on GPU-side events only
            stream = pl.when(pl.col("kind").is_in([*GPU_KINDS, "sync"])).then(stream).otherwise(-1)
        partner = self._partners(trace)
        ev = ev.join(partner, on="row", how="left", maintain_order="left")
        if self.hta_compat:  # HTA gives GPU annotations (stream -1 there) the step around their start
            ev = ev.with_columns(
                pl.when(pl.col("kind") == "gpu_user_annotation")
                .then(pl.Series(_step_at(trace, start, self.hta_compat)))
                .otherwise(pl.col("step"))
                .alias("step")
            )
        return ev.select(
            pl.col("row").cast(pl.Int64).alias("index"),
            "cat",
            "name",
            "pid",
            "tid",
            ts.alias("ts"),
            dur.alias("dur"),
            stream.alias("stream"),
            *(pl.col(c).fill_null(-1).cast(pl.Int64) for c in ("correlation", "external_id")),
            # HTA's encoding: the linked event's index, 0 for an event with a correlation whose
            # partner is not in the trace, -1 for an event without one
            pl.coalesce(
                pl.col("__partner").cast(pl.Int64),
                pl.when(pl.col("correlation").is_not_null()).then(0).otherwise(-1),
            ).alias("index_correlation"),
            self._iteration(),
        )

    def _partners(self, trace: Trace) -> pl.DataFrame:
        """``row → __partner``: the GPU event a CPU event launched and the launch of a GPU event.

        ranksight: its launch link (``launch_row``, every launch API). ``hta_compat``: HTA's
        ``add_iteration``/``index_correlation`` rule: every CPU-side event and every event of
        HTA's GPU set (``GPUKernelFilter``) sharing a correlation are partners (the highest index
        wins where several are, as HTA's repeated assignment leaves it)."""
        if not self.hta_compat:
            gpu = trace.scan().filter(pl.col("launch_row").is_not_null()).select("row", "launch_row").collect()
            return pl.concat(
                [
                    gpu.select("row", pl.col("launch_row").alias("__partner")),
                    gpu.select(pl.col("launch_row").alias("row"), pl.col("row").alias("__partner"))
                    .group_by("row")
                    .agg(pl.col("__partner").max()),
                ]
            ).unique("row", keep="first")
        corr = (
            trace.scan()
            .filter(_COMPLETE & pl.col("correlation").is_not_null() & (pl.col("correlation") != -1))
            .select("row", pl.col("name").cast(pl.String), pl.col("kind").cast(pl.String), "stream", "correlation")
            .collect()
        )
        on_gpu = ((pl.col("stream") >= 0) & (pl.col("correlation") >= 0)) | pl.col("name").is_in(_HTA_DEVICE_SYNCS)
        on_gpu = on_gpu & pl.col("kind").is_in([*GPU_KINDS, "sync"])
        g = corr.filter(on_gpu).select("row", "correlation")
        c = corr.filter(~on_gpu).select("row", "correlation")
        m = c.join(g, on="correlation", how="inner", suffix="_gpu")
        return pl.concat(
            [
                m.group_by("row_gpu").agg(pl.col("row").max().alias("__partner")).rename({"row_gpu": "row"}),
                m.group_by("row").agg(pl.col("row_gpu").max().alias("__partner")),
            ]
        ).unique("row", keep="first")

    def _iteration(self) -> pl.Expr:
        """The step (``-1`` outside steps). ``hta_compat``: HTA's ``add_iteration`` leaves GPU
        events on stream 0 (AMD's default stream) without one (NaN): it takes a GPU event's step
        from its launch only for ``stream > 0``."""
        step = pl.col("step").cast(pl.Int64).fill_null(-1)
        if not self.hta_compat:
            return step.alias("iteration")
        missed = pl.col("kind").is_in([*GPU_KINDS, "sync"]) & (pl.col("stream") == 0)
        return pl.when(missed).then(None).otherwise(step).alias("iteration")

    def get_gpu_kernels_with_user_annotations(
        self, rank: int, expand_names: bool = True, shorten_names: bool = True
    ) -> pd.DataFrame | None:
        """Every GPU kernel, memcpy and memset of ``rank`` with the GPU user annotation it runs
        under (``user_annotation``; ``""`` for none): HTA's columns ``index, cat, name, pid, tid,
        ts, dur, end, stream, correlation, external_id, index_correlation, iteration``, then with
        ``expand_names`` ``s_name, s_cat``, then ``user_annotation`` and ``s_user_annotation``
        (names shortened with ``shorten_names``), in ``index`` order. The annotation is the
        innermost GPU annotation on the event's stream that overlaps it
        (:func:`ranksight.analyses.annotations.kernel_annotations`). None with a warning when the
        rank has no GPU annotations, as HTA."""
        run = self._hta_run()
        if rank not in run.ranks:
            raise UsageError(f"rank {rank} not loaded; ranks: {run.ranks}")
        trace = run[rank]
        if trace.kind("gpu_user_annotation", columns=["row"]).height == 0:
            warnings.warn(
                f"Trace for rank {rank} does not contain any GPU user annotations", RanksightWarning, stacklevel=2
            )
            return None
        owned = self._session().map(kernel_annotations, [rank], hta_compat=self.hta_compat)[rank]
        ev = (
            trace.scan()
            .join(owned.lazy().select("row", "annotation"), on="row", how="semi")
            .select(*_EVENT_COLUMNS)
            .collect()
            .sort("row")
        )
        df = self._hta_columns(trace, ev).with_columns((pl.col("ts") + pl.col("dur")).alias("end"))
        ann = ev.select("row").join(owned.select("row", "annotation"), on="row", how="left", maintain_order="left")
        df = df.with_columns(ann["annotation"].fill_null("").alias("user_annotation"))
        first = ["index", "cat", "name", "pid", "tid", "ts", "dur", "end", "stream", "correlation"]
        rest = ["external_id", "index_correlation", "iteration"]
        cols = first + rest
        if expand_names:
            short = _short([*df["name"].unique().to_list(), *df["user_annotation"].unique().to_list()], shorten_names)
            df = df.with_columns(
                pl.col("name").replace_strict(short, return_dtype=pl.String).alias("s_name"),
                pl.col("cat").alias("s_cat"),
                pl.col("user_annotation").replace_strict(short, return_dtype=pl.String).alias("s_user_annotation"),
            )
            cols += ["s_name", "s_cat", "user_annotation", "s_user_annotation"]
        else:
            cols += ["user_annotation"]
        return df.select(cols).to_pandas()
