"""``bubble``: pipeline-parallel bubble per stage from the send/recv structure.

A rank that runs point-to-point ``send``/``recv`` (or ``send_recv`` kernels that no CPU op names as
another collective) is a pipeline stage. Per stage and step window (the one step window,
:func:`ranksight.views.gpu_work.step_windows`, as in ``temporal --per-step`` and ``exposed-comm``;
``step_us`` is its length, the same number as theirs):
- ``compute`` = union of COMPUTE kernels (CPU ops on CPU-only ranks);
- ``bubble = step − compute``: the stage does not compute;
  ``in_p2p`` = the part of it spent inside send/recv (waiting for the neighbour stage),
  ``outside_p2p`` = the rest (not GPU idle: other communication or copies may run in it);
  ``bubble_fraction = bubble / step``;
- expectation for a synchronous schedule (GPipe / 1F1B without interleaving):
  ``(p − 1) / (m + p − 1)`` with ``p`` stages and ``m`` microbatches. ``p`` = ``--stages`` or the
  number of ranks with send/recv; ``m`` = ``--microbatches`` or, per step, half the smallest number
  of send/recv ops of a stage (an end stage sends or receives once per microbatch forward and once
  backward) — an inference, stated in the output.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, Option, register
from ranksight.analyses._session import Session
from ranksight.analyses.collectives import rank_collectives, seed_collectives
from ranksight.views.comm_intervals import clip_union, compute_intervals, length, step_windows
from ranksight.views.intervals import intersect, subtract

if TYPE_CHECKING:
    from ranksight.model.run import Run
    from ranksight.model.trace import Trace

__all__ = ["bubble", "rank_bubble", "expected_bubble"]

P2P = ("send", "recv", "send_recv")
SCHEMA = {
    "rank": pl.Int32,
    "step": pl.Int32,
    "step_us": pl.Float64,
    "compute_us": pl.Float64,
    "bubble_us": pl.Float64,
    "in_p2p_us": pl.Float64,
    "outside_p2p_us": pl.Float64,
    "bubble_fraction": pl.Float64,
    "p2p_ops": pl.Int64,
}


def expected_bubble(stages: int, microbatches: int) -> float:
    """``(p − 1) / (m + p − 1)``."""
    return (stages - 1) / (microbatches + stages - 1)


def rank_bubble(trace: Trace) -> pl.DataFrame:
    """Bubble per step of one rank (schema :data:`SCHEMA`); empty when it runs no send/recv."""
    coll = rank_collectives(trace)
    p2p = coll.filter(pl.col("coll_type").is_in(list(P2P)))
    if p2p.height == 0:
        return pl.DataFrame(schema=SCHEMA)
    ps, pe = p2p["start_ns"].to_numpy(), p2p["end_ns"].to_numpy()
    ks, ke, _ = compute_intervals(trace, coll)
    rows = []
    for step, lo, hi in step_windows(trace):
        comp = clip_union(ks, ke, lo, hi)
        win = (np.array([lo], dtype=np.int64), np.array([hi], dtype=np.int64))
        gap = subtract(win, comp)
        in_p2p = length(intersect(gap, clip_union(ps, pe, lo, hi)))
        b = length(gap)
        n = int(((ps >= lo) & (ps < hi)).sum())
        rows.append(
            {
                "rank": trace.rank,
                "step": step,
                "step_us": (hi - lo) / 1e3,
                "compute_us": length(comp) / 1e3,
                "bubble_us": b / 1e3,
                "in_p2p_us": in_p2p / 1e3,
                "outside_p2p_us": (b - in_p2p) / 1e3,
                "bubble_fraction": b / (hi - lo) if hi > lo else None,
                "p2p_ops": n,
            }
        )
    return pl.DataFrame(rows, schema=SCHEMA)


def bubble(
    run: Run, *, ranks: Sequence[int] | None = None, stages: int | None = None, microbatches: int | None = None
) -> AnalysisResult:
    """Bubble per stage and step, its fraction, and the (p − 1)/(m + p − 1) expectation."""
    sess = Session.of(run, ranks)
    rs = sess.ranks
    seed_collectives(sess)  # many small ranks: one pass over all of them
    out = sess.map(rank_bubble)
    frames = [out[r] for r in rs]
    per = pl.concat(frames) if frames else pl.DataFrame(schema=SCHEMA)
    notes: list[str] = []
    if per.height == 0:
        notes.append("no point-to-point send/recv found: not a pipeline-parallel trace (no stage structure to measure)")
        return AnalysisResult({"per_stage_step": per, "per_step": pl.DataFrame()}, notes)
    p = stages or per["rank"].n_unique()
    m_inferred = per.group_by("step").agg((pl.col("p2p_ops").min() // 2).alias("m_inferred"))
    steps = (
        per.group_by("step")
        .agg(
            pl.col("rank").n_unique().alias("stages_seen"),
            pl.col("bubble_fraction").mean().alias("mean_bubble_fraction"),
            pl.col("bubble_fraction").max().alias("max_bubble_fraction"),
            pl.col("in_p2p_us").sum().alias("in_p2p_us"),
            pl.col("outside_p2p_us").sum().alias("outside_p2p_us"),
        )
        .join(m_inferred, on="step", how="left", nulls_equal=True)
    )
    m_expr = pl.lit(microbatches, dtype=pl.Int64) if microbatches else pl.col("m_inferred").cast(pl.Int64)
    steps = steps.with_columns(pl.lit(p, dtype=pl.Int64).alias("stages"), m_expr.alias("microbatches"))
    steps = (
        steps.with_columns(
            pl.when(pl.col("microbatches") > 0)
            .then((pl.col("stages") - 1) / (pl.col("microbatches") + pl.col("stages") - 1))
            .alias("expected_fraction")
        )
        .with_columns((pl.col("mean_bubble_fraction") - pl.col("expected_fraction")).alias("excess_fraction"))
        .sort("step", nulls_last=True)
    )
    notes.append(
        f"stages p = {p} ({'given' if stages else 'ranks with send/recv'}); microbatches m = "
        + (
            f"{microbatches} (given)"
            if microbatches
            else "half the fewest send/recv ops of a stage per step (inferred)"
        )
        + "; expected bubble fraction (p-1)/(m+p-1)"
    )
    if len(rs) < 2:
        notes.insert(0, "cross-rank analysis needs several ranks: only one stage loaded")
    return AnalysisResult({"per_stage_step": per.sort(["step", "rank"], nulls_last=True), "per_step": steps}, notes)


register(
    AnalysisSpec(
        name="bubble",
        func=bubble,
        help="pipeline-parallel bubble per stage and step from send/recv, with the (p-1)/(m+p-1) expectation",
        options=(
            Option("stages", int, None, "pipeline stages p (default: ranks with send/recv)"),
            Option("microbatches", int, None, "microbatches m per step (default: inferred from send/recv counts)"),
        ),
    )
)
