"""Potential stragglers by late start of the dominant communication kernel (HTA's method).

Definitions (over all selected ranks and steps; HTA's ``find_stragglers_with_late_start_comm_kernels``,
``hta-definitions.md`` §3.12):

1. events: every timed event with a step (CPU events by the step containing their start, GPU
   work through its launch) in the selected steps; ``t_min`` = first start over all ranks,
   ``mean_step`` = (last end − ``t_min``) / number of steps;
2. communication kernels: kernels classified COMMUNICATION (NCCL ``ncclKernel_*`` and
   ``ncclDevKernel_*``, RCCL, custom collectives, kernels with collective args); with
   ``hta_names`` only names starting with ``ncclKernel`` and streams > 0 (HTA's rule); kept when
   ``dur >= 0.01 × mean_step``;
3. per (rank, stream, step, kernel name) the last such kernel (in trace order);
   ``normalized_start`` = (ts − ``t_min``) / ``mean_step``, ``duration`` = dur / ``mean_step``;
4. the (stream, name) with the largest mean over steps of the cross-rank standard deviation (ddof 1)
   of ``duration`` is the *candidate* kernel;
5. per step, ranks whose candidate ``normalized_start`` is at least the ``candidates``-th largest
   are counted late (ties included); ranks sorted by that count (then rank) give the stragglers:
   the first ``candidates`` of them.

A single rank, no step, or no communication kernel leave the question without an answer: the
result is empty with a note (HTA raises).
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

__all__ = ["late_start_metric", "late_start"]

MIN_NORMALIZED_DURATION = 0.01

_METRIC_SCHEMA = {
    "rank": pl.Int32,
    "step": pl.Int32,
    "stream": pl.Int64,
    "kernel": pl.String,
    "normalized_start": pl.Float64,
    "duration": pl.Float64,
}
_COUNT_SCHEMA = {"rank": pl.Int32, "late_steps": pl.Int64, "straggler": pl.Boolean}


def _rank_events(trace: Trace, steps: Sequence[int] | None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One rank's events in steps (``gpu_user_annotation`` excepted): the steps seen, first start
    and last end (one row), and the GPU work (where the candidate kernels are), without copying
    the other events."""
    ev = trace.scan().filter(
        pl.col("step").is_not_null() & pl.col("dur_ns").is_not_null() & (pl.col("kind") != "gpu_user_annotation")
    )
    if steps is not None:
        ev = ev.filter(pl.col("step").is_in(list(steps)))
    span = ev.select(
        pl.col("step").unique().implode().alias("steps"),
        pl.col("ts_ns").min().alias("t_min"),
        pl.col("end_ns").max().alias("t_max"),
        pl.len().alias("n"),
    )
    gpu = ev.filter(pl.col("kind").is_in(list(GPU_KINDS))).select(
        pl.lit(trace.rank, pl.Int32).alias("rank"),
        "row",
        "kind",
        "kernel_class",
        pl.col("name").cast(pl.String),
        "stream",
        "ts_ns",
        "dur_ns",
        "end_ns",
        "step",
    )
    s, g = pl.collect_all([span, gpu])
    return s, g


def _events(sess: Session, steps: Sequence[int] | None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Over every rank: ``span`` (steps seen, first start, last end) and ``gpu`` (GPU work)."""
    if not sess.ranks:
        return pl.DataFrame(), pl.DataFrame()
    per = sess.map(_rank_events, steps=steps)
    span = pl.concat([per[r][0] for r in sess.ranks]).filter(pl.col("n") > 0)
    return span, pl.concat([per[r][1] for r in sess.ranks])


def late_start_metric(
    run: Run, *, ranks: Sequence[int] | None = None, steps: Sequence[int] | None = None, hta_names: bool = False
) -> tuple[pl.DataFrame, dict[str, object]]:
    """Steps 1–4: the candidate kernel's normalized start per (rank, step), plus run facts."""
    sess = Session.of(run, ranks)
    rs = sess.ranks
    span, ev = _events(sess, steps)
    facts: dict[str, object] = {"ranks": len(rs)}
    if span.height == 0:
        return pl.DataFrame(schema=_METRIC_SCHEMA), facts
    step_ids = span["steps"].explode().unique().drop_nulls()
    n_steps = step_ids.len()
    t_min = int(span["t_min"].min())  # type: ignore[arg-type]
    mean_step = (int(span["t_max"].max()) - t_min) / n_steps  # type: ignore[arg-type]
    facts.update(steps=sorted(step_ids.to_list()), mean_step_us=mean_step / 1e3)
    if hta_names:
        comm = ev.filter(
            (pl.col("kind").is_in(list(GPU_KINDS)))
            & pl.col("name").str.starts_with("ncclKernel")
            & (pl.col("stream") > 0)
            & (pl.col("step") > 0)
        )
    else:
        comm = ev.filter((pl.col("kind") == "kernel") & (pl.col("kernel_class") == "COMMUNICATION"))
    comm = comm.filter(pl.col("dur_ns") >= MIN_NORMALIZED_DURATION * mean_step)
    if comm.height == 0:
        return pl.DataFrame(schema=_METRIC_SCHEMA), facts
    last = comm.sort(["rank", "row"]).group_by(["rank", "stream", "step", "name"], maintain_order=True).last()
    last = last.with_columns(
        ((pl.col("ts_ns") - t_min) / mean_step).alias("normalized_start"),
        (pl.col("dur_ns") / mean_step).alias("duration"),
    )
    spread = (
        last.group_by("stream", "step", "name")
        .agg(pl.col("duration").std().alias("__sd"))
        .group_by("stream", "name")
        .agg(pl.col("__sd").mean().alias("__mean_sd"))
        .filter(pl.col("__mean_sd").is_not_null() & pl.col("__mean_sd").is_not_nan())
        .sort(["__mean_sd", "stream", "name"], descending=[True, False, False])
    )
    if spread.height == 0:
        return pl.DataFrame(schema=_METRIC_SCHEMA), facts
    stream, name = spread.row(0)[:2]
    facts.update(candidate_stream=stream, candidate_kernel=name)
    metric = (
        last.filter((pl.col("stream") == stream) & (pl.col("name") == name))
        .select("rank", "step", "stream", pl.col("name").alias("kernel"), "normalized_start", "duration")
        .sort(["step", "rank"])
    )
    return metric.cast(_METRIC_SCHEMA), facts  # type: ignore[arg-type]


def straggler_counts(metric: pl.DataFrame, candidates: int = 2) -> pl.DataFrame:
    """Step 5: per rank, in how many steps it starts the candidate kernel among the latest ``candidates``."""
    k = max(1, candidates)
    if metric.height == 0:
        return pl.DataFrame(schema=_COUNT_SCHEMA)
    thr = metric.group_by("step").agg(
        pl.col("normalized_start").sort(descending=True).get(pl.min_horizontal(pl.len() - 1, k - 1)).alias("__thr")
    )
    late = metric.join(thr, on="step").with_columns(
        (pl.col("normalized_start") >= pl.col("__thr")).cast(pl.Int64).alias("__late")
    )
    counts = (
        late.group_by("rank")
        .agg(pl.col("__late").sum().alias("late_steps"))
        .sort(["late_steps", "rank"], descending=[True, False])
    )
    return counts.with_columns((pl.int_range(0, pl.len()) < k).alias("straggler")).cast(_COUNT_SCHEMA)  # type: ignore[arg-type]


def late_start(
    run: Run,
    *,
    ranks: Sequence[int] | None = None,
    steps: Sequence[int] | None = None,
    candidates: int = 2,
    hta_names: bool = False,
) -> AnalysisResult:
    """Potential stragglers: ranks that start the dominant communication kernel last."""
    metric, facts = late_start_metric(run, ranks=ranks, steps=steps, hta_names=hta_names)
    counts = straggler_counts(metric, candidates)
    notes = []
    if facts["ranks"] == 1:
        notes.append("one rank only: a late start needs several ranks to compare (HTA raises here)")
    elif "steps" not in facts:
        notes.append("no ProfilerStep in the selected steps: late start is measured per step (HTA raises here)")
    elif "candidate_kernel" not in facts:
        what = "ncclKernel_* kernels" if hta_names else "communication kernels"
        notes.append(f"no {what} of at least 1% of a step on two or more ranks: no straggler can be named")
    else:
        notes.append(f"candidate kernel (stream {facts['candidate_stream']}): {facts['candidate_kernel']}")
    return AnalysisResult({"stragglers": counts, "metric": metric}, notes)


register(
    AnalysisSpec(
        name="late-start",
        func=late_start,
        help="HTA's potential stragglers: ranks that start the dominant communication kernel last (NCCL, RCCL)",
        options=(
            Option("steps", int, None, "only this ProfilerStep (repeatable)", multiple=True),
            Option("candidates", int, 2, "stragglers to name"),
            Option("hta_names", bool, False, "HTA's rule: ncclKernel* names only, streams > 0, steps > 0", flag=True),
        ),
    )
)
