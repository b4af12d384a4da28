"""Profiler steps per rank: CPU span, GPU span of the work they launched, kernel count.

Definitions (per rank; ``trace.steps``): a step is a CPU ``ProfilerStep#N`` event (cpu_op or
user_annotation). ``cpu_start_ns``/``cpu_dur_us`` are its span; ``gpu_start_ns``/``gpu_end_ns``
the first start and last end of the GPU work launched from inside it (through the launch's
correlation), ``gpu_span_us`` their difference; ``kernels`` the kernels launched in it;
``incomplete`` is true when a step has fewer than 80 % of the previous step's kernels (typically
the last, cut-off step). HTA's facade drops the last step by default; this analysis keeps it.
These are parts of a step, not the step time (``temporal --per-step`` ``step_time_us``, the one
step window, ``docs/metrics.md``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, register
from ranksight.analyses._session import Session

if TYPE_CHECKING:
    from ranksight.model.run import Run
    from ranksight.model.trace import Trace

__all__ = ["step_table", "steps"]

_SCHEMA = {
    "rank": pl.Int32,
    "step": pl.Int32,
    "name": pl.String,
    "cpu_start_ns": pl.Int64,
    "cpu_dur_us": pl.Float64,
    "gpu_start_ns": pl.Int64,
    "gpu_end_ns": pl.Int64,
    "gpu_span_us": pl.Float64,
    "kernels": pl.Int64,
    "incomplete": pl.Boolean,
}


def step_table(trace: Trace) -> pl.DataFrame:
    """One row per ProfilerStep of one rank."""
    st = trace.steps
    if st.height == 0:
        return pl.DataFrame(schema=_SCHEMA)
    return st.select(
        pl.lit(trace.rank, pl.Int32).alias("rank"),
        "step",
        "name",
        pl.col("start_ns").alias("cpu_start_ns"),
        ((pl.col("end_ns") - pl.col("start_ns")) / 1e3).alias("cpu_dur_us"),
        "gpu_start_ns",
        "gpu_end_ns",
        ((pl.col("gpu_end_ns") - pl.col("gpu_start_ns")) / 1e3).alias("gpu_span_us"),
        pl.col("kernel_count").alias("kernels"),
        "incomplete",
    ).cast(_SCHEMA)  # type: ignore[arg-type]


def steps(run: Run, *, ranks: Sequence[int] | None = None) -> AnalysisResult:
    """Profiler steps of every selected rank."""
    sess = Session.of(run, ranks)
    per = sess.map(step_table)
    parts = list(per.values())
    table = pl.concat(parts) if parts else pl.DataFrame(schema=_SCHEMA)
    notes = []
    none = [r for r, p in per.items() if p.height == 0]
    if none:
        notes.append(f"rank(s) {none}: no ProfilerStep events (profiler run without schedule/step())")
    return AnalysisResult({"steps": table}, notes)


register(AnalysisSpec(name="steps", func=steps, help="ProfilerSteps per rank: CPU span, GPU span and kernels launched"))
