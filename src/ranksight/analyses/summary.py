"""Per-rank headline numbers: GPU busy / idle over the trace span, and the top kernels.

Definitions (all per rank):
- span: first start to last end of GPU work (kernels, memcpys, memsets; sync events excluded);
- busy: the union of GPU work intervals over all streams of the rank; idle = span − busy;
- top kernels: kernels by total duration (sum of ``dur_ns``) with count and mean.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, Option, register
from ranksight.analyses._session import Session
from ranksight.views.intervals import union_length

if TYPE_CHECKING:
    from ranksight.model.run import Run
    from ranksight.model.trace import Trace

__all__ = ["gpu_busy", "top_kernels", "summary"]


def gpu_busy(trace: Trace) -> dict[str, object]:
    """Busy/idle split of one rank's GPU work over its GPU span."""
    g = trace.gpu_events.filter(pl.col("dur_ns").is_not_null())
    row: dict[str, object] = {
        "rank": trace.rank,
        "gpu_events": g.height,
        "kernels": int((g["kind"] == "kernel").sum()) if g.height else 0,
        "span_us": None,
        "busy_us": None,
        "idle_us": None,
        "busy_pct": None,
    }
    if g.height == 0:
        return row
    s = g["ts_ns"].to_numpy()
    e = g["end_ns"].to_numpy()
    span = int(e.max() - s.min())
    busy = union_length(s, e)
    row.update(
        span_us=span / 1e3,
        busy_us=busy / 1e3,
        idle_us=(span - busy) / 1e3,
        busy_pct=round(100.0 * busy / span, 2) if span else None,
    )
    return row


def top_kernels(trace: Trace, n: int = 5) -> pl.DataFrame:
    """The ``n`` kernels with the largest total time on one rank."""
    k = trace.kind("kernel").filter(pl.col("dur_ns").is_not_null())
    return (
        k.group_by(pl.col("name").cast(pl.String))
        .agg(
            pl.len().alias("count"),
            (pl.col("dur_ns").sum() / 1e3).alias("total_us"),
            (pl.col("dur_ns").mean() / 1e3).alias("mean_us"),
        )
        .sort(["total_us", "name"], descending=[True, False])
        .head(n)
        .with_columns(pl.lit(trace.rank, dtype=pl.Int32).alias("rank"))
        .select("rank", "name", "count", "total_us", "mean_us")
    )


def _rank_summary(trace: Trace, top: int) -> tuple[dict[str, object], pl.DataFrame]:
    return gpu_busy(trace), top_kernels(trace, top)


def summary(run: Run, *, ranks: Sequence[int] | None = None, top: int = 5) -> AnalysisResult:
    """GPU busy/idle per rank and each rank's top kernels."""
    sess = Session.of(run, ranks)
    rs = sess.ranks
    per = sess.map(_rank_summary, top=top)
    busy = pl.DataFrame(
        [per[r][0] for r in rs],
        schema={
            "rank": pl.Int32,
            "gpu_events": pl.Int64,
            "kernels": pl.Int64,
            "span_us": pl.Float64,
            "busy_us": pl.Float64,
            "idle_us": pl.Float64,
            "busy_pct": pl.Float64,
        },
    )
    tops = pl.concat([per[r][1] for r in rs], how="vertical_relaxed")
    notes = []
    if busy["gpu_events"].sum() == 0:
        notes.append("no GPU events in these traces (CPU-only); GPU busy/idle is empty")
    return AnalysisResult({"gpu": busy, "top_kernels": tops}, notes)


register(
    AnalysisSpec(
        name="summary",
        func=summary,
        help="GPU busy/idle per rank and the top kernels",
        options=(Option("top", int, 5, "kernels shown per rank"),),
    )
)
