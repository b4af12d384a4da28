"""Launch queue length per GPU stream: time series, summary, and time blocked on a full queue.

Definitions (per rank and GPU stream; HTA's, ``hta-definitions.md`` §3.8):

- each GPU activity (kernel, memcpy, memset) with a known launch adds **+1 at the start of its
  launch call** and **−1 at its own start** (a running kernel is no longer queued). A graph launch
  is **one** entry per stream it runs on: +1 at the launch call, −1 when its first node starts there
  (the launch queue holds the graph launch, not its nodes; counting every node made a diffusion step
  that replays four 1,000-node graphs look like a full queue). Events are ordered by time; at equal times launches come
  before starts, then by trace row. ``queue_length`` is the cumulative sum per stream: one point
  per event (HTA's "change points"; equal-time points are kept).
- summary: HTA's ``describe()`` of ``queue_length`` over the points (``count, mean, std, min,
  p25, p50, p75, max``; std with ddof 1), plus **time-weighted** statistics over the stream's
  series span (first to last point): ``tw_mean`` = Σ qᵢ·(tᵢ₊₁ − tᵢ) / span, ``tw_std``, and the
  time-weighted median and 95th percentile (the smallest q whose cumulative time share reaches
  0.5 / 0.95). The value at the last point has no duration.
- blocked: for **every** stream, the time during which ``queue_length >= max_queue_length``
  (default 1024, CUDA's per-stream launch queue; 1022–1024 is observed to block), and that time
  relative to the rank's trace duration (last minus first start of any timed event; HTA's
  ``ts.max() − ts.min()``).

``hta_apis=True`` counts only HTA's launch names (no graph launches, no HIP module launches).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, Option, register
from ranksight.analyses._session import Session
from ranksight.views.links import HTA_QUEUE_APIS, launch_children_of

if TYPE_CHECKING:
    from ranksight.model.run import Run
    from ranksight.model.trace import Trace

__all__ = [
    "queue_series",
    "queue_series_of",
    "queue_summary",
    "blocked_on_full_queue",
    "trace_duration_ns",
    "queue",
    "CUDA_MAX_LAUNCH_QUEUE_PER_STREAM",
]

#: CUDA's launch queue depth per stream (HTA's ``CUDA_MAX_LAUNCH_QUEUE_PER_STREAM``).
CUDA_MAX_LAUNCH_QUEUE_PER_STREAM = 1024

_SERIES_SCHEMA = {
    "rank": pl.Int32,
    "stream": pl.Int64,
    "ts_ns": pl.Int64,
    "pid": pl.Int64,
    "tid": pl.Int64,
    "row": pl.UInt32,
    "event": pl.String,
    "queue_length": pl.Int64,
}


def queue_series(trace: Trace, *, hta_apis: bool = False, hta_order: bool = False) -> pl.DataFrame:
    """Queue length change points of one rank, sorted by stream then time.

    Columns ``rank, stream, ts_ns, pid, tid`` (the GPU device/stream of the activity), ``row``
    (the launch call for +1 points, the GPU activity for −1 points), ``event`` (``launch`` /
    ``start``) and ``queue_length``.

    Points at the same time are ordered launches first, then by row. ``hta_order`` (the HTA
    facade's ``hta_compat``) orders them as HTA v0.6 does instead: launches in file order, then GPU
    activities in file order, argsorted by time with numpy's default (unstable) quicksort, then
    grouped by stream keeping that order.
    """
    if not hta_order:
        return queue_series_of(trace.scan().with_columns(pl.lit(trace.rank, pl.Int32).alias("rank")), hta_apis=hta_apis)
    ch = _queue_children(trace.scan().with_columns(pl.lit(trace.rank, pl.Int32).alias("rank")), hta_apis)
    if ch.height == 0:
        return pl.DataFrame(schema=_SERIES_SCHEMA)
    up, down = _points(ch)
    m = pl.concat([up.sort("row"), down.sort("row")])
    order = np.argsort(m["ts_ns"].to_numpy(), kind="quicksort")
    s = m[order].with_row_index("__i").sort(["stream", "__i"]).drop("__i")
    return _series(s)


def queue_series_of(ev: pl.LazyFrame, *, hta_apis: bool = False) -> pl.DataFrame:
    """:func:`queue_series` (ranksight's order) of events with a ``rank`` column: one rank's, or a
    run's stacked events (every rank in one pass), sorted by rank, stream, then time."""
    ch = _queue_children(ev, hta_apis)
    if ch.height == 0:
        return pl.DataFrame(schema=_SERIES_SCHEMA)
    up, down = _points(ch)
    return _series(pl.concat([up, down]).sort(["rank", "stream", "ts_ns", "__o", "row"]))


def _queue_children(ev: pl.LazyFrame, hta_apis: bool) -> pl.DataFrame:
    """The launch children that make queue points: one per graph launch and stream (a graph
    launch is one queue entry per stream, not one per node)."""
    ch = launch_children_of(ev, HTA_QUEUE_APIS if hta_apis else None, by=["rank"])
    if ch.height == 0:
        return ch
    graph = pl.col("api").cast(pl.String).str.contains("GraphLaunch")
    if ch.select(graph.any()).item():
        ch = pl.concat(
            [ch.filter(~graph), ch.filter(graph).unique(["rank", "launch_row", "stream"], keep="first")]
        ).sort(["rank", "launch_row", "ts_ns", "row"])
    return ch


def _points(ch: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """+1 at each launch call's start, −1 at each GPU activity's start."""
    up = ch.select(
        "rank",
        "stream",
        pl.col("cpu_ts_ns").alias("ts_ns"),
        "pid",
        "tid",
        pl.col("launch_row").alias("row"),
        pl.lit(0, pl.Int8).alias("__o"),
        pl.lit(1, pl.Int64).alias("__d"),
    )
    down = ch.select(
        "rank",
        "stream",
        "ts_ns",
        "pid",
        "tid",
        "row",
        pl.lit(1, pl.Int8).alias("__o"),
        pl.lit(-1, pl.Int64).alias("__d"),
    )
    return up, down


def _series(s: pl.DataFrame) -> pl.DataFrame:
    return s.select(
        pl.col("rank").cast(pl.Int32),
        "stream",
        "ts_ns",
        "pid",
        "tid",
        pl.col("row").cast(pl.UInt32),
        pl.when(pl.col("__o") == 0).then(pl.lit("launch")).otherwise(pl.lit("start")).alias("event"),
        pl.col("__d").cum_sum().over("rank", "stream").alias("queue_length"),
    ).cast(_SERIES_SCHEMA)  # type: ignore[arg-type]  # pid/tid are Int32 in some traces: one schema


def _tw_stats(ts: np.ndarray, q: np.ndarray) -> tuple[float, float, float, float, float]:
    """Time-weighted mean, std, median, p95 and span (ns) of one stream's step function."""
    if ts.size < 2:
        return (float("nan"),) * 4 + (0.0,)
    w = np.diff(ts).astype(np.float64)
    v = q[:-1].astype(np.float64)
    span = float(w.sum())
    if span <= 0:
        return (float("nan"),) * 4 + (0.0,)
    mean = float((v * w).sum() / span)
    std = float(np.sqrt(((v - mean) ** 2 * w).sum() / span))
    order = np.argsort(v, kind="stable")
    cw = np.cumsum(w[order]) / span
    p50 = float(v[order][np.searchsorted(cw, 0.5 - 1e-12)])
    p95 = float(v[order][np.searchsorted(cw, 0.95 - 1e-12)])
    return mean, std, p50, p95, span


def queue_summary(series: pl.DataFrame) -> pl.DataFrame:
    """Per (rank, stream): HTA's change-point statistics and the time-weighted statistics."""
    q = pl.col("queue_length")
    base = series.group_by("rank", "stream", maintain_order=True).agg(
        pl.len().alias("count"),
        q.mean().alias("mean"),
        q.std().alias("std"),
        q.min().alias("min"),
        q.quantile(0.25, "linear").alias("p25"),
        q.quantile(0.5, "linear").alias("p50"),
        q.quantile(0.75, "linear").alias("p75"),
        q.max().alias("max"),
    )
    tw_rows = []
    for (rank, stream), g in series.group_by("rank", "stream", maintain_order=True):
        mean, std, p50, p95, span = _tw_stats(g["ts_ns"].to_numpy(), g["queue_length"].to_numpy())
        tw_rows.append(
            {
                "rank": rank,
                "stream": stream,
                "span_us": span / 1e3,
                "tw_mean": mean,
                "tw_std": std,
                "tw_p50": p50,
                "tw_p95": p95,
            }
        )
    tw = pl.DataFrame(
        tw_rows,
        schema={
            "rank": pl.Int32,
            "stream": pl.Int64,
            "span_us": pl.Float64,
            "tw_mean": pl.Float64,
            "tw_std": pl.Float64,
            "tw_p50": pl.Float64,
            "tw_p95": pl.Float64,
        },
    )
    return base.join(tw, on=["rank", "stream"], how="left", maintain_order="left").sort(["rank", "stream"])


def trace_duration_ns(trace: Trace) -> int:
    """Last start minus first start over the rank's timed events (HTA's ``get_trace_duration``)."""
    lo, hi = (
        trace.scan()
        .filter(pl.col("dur_ns").is_not_null())
        .select(pl.col("ts_ns").min().alias("lo"), pl.col("ts_ns").max().alias("hi"))
        .collect()
        .row(0)
    )
    return 0 if lo is None else int(hi - lo)


def blocked_on_full_queue(
    series: pl.DataFrame, durations_ns: dict[int, int], max_queue_length: int = CUDA_MAX_LAUNCH_QUEUE_PER_STREAM
) -> pl.DataFrame:
    """Per (rank, stream) that reaches ``max_queue_length``: time at or above it (µs, from each
    point to the next point of the same stream) and that time over the rank's trace duration."""
    s = series.with_columns((pl.col("ts_ns").shift(-1).over("rank", "stream") - pl.col("ts_ns")).alias("__dt"))
    out = (
        s.filter(pl.col("queue_length") >= max_queue_length)
        .group_by("rank", "stream", maintain_order=True)
        .agg((pl.col("__dt").sum() / 1e3).alias("duration_at_max_queue_length_us"))
        .sort(["rank", "stream"])
    )
    dur = pl.DataFrame(
        {"rank": list(durations_ns), "__span": list(durations_ns.values())},
        schema={"rank": pl.Int32, "__span": pl.Int64},
    )
    return out.join(dur, on="rank", how="left").select(
        "rank",
        "stream",
        "duration_at_max_queue_length_us",
        (pl.col("duration_at_max_queue_length_us") * 1e3 / pl.col("__span")).alias(
            "relative_duration_at_max_queue_length"
        ),
    )


def _rank_queue(trace: Trace, hta_apis: bool) -> tuple[pl.DataFrame, int | None]:
    return queue_series(trace, hta_apis=hta_apis), trace_duration_ns(trace)


def queue(
    run: Run,
    *,
    ranks: Sequence[int] | None = None,
    max_queue_length: int = CUDA_MAX_LAUNCH_QUEUE_PER_STREAM,
    hta_apis: bool = False,
) -> AnalysisResult:
    """Queue length summary, blocked time and the series per rank and stream."""
    sess = Session.of(run, ranks)
    rs = sess.ranks
    stacked = sess.stacked_events()
    if stacked is not None:  # many small ranks: one pass over all of them (equal to rank by rank)
        ev = stacked.lazy()
        series = queue_series_of(ev, hta_apis=hta_apis)
        span = (
            ev.filter(pl.col("dur_ns").is_not_null())
            .group_by("rank")
            .agg((pl.col("ts_ns").max() - pl.col("ts_ns").min()).alias("d"))
            .collect()
        )
        got = dict(zip(span["rank"].to_list(), span["d"].to_list(), strict=True))
        durations = {r: int(got.get(r) or 0) for r in rs}  # trace_duration_ns of each rank
    else:
        per = sess.map(_rank_queue, hta_apis=hta_apis)
        parts = [per[r][0] for r in rs]
        series = pl.concat(parts, how="vertical_relaxed") if parts else pl.DataFrame(schema=_SERIES_SCHEMA)
        durations = {r: per[r][1] for r in rs}
    summary = queue_summary(series)
    blocked = blocked_on_full_queue(series, durations, max_queue_length)
    notes = []
    present = set(series["rank"].unique().to_list())
    empty = [r for r in rs if r not in present]
    if empty:
        notes.append(f"rank(s) {empty}: no launch linked to GPU work, so no queue")
    if blocked.height == 0 and series.height:
        notes.append(f"no stream reached {max_queue_length} queued launches (max {int(series['queue_length'].max())})")  # type: ignore[arg-type]
    return AnalysisResult({"summary": summary, "blocked": blocked, "series": series}, notes)


register(
    AnalysisSpec(
        name="queue",
        func=queue,
        help="launch queue length per GPU stream: summary (change-point and time-weighted), blocked time, series",
        options=(
            Option("max_queue_length", int, CUDA_MAX_LAUNCH_QUEUE_PER_STREAM, "queue length counted as full"),
            Option("hta_apis", bool, False, "only HTA's launch API names (HTA-compatible)", flag=True),
        ),
    )
)
