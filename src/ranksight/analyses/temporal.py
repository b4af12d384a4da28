"""Temporal breakdown: how a rank's GPU time splits into idle, compute and non-compute.

Definitions, per rank (ns, reported in µs; GPU work as in :mod:`ranksight.views.gpu_work`):

- ``kernel_time``: first start to last end of the rank's GPU work, all streams pooled (HTA's
  "kernel time": the span, not wall time, not per step);
- ``busy``: length of the union of all GPU work intervals; ``idle = kernel_time − busy``;
- ``compute``: length of the union of COMPUTATION intervals only;
- ``non_compute = kernel_time − compute − idle`` (= busy − compute): time when only communication
  or memory work runs. Communication overlapped by computation counts as compute.
- ``*_pct = round(100 × part / kernel_time, 2)`` (numpy rounding, like HTA).

Per step (``per_step=True``), the same split inside each device-extended ProfilerStep window
(:func:`~ranksight.views.gpu_work.step_windows`): ``step_time`` is the window, GPU work of any step
is clipped to it, and idle inside the window includes time the GPU waited for the CPU. Table
``over_steps`` sums the windows per rank: ``busy_pct_of_steps = round(100 × busy / windows, 2)`` is
GPU busy over the step windows (the number ``low-gpu-utilization`` judges), ``busy_pct`` of
``summary`` is GPU busy over the GPU span (``100 − idle_pct``). One definition of busy, two
windows; see ``docs/metrics.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, Option, register
from ranksight.analyses._session import Session
from ranksight.views.gpu_work import (
    covered_in_windows,
    gpu_work,
    gpu_work_of,
    merge,
    pct,
    seed_gpu_work,
    step_windows,
)
from ranksight.views.intervals import union_length_by

if TYPE_CHECKING:
    from ranksight.model.run import Run
    from ranksight.model.trace import Trace

__all__ = ["temporal_rank", "temporal_of", "temporal_steps_rank", "over_steps", "temporal", "to_hta", "HTA_COLUMNS"]

_RANK_SCHEMA = {
    "rank": pl.Int64,
    "kernel_time_us": pl.Float64,
    "idle_us": pl.Float64,
    "compute_us": pl.Float64,
    "non_compute_us": pl.Float64,
    "idle_pct": pl.Float64,
    "compute_pct": pl.Float64,
    "non_compute_pct": pl.Float64,
}
_STEP_SCHEMA = {
    "rank": pl.Int64,
    "step": pl.Int32,
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "step_time_us": pl.Float64,
    "idle_us": pl.Float64,
    "compute_us": pl.Float64,
    "non_compute_us": pl.Float64,
    "idle_pct": pl.Float64,
    "compute_pct": pl.Float64,
    "non_compute_pct": pl.Float64,
}

_OVER_STEPS_SCHEMA = {
    "rank": pl.Int64,
    "steps": pl.Int64,
    "step_time_us": pl.Float64,
    "busy_us_in_steps": pl.Float64,
    "idle_us_in_steps": pl.Float64,
    "busy_pct_of_steps": pl.Float64,
    "idle_pct_of_steps": pl.Float64,
}

#: HTA's column names for the per-rank table, in HTA's order.
HTA_COLUMNS = {
    "rank": "rank",
    "idle_us": "idle_time(us)",
    "compute_us": "compute_time(us)",
    "non_compute_us": "non_compute_time(us)",
    "kernel_time_us": "kernel_time(us)",
    "idle_pct": "idle_time_pctg",
    "compute_pct": "compute_time_pctg",
    "non_compute_pct": "non_compute_time_pctg",
}


def _merged(g: pl.DataFrame, hta_compat: bool) -> tuple[np.ndarray, np.ndarray]:
    return merge(g["ts_ns"].to_numpy(), g["end_ns"].to_numpy(), hta_compat=hta_compat)


def temporal_of(work: pl.DataFrame, ranks: Sequence[int]) -> pl.DataFrame:
    """:func:`temporal_rank` (ranksight's definitions) from the GPU work of several ranks
    (:func:`~ranksight.views.gpu_work.gpu_work_of` with a ``rank`` column): one row per rank of
    ``ranks`` in that order, every rank in one pass (a rank without GPU work: nulls)."""
    g = work.select("rank", "ts_ns", "end_ns", "kernel_type")
    whole = union_length_by(g, "rank").rename({"covered_ns": "busy"})
    comp = union_length_by(g.filter(pl.col("kernel_type") == "COMPUTATION"), "rank").rename({"covered_ns": "comp"})
    span = g.group_by("rank").agg(
        (pl.max_horizontal("ts_ns", "end_ns").max() - pl.col("ts_ns").min()).alias("span")  # as merge()'s last end
    )
    t = (
        pl.DataFrame({"rank": list(ranks)}, schema={"rank": g.schema["rank"]})
        .join(span, on="rank", how="left", maintain_order="left")
        .join(whole, on="rank", how="left", maintain_order="left")
        .join(comp, on="rank", how="left", maintain_order="left")
        .with_columns(pl.col("comp").fill_null(0))
    )
    has = ~t["span"].is_null().to_numpy()
    sp = np.where(has, t["span"].fill_null(0).to_numpy(), 0).astype(np.int64)
    busy = t["busy"].fill_null(0).to_numpy().astype(np.int64)
    compute = t["comp"].to_numpy().astype(np.int64)
    idle = sp - busy
    non_compute = sp - compute - idle

    def col(x: np.ndarray) -> pl.Series:
        # null for a rank without GPU work; a NaN percentage of a zero span stays NaN, as per rank
        return pl.select(pl.when(pl.Series(has)).then(pl.Series(x, dtype=pl.Float64))).to_series()

    return pl.DataFrame(
        {
            "rank": t["rank"],
            "kernel_time_us": col(sp / 1e3),
            "idle_us": col(idle / 1e3),
            "compute_us": col(compute / 1e3),
            "non_compute_us": col(non_compute / 1e3),
            "idle_pct": col(pct(idle, sp)),
            "compute_pct": col(pct(compute, sp)),
            "non_compute_pct": col(pct(non_compute, sp)),
        }
    ).cast(_RANK_SCHEMA)  # type: ignore[arg-type]


def temporal_rank(trace: Trace, *, hta_compat: bool = False) -> pl.DataFrame:
    """One row: the rank's idle / compute / non-compute split of its GPU span (µs and %).

    A rank without GPU work gives a row of nulls.
    """
    g = gpu_work(trace, hta_compat=hta_compat)
    if g.height == 0:
        return pl.DataFrame({"rank": [trace.rank]}, schema={"rank": pl.Int64}).with_columns(
            pl.lit(None, dtype=t).alias(c) for c, t in _RANK_SCHEMA.items() if c != "rank"
        )
    ms, me = _merged(g, hta_compat)
    span = int(me[-1] - ms[0])
    busy = int((me - ms).sum())
    cs, ce = _merged(g.filter(pl.col("kernel_type") == "COMPUTATION"), hta_compat)
    compute = int((ce - cs).sum())
    idle = span - busy
    non_compute = span - compute - idle
    vals = np.array([idle, compute, non_compute], dtype=np.float64)
    p = pct(vals, span)
    return pl.DataFrame(
        {
            "rank": [trace.rank],
            "kernel_time_us": [span / 1e3],
            "idle_us": [idle / 1e3],
            "compute_us": [compute / 1e3],
            "non_compute_us": [non_compute / 1e3],
            "idle_pct": [float(p[0])],
            "compute_pct": [float(p[1])],
            "non_compute_pct": [float(p[2])],
        },
        schema=_RANK_SCHEMA,
    )


def temporal_steps_rank(trace: Trace) -> pl.DataFrame:
    """One row per ProfilerStep: the split inside the step's device-extended window."""
    win = step_windows(trace)
    if win.height == 0:
        return pl.DataFrame(schema=_STEP_SCHEMA)
    g = gpu_work(trace)
    ws, we = win["start_ns"].to_numpy(), win["end_ns"].to_numpy()
    ms, me = _merged(g, False)
    cs, ce = _merged(g.filter(pl.col("kernel_type") == "COMPUTATION"), False)
    busy = covered_in_windows(ms, me, ws, we)
    compute = covered_in_windows(cs, ce, ws, we)
    length = we - ws
    idle = length - busy
    non_compute = busy - compute
    return pl.DataFrame(
        {
            "rank": np.full(win.height, trace.rank, dtype=np.int64),
            "step": win["step"],
            "start_ns": ws,
            "end_ns": we,
            "step_time_us": length / 1e3,
            "idle_us": idle / 1e3,
            "compute_us": compute / 1e3,
            "non_compute_us": non_compute / 1e3,
            "idle_pct": pct(idle, length),
            "compute_pct": pct(compute, length),
            "non_compute_pct": pct(non_compute, length),
        },
        schema=_STEP_SCHEMA,
    )


def over_steps(per_step: pl.DataFrame) -> pl.DataFrame:
    """Per rank, the step windows summed: ``steps, step_time_us, busy_us_in_steps, idle_us_in_steps`` and
    ``busy_pct_of_steps`` / ``idle_pct_of_steps`` (``round(100 × part / windows, 2)``; they sum to 100)."""
    if per_step.height == 0:
        return pl.DataFrame(schema=_OVER_STEPS_SCHEMA)
    agg = (
        per_step.group_by("rank")
        .agg(
            pl.len().alias("steps"),
            ((pl.col("end_ns") - pl.col("start_ns")).sum()).alias("_win_ns"),
            (pl.col("idle_us") * 1e3).round(0).cast(pl.Int64).sum().alias("_idle_ns"),  # exact ns
        )
        .sort("rank")
    )
    win = agg["_win_ns"].to_numpy().astype(np.float64)
    idle = agg["_idle_ns"].to_numpy().astype(np.float64)
    idle_pct = pct(idle, win)
    return pl.DataFrame(
        {
            "rank": agg["rank"],
            "steps": agg["steps"],
            "step_time_us": win / 1e3,
            "busy_us_in_steps": (win - idle) / 1e3,
            "idle_us_in_steps": idle / 1e3,
            "busy_pct_of_steps": np.round(100.0 - idle_pct, 2),
            "idle_pct_of_steps": idle_pct,
        },
        schema=_OVER_STEPS_SCHEMA,
    )


def to_hta(df: pl.DataFrame) -> pl.DataFrame:
    """The per-rank table with HTA's column names and order."""
    return df.select([pl.col(k).alias(v) for k, v in HTA_COLUMNS.items()])


def temporal(
    run: Run, *, ranks: Sequence[int] | None = None, per_step: bool = False, hta_compat: bool = False
) -> AnalysisResult:
    """Idle / compute / non-compute time per rank (and per ProfilerStep with ``per_step``)."""
    sess = Session.of(run, ranks)
    stacked = None if hta_compat else sess.stacked_events()
    if stacked is not None:  # many small ranks: one pass over all of them (equal to rank by rank)
        work = gpu_work_of(stacked.lazy(), by=["rank"])
        seed_gpu_work([sess.trace(r) for r in sess.ranks], work)  # for the analyses that read it per rank
        per_rank = temporal_of(work, sess.ranks)
    else:
        per_rank = pl.concat(list(sess.map(temporal_rank, hta_compat=hta_compat).values()))
    tables = {"temporal": per_rank}
    notes = []
    missing = per_rank.filter(pl.col("kernel_time_us").is_null())["rank"].to_list()
    if missing:
        notes.append(f"rank(s) {missing} have no GPU work (CPU-only trace): no temporal breakdown")
    if per_step:
        steps = pl.concat(list(sess.map(temporal_steps_rank).values()))
        tables["per_step"] = steps
        # ranks without GPU work have no GPU busy over their steps (empty, the note above says why)
        tables["over_steps"] = over_steps(steps.filter(~pl.col("rank").is_in(missing)))
        if steps.height == 0:
            notes.append("no ProfilerStep in these traces: no per-step table")
    if hta_compat:
        notes.append("HTA-compatible definitions: sync events count as GPU busy, ns traces rounded to µs")
    return AnalysisResult(tables, notes)


register(
    AnalysisSpec(
        name="temporal",
        func=temporal,
        help="idle / compute / non-compute GPU time per rank (HTA's temporal breakdown), optionally per step",
        options=(
            Option("per_step", bool, False, "also break down each ProfilerStep", flag=True),
            Option("hta_compat", bool, False, "HTA v0.6 definitions (sync events busy, µs rounding)", flag=True),
        ),
    )
)
