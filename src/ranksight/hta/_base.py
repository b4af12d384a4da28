"""Loading for the HTA facade (``TraceAnalysis(trace_dir=..., trace_files=...)``)."""

from __future__ import annotations

import os
from collections.abc import Mapping

import polars as pl

from ranksight.analyses import Session
from ranksight.errors import UsageError
from ranksight.hta import _deps
from ranksight.model.kinds import GPU_KINDS
from ranksight.model.run import Run, load
from ranksight.model.trace import Trace
from ranksight.views.gpu_work import hta_round, needs_hta_rounding

__all__ = ["TraceAnalysisBase", "filter_last_step"]

_STEP_NAME = pl.col("name").cast(pl.String).str.contains(r"^ProfilerStep\s*#\s*\d+$")


def _step_names(run: Run) -> set[str]:
    names: set[str] = set()
    for t in run:
        s = (
            t.scan()
            .filter(_STEP_NAME & ~pl.col("kind").is_in(["metadata"]))
            .select(pl.col("name").unique())
            .collect()["name"]
            .cast(pl.String)
        )
        names.update(s.to_list())
    return names


def _filtered_trace(trace: Trace, include_last_profiler_step: bool) -> Trace:
    ev = trace.scan()
    # HTA's GPUKernelFilter: GPU work and sync events (they carry a stream and a correlation)
    is_gpu = pl.col("kind").is_in([*GPU_KINDS, "sync"])
    timed = pl.col("ts_ns").is_not_null()
    cpu_steps = ev.filter(~is_gpu & timed & _STEP_NAME).select("ts_ns", "end_ns").collect()
    if cpu_steps.height == 0:
        return trace
    if include_last_profiler_step:
        keep_cpu = ~is_gpu & (pl.col("ts_ns") <= cpu_steps["end_ns"].max())
    else:
        keep_cpu = ~is_gpu & (pl.col("ts_ns") < cpu_steps["ts_ns"].max())
    kept_corr = (
        ev.filter(keep_cpu & pl.col("correlation").is_not_null())
        .select(pl.col("correlation").unique())
        .collect()
        .to_series()
    )
    keep_gpu = is_gpu & pl.col("correlation").is_in(kept_corr.implode())
    # rows HTA drops while loading anyway (metadata, flows, instants, counters) are kept untouched
    untimed_or_dropped = ~timed | pl.col("kind").is_in(["metadata", "flow", "counter", "memory"])
    new_events = ev.filter(keep_cpu | keep_gpu | untimed_or_dropped).collect()
    return trace.with_events(new_events)


def hta_rounded(trace: Trace) -> Trace:
    """The trace as HTA's loader sees it when any ``ts`` is fractional µs (hta-definitions §1):
    every start rounded up and every end (``ts + dur``) rounded down to a whole µs in float64 µs
    (:func:`~ranksight.views.gpu_work.hta_round`), so sub-µs events get ``dur`` 0 or −1 µs.
    Unchanged when every ``ts`` is whole µs. Used by the facade with ``hta_compat=True`` only."""
    if not needs_hta_rounding(trace):
        return trace
    ev = trace.scan().collect()
    base = trace.meta.base_time_ns or 0
    timed = ev["ts_ns"].is_not_null().to_numpy()
    ts = ev["ts_ns"].fill_null(base).to_numpy()
    dur = ev["dur_ns"].fill_null(0).to_numpy()
    ts_r, end_r = hta_round(ts, dur, base)
    has_dur = ev["dur_ns"].is_not_null()
    new = (
        ev.with_columns(pl.when(pl.Series(timed)).then(pl.Series(ts_r)).otherwise(None).alias("ts_ns"))
        .with_columns(pl.when(has_dur).then(pl.Series(end_r)).otherwise(pl.col("ts_ns")).alias("end_ns"))
        .with_columns(pl.when(has_dur).then(pl.col("end_ns") - pl.col("ts_ns")).otherwise(None).alias("dur_ns"))
    )
    return trace.with_events(new)


def filter_last_step(run: Run, *, include_last_profiler_step: bool = False) -> Run:
    """HTA's last-step filter (``_filter_irrelevant_gpu_kernels``, hta-definitions §1.8).

    Skipped when the run has fewer than two distinct ``ProfilerStep#N`` names (over all ranks).
    Otherwise, per rank: CPU-side events (everything but GPU work and sync events) are kept when
    they start before the start of the rank's last ProfilerStep (``ts ≤`` its end with
    ``include_last_profiler_step``); GPU work and sync events are kept when their correlation
    matches a kept CPU-side event, so GPU events without a CPU partner are dropped too. Metadata,
    flow, counter and memory-instant rows (which HTA drops while loading) are left in place.
    Returns a new :class:`Run`; the input is not modified.
    """
    if len(_step_names(run)) <= 1:
        return run
    return Run([_filtered_trace(t, include_last_profiler_step) for t in run])


class TraceAnalysisBase:
    """Holds the loaded run; mixins add HTA's methods.

    ``self.run`` is the run with every event (ranksight's native view). Mixins call
    :meth:`_hta_run` for the run that HTA's analyses see.
    """

    def __init__(
        self,
        trace_files: Mapping[int, str] | None = None,
        trace_dir: str | os.PathLike[str] | None = None,
        include_last_profiler_step: bool | None = False,
        *,
        hta_compat: bool = False,
    ) -> None:
        _deps.pandas()  # every method returns pandas: say what is missing before the load, not after
        if trace_files is None and trace_dir is None:
            raise UsageError("give trace_dir or trace_files")
        if trace_files is not None:
            base = os.fspath(trace_dir) if trace_dir is not None else ""
            files = {
                int(r): os.path.join(base, p) if base and not os.path.isabs(p) else p for r, p in trace_files.items()
            }
            self.run: Run = load(files)
        else:
            self.run = load(trace_dir)  # type: ignore[arg-type]
        self.include_last_profiler_step = bool(include_last_profiler_step)
        #: ranksight extension: reproduce HTA's definitions (sync events busy, µs rounding of ns
        #: traces, name-regex kernel types) instead of ranksight's (see docs/hta-differences.md).
        self.hta_compat = bool(hta_compat)
        self._hta_run_cache: Run | None = None
        self._min_ts_cache: int | None = None
        self._session_cache: Session | None = None
        self._native_cache: Session | None = None

    def _hta_run(self) -> Run:
        """The run as HTA's analyses see it: HTA's last-step filter applied.

        By default (HTA's ``include_last_profiler_step=False``) the last ProfilerStep is dropped:
        CPU-side events starting at or after its start, and every GPU/sync event whose correlation
        does not match a kept CPU-side event (:func:`filter_last_step`). With
        ``include_last_profiler_step=True`` CPU-side events up to the last step's end are kept.
        Traces with fewer than two distinct ProfilerStep names are returned unfiltered. The result
        is computed once and cached; ``self.run`` keeps every event. Every facade mixin uses this.
        """
        if self._hta_run_cache is None:
            run = Run([hta_rounded(t) for t in self.run]) if self.hta_compat else self.run
            self._hta_run_cache = filter_last_step(run, include_last_profiler_step=self.include_last_profiler_step)
        return self._hta_run_cache

    def _session(self) -> Session:
        """The session over :meth:`_hta_run` through which every facade method runs its analyses
        and per-rank work (results shared between methods, per-rank work on the run's engine)."""
        if self._session_cache is None:
            self._session_cache = Session(self._hta_run())
        return self._session_cache

    def _native_session(self) -> Session:
        """The session over ``self.run`` (every event; used where HTA reads the unfiltered trace)."""
        if self._native_cache is None:
            self._native_cache = Session(self.run)
        return self._native_cache
