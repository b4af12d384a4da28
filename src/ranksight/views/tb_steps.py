"""Step windows as the TensorBoard plugin defines them (host span extended by the device work).

1. Host steps: ``trace.steps`` (``ProfilerStep#N`` as ``cpu_op`` or ``user_annotation``; the
   ``gpu_user_annotation`` copy is ignored). Without any, one pseudo-step numbered 0 spanning the
   first start to the last end of ``cpu_op`` and ``python`` events (of all timed events when the
   trace has neither).
2. A launch (``cuda_runtime`` or ``cuda_driver`` event) lying entirely inside a host step
   (``host start <= launch start`` and ``launch end <= host end``) contributes the start/end of
   the GPU work it launched to that step; launches crossing a step boundary contribute nothing.
   ``matched`` counts the GPU activities contributed.
3. Only if some GPU activity was matched: ``prev = first host start``, raised to the latest end
   of the unmatched GPU activities that end before the first matched activity of step 0 (when
   step 0 has any). Then in step order: ``start = max(prev, host start)``; ``end = max(host end,
   device end)`` (``max(host end, start)`` for a step without device work); ``prev = end``.
4. Tail: with device work and more than one step, trailing steps that matched nothing are
   dropped; then the last step is dropped too if it matched fewer than 0.8 × the activities of
   the step before it ("the profiler may fail to capture all the kernels").

The plugin walks ``cuda_runtime`` events only; ranksight also counts ``cuda_driver`` launches
(``cuLaunchKernel`` of Triton, cuBLASLt, FlashAttention), whose kernels the plugin leaves out of
the steps.
"""

from __future__ import annotations

import functools

import numpy as np
import polars as pl

from ranksight.model.kinds import GPU_KINDS, LAUNCH_KINDS
from ranksight.model.trace import Trace
from ranksight.views.event_source import EventSource
from ranksight.views.names import trace_values_matching
from ranksight.views.rank_slices import RankSlices

__all__ = ["plugin_steps", "seed_plugin_steps", "TAIL_RATIO"]

TAIL_RATIO = 0.8


def _host_steps(trace: Trace) -> pl.DataFrame:
    st = trace.steps.sort("start_ns").select(
        "step", pl.col("start_ns").alias("host_start_ns"), pl.col("end_ns").alias("host_end_ns")
    )
    if st.height:
        return st
    ev = trace.scan().filter(pl.col("ts_ns").is_not_null() & pl.col("dur_ns").is_not_null())
    python_cats = trace_values_matching(trace, "(?i)^python$", "cat")
    bounds = [pl.len().alias("n"), pl.col("ts_ns").min().alias("lo"), pl.col("end_ns").max().alias("hi")]
    cpu, other = pl.collect_all(
        [
            ev.filter((pl.col("kind") == "cpu_op") | pl.col("cat").is_in(python_cats)).select(bounds),
            ev.filter(pl.col("kind") != "metadata").select(bounds),
        ]
    )
    n, lo, hi = cpu.row(0) if cpu["n"][0] else other.row(0)
    if n == 0:
        return st
    return pl.DataFrame(
        {"step": [0], "host_start_ns": [int(lo)], "host_end_ns": [int(hi)]},
        schema={"step": pl.Int32, "host_start_ns": pl.Int64, "host_end_ns": pl.Int64},
    )


def plugin_steps(trace: Trace, *, keep_all: bool = False, launch_kinds: tuple[str, ...] = LAUNCH_KINDS) -> pl.DataFrame:
    """Steps of one trace: ``step, host_start_ns, host_end_ns, start_ns, end_ns, matched``
    (GPU activities launched inside the step), ``kept`` (false for dropped tail steps; those rows
    are removed unless ``keep_all``). ``launch_kinds=("cuda_runtime",)`` walks the runtime events
    only, as the plugin does. Memoised per trace (``overview`` and ``gpu-metrics`` read the same)."""
    steps: pl.DataFrame = trace.memo(
        _key(keep_all, launch_kinds), lambda: _plugin_steps(trace, keep_all, launch_kinds, None)
    )
    return steps


def seed_plugin_steps(
    src: EventSource, *, keep_all: bool = False, launch_kinds: tuple[str, ...] = LAUNCH_KINDS
) -> None:
    """Give each trace of a stacked source its :func:`plugin_steps`, the GPU activities and their
    launches read in one query over every rank (issue 19); traces that have theirs keep it."""
    key = _key(keep_all, launch_kinds)
    traces = [t for t in src.traces if not t.has_memo(key)]
    if not traces:
        return
    g = RankSlices(_launched(src, launch_kinds), drop=True)
    for t in traces:
        t.memo(key, functools.partial(_plugin_steps, t, keep_all, launch_kinds, g[t.rank]))


def _key(keep_all: bool, launch_kinds: tuple[str, ...]) -> str:
    return f"plugin_steps:{keep_all}:{','.join(launch_kinds)}"


def _launched(src: EventSource, launch_kinds: tuple[str, ...]) -> pl.DataFrame:
    """Each GPU activity (``*by, ts_ns, end_ns``) with its launch's ``l_start``, ``l_end`` (null
    when it has no launch of ``launch_kinds``)."""
    by = src.by
    timed = src.ev.filter(pl.col("dur_ns").is_not_null())
    gpu = timed.filter(pl.col("kind").is_in(list(GPU_KINDS))).select(*by, "ts_ns", "end_ns", "launch_row")
    launches = timed.filter(pl.col("kind").is_in(list(launch_kinds))).select(
        *by, pl.col("row").alias("launch_row"), pl.col("ts_ns").alias("l_start"), pl.col("end_ns").alias("l_end")
    )
    return gpu.join(launches, on=[*by, "launch_row"], how="left", maintain_order="left").collect()


def _plugin_steps(
    trace: Trace, keep_all: bool, launch_kinds: tuple[str, ...], launched: pl.DataFrame | None
) -> pl.DataFrame:
    host = _host_steps(trace)
    n = host.height
    if n == 0:
        return host.with_columns(
            pl.lit(None, pl.Int64).alias("start_ns"),
            pl.lit(None, pl.Int64).alias("end_ns"),
            pl.lit(0, pl.Int64).alias("matched"),
            pl.lit(True).alias("kept"),
        )
    hs = host["host_start_ns"].to_numpy()
    he = host["host_end_ns"].to_numpy()
    g = _launched(EventSource.one(trace), launch_kinds) if launched is None else launched
    ls = g["l_start"].to_numpy(allow_copy=True)
    le = g["l_end"].to_numpy(allow_copy=True)
    has_launch = g["l_start"].is_not_null().to_numpy()
    idx = np.searchsorted(hs, np.where(has_launch, ls, 0), side="right") - 1
    inside = has_launch & (idx >= 0)
    ci = np.clip(idx, 0, n - 1)
    inside &= np.where(inside, le, 0) <= he[ci]
    step_of = np.where(inside, ci, -1)
    gs = g["ts_ns"].to_numpy()
    ge = g["end_ns"].to_numpy()
    m = step_of >= 0
    matched = np.bincount(step_of[m], minlength=n)
    dev_start = np.full(n, np.iinfo(np.int64).max)
    dev_end = np.full(n, np.iinfo(np.int64).min)
    np.minimum.at(dev_start, step_of[m], gs[m])
    np.maximum.at(dev_end, step_of[m], ge[m])
    start = hs.copy()
    end = he.copy()
    use_gpu = bool(m.any())
    if use_gpu:
        prev = int(hs[0])
        if matched[0] > 0:
            early = ~m & (ge < dev_start[0])
            if early.any():
                prev = max(prev, int(ge[early].max()))
        for i in range(n):  # sequential by definition: each step starts where the previous ended
            s = max(prev, int(hs[i]))
            e = max(int(he[i]), int(dev_end[i])) if matched[i] > 0 else max(int(he[i]), s)
            e = max(e, s)
            start[i], end[i] = s, e
            prev = e
    kept = np.ones(n, dtype=bool)
    if use_gpu and n > 1:
        last = np.flatnonzero(matched > 0)
        if last.size:
            keep = int(last[-1]) + 1
            i = keep - 1
            if i > 0 and matched[i - 1] * TAIL_RATIO > matched[i]:
                keep = i
            kept[keep:] = False
    out = host.with_columns(
        pl.Series("start_ns", start),
        pl.Series("end_ns", end),
        pl.Series("matched", matched.astype(np.int64)),
        pl.Series("kept", kept),
    )
    return out if keep_all else out.filter(pl.col("kept"))
