"""CUPTI range-profiler counters per kernel, joined with the PyTorch operators that launched them.

In CUPTI profiler mode, Kineto writes one ``cuda_profiler_range`` event per kernel with the
counter values in its args, and no correlation id. Definitions (per rank; HTA's
``get_cupti_counter_data_with_operators``):

- kernels = ``cuda_profiler_range`` events sorted by start; launches = runtime events whose
  name starts with ``cudaLaunchKernel`` sorted by start; the i-th kernel belongs to the i-th
  launch (by position). A rank where the counts differ is skipped with a note.
- ``op_stack``: the ``cpu_op`` ancestors of the launch on its CPU thread (call nesting as in
  HTA's call stack), outermost first; ``top_level_op`` / ``bottom_level_op`` its first / last
  element (empty when the launch is outside every op).
- one column per counter (every arg key of the range events; missing values null) and
  ``flops``: Σ weight × ``smsp__sass_thread_inst_executed_op_{f,h,d}{fma,mul,add}_pred_on.sum``
  with weight 2 for FMA, 1 otherwise (HTA's only FLOP formula), when any of them is present.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, register
from ranksight.analyses._session import Session
from ranksight.model.kinds import CPU_KINDS
from ranksight.views.hta_call_stack import nest

if TYPE_CHECKING:
    from ranksight.model.run import Run
    from ranksight.model.trace import Trace

__all__ = ["CUPTI_RANGE_CATEGORY", "SASS_FLOP_WEIGHTS", "cupti_table", "cupti_counters"]

CUPTI_RANGE_CATEGORY = "cuda_profiler_range"
#: HTA's ``CUDA_SASS_INSTRUCTION_COUNTER_FLOPS``.
SASS_FLOP_WEIGHTS = {
    f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum": 2 if "fma" in op else 1
    for op in ["ffma", "fmul", "fadd", "hfma", "hmul", "hadd", "dfma", "dmul", "dadd"]
}


def _op_stacks(trace: Trace, launch_rows: np.ndarray) -> pl.DataFrame:
    """``launch_row, op_stack`` (cpu_op ancestor names, outermost first) for the given launches."""
    ev = trace.scan()
    launches = ev.filter(pl.col("row").is_in(pl.Series(launch_rows.astype(np.uint32)).implode()))
    threads = launches.select("pid", "tid").unique()
    cpu = (
        ev.filter(pl.col("kind").is_in([k for k in CPU_KINDS if k != "memory"]) & pl.col("dur_ns").is_not_null())
        .select("row", "pid", "tid", "ts_ns", "end_ns", "kind", "name")
        .join(threads, on=["pid", "tid"])
        .collect()
    )
    tree = nest(cpu.select("row", "pid", "tid", "ts_ns", "end_ns"))
    size = int(ev.select(pl.col("row").max()).collect().item()) + 1
    parent_of = np.full(size, -1, np.int64)
    parent_of[tree["row"].to_numpy()] = tree["parent_row"].fill_null(-1).to_numpy()
    is_op = np.zeros(size, bool)
    is_op[cpu.filter(pl.col("kind") == "cpu_op")["row"].to_numpy()] = True
    # walk up one level at a time for every launch at once
    levels: list[np.ndarray] = []
    a = parent_of[launch_rows.astype(np.int64)]
    while (a >= 0).any():
        levels.append(a.copy())
        a = np.where(a >= 0, parent_of[np.maximum(a, 0)], -1)
    if not levels:
        return pl.DataFrame(
            {"launch_row": launch_rows, "op_stack": [[] for _ in launch_rows]},
            schema={"launch_row": pl.Int64, "op_stack": pl.List(pl.String)},
        )
    anc = np.stack(levels[::-1], axis=1)  # outermost first
    li, lv = np.nonzero((anc >= 0) & is_op[np.maximum(anc, 0)])
    rows = anc[li, lv]
    flat = pl.DataFrame({"i": li, "lv": lv, "row": rows.astype(np.uint32)}).join(
        cpu.select("row", pl.col("name").cast(pl.String)), on="row", how="left"
    )
    stacks = flat.sort(["i", "lv"]).group_by("i", maintain_order=True).agg(pl.col("name").alias("op_stack"))
    out = pl.DataFrame({"i": np.arange(launch_rows.size), "launch_row": launch_rows.astype(np.int64)}).join(
        stacks, on="i", how="left"
    )
    return out.select("launch_row", pl.col("op_stack").fill_null(pl.lit([], pl.List(pl.String))))


def cupti_table(trace: Trace) -> tuple[pl.DataFrame | None, str | None]:
    """The counter table of one rank, or ``(None, reason)``."""
    ev = trace.scan()
    ranges = (
        ev.filter(pl.col("cat") == CUPTI_RANGE_CATEGORY)
        .select("row", "name", "ts_ns", "dur_ns")
        .collect()
        .sort("ts_ns", maintain_order=True)
    )
    if ranges.height == 0:
        return None, f"no {CUPTI_RANGE_CATEGORY} events (CUPTI range-profiler mode was off)"
    launch_names = [n for n in trace.distinct_names() if n.startswith("cudaLaunchKernel")]
    launches = (
        ev.filter((pl.col("kind") == "cuda_runtime") & pl.col("name").is_in(launch_names))
        .select("row", "ts_ns")
        .collect()
        .sort("ts_ns", maintain_order=True)
    )
    if launches.height != ranges.height:
        return None, f"{ranges.height} counter ranges but {launches.height} cudaLaunchKernel calls: cannot pair them"
    raw = trace.raw_events(ranges["row"])
    counters = pl.DataFrame([e.get("args", {}) or {} for e in raw], infer_schema_length=None)
    lrows = launches["row"].to_numpy().astype(np.int64)
    stacks = _op_stacks(trace, lrows)
    base = pl.DataFrame(
        {
            "rank": pl.Series([trace.rank] * ranges.height, dtype=pl.Int32),
            "kernel": ranges["name"].cast(pl.String),
            "ts_ns": ranges["ts_ns"],
            "dur_ns": ranges["dur_ns"],
            "row": ranges["row"],
            "launch_row": lrows,
        }
    ).with_columns(stacks["op_stack"])
    base = base.with_columns(
        pl.col("op_stack").list.first().fill_null("").alias("top_level_op"),
        pl.col("op_stack").list.last().fill_null("").alias("bottom_level_op"),
    )
    out = pl.concat([base, counters], how="horizontal") if counters.width else base
    present = [c for c in SASS_FLOP_WEIGHTS if c in out.columns]
    if present:
        out = out.with_columns(
            pl.sum_horizontal([pl.col(c).fill_null(0) * w for c, w in SASS_FLOP_WEIGHTS.items() if c in present]).alias(
                "flops"
            )
        )
    return out, None


def cupti_counters(run: Run, *, ranks: Sequence[int] | None = None) -> AnalysisResult:
    """CUPTI counters per kernel with their operator stacks, per rank."""
    sess = Session.of(run, ranks)
    rs = sess.ranks
    parts, notes = [], []
    per = sess.map(cupti_table)
    for r in rs:
        t, why = per[r]
        if t is None:
            notes.append(f"rank {r}: {why}")
        else:
            parts.append(t)
    table = (
        pl.concat(parts, how="diagonal_relaxed")
        if parts
        else pl.DataFrame(
            schema={
                "rank": pl.Int32,
                "kernel": pl.String,
                "op_stack": pl.List(pl.String),
                "top_level_op": pl.String,
                "bottom_level_op": pl.String,
            }
        )
    )
    if parts:
        by_op = (
            table.group_by("rank", "bottom_level_op")
            .agg(
                pl.len().alias("kernels"),
                (pl.col("dur_ns").sum() / 1e3).alias("dur_us"),
                *([pl.col("flops").sum().alias("flops")] if "flops" in table.columns else []),
            )
            .sort(["rank", "kernels", "bottom_level_op"], descending=[False, True, False])
        )
    else:
        by_op = pl.DataFrame(
            schema={"rank": pl.Int32, "bottom_level_op": pl.String, "kernels": pl.UInt32, "dur_us": pl.Float64}
        )
    return AnalysisResult({"by_op": by_op, "kernels": table}, notes)


register(
    AnalysisSpec(
        name="cupti-counters",
        func=cupti_counters,
        help="CUPTI range-profiler counters per kernel with the operators that launched it",
    )
)
