"""Per-kernel statistics per rank and kernel type, with the top kernels and an honest "others" row.

Definition, per rank and kernel type (COMPUTATION, COMMUNICATION and, with ``include_memory``,
MEMORY; GPU work as in :mod:`ranksight.views.gpu_work`):

1. group the events by name: ``count, sum, mean, min, max, std`` of the durations (std with
   ddof 1; 0 for a single event); order by sum, largest first (ties by name);
2. top-N selection (HTA's rule): when there are more than ``num_kernels`` names, with ``cumsum``
   the running sum in that order and ``q`` the linear-interpolated ``duration_ratio`` quantile
   of the ``cumsum`` column, names with ``cumsum > q`` or position ≥ ``num_kernels`` go into one
   ``others`` row;
3. every row's statistics are over **individual kernel events**: a named row keeps its own
   statistics, and ``others`` gets count, sum, mean, min, max and std over all events of the
   names it holds, plus ``names`` = how many names it holds. (HTA instead recomputes every row
   from per-name totals, so its named rows show ``max = min = mean = sum`` and its ``others``
   row shows statistics of totals; ``hta_compat=True`` reproduces that for a type with more than
   ``num_kernels`` names.)

``view="launch"`` returns :func:`ranksight.analyses.kernel_config.kernel_config` instead (kernels
grouped by launch configuration).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, Option, register
from ranksight.analyses._session import Session
from ranksight.errors import UsageError
from ranksight.views.gpu_work import TYPE_BITS, gpu_work, gpu_work_of, parse_bool

if TYPE_CHECKING:
    from ranksight.model.run import Run
    from ranksight.model.trace import Trace

__all__ = ["kernel_stats_rank", "kernel_stats_of", "select_top", "kernels", "OTHERS"]

OTHERS = "others"
_SCHEMA = {
    "rank": pl.Int64,
    "kernel_type": pl.String,
    "name": pl.String,
    "count": pl.Int64,
    "sum_us": pl.Float64,
    "mean_us": pl.Float64,
    "min_us": pl.Float64,
    "max_us": pl.Float64,
    "std_us": pl.Float64,
    "names": pl.Int64,
}


def _stats(df: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    d = pl.col("dur_ns").cast(pl.Float64) / 1e3
    return df.group_by(by).agg(
        pl.len().cast(pl.Int64).alias("count"),
        d.sum().alias("sum_us"),
        d.mean().alias("mean_us"),
        d.min().alias("min_us"),
        d.max().alias("max_us"),
        d.std(ddof=1).fill_null(0.0).fill_nan(0.0).alias("std_us"),
        pl.col("name").n_unique().cast(pl.Int64).alias("names"),
    )


def select_top(sums: np.ndarray, num_kernels: int, duration_ratio: float) -> np.ndarray:
    """HTA's top-N rule on per-name sums sorted descending: a mask of names that go to ``others``."""
    n = sums.size
    if n <= num_kernels:
        return np.zeros(n, dtype=bool)
    cum = np.cumsum(sums.astype(np.float64))
    q = np.quantile(cum, duration_ratio, method="linear")
    return (cum > q) | (np.arange(n) >= num_kernels)


def kernel_stats_rank(
    trace: Trace,
    *,
    num_kernels: int = 10,
    duration_ratio: float = 0.8,
    include_memory: bool = True,
    hta_compat: bool = False,
) -> pl.DataFrame:
    """Per-kernel statistics of one rank (see the module docstring): ``rank, kernel_type, name,
    count, sum_us, mean_us, min_us, max_us, std_us, names``."""
    work = gpu_work(trace, hta_compat=hta_compat).with_columns(pl.lit(trace.rank, pl.Int64).alias("rank"))
    return kernel_stats_of(
        work,
        num_kernels=num_kernels,
        duration_ratio=duration_ratio,
        include_memory=include_memory,
        hta_compat=hta_compat,
    )


def kernel_stats_of(
    work: pl.DataFrame,
    *,
    num_kernels: int = 10,
    duration_ratio: float = 0.8,
    include_memory: bool = True,
    hta_compat: bool = False,
) -> pl.DataFrame:
    """:func:`kernel_stats_rank` of GPU work with a ``rank`` column (one rank's, or every rank's
    stacked: :func:`~ranksight.views.gpu_work.gpu_work_of`), every rank in one pass; sorted by
    rank, kernel type, time (descending), name."""
    types = [t for t in TYPE_BITS if include_memory or t != "MEMORY"]
    g = work.filter(pl.col("kernel_type").is_in(types)).select(
        pl.col("rank").cast(pl.Int64), "kernel_type", pl.col("name").cast(pl.String), "dur_ns"
    )
    if g.height == 0:
        return pl.DataFrame(schema=_SCHEMA)
    keys = ["rank", "kernel_type"]
    per_name = (
        g.group_by([*keys, "name"])
        .agg(pl.col("dur_ns").sum().alias("__sum"))
        .sort([*keys, "__sum", "name"], descending=[False, False, True, False])
    )
    # HTA's top-N rule per (rank, kernel type), on each group's names by time (numpy per group:
    # a few µs each, no query)
    gid = per_name.select(pl.struct(keys).rle_id()).to_series().to_numpy()
    starts = np.flatnonzero(np.r_[True, gid[1:] != gid[:-1]])
    ends = np.r_[starts[1:], gid.size]
    sums = per_name["__sum"].to_numpy()
    other = np.zeros(gid.size, dtype=bool)
    big = np.zeros(gid.size, dtype=bool)  # in a group with more than num_kernels names (HTA regroups it)
    for a, b in zip(starts, ends, strict=True):
        other[a:b] = select_top(sums[a:b], num_kernels, duration_ratio)
        big[a:b] = b - a > num_kernels
    per_name = per_name.with_columns(
        pl.Series("__group", np.where(other, OTHERS, per_name["name"].to_numpy()), dtype=pl.String),
        pl.Series("__big", big),
    )
    groups = per_name.select(*keys, "name", "__group")
    labelled = g.join(groups, on=[*keys, "name"], how="left", maintain_order="left")
    out = _stats(labelled, [*keys, "__group"]).rename({"__group": "name"})
    if hta_compat and big.any():
        # HTA (step 3 of its rule) recomputes every row of a regrouped type from the per-name
        # totals: named rows get max = min = mean = sum and std 0, ``others`` the statistics of
        # its names' totals. Count and names stay per event.
        totals = per_name.filter(pl.col("__big")).select(*keys, "__group", "name", pl.col("__sum").alias("dur_ns"))
        hta = _stats(totals, [*keys, "__group"]).rename({"__group": "name"}).drop("count", "names")
        out = out.update(hta, on=[*keys, "name"])
    return (
        out.select(*_SCHEMA)
        .cast(_SCHEMA)  # type: ignore[arg-type]
        .sort(["rank", "kernel_type", "sum_us", "name"], descending=[False, False, True, False])
    )


def kernels(
    run: Run,
    *,
    ranks: Sequence[int] | None = None,
    num_kernels: int = 10,
    duration_ratio: float = 0.8,
    include_memory: bool = True,
    view: str = "name",
    hta_compat: bool = False,
) -> AnalysisResult:
    """Top kernels per rank and type with count/sum/mean/min/max/std (``view="name"``), or kernels
    by launch configuration (``view="launch"``, from :mod:`ranksight.analyses.kernel_config`)."""
    if view == "launch":
        return Session.of(run, ranks).result("kernel-config")
    if view != "name":
        raise UsageError(f"unknown view {view!r}; choose name or launch")
    if num_kernels < 1 or not 0.0 <= duration_ratio <= 1.0:
        raise UsageError("num_kernels must be ≥ 1 and duration_ratio within [0, 1]")
    sess = Session.of(run, ranks)
    opts: dict[str, Any] = {
        "num_kernels": num_kernels,
        "duration_ratio": duration_ratio,
        "include_memory": include_memory,
    }
    stacked = None if hta_compat else sess.stacked_events()
    if stacked is not None:  # many small ranks: one pass over all of them (equal to rank by rank)
        work = sess.memo(("gpu_work_of",), lambda: gpu_work_of(stacked.lazy(), by=["rank"]))
        df = kernel_stats_of(work, **opts)
    else:
        df = pl.concat(list(sess.map(kernel_stats_rank, hta_compat=hta_compat, **opts).values()))
    notes = [] if df.height else ["no GPU kernels in these traces"]
    return AnalysisResult({"kernels": df}, notes)


register(
    AnalysisSpec(
        name="kernels",
        func=kernels,
        help="top kernels per rank and type: count, sum, mean, min, max, std (with an honest 'others' row)",
        options=(
            Option("num_kernels", int, 10, "kernels kept per rank and type before 'others'"),
            Option("duration_ratio", float, 0.8, "keep kernels up to this share of the cumulative time (HTA's rule)"),
            Option("include_memory", parse_bool, True, "include memcpy/memset (true/false)"),
            Option("view", str, "name", "name: per kernel name; launch: per launch configuration"),
            Option("hta_compat", bool, False, "HTA v0.6 definitions (name regexes, µs rounding)", flag=True),
        ),
    )
)
