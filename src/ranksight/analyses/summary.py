"""Per-rank headline numbers: GPU busy / idle over the GPU span, and the top kernels.

Definitions (all per rank; the one definition of GPU busy and idle, ``docs/metrics.md``):
- span: first start to last end of GPU work (kernels, memcpys, memsets; sync events excluded);
- busy: the union of GPU work intervals over all streams of the rank; idle = span − busy;
  ``busy_pct = round(100 − idle_pct, 2)``. These are ``temporal``'s numbers (read through the
  session, not computed again): ``span_us`` is its ``kernel_time_us``, ``idle_us`` / ``idle_pct``
  its own; ``summary`` adds the counts of GPU events and kernels;
- top kernels: kernels by total duration (sum of ``dur_ns``) with count and mean.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, Option, register
from ranksight.analyses._session import Session
from ranksight.model.kinds import GPU_KINDS

if TYPE_CHECKING:
    from ranksight.model.run import Run
    from ranksight.model.trace import Trace

__all__ = ["gpu_counts", "gpu_busy", "top_kernels", "summary"]

#: ``temporal``'s options that ``summary``, its headlines, the report and ``diagnose`` all ask
#: for: one computation serves them all.
TEMPORAL_OPTIONS = {"per_step": True}


def gpu_counts(trace: Trace) -> dict[str, object]:
    """GPU events (kernels, memcpys, memsets with a duration) and kernels of one rank."""
    g = trace.kind(*GPU_KINDS, columns=["kind", "dur_ns"]).filter(pl.col("dur_ns").is_not_null())
    return {
        "rank": trace.rank,
        "gpu_events": g.height,
        "kernels": int((g["kind"] == "kernel").sum()) if g.height else 0,
    }


def gpu_busy(temporal: pl.DataFrame) -> pl.DataFrame:
    """``rank, span_us, busy_us, idle_us, busy_pct`` from ``temporal``'s per-rank table (the one
    implementation of GPU busy over the GPU span); nulls where the rank has no GPU work."""
    span = pl.col("kernel_time_us")
    return temporal.select(
        pl.col("rank").cast(pl.Int32),
        span.alias("span_us"),
        ((span - pl.col("idle_us")) * 1e3).round(0).truediv(1e3).alias("busy_us"),  # whole ns, as both are
        pl.col("idle_us"),
        (100.0 - pl.col("idle_pct")).round(2).fill_nan(None).alias("busy_pct"),
    )


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
    return gpu_counts(trace), top_kernels(trace, top)


def summary(run: Run, *, ranks: Sequence[int] | None = None, top: int = 5) -> AnalysisResult:
    """GPU busy/idle per rank (``temporal``'s, over the GPU span) and each rank's top kernels."""
    sess = Session.of(run, ranks)
    rs = sess.ranks
    per = sess.map(_rank_summary, top=top)
    counts = pl.DataFrame(
        [per[r][0] for r in rs], schema={"rank": pl.Int32, "gpu_events": pl.Int64, "kernels": pl.Int64}
    )
    busy = counts.join(
        gpu_busy(sess.result("temporal", **TEMPORAL_OPTIONS)["temporal"]), on="rank", how="left", maintain_order="left"
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
