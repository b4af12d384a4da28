"""CPU launch ↔ GPU activity pairs, shared by the launch, queue, op-kernel and sequence analyses.

A *launch* is a runtime or driver event (``kind`` ``cuda_runtime``/``cuda_driver``: CUDA, HIP,
MTIA, driver APIs, CUDA/HIP graph launches) whose ``correlation`` matches GPU work (kernels,
memcpys, memsets). The trace model already links every GPU activity to its launch
(``launch_row``); a graph launch owns many activities.

HTA's fixed name sets are kept here for the compatibility paths (``hta-definitions.md`` §2.4, §3.5).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

import polars as pl

from ranksight.model.kinds import GPU_KINDS

__all__ = [
    "names_matching",
    "HTA_LAUNCH_STATS_APIS",
    "HTA_MEMORY_APIS",
    "HTA_QUEUE_APIS",
    "HTA_KERNEL_LAUNCH_RE",
    "launch_children",
    "launch_children_of",
    "name_filter",
]

#: ``get_cuda_kernel_launch_stats``: kernel launches counted by HTA (no HIP, driver or graph APIs).
HTA_LAUNCH_STATS_APIS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "runFunction - job_prep_and_submit_for_execution")
#: ... plus these with ``include_memory_events=True``.
HTA_MEMORY_APIS = ("cudaMemcpyAsync", "cudaMemsetAsync")
#: Queue length and critical path (``get_runtime_launch_events_mask``); no graph launches.
HTA_QUEUE_APIS = (
    "cudaLaunchKernel",
    "cudaLaunchKernelExC",
    "cuLaunchKernel",
    "cudaMemcpyAsync",
    "cudaMemsetAsync",
    "runFunction - job_prep_and_submit_for_execution",
    "hipLaunchKernel",
    "hipExtModuleLaunchKernel",
    "hipMemcpyAsync",
    "hipMemsetAsync",
    "hipMemcpyWithStream",
)
#: ``KERNEL_LAUNCH`` pattern of HTA (``re.match``: anchored at the start), used for aten-op delays.
HTA_KERNEL_LAUNCH_RE = re.compile(r"(cuda.*LaunchKernel)|(cuLaunchKernel)|(^runFunction)")


def name_filter(apis: Iterable[str] | None) -> pl.Expr:
    """True for launches whose API name is in ``apis`` (every launch when ``apis`` is None)."""
    if apis is None:
        return pl.lit(True)
    return pl.col("api").cast(pl.String).is_in(list(apis))


def launch_children(trace, apis: Iterable[str] | None = None) -> pl.DataFrame:  # noqa: ANN001
    """One row per GPU activity that has a known launch.

    Columns: ``row, kind, name, kernel_class, pid, tid, stream, device, ts_ns, dur_ns, end_ns,
    step`` (the GPU activity), ``launch_row, correlation, api, cpu_pid, cpu_tid, cpu_ts_ns,
    cpu_dur_ns, cpu_end_ns, gpu_count`` (its launch); ``name`` and ``api`` stay categorical
    (cast to strings only where needed: long kernel names are costly). Restricted to launches named in ``apis``
    when given. Sorted by launch row, then GPU start, then GPU row.
    """
    return launch_children_of(trace.scan(), apis, by=[])


def launch_children_of(ev: pl.LazyFrame, apis: Iterable[str] | None = None, *, by: list[str]) -> pl.DataFrame:
    """:func:`launch_children` of events that may hold several traces: ``by`` are the columns that
    tell them apart (``["rank"]`` over a run's stacked events; empty for one trace), kept in front
    and used in the join and the order (one query for every rank instead of two per rank)."""
    g = (
        ev.filter(pl.col("kind").is_in(list(GPU_KINDS)) & pl.col("launch_row").is_not_null())
        .select(
            *by,
            "row",
            "kind",
            "name",
            "kernel_class",
            "pid",
            "tid",
            "stream",
            "device",
            "ts_ns",
            "dur_ns",
            "end_ns",
            "step",
            "launch_row",
        )
        .collect()
    )
    launches = ev.filter(pl.col("gpu_count") > 0).select(
        *by,
        pl.col("row").alias("launch_row"),
        "correlation",
        pl.col("name").alias("api"),
        pl.col("pid").alias("cpu_pid"),
        pl.col("tid").alias("cpu_tid"),
        pl.col("ts_ns").alias("cpu_ts_ns"),
        pl.col("dur_ns").alias("cpu_dur_ns"),
        pl.col("end_ns").alias("cpu_end_ns"),
        "gpu_count",
    )
    if apis is not None:
        launches = launches.filter(name_filter(apis))
    return g.join(launches.collect(), on=[*by, "launch_row"], how="inner").sort([*by, "launch_row", "ts_ns", "row"])


def names_matching(df: pl.DataFrame, test: Callable[[pl.Series], pl.Series], col: str = "name") -> pl.Expr:
    """A filter expression on ``col`` (categorical) that runs the string test ``test`` once per
    distinct name instead of once per event (casting every event's name is slow on big traces)."""
    u = df.get_column(col).unique()
    hit = u.filter(test(u.cast(pl.String)).fill_null(False))
    return pl.col(col).is_in(hit.implode())
