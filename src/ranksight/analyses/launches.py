"""Kernel launches: CPU launch time, GPU time and launch delay per launch, with HTA's findings.

Definitions (per rank; times in µs from exact ns):

- a *launch* is a runtime/driver call whose correlation matches GPU work (every API: CUDA
  runtime and driver, ``cudaGraphLaunch``, HIP, MTIA); its GPU *children* are the kernels,
  memcpys and memsets with that correlation. A CUDA/HIP graph launch is one launch with N children.
- ``cpu_dur_us``: duration of the launch call;
- ``gpu_dur_us``: sum of the children's durations (one child for ordinary launches);
- ``launch_delay_us``: start of the first child − end of the launch call, clipped at 0 (HTA's
  definition); only the first child of a graph launch has a delay, so it is one number per launch;
- ``launch_delay_from_start_us``: start of the first child − start of the launch call (not clipped);
- ``queued_us``: the part of ``launch_delay_us`` during which the first child's stream was still
  running earlier GPU work (the CPU ran ahead and the work waited its turn): ``clamp(end of the
  stream's earlier work − end of the launch call, 0, launch_delay_us)``; ``idle_delay_us =
  launch_delay_us − queued_us``: the stream sat idle after the call returned and the work had not
  started (launch latency proper);
- findings (HTA's cutoffs by default): ``short_kernel`` = ``cpu_dur_us <= runtime_cutoff_us`` and
  ``gpu_dur_us < cpu_dur_us`` (the GPU work is shorter than launching it); ``runtime_outlier`` =
  ``cpu_dur_us > runtime_cutoff_us``; ``launch_delay_outlier`` = ``idle_delay_us >
  launch_delay_cutoff_us``: a delay while the stream was idle. A delay spent queued behind earlier
  work is the norm when the CPU runs ahead of the GPU (on a GPU-bound step nearly every launch
  waits), not an outlier. With ``hta_apis=True`` the outlier is HTA's, on the whole delay
  (``launch_delay_us > launch_delay_cutoff_us``).

``hta_apis=True`` restricts launches to HTA's names (``cudaLaunchKernel``, ``cudaLaunchKernelExC``,
MTIA ``runFunction``, plus ``cudaMemcpyAsync``/``cudaMemsetAsync`` with memory events);
``include_memory=False`` drops launches without a kernel child (with ``hta_apis``: the memory APIs).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, Option, register
from ranksight.analyses._session import Session
from ranksight.model.kinds import GPU_KINDS
from ranksight.views.links import HTA_LAUNCH_STATS_APIS, HTA_MEMORY_APIS, launch_children, launch_children_of

if TYPE_CHECKING:
    from ranksight.model.run import Run
    from ranksight.model.trace import Trace

__all__ = [
    "launch_table",
    "launch_table_of",
    "hta_launch_stats",
    "launch_summary",
    "launches",
    "RUNTIME_CUTOFF_US",
    "LAUNCH_DELAY_CUTOFF_US",
]

#: HTA's defaults (µs).
RUNTIME_CUTOFF_US = 50.0
LAUNCH_DELAY_CUTOFF_US = 100.0

_LAUNCH_SCHEMA = {
    "rank": pl.Int32,
    "row": pl.UInt32,
    "correlation": pl.Int64,
    "api": pl.String,
    "tid": pl.Int64,
    "ts_ns": pl.Int64,
    "kernel": pl.String,
    "kind": pl.String,
    "stream": pl.Int64,
    "gpu_count": pl.Int64,
    "cpu_dur_us": pl.Float64,
    "gpu_dur_us": pl.Float64,
    "launch_delay_us": pl.Float64,
    "launch_delay_from_start_us": pl.Float64,
    "short_kernel": pl.Boolean,
    "runtime_outlier": pl.Boolean,
    "launch_delay_outlier": pl.Boolean,
    "queued_us": pl.Float64,
    "idle_delay_us": pl.Float64,
}


def _apis(hta_apis: bool, include_memory: bool) -> tuple[str, ...] | None:
    if not hta_apis:
        return None
    return HTA_LAUNCH_STATS_APIS + (HTA_MEMORY_APIS if include_memory else ())


def launch_table(
    trace: Trace,
    *,
    runtime_cutoff_us: float = RUNTIME_CUTOFF_US,
    launch_delay_cutoff_us: float = LAUNCH_DELAY_CUTOFF_US,
    include_memory: bool = True,
    hta_apis: bool = False,
) -> pl.DataFrame:
    """One row per launch of one rank (see the module docstring for the definitions)."""
    return launch_table_of(
        trace.scan().with_columns(pl.lit(trace.rank, pl.Int32).alias("rank")),
        runtime_cutoff_us=runtime_cutoff_us,
        launch_delay_cutoff_us=launch_delay_cutoff_us,
        include_memory=include_memory,
        hta_apis=hta_apis,
    )


def launch_table_of(
    ev: pl.LazyFrame,
    *,
    runtime_cutoff_us: float = RUNTIME_CUTOFF_US,
    launch_delay_cutoff_us: float = LAUNCH_DELAY_CUTOFF_US,
    include_memory: bool = True,
    hta_apis: bool = False,
) -> pl.DataFrame:
    """:func:`launch_table` of events with a ``rank`` column (one rank's, or a run's stacked
    events: every rank in one pass), in rank then launch order."""
    ch = launch_children_of(ev, _apis(hta_apis, include_memory), by=["rank"])
    if ch.height == 0:
        return pl.DataFrame(schema=_LAUNCH_SCHEMA)
    agg = ch.group_by("rank", "launch_row", maintain_order=True).agg(
        pl.col("correlation").first(),
        pl.col("api").first().cast(pl.String),
        pl.col("cpu_tid").first().alias("tid"),
        pl.col("cpu_ts_ns").first().alias("ts_ns"),
        pl.col("cpu_dur_ns").first(),
        pl.col("cpu_end_ns").first(),
        pl.col("name").first().cast(pl.String).alias("kernel"),
        pl.col("kind").first().cast(pl.String).alias("kind"),
        pl.col("stream").first(),
        pl.len().cast(pl.Int64).alias("gpu_count"),
        pl.col("dur_ns").sum().alias("gpu_dur_ns"),
        pl.col("ts_ns").min().alias("first_gpu_ns"),
        (pl.col("kind") == "kernel").any().alias("has_kernel"),
    )
    if not include_memory and not hta_apis:
        agg = agg.filter(pl.col("has_kernel"))
    agg = agg.join(_stream_busy_until(ev, agg), on=["rank", "launch_row"], how="left", maintain_order="left")
    cpu = pl.col("cpu_dur_ns") / 1e3
    gpu = pl.col("gpu_dur_ns") / 1e3
    delay = ((pl.col("first_gpu_ns") - pl.col("cpu_end_ns")).clip(lower_bound=0)) / 1e3
    queued = ((pl.col("__busy_until") - pl.col("cpu_end_ns")).clip(lower_bound=0).fill_null(0) / 1e3).clip(
        upper_bound=delay
    )
    idle_delay = delay - queued
    return agg.select(
        pl.col("rank").cast(pl.Int32),
        pl.col("launch_row").alias("row"),
        "correlation",
        "api",
        "tid",
        "ts_ns",
        "kernel",
        "kind",
        "stream",
        "gpu_count",
        cpu.alias("cpu_dur_us"),
        gpu.alias("gpu_dur_us"),
        delay.alias("launch_delay_us"),
        ((pl.col("first_gpu_ns") - pl.col("ts_ns")) / 1e3).alias("launch_delay_from_start_us"),
        ((cpu <= runtime_cutoff_us) & (gpu < cpu)).alias("short_kernel"),
        (cpu > runtime_cutoff_us).alias("runtime_outlier"),
        ((delay if hta_apis else idle_delay) > launch_delay_cutoff_us).alias("launch_delay_outlier"),
        queued.alias("queued_us"),
        idle_delay.alias("idle_delay_us"),
    ).cast(_LAUNCH_SCHEMA)  # type: ignore[arg-type]


def _stream_busy_until(ev: pl.LazyFrame, agg: pl.DataFrame) -> pl.DataFrame:
    """Per launch: the latest end of GPU work on its first child's stream (of its rank) that
    started before that child (``__busy_until``; null when none did)."""
    g = (
        ev.filter(pl.col("kind").is_in(list(GPU_KINDS)) & pl.col("end_ns").is_not_null())
        .select("rank", "stream", "ts_ns", "end_ns")
        .sort("rank", "stream", "ts_ns")
        .collect()
        .with_columns(pl.col("end_ns").cum_max().over("rank", "stream").alias("__busy_until"))
        .with_columns(pl.col("ts_ns") + 1)  # work starting at the child's start is not before it
        .unique(["rank", "stream", "ts_ns"], keep="last")
        .sort("rank", "stream", "ts_ns")
    )
    first = agg.select("rank", "launch_row", "stream", pl.col("first_gpu_ns").alias("ts_ns")).drop_nulls()
    if first.height == 0 or g.height == 0:
        return pl.DataFrame(
            schema={"rank": agg.schema["rank"], "launch_row": agg.schema["launch_row"], "__busy_until": pl.Int64}
        )
    j = first.sort("rank", "stream", "ts_ns").join_asof(
        g.select("rank", "stream", "ts_ns", "__busy_until"),
        on="ts_ns",
        by=["rank", "stream"],
        strategy="backward",
        check_sortedness=False,
    )
    return j.select("rank", "launch_row", "__busy_until")


def hta_launch_stats(trace: Trace, *, include_memory: bool = True) -> pl.DataFrame:
    """HTA's ``get_cuda_kernel_launch_stats`` table for one rank: one row per GPU activity of a
    launch with one of HTA's API names, ``correlation, cpu_duration, gpu_duration, launch_delay``
    (µs; delay from the end of the launch call, clipped at 0), in launch order."""
    ch = launch_children(trace, _apis(True, include_memory)).sort(["launch_row", "row"])
    return ch.select(
        "correlation",
        (pl.col("cpu_dur_ns") / 1e3).alias("cpu_duration"),
        (pl.col("dur_ns") / 1e3).alias("gpu_duration"),
        ((pl.col("ts_ns") - pl.col("cpu_end_ns")).clip(lower_bound=0) / 1e3).alias("launch_delay"),
    )


def launch_summary(table: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Per-rank summary, per-(rank, API) table and the three findings with counts and totals."""
    summary = table.group_by("rank", maintain_order=True).agg(
        pl.len().alias("launches"),
        pl.col("gpu_count").sum().alias("gpu_activities"),
        (pl.col("gpu_count") > 1).sum().alias("multi_activity_launches"),
        pl.col("cpu_dur_us").sum().alias("cpu_total_us"),
        pl.col("cpu_dur_us").mean().alias("cpu_mean_us"),
        pl.col("launch_delay_us").mean().alias("delay_mean_us"),
        pl.col("launch_delay_us").median().alias("delay_p50_us"),
        pl.col("launch_delay_us").quantile(0.99, "linear").alias("delay_p99_us"),
        pl.col("short_kernel").sum().alias("short_kernels"),
        pl.col("runtime_outlier").sum().alias("runtime_outliers"),
        pl.col("launch_delay_outlier").sum().alias("launch_delay_outliers"),
        pl.col("queued_us").sum().alias("queued_total_us"),
        pl.col("idle_delay_us").median().alias("idle_delay_p50_us"),
    )
    by_api = (
        table.group_by("rank", "api")
        .agg(
            pl.len().alias("launches"),
            pl.col("gpu_count").sum().alias("gpu_activities"),
            pl.col("cpu_dur_us").sum().alias("cpu_total_us"),
            pl.col("cpu_dur_us").mean().alias("cpu_mean_us"),
            pl.col("cpu_dur_us").max().alias("cpu_max_us"),
            pl.col("launch_delay_us").mean().alias("delay_mean_us"),
            pl.col("launch_delay_us").max().alias("delay_max_us"),
        )
        .sort(["rank", "launches", "api"], descending=[False, True, False])
    )
    frames = []
    for flag in ("short_kernel", "runtime_outlier", "launch_delay_outlier"):
        frames.append(
            table.filter(pl.col(flag))
            .group_by("rank")
            .agg(
                pl.lit(flag).alias("finding"),
                pl.len().alias("count"),
                pl.col("cpu_dur_us").sum().alias("cpu_total_us"),
                pl.col("gpu_dur_us").sum().alias("gpu_total_us"),
                pl.col("launch_delay_us").sum().alias("delay_total_us"),
            )
        )
    findings = pl.concat(frames, how="vertical_relaxed").sort(["rank", "finding"]) if frames else pl.DataFrame()
    return summary, by_api, findings


def launches(
    run: Run,
    *,
    ranks: Sequence[int] | None = None,
    runtime_cutoff_us: float = RUNTIME_CUTOFF_US,
    launch_delay_cutoff_us: float = LAUNCH_DELAY_CUTOFF_US,
    include_memory: bool = True,
    hta_apis: bool = False,
) -> AnalysisResult:
    """Launch statistics per rank (see the module docstring)."""
    sess = Session.of(run, ranks)
    opts: dict[str, Any] = {
        "runtime_cutoff_us": runtime_cutoff_us,
        "launch_delay_cutoff_us": launch_delay_cutoff_us,
        "include_memory": include_memory,
        "hta_apis": hta_apis,
    }
    stacked = sess.stacked_events()
    if stacked is not None:  # many small ranks: one pass over all of them (equal to rank by rank)
        table = launch_table_of(stacked.lazy(), **opts)
    else:
        tables = list(sess.map(launch_table, **opts).values())
        table = pl.concat(tables) if tables else pl.DataFrame(schema=_LAUNCH_SCHEMA)
    summary, by_api, findings = launch_summary(table)
    notes = []
    present = set(table["rank"].unique().to_list())
    no_launch = [r for r in sess.ranks if r not in present]
    if no_launch:
        notes.append(f"rank(s) {no_launch}: no launch linked to GPU work (CPU-only trace or no correlation ids)")
    return AnalysisResult({"summary": summary, "findings": findings, "by_api": by_api, "launches": table}, notes)


register(
    AnalysisSpec(
        name="launches",
        func=launches,
        help="per launch: CPU time, GPU time, launch delay; short kernels and outliers (every launch API)",
        options=(
            Option(
                "runtime_cutoff_us", float, RUNTIME_CUTOFF_US, "launch calls longer than this are runtime outliers (µs)"
            ),
            Option(
                "launch_delay_cutoff_us",
                float,
                LAUNCH_DELAY_CUTOFF_US,
                "launch delays longer than this are outliers (µs)",
            ),
            Option(
                "include_memory",
                lambda s: s.lower() not in ("0", "false", "no"),
                True,
                "include memcpy/memset launches",
            ),
            Option("hta_apis", bool, False, "only HTA's launch API names (HTA-compatible)", flag=True),
        ),
    )
)
