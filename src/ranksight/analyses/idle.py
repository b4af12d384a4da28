"""Idle time per stream, split by cause: host_wait, kernel_wait, other (HTA's idle breakdown).

Definitions, per rank and stream (GPU work only: kernels, memcpys, memsets; sync events never):

- events of the stream are sorted by start; for each event after the first,
  ``prev_end`` = the latest end among the earlier events of the stream and
  ``gap = max(0, start − prev_end)`` (overlapping events on one stream give a 0 gap);
- category of the gap: ``host_wait`` when the event's launch call started after ``prev_end``
  (the GPU waited for the host to launch); else ``kernel_wait`` when ``gap < kernel_wait_us``
  (default 30 µs: the normal gap between back-to-back kernels); else ``other``. Events without a
  known launch can never be host_wait. The first event of a stream has no gap and is counted in
  ``other`` with no interval (as HTA does), so every stream has at least an ``other`` row;
- ``idle_us`` = sum of gaps per category; ``idle_ratio = round(idle_us / stream total, 2)``
  (NaN for a stream without idle time).

``hta_compat=True`` reproduces HTA exactly: ``prev_end`` is the end of the previous event in start
order (not the running maximum), so overlaps on one stream give negative gaps counted as
kernel_wait; ns traces are rounded to µs like HTA's loader; an event with a correlation but no
launching CPU event takes the start of the trace's event 0 as its launch time (HTA's
``index_correlation`` 0 joined to the frame's index), so it can be host_wait.

``idle_us`` is per stream: a gap on one stream while another stream of the rank is busy counts.
Summed over streams it is not the GPU's idle time (``temporal``'s ``idle_us``, the union over
streams; ``docs/metrics.md``); the report labels it "stream idle".

Optional tables: ``intervals`` (statistics of the gaps per stream and category: count, mean, std
with ddof 1, min, quartiles with linear interpolation, max; HTA's ``show_idle_interval_stats``)
and ``per_step`` (idle per stream, step and category; a gap belongs to the step of the event
that ends it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, Option, register
from ranksight.analyses._session import Session
from ranksight.views.gpu_work import gpu_work, gpu_work_of, launch_ts

if TYPE_CHECKING:
    from ranksight.model.run import Run
    from ranksight.model.trace import Trace

__all__ = ["idle_gaps_rank", "idle_totals", "idle_stats", "idle", "CATEGORIES"]

CATEGORIES = ("host_wait", "kernel_wait", "other")
_GAP_SCHEMA = {
    "rank": pl.Int64,
    "stream": pl.Int64,
    "step": pl.Int32,
    "row": pl.UInt32,
    "ts_ns": pl.Int64,
    "prev_end_ns": pl.Int64,
    "gap_ns": pl.Int64,
    "idle_category": pl.String,
}


def idle_gaps_rank(
    trace: Trace,
    *,
    kernel_wait_us: float = 30.0,
    streams: Sequence[int] | None = None,
    hta_compat: bool = False,
) -> pl.DataFrame:
    """One row per GPU event of the rank: the gap before it on its stream and its category.

    Columns ``rank, stream, step, row, ts_ns, prev_end_ns, gap_ns, idle_category``; ``gap_ns`` and
    ``prev_end_ns`` are null for the first event of each stream.
    """
    # HTA's idle analysis reads kernel, memcpy and memset categories only: no sync events and no
    # host op carrying a stream arg (both in gpu_work's hta_compat row set)
    g = gpu_work(trace, hta_compat=hta_compat).filter(~pl.col("kind").is_in(["sync", "cpu_op"]))
    if streams is not None:
        g = g.filter(pl.col("stream").is_in(list(streams)))
    if g.height == 0:
        return pl.DataFrame(schema=_GAP_SCHEMA)
    g = g.with_columns(launch_ts(trace, g["launch_row"], hta_compat=hta_compat))
    if hta_compat:
        g = _hta_unlinked_launch_ts(trace, g)
    return idle_gaps_of(g.with_columns(pl.lit(trace.rank, dtype=pl.Int64).alias("rank")), kernel_wait_us, hta_compat)


def idle_gaps_of(g: pl.DataFrame, kernel_wait_us: float = 30.0, hta_compat: bool = False) -> pl.DataFrame:
    """:func:`idle_gaps_rank` of GPU events with a ``rank`` column and their ``launch_ts_ns`` (one
    rank's, or every rank's stacked), every rank in one pass; sorted by rank, stream, time."""
    g = g.sort(["rank", "stream", "ts_ns", "end_ns", "row"])
    if hta_compat:
        prev_end = pl.col("end_ns").shift(1).over("rank", "stream")
        gap = pl.col("ts_ns") - pl.col("prev_end_ns")
    else:
        prev_end = pl.col("end_ns").cum_max().shift(1).over("rank", "stream")
        gap = pl.max_horizontal(pl.col("ts_ns") - pl.col("prev_end_ns"), pl.lit(0, dtype=pl.Int64))
    g = g.with_columns(prev_end.alias("prev_end_ns")).with_columns(
        pl.when(pl.col("prev_end_ns").is_null()).then(None).otherwise(gap).alias("gap_ns")
    )
    threshold_ns = kernel_wait_us * 1000.0
    cat = (
        pl.when(pl.col("prev_end_ns").is_null())
        .then(pl.lit("other"))
        .when(pl.col("launch_ts_ns") > pl.col("prev_end_ns"))
        .then(pl.lit("host_wait"))
        .when(pl.col("gap_ns") < threshold_ns)
        .then(pl.lit("kernel_wait"))
        .otherwise(pl.lit("other"))
    )
    return g.select(
        pl.col("rank").cast(pl.Int64),
        "stream",
        "step",
        "row",
        "ts_ns",
        "prev_end_ns",
        "gap_ns",
        cat.alias("idle_category"),
    ).cast(_GAP_SCHEMA)  # type: ignore[arg-type]


def _idle_gaps_stacked(
    sess: Session, stacked: pl.DataFrame, kernel_wait_us: float, streams: Sequence[int] | None
) -> pl.DataFrame:
    """:func:`idle_gaps_rank` (ranksight's definitions) of every rank from their stacked events."""
    work = sess.memo(("gpu_work_of",), lambda: gpu_work_of(stacked.lazy(), by=["rank"]))
    g = work.filter(~pl.col("kind").is_in(["sync", "cpu_op"]))
    if streams is not None:
        g = g.filter(pl.col("stream").is_in(list(streams)))
    if g.height == 0:
        return pl.DataFrame(schema=_GAP_SCHEMA)
    calls = stacked.select("rank", pl.col("row").cast(pl.UInt32).alias("__lr"), pl.col("ts_ns").alias("launch_ts_ns"))
    g = g.with_columns(pl.col("launch_row").cast(pl.UInt32).alias("__lr")).join(
        calls, on=["rank", "__lr"], how="left", maintain_order="left"
    )
    return idle_gaps_of(g, kernel_wait_us)


def _hta_unlinked_launch_ts(trace: Trace, g: pl.DataFrame) -> pl.DataFrame:
    """HTA's launch time for GPU events with a correlation but no launching CPU event: HTA sets
    their ``index_correlation`` to 0 and joins it to the frame's index, so it reads the start of
    the trace's event 0 (when that event is in its frame: a complete event other than the
    profiler's ``Trace`` span). On DLRM's example this makes such kernels host_wait."""
    unlinked = g["launch_row"].is_null()
    if not unlinked.any():
        return g
    ev0 = (
        trace.scan()
        .filter(
            (pl.col("row") == 0)
            & pl.col("ts_ns").is_not_null()
            & pl.col("dur_ns").is_not_null()
            & (pl.col("cat").cast(pl.String) != "Trace").fill_null(True)
        )
        .select("ts_ns")
        .collect()
    )
    if ev0.height == 0:
        return g
    t0 = launch_ts(trace, pl.Series("launch_row", [0], dtype=pl.UInt32), hta_compat=True).item()
    corr = trace.scan().select("row", "correlation").collect()
    g = g.join(corr, on="row", how="left", maintain_order="left")
    linked_elsewhere = pl.col("correlation").is_not_null() & (pl.col("correlation") != -1)
    return g.with_columns(
        pl.when(pl.col("launch_row").is_null() & linked_elsewhere)
        .then(pl.lit(t0, dtype=pl.Int64))
        .otherwise(pl.col("launch_ts_ns"))
        .alias("launch_ts_ns")
    ).drop("correlation")


def idle_totals(gaps: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Idle per ``keys`` + category with the ratio to the total of ``keys``."""
    by = [*keys, "idle_category"]
    agg = gaps.group_by(by).agg(pl.col("gap_ns").sum().alias("idle_ns"), pl.len().alias("events"))
    total = pl.col("idle_ns").sum().over(keys)
    return (
        agg.with_columns(
            (pl.col("idle_ns") / 1e3).alias("idle_us"),
            pl.when(total != 0).then(pl.col("idle_ns") / total).otherwise(float("nan")).round(2).alias("idle_ratio"),
        )
        .sort(by)
        .select(*by, "idle_us", "idle_ratio")
    )


def idle_stats(gaps: pl.DataFrame) -> pl.DataFrame:
    """Statistics of the idle intervals (µs) per rank, stream and category (HTA's ``describe()``,
    rounded to 2 decimals): ``count, mean, std, min, 25%, 50%, 75%, max``."""
    x = pl.col("gap_ns").cast(pl.Float64) / 1e3
    return (
        gaps.group_by(["rank", "stream", "idle_category"])
        .agg(
            x.count().cast(pl.Int64).alias("count"),
            x.mean().alias("mean_us"),
            x.std(ddof=1).alias("std_us"),
            x.min().alias("min_us"),
            x.quantile(0.25, interpolation="linear").alias("p25_us"),
            x.quantile(0.5, interpolation="linear").alias("p50_us"),
            x.quantile(0.75, interpolation="linear").alias("p75_us"),
            x.max().alias("max_us"),
        )
        .with_columns(
            pl.col(c).round(2) for c in ("mean_us", "std_us", "min_us", "p25_us", "p50_us", "p75_us", "max_us")
        )
        .sort(["rank", "stream", "idle_category"])
    )


def idle(
    run: Run,
    *,
    ranks: Sequence[int] | None = None,
    streams: Sequence[int] | None = None,
    kernel_wait_us: float = 30.0,
    stats: bool = False,
    per_step: bool = False,
    hta_compat: bool = False,
) -> AnalysisResult:
    """Idle time per rank, stream and cause; optional interval statistics and per-step table."""
    sess = Session.of(run, ranks)
    rs = sess.ranks
    stacked = None if hta_compat else sess.stacked_events()
    if stacked is not None:  # many small ranks: one pass over all of them (equal to rank by rank)
        gaps = _idle_gaps_stacked(sess, stacked, kernel_wait_us, streams)
    else:
        gaps = pl.concat(
            list(
                sess.map(idle_gaps_rank, kernel_wait_us=kernel_wait_us, streams=streams, hta_compat=hta_compat).values()
            )
        )
    tables = {"idle": idle_totals(gaps, ["rank", "stream"])}
    notes = [
        "idle_us here is stream idle (each stream's own gaps); summed over streams it is not the GPU idle time, "
        "which is temporal's idle_us (no work on any stream)"
    ]
    no_gpu = sorted(set(rs) - set(gaps["rank"].unique().to_list()))
    if no_gpu:
        notes.append(
            f"rank(s) {no_gpu} have no GPU work{' on the selected streams' if streams else ''}: no idle breakdown"
        )
    if stats:
        tables["intervals"] = idle_stats(gaps)
    if per_step:
        tables["per_step"] = idle_totals(gaps.filter(pl.col("step").is_not_null()), ["rank", "stream", "step"])
    return AnalysisResult(tables, notes)


register(
    AnalysisSpec(
        name="idle",
        func=idle,
        help="GPU idle time per stream: host_wait / kernel_wait / other (HTA's idle time breakdown)",
        options=(
            Option("kernel_wait_us", float, 30.0, "gaps shorter than this (µs) are kernel_wait"),
            Option("streams", int, None, "only this stream (repeatable)", multiple=True),
            Option("stats", bool, False, "add statistics of the idle intervals", flag=True),
            Option("per_step", bool, False, "add idle per ProfilerStep", flag=True),
            Option("hta_compat", bool, False, "HTA v0.6 definitions (previous-event gaps, µs rounding)", flag=True),
        ),
    )
)
