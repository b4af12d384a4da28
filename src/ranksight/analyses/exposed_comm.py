"""``exposed-comm``: per rank and step, the communication time not hidden under computation.

Definitions (per rank, per step window; intervals clipped to the window, unions per set):
- window: the one step window (:func:`ranksight.views.gpu_work.step_windows`: the ProfilerStep
  extended to the GPU work it launched, contiguous; ``step_us`` is ``temporal --per-step``'s
  ``step_time_us``); the whole trace when there are no steps;
- ``comm``: union of the rank's collectives (GPU collective kernels, gloo collectives);
- ``compute``: union of COMPUTE kernels (memcpy/memset excluded) on GPU ranks; on CPU-only ranks the
  ``cpu_op`` intervals of threads that run no collective, collective ops (``c10d::*``,
  ``record_param_comms``, ``nccl:*``, ``gloo:*``) excluded;
- ``hidden = |comm ∩ compute|``, ``exposed = |comm| − hidden``,
  ``overlap_efficiency = hidden / |comm|`` (the one definition of overlap efficiency,
  ``docs/metrics.md``; ``overlap``'s ``comp_comm_overlap_pctg`` is the same share over the GPU span,
  in %, and its ``exposed_comm_us`` the same exposed time over the GPU span);
- ``exposed_wait`` = exposed time spent waiting for the last peer (the participant's
  ``[start, last start)`` from the matched collectives; needs several ranks),
  ``exposed_transfer = exposed − exposed_wait``;
- ``perfect_overlap_step = step − exposed``: the step with every collective hidden (an estimate:
  it assumes the exposed communication was on the critical path).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, register
from ranksight.analyses._session import Session
from ranksight.analyses.collectives import ALIGN_OPTION, comm_data, rank_collectives
from ranksight.views.comm_intervals import clip_union, compute_intervals, length, step_windows
from ranksight.views.intervals import intersect, subtract
from ranksight.views.rank_slices import RankSlices

if TYPE_CHECKING:
    from ranksight.model.run import Run
    from ranksight.model.trace import Trace

__all__ = ["exposed_comm", "rank_exposed_comm"]

SCHEMA = {
    "rank": pl.Int32,
    "step": pl.Int32,
    "step_us": pl.Float64,
    "compute_us": pl.Float64,
    "comm_us": pl.Float64,
    "hidden_us": pl.Float64,
    "exposed_us": pl.Float64,
    "exposed_wait_us": pl.Float64,
    "exposed_transfer_us": pl.Float64,
    "overlap_efficiency": pl.Float64,
    "perfect_overlap_step_us": pl.Float64,
}


def rank_exposed_comm(trace: Trace, waits: pl.DataFrame | None = None) -> tuple[pl.DataFrame, str]:
    """Per-step exposed communication of one rank (schema :data:`SCHEMA`) and the compute basis.

    ``waits`` (``start_ns``, ``end_ns`` in this rank's own clock) are its waiting intervals."""
    coll = rank_collectives(trace)
    cs, ce = coll["start_ns"].to_numpy(), coll["end_ns"].to_numpy()
    ks, ke, basis = compute_intervals(trace, coll)
    ws = waits["start_ns"].to_numpy() if waits is not None and waits.height else np.empty(0, np.int64)
    we = waits["end_ns"].to_numpy() if waits is not None and waits.height else np.empty(0, np.int64)
    rows = []
    for step, lo, hi in step_windows(trace):
        comm = clip_union(cs, ce, lo, hi)
        comp = clip_union(ks, ke, lo, hi)
        hidden = length(intersect(comm, comp))
        exposed_iv = subtract(comm, comp)
        exposed = length(exposed_iv)
        wait = length(intersect(exposed_iv, clip_union(ws, we, lo, hi))) if waits is not None else None
        c = length(comm)
        rows.append(
            {
                "rank": trace.rank,
                "step": step,
                "step_us": (hi - lo) / 1e3,
                "compute_us": length(comp) / 1e3,
                "comm_us": c / 1e3,
                "hidden_us": hidden / 1e3,
                "exposed_us": exposed / 1e3,
                "exposed_wait_us": wait / 1e3 if wait is not None else None,
                "exposed_transfer_us": (exposed - wait) / 1e3 if wait is not None else None,
                "overlap_efficiency": hidden / c if c else None,
                "perfect_overlap_step_us": (hi - lo - exposed) / 1e3,
            }
        )
    return pl.DataFrame(rows, schema=SCHEMA), basis


def _rank_exposed(trace: Trace, waits: RankSlices | None) -> tuple[pl.DataFrame, str]:
    return rank_exposed_comm(trace, waits[trace.rank] if waits is not None else None)


def exposed_comm(run: Run, *, ranks: Sequence[int] | None = None, no_align: bool = False) -> AnalysisResult:
    """Exposed communication, overlap efficiency and the perfect-overlap step time per rank and step."""
    sess = Session.of(run, ranks)
    cd = comm_data(sess, align=not no_align)
    multi = len(cd.ranks) >= 2
    waits = None
    if multi:  # each rank's waiting intervals, back in its own clock
        p = cd.participants.filter(pl.col("wait_ns") > 0).join(cd.offsets.select("rank", "offset_ns"), on="rank")
        waits = p.select(
            "rank",
            (pl.col("start_ns") + pl.col("offset_ns")).alias("start_ns"),
            (pl.col("start_ns") + pl.col("wait_ns") + pl.col("offset_ns")).alias("end_ns"),
        )
    res = sess.map(_rank_exposed, cd.ranks, waits=RankSlices(waits) if waits is not None else None)
    frames = [res[r][0] for r in cd.ranks]
    bases = {res[r][1] for r in cd.ranks}
    per = pl.concat(frames) if frames else pl.DataFrame(schema=SCHEMA)
    summary = (
        per.group_by("rank")
        .agg(
            pl.len().alias("steps"),
            pl.col("step_us").sum(),
            pl.col("comm_us").sum(),
            pl.col("exposed_us").sum(),
            pl.when(pl.col("exposed_wait_us").is_not_null().any())
            .then(pl.col("exposed_wait_us").sum())
            .alias("exposed_wait_us"),
            pl.col("perfect_overlap_step_us").sum(),
        )
        .with_columns(
            (1 - pl.col("exposed_us") / pl.col("comm_us")).alias("overlap_efficiency"),
            (pl.col("exposed_us") / pl.col("step_us")).alias("exposed_share_of_step"),
        )
        .sort("rank")
    )
    notes = [n for n in cd.notes if not n.startswith(("times in", "cross-rank"))]
    notes.append(
        f"compute = {', '.join(sorted(bases))}; exposed = comm − compute; perfect overlap step = step − exposed "
        "(assumes exposed comm was on the critical path)"
    )
    if not multi:
        notes.insert(0, "one rank loaded: exposed_wait (waiting for peers) needs several ranks; the rest is per rank")
    if per.filter(pl.col("comm_us") > 0).height == 0:
        notes.append("no communication in these traces")
    return AnalysisResult({"per_step": per, "per_rank": summary}, notes)


register(
    AnalysisSpec(
        name="exposed-comm",
        func=exposed_comm,
        help="per rank and step: communication not hidden under compute, overlap efficiency, perfect-overlap step time",
        options=(ALIGN_OPTION,),
    )
)
