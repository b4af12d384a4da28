"""How the duration of the top kernels spreads across ranks (the "kernel duration distribution").

Definition: the top ``top`` kernel names by total GPU time over the selected ranks (kernels,
memcpys and memsets; GPU work as in :mod:`ranksight.views.gpu_work`), and for each of them and
each rank: ``count, sum, mean, min, max, std`` (ddof 1; 0 for one event) of the durations (µs).
Ranks where a top kernel never ran have no row. ``spread_pct`` = ``100 × (max over ranks of
the rank mean − min over ranks of the rank mean) / mean over ranks of the rank mean``, the same
value on every row of a kernel.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, Option, register
from ranksight.analyses._session import Session
from ranksight.errors import UsageError
from ranksight.views.gpu_work import gpu_work

if TYPE_CHECKING:
    from ranksight.model.run import Run
    from ranksight.model.trace import Trace

__all__ = ["kernel_durations_rank", "kernel_spread"]

_SCHEMA = {
    "name": pl.String,
    "kernel_type": pl.String,
    "rank": pl.Int64,
    "count": pl.Int64,
    "sum_us": pl.Float64,
    "mean_us": pl.Float64,
    "min_us": pl.Float64,
    "max_us": pl.Float64,
    "std_us": pl.Float64,
}


def kernel_durations_rank(trace: Trace, names: Sequence[str] | None = None) -> pl.DataFrame:
    """Duration statistics per kernel name on one rank (optionally only ``names``)."""
    g = gpu_work(trace)
    if names is not None:
        g = g.filter(pl.col("name").is_in(list(names)))
    d = pl.col("dur_ns").cast(pl.Float64) / 1e3
    return (
        g.group_by(["name", "kernel_type"])
        .agg(
            pl.len().cast(pl.Int64).alias("count"),
            d.sum().alias("sum_us"),
            d.mean().alias("mean_us"),
            d.min().alias("min_us"),
            d.max().alias("max_us"),
            d.std(ddof=1).fill_null(0.0).fill_nan(0.0).alias("std_us"),
        )
        .with_columns(pl.lit(trace.rank, dtype=pl.Int64).alias("rank"))
        .select(list(_SCHEMA))
        .cast(_SCHEMA)  # type: ignore[arg-type]
    )


def kernel_spread(run: Run, *, ranks: Sequence[int] | None = None, top: int = 10) -> AnalysisResult:
    """For the ``top`` kernels by total time, their duration statistics on every rank."""
    if top < 1:
        raise UsageError("top must be ≥ 1")
    sess = Session.of(run, ranks)
    per = pl.concat(list(sess.map(kernel_durations_rank).values()))
    if per.height == 0:
        return AnalysisResult(
            {"kernel_spread": pl.DataFrame(schema={**_SCHEMA, "spread_pct": pl.Float64})},
            ["no GPU kernels in these traces"],
        )
    order = (
        per.group_by("name")
        .agg(pl.col("sum_us").sum().alias("__total"))
        .sort(["__total", "name"], descending=[True, False])
        .head(top)
        .with_row_index("__order")
    )
    out = (
        per.join(order, on="name", how="inner")
        .with_columns(
            (100.0 * (pl.col("mean_us").max() - pl.col("mean_us").min()) / pl.col("mean_us").mean())
            .over("name")
            .alias("spread_pct")
        )
        .sort(["__order", "rank"])
        .drop("__order", "__total")
    )
    return AnalysisResult({"kernel_spread": out})


register(
    AnalysisSpec(
        name="kernel-spread",
        func=kernel_spread,
        help="for the top kernels, their duration (mean, min, max, std) on each rank",
        options=(Option("top", int, 10, "how many kernels (by total time over all ranks)"),),
    )
)
