"""Per-rank interval helpers shared by ``exposed-comm`` and ``bubble``: step windows, the
computation intervals of a rank, clipping and lengths."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from ranksight.views.gpu_work import step_windows as gpu_step_windows
from ranksight.views.intervals import union

if TYPE_CHECKING:
    from ranksight.model.trace import Trace

__all__ = ["step_windows", "compute_intervals", "clip_union", "length"]

_COMM_OP_PREFIXES = ("c10d::", "record_param_comms", "nccl:", "gloo:", "ProfilerStep")


def step_windows(trace: Trace) -> list[tuple[int | None, int, int]]:
    """``(step, lo, hi)``: the step windows of :func:`ranksight.views.gpu_work.step_windows` (each
    ProfilerStep extended to the GPU work it launched, contiguous: the one step window of
    ``temporal``, ``mfu`` and ``idle-causes``). Without steps one window (step None), ``mfu``'s: the
    GPU span (``temporal``'s ``kernel_time``); on a rank without GPU work the span of its CPU ops;
    the trace span when it has neither."""
    win = gpu_step_windows(trace)
    if win.height:
        return list(zip(win["step"].to_list(), win["start_ns"].to_list(), win["end_ns"].to_list(), strict=True))
    for src in (trace.gpu_events, trace.kind("cpu_op")):
        g = src.filter(pl.col("dur_ns").is_not_null() & pl.col("ts_ns").is_not_null())
        if g.height:
            return [(None, int(g["ts_ns"].min()), int(g["end_ns"].max()))]  # type: ignore[arg-type]
    span = trace.span_ns
    return [(None, span[0], span[1])] if span else []


def compute_intervals(trace: Trace, coll: pl.DataFrame) -> tuple[np.ndarray, np.ndarray, str]:
    """``(start, end, basis)`` of a rank's computation: COMPUTE kernels on a rank with kernels;
    otherwise ``cpu_op`` intervals of threads that run no collective, collective ops excluded."""
    ev = trace.scan()
    if ev.select((pl.col("kind") == "kernel").any()).collect().item():
        k = (
            ev.filter(
                (pl.col("kind") == "kernel") & (pl.col("kernel_class") == "COMPUTE") & pl.col("dur_ns").is_not_null()
            )
            .select("ts_ns", "end_ns")
            .collect()
        )
        return k["ts_ns"].to_numpy(), k["end_ns"].to_numpy(), "gpu kernels"
    coll_threads = (
        ev.filter(pl.col("row").is_in(coll["row"].cast(pl.UInt32).implode()))
        .select(pl.col("tid").unique())
        .collect()["tid"]
        .to_list()
        if coll.height
        else []
    )
    comm_names = [n for n in trace.distinct_names() if n.startswith(_COMM_OP_PREFIXES)]
    ops = (
        ev.filter(
            (pl.col("kind") == "cpu_op")
            & pl.col("dur_ns").is_not_null()
            & ~pl.col("tid").is_in(coll_threads)
            & ~pl.col("name").is_in(comm_names)
        )
        .select("ts_ns", "end_ns")
        .collect()
    )
    return ops["ts_ns"].to_numpy(), ops["end_ns"].to_numpy(), "cpu ops"


def clip_union(s: np.ndarray, e: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """The union of the intervals clipped to ``[lo, hi)``."""
    s2, e2 = np.maximum(s, lo), np.minimum(e, hi)
    keep = e2 > s2
    return union(s2[keep], e2[keep])


def length(iv: tuple[np.ndarray, np.ndarray]) -> int:
    """Total length of disjoint intervals."""
    return int((iv[1] - iv[0]).sum())
