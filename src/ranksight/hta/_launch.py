"""HTA facade methods for launches, op kernels, sequences, queue, memory bandwidth, counters,
steps, annotations, stragglers and CUPTI counters.

Each method has HTA v0.6's name, arguments, return shape (pandas) and column names, and runs on
:meth:`TraceAnalysisBase._hta_run` (HTA's last-step filter). Numbers are ranksight's (every launch
API, per-rank aten-op tables, blocked time on every stream, bandwidth from bytes when Kineto's arg
is missing, stragglers on current NCCL names); ``TraceAnalysis(..., hta_compat=True)`` selects
HTA's name sets and rules instead. Time series carry HTA's time base: µs since the earliest event
of all ranks (``ts`` rebased like HTA's loader). ``visualize=True`` draws the plotly figure when
plotly is installed, and does nothing else.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Callable, Sequence
from enum import Flag, auto
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from ranksight.analyses.annotations import annotation_events
from ranksight.analyses.cupti_counters import cupti_table
from ranksight.analyses.launches import hta_launch_stats, launch_table
from ranksight.analyses.memcpy_bw import bw_series, copies
from ranksight.analyses.op_kernels import hta_launch_rows, hta_pooled_tables, op_kernel_table
from ranksight.analyses.queue import CUDA_MAX_LAUNCH_QUEUE_PER_STREAM, queue_series, trace_duration_ns
from ranksight.analyses.sequences import kernel_patterns
from ranksight.errors import RanksightWarning, UsageError
from ranksight.hta import _deps
from ranksight.io.rewrite import rewrite_trace
from ranksight.model.run import Run
from ranksight.report import plots
from ranksight.report.counters import write_counters
from ranksight.views.gpu_work import needs_hta_rounding

if TYPE_CHECKING:
    import pandas as pd

    from ranksight.analyses import Session
    from ranksight.model.trace import Trace

__all__ = ["LaunchMixin", "TimeSeriesTypes"]


class TimeSeriesTypes(Flag):
    """HTA's counter families for :meth:`LaunchMixin.generate_trace_with_counters`."""

    QUEUE_LENGTH = auto()
    MEMCPY_BANDWIDTH = auto()


def _pd() -> Any:
    return _deps.pandas()


def _show(draw: Callable[..., Any], *args: Any, renderer: str | None = None, **kwargs: Any) -> None:
    """Draw and show plotly figure(s) from :mod:`ranksight.report.plots` when plotly is importable."""
    try:
        import plotly  # noqa: F401
    except ImportError:
        from ranksight.errors import warn

        warn(
            "plotly is not installed, so visualize=True draws no figure (the table is returned): "
            "pip install 'ranksight[hta]'"
        )
        return
    figs = draw(*args, **kwargs)
    for fig in figs if isinstance(figs, list) else [figs]:
        fig.show(renderer=renderer or None)


def _us(values_ns: pl.Series) -> pl.Series:
    """ns → µs: int64 when every value is whole µs (HTA's integer traces), else float64."""
    if values_ns.len() and (values_ns.drop_nulls() % 1000 == 0).all():
        return values_ns // 1000
    return values_ns / 1e3


def _first_ts_ns(trace: Trace) -> int | None:
    """Earliest start of a timed event (the profiler's ``Trace`` span excluded), relative to the
    trace's base time."""
    lo = (
        trace.scan()
        .filter(pl.col("dur_ns").is_not_null() & (pl.col("cat").cast(pl.String) != "Trace"))
        .select(pl.col("ts_ns").min())
        .collect()
        .item()
    )
    return None if lo is None else int(lo) - int(trace.meta.base_time_ns or 0)


def _launch_stats(trace: Trace, hta_compat: bool, include_memory: bool) -> pl.DataFrame:
    if hta_compat:
        return hta_launch_stats(trace, include_memory=include_memory)
    return launch_table(trace, include_memory=include_memory).select(
        "correlation",
        pl.col("cpu_dur_us").alias("cpu_duration"),
        pl.col("gpu_dur_us").alias("gpu_duration"),
        pl.col("launch_delay_us").alias("launch_delay"),
    )


def _queue_series(trace: Trace, hta_apis: bool) -> tuple[pl.DataFrame, int | None]:
    return queue_series(trace, hta_apis=hta_apis, hta_order=hta_apis), trace.meta.base_time_ns


def _bw_series(trace: Trace, hta_compat: bool) -> tuple[pl.DataFrame, int | None]:
    return bw_series(copies(trace, hta_compat=hta_compat), hta_order=hta_compat), trace.meta.base_time_ns


def _cupti_table(trace: Trace) -> tuple[tuple[pl.DataFrame | None, str | None], int | None]:
    return cupti_table(trace), trace.meta.base_time_ns


def _step_numbers(trace: Trace) -> list[int]:
    return [int(s) for s in trace.steps["step"].to_list()]


class LaunchMixin:
    """HTA's launch, op-kernel, sequence, counter, step, straggler and annotation methods."""

    run: Run
    hta_compat: bool
    _hta_run: Callable[[], Run]
    _session: Callable[[], Session]
    _native_session: Callable[[], Session]
    _min_ts_cache: int | None

    # ---- helpers ---------------------------------------------------------------------------

    def _ranks(self, ranks: Sequence[int] | None) -> list[int]:
        """HTA's default ``[0]`` (the first rank when there is no rank 0); unknown ranks raise."""
        loaded = self._session().ranks
        if not ranks:
            return [0] if 0 in loaded else loaded[:1]
        bad = [r for r in ranks if r not in loaded]
        if bad:
            raise UsageError(f"rank(s) {bad} not loaded; ranks: {loaded}")
        return list(ranks)

    def _min_ts_ns(self) -> int:
        """HTA's ``Trace.min_ts``: the earliest start of a timed event over all ranks (before the
        last-step filter; the profiler's ``Trace`` span excluded), in the files' own time base."""
        if self._min_ts_cache is not None:
            return self._min_ts_cache
        mins = [lo for lo in self._native_session().map(_first_ts_ns).values() if lo is not None]
        out = min(mins) if mins else 0
        self._min_ts_cache = out
        return out

    def _rebased(self, base_ns: int | None, ts_ns: pl.Series) -> pl.Series:
        lo = self._min_ts_ns()
        if self.hta_compat and any(needs_hta_rounding(t) for t in self.run):
            lo = -(-lo // 1000) * 1000  # HTA's min_ts is taken after its loader rounded starts up
        return _us(ts_ns - int(base_ns or 0) - lo)

    # ---- launches --------------------------------------------------------------------------

    def get_cuda_kernel_launch_stats(
        self,
        ranks: list[int] | None = None,
        runtime_cutoff: int = 50,
        launch_delay_cutoff: int = 100,
        include_memory_events: bool = True,
        visualize: bool = True,
    ) -> dict[int, pd.DataFrame]:
        """Per rank: ``correlation, cpu_duration, gpu_duration, launch_delay`` (µs) of each launch.

        ranksight counts every launch API (HIP, driver, CUDA graphs: one row per launch, GPU time
        summed over its activities, delay of the first); ``hta_compat`` uses HTA's names and one row
        per GPU activity."""
        out: dict[int, pd.DataFrame] = {}
        rs = self._ranks(ranks)
        per = self._session().map(_launch_stats, rs, hta_compat=self.hta_compat, include_memory=include_memory_events)
        for r in rs:
            out[r] = per[r].to_pandas()
            if visualize:
                _show(plots.launch_stats_figures, r, out[r], runtime_cutoff, launch_delay_cutoff)
        return out

    def get_aten_op_kernels_and_delay(
        self, ranks: list[int] | None = None, sort_by: list[str] | None = None
    ) -> dict[int, pd.DataFrame]:
        """Per rank: ``aten_op_name, kernel_sequence, occurrence_count, avg_aten_op_launch_delay,
        avg_runtime_delay``, sorted by ``sort_by`` (descending). Each rank's table has only its own
        rows; with ``hta_compat`` rank k's table pools every rank before it in ``ranks``, as HTA's
        does."""
        sort_by = list(sort_by or ["occurrence_count"])
        out: dict[int, pd.DataFrame] = {}
        rs = self._ranks(ranks)
        if self.hta_compat:
            per = hta_pooled_tables(self._session().map(hta_launch_rows, rs), rs)
        else:
            per = self._session().map(op_kernel_table, rs, hta_apis=False)
        for r in rs:
            df = per[r].drop("rank")
            bad = [c for c in sort_by if c not in df.columns]
            if bad:
                raise UsageError(f"cannot sort by {bad}; columns: {df.columns}")
            df = df.sort(
                sort_by + ["aten_op_name", "kernel_sequence"], descending=[True] * len(sort_by) + [False, False]
            )
            out[r] = df.to_pandas()
            _show(plots.aten_op_table_figure, r, out[r])
        return out

    def get_frequent_cuda_kernel_sequences(
        self,
        operator_name: str,
        output_dir: str,
        min_pattern_len: int = 3,
        rank: int = 0,
        top_k: int = 5,
        visualize: bool = False,
        compress_other_kernels: bool = True,
    ) -> pd.DataFrame:
        """``pattern, count, GPU kernel duration (us), CPU op duration (us)``; writes
        ``overlaid_<trace file>`` to ``output_dir`` with ``args["Patterns"]`` on the events of the
        ``top_k`` patterns. Other events are left as they are (``compress_other_kernels`` is
        accepted for compatibility; ranksight never renames events)."""
        pd_ = _pd()
        cols = ["pattern", "count", "GPU kernel duration (us)", "CPU op duration (us)"]
        if not operator_name:
            warnings.warn("operator_name must be a non-empty operator name", RanksightWarning, stacklevel=2)
            return pd_.DataFrame()
        if not os.path.isdir(output_dir) or not os.access(output_dir, os.W_OK):
            warnings.warn(f"output_dir {output_dir!r} is not a writable directory", RanksightWarning, stacklevel=2)
            return pd_.DataFrame()
        trace = self._session().trace(rank)  # the overlaid file is written from this rank's trace here
        pats, occ = kernel_patterns(trace, operator_name, min_pattern_len=min_pattern_len, top_k=top_k)
        if pats.height == 0:
            warnings.warn(
                f"no {operator_name!r} op with at least {min_pattern_len} kernels below it",
                RanksightWarning,
                stacklevel=2,
            )
            return pd_.DataFrame()
        df = pats.select(
            "pattern", "count", pl.col("gpu_dur_us").alias(cols[2]), pl.col("cpu_dur_us").alias(cols[3])
        ).to_pandas()
        patches = {int(r): {"Patterns": {p: int(c)}} for r, p, c in occ.select("row", "pattern", "count").iter_rows()}
        sp = trace.spans
        dst = os.path.join(output_dir, "overlaid_" + os.path.basename(trace.path))
        rewrite_trace(
            trace.path,
            dst,
            offsets=sp["offset"].to_list(),
            lengths=sp["length"].to_list(),
            patches=patches,
            inputs=[t.path for t in self.run],
            force=True,
        )
        if visualize:
            _show(plots.frequent_patterns_figure, df, rank, top_k)
        return df

    # ---- queue length ----------------------------------------------------------------------

    def get_queue_length_time_series(self, ranks: list[int] | None = None) -> dict[int, pd.DataFrame]:
        """Per rank: ``ts, pid, tid, stream, queue_length`` (index ``index`` = the event's position
        in ``traceEvents``), one row per change; ranks without launches are left out."""
        out: dict[int, pd.DataFrame] = {}
        rs = self._ranks(ranks)
        per = self._session().map(_queue_series, rs, hta_apis=self.hta_compat)
        for r in rs:
            s, base_ns = per[r]
            if s.height == 0:
                continue
            df = s.select(
                pl.col("row").cast(pl.Int64).alias("index"),
                self._rebased(base_ns, s["ts_ns"]).alias("ts"),
                "pid",
                "tid",
                "stream",
                "queue_length",
            ).to_pandas()
            out[r] = df.set_index("index")
        return out

    def get_queue_length_summary_from_time_series(
        self, queue_length_dict: dict[int, pd.DataFrame]
    ) -> pd.DataFrame | None:
        """HTA's ``describe()`` of ``queue_length`` per (rank, stream) over the change points."""
        pd_ = _pd()
        frames = [df.assign(rank=r)[["rank", "stream", "queue_length"]] for r, df in queue_length_dict.items()]
        if not frames:
            return None
        return pd_.concat([f.groupby(["rank", "stream"]).describe() for f in frames])

    def get_queue_length_summary(self, ranks: list[int] | None = None) -> pd.DataFrame | None:
        """Queue length statistics per (rank, stream); None when no rank has launches."""
        return self.get_queue_length_summary_from_time_series(self.get_queue_length_time_series(ranks))

    def get_time_spent_blocked_on_full_queue(
        self, queue_length_dict: dict[int, pd.DataFrame], max_queue_length: int = CUDA_MAX_LAUNCH_QUEUE_PER_STREAM
    ) -> pd.DataFrame | None:
        """``rank, stream, duration_at_max_queue_length, relative_duration_at_max_queue_length`` for
        **every** stream that reaches ``max_queue_length`` (HTA keeps one stream per rank)."""
        pd_ = _pd()
        rows = []
        sess = self._session()
        known = [r for r in queue_length_dict if r in sess.ranks]
        spans = sess.map(trace_duration_ns, known) if known else {}
        for r, df in queue_length_dict.items():
            d = df[["stream", "ts", "queue_length"]].copy()
            d["dur"] = d.groupby("stream")["ts"].shift(-1) - d["ts"]
            hit = d[d["queue_length"] >= max_queue_length]
            if hit.empty:
                continue
            span_us = spans[r] / 1e3 if r in spans else float("nan")
            agg = hit.groupby("stream", sort=True)["dur"].sum()
            for stream, dur in agg.items():
                rows.append(
                    {
                        "rank": r,
                        "stream": stream,
                        "duration_at_max_queue_length": dur,
                        "relative_duration_at_max_queue_length": dur / span_us if span_us else float("nan"),
                    }
                )
        return pd_.DataFrame(
            rows, columns=["rank", "stream", "duration_at_max_queue_length", "relative_duration_at_max_queue_length"]
        )

    # ---- memory bandwidth ------------------------------------------------------------------

    def get_memory_bw_time_series(self, ranks: list[int] | None = None) -> dict[int, pd.DataFrame]:
        """Per rank: ``ts, pid, name, memory_bw_gbps``: bandwidth in use per copy kind."""
        out: dict[int, pd.DataFrame] = {}
        rs = self._ranks(ranks)
        per = self._session().map(_bw_series, rs, hta_compat=self.hta_compat)
        for r in rs:
            s, base_ns = per[r]
            if s.height == 0:
                continue
            out[r] = s.select(
                self._rebased(base_ns, s["ts_ns"]).alias("ts"),
                "pid",
                pl.col("copy_kind").alias("name"),
                pl.col("bw_gbps").alias("memory_bw_gbps"),
            ).to_pandas()
        return out

    def get_memory_bw_summary(self, ranks: list[int] | None = None) -> pd.DataFrame | None:
        """``describe()`` of ``memory_bw_gbps`` per (rank, name) over the points above 0."""
        pd_ = _pd()
        parts = []
        for r, df in self.get_memory_bw_time_series(ranks).items():
            d = df[df["memory_bw_gbps"] > 0].assign(rank=r)[["rank", "name", "memory_bw_gbps"]]
            parts.append(d.groupby(["rank", "name"]).describe())
        return pd_.concat(parts) if parts else None

    # ---- counters --------------------------------------------------------------------------

    def generate_trace_with_counters(
        self,
        time_series: TimeSeriesTypes | None = None,
        ranks: list[int] | None = None,
        output_suffix: str = "_with_counters",
    ) -> None:
        """Write ``<trace>_with_counters.json.gz`` next to each rank's trace with queue-length and/or
        memcpy-bandwidth counter tracks (never over an input; earlier outputs are replaced)."""
        if time_series is None:
            time_series = TimeSeriesTypes.QUEUE_LENGTH | TimeSeriesTypes.MEMCPY_BANDWIDTH
        kinds = [
            k
            for k, f in (("queue", TimeSeriesTypes.QUEUE_LENGTH), ("bw", TimeSeriesTypes.MEMCPY_BANDWIDTH))
            if f in time_series
        ]
        run = self._hta_run()
        sub = Run([run[r] for r in self._ranks(ranks)])
        write_counters(sub, None, kinds=kinds, force=True, suffix=output_suffix or "_with_counters")
        return None

    # ---- steps and stragglers --------------------------------------------------------------

    def get_profiler_steps(self) -> list[int]:
        """ProfilerStep numbers present (over all ranks) after HTA's last-step filter."""
        steps: set[int] = set()
        for st in self._session().map(_step_numbers).values():
            steps.update(st)
        return sorted(steps)

    def get_potential_stragglers(
        self,
        profiler_steps: list[int] | None = None,
        num_candidates: int = 2,
        visualize: bool = False,
        straggler_identification_impl: Callable[..., Any] | None = None,
    ) -> list[int]:
        """Ranks that start the dominant communication kernel last (HTA's late-start method on
        NCCL ``ncclKernel_*``/``ncclDevKernel_*`` and RCCL kernels; ``hta_compat``: ``ncclKernel``
        only). Returns ``[]`` with a warning where HTA raises (one rank, no step, no kernel)."""
        if straggler_identification_impl is not None:
            raise UsageError(
                "straggler_identification_impl takes HTA's DataFrame and symbol table; not supported by ranksight"
            )
        available = self.get_profiler_steps()
        steps = available if profiler_steps is None else [s for s in profiler_steps if s in available]
        if not steps:
            warnings.warn(
                f"no valid profiler step: profiler_steps={profiler_steps}; available profiler steps={available}",
                RanksightWarning,
                stacklevel=2,
            )
            return []
        res = self._session().result(
            "late-start", steps=steps, candidates=max(1, num_candidates), hta_names=self.hta_compat
        )
        out = [int(r) for r in res["stragglers"].filter(pl.col("straggler"))["rank"].to_list()]
        if not out:
            warnings.warn("; ".join(res.notes) or "no straggler found", RanksightWarning, stacklevel=2)
        if visualize and res["metric"].height:
            _show(plots.stragglers_figure, res["metric"].to_pandas())
        return out

    # ---- CUPTI counters --------------------------------------------------------------------

    def get_cupti_counter_data_with_operators(self, ranks: list[int] | None = None) -> list[pd.DataFrame]:
        """One frame per rank in CUPTI range-profiler mode: the kernel's ``name``, ``ts``, ``dur``,
        one column per counter, ``op_stack``, ``top_level_op``, ``bottom_level_op`` (and ``flops``)."""
        out = []
        rs = self._ranks(ranks)
        per = self._session().map(_cupti_table, rs)
        for r in rs:
            (t, why), base_ns = per[r]
            if t is None:
                if "cannot pair" in (why or ""):
                    warnings.warn(f"rank {r}: {why}", RanksightWarning, stacklevel=2)
                continue
            df = t.with_columns(
                self._rebased(base_ns, t["ts_ns"]).alias("ts"),
                _us(t["dur_ns"]).alias("dur"),
                pl.col("row").cast(pl.Int64).alias("index"),
                pl.col("launch_row").alias("index_runtime"),
                pl.lit("cuda_profiler_range").alias("cat"),
                pl.col("kernel").alias("name"),
            ).drop("ts_ns", "dur_ns", "row", "launch_row", "kernel", "rank")
            first = ["index", "cat", "name", "ts", "dur"]
            out.append(df.select(first + [c for c in df.columns if c not in first]).to_pandas())
        return out

    # ---- user annotations ------------------------------------------------------------------

    def get_gpu_user_annotation_breakdown(
        self,
        use_gpu_annotation: bool = True,
        visualize: bool = True,
        duration_ratio: float = 0.8,
        num_kernels: int = 1000,
        allowlist_patterns: list[str] | None = None,
        image_renderer: str | None = None,
    ) -> pd.DataFrame | None:
        """``name, sum (us), max (us), min (us), stddev, mean (us), rank`` per annotation and rank
        (GPU ``gpu_user_annotation`` or, with ``use_gpu_annotation=False``, CPU ``user_annotation``).

        With more than ``num_kernels`` names, HTA's rule picks which become ``others`` (beyond the
        ``duration_ratio`` quantile of the cumulative sum, or past ``num_kernels``; allow-listed
        names stay). ranksight computes the ``others`` row over its events; ``hta_compat``
        reproduces HTA's statistics over the per-name sums."""
        side = "gpu" if use_gpu_annotation else "cpu"
        sess = self._session()
        ev = pl.concat(list(sess.map(annotation_events, side=side).values()))
        if ev.height == 0:
            return None
        allow = [re.compile(p) for p in allowlist_patterns or []]
        parts = [
            self._annotation_rank(ev.filter(pl.col("rank") == r), r, duration_ratio, num_kernels, allow)
            for r in sess.ranks
        ]
        df = pl.concat([p for p in parts if p.height], how="vertical_relaxed").sort(["rank", "name"]).to_pandas()
        if visualize:
            _show(plots.user_annotation_figure, df, renderer=image_renderer)
        return df

    def _annotation_rank(
        self, ev: pl.DataFrame, rank: int, ratio: float, num: int, allow: list[re.Pattern[str]]
    ) -> pl.DataFrame:
        d = pl.col("dur_ns") / 1e3
        per = ev.group_by("name").agg(
            d.sum().alias("sum"),
            d.max().alias("max"),
            d.min().alias("min"),
            d.mean().alias("mean"),
            d.std().fill_null(0.0).alias("std"),
        )
        per = per.sort(["sum", "name"], descending=[True, False])
        out_cols = ["name", "sum (us)", "max (us)", "min (us)", "stddev", "mean (us)", "rank"]
        if per.height > num:
            names = per["name"].to_list()
            keep = np.array([any(p.search(n) for p in allow) for n in names], dtype=bool)
            cum = np.cumsum(per["sum"].to_numpy())
            q = float(np.quantile(cum, ratio))  # pandas' default linear quantile
            other = ~keep & ((cum > q) | (np.arange(len(names)) >= num))
            mapping = pl.DataFrame(
                {"name": names, "__new": np.where(other, "others", np.array(names, dtype=object)).astype(str)}
            )
            if self.hta_compat:
                per = (
                    per.join(mapping, on="name")
                    .group_by("__new")
                    .agg(
                        pl.col("sum").sum().alias("sum"),
                        pl.col("sum").max().alias("max"),
                        pl.col("sum").min().alias("min"),
                        pl.col("sum").mean().alias("mean"),
                        pl.col("sum").std().fill_null(0.0).alias("std"),
                    )
                    .rename({"__new": "name"})
                )
            else:
                ev = ev.join(mapping, on="name").with_columns(pl.col("__new").alias("name"))
                per = ev.group_by("name").agg(
                    d.sum().alias("sum"),
                    d.max().alias("max"),
                    d.min().alias("min"),
                    d.mean().alias("mean"),
                    d.std().fill_null(0.0).alias("std"),
                )
        return per.select(
            "name",
            pl.col("sum").alias(out_cols[1]),
            pl.col("max").alias(out_cols[2]),
            pl.col("min").alias(out_cols[3]),
            pl.col("std").alias(out_cols[4]),
            pl.col("mean").alias(out_cols[5]),
            pl.lit(rank, pl.Int64).alias("rank"),
        )
