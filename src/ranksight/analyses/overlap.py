"""Communication / computation overlap per rank over the GPU span (HTA's comm-comp overlap).

Definitions, per rank (GPU work as in :mod:`ranksight.views.gpu_work`; ns, reported in µs; the
window is the rank's GPU span, not the step windows of ``exposed-comm``):

- ``C`` = length of the union of COMPUTATION intervals, ``M`` = of COMMUNICATION intervals,
  ``T`` = of both together; ``overlap = C + M − T`` (time when both run);
- ``comp_comm_overlap_pctg = round(100 × overlap / M, 2)``: the share of communication time
  overlapped by computation (HTA's number; NaN without communication). This is ranksight's one
  definition of overlap efficiency (``exposed-comm``'s ``overlap_efficiency = hidden / comm``,
  0–1, over the step windows), in % over the GPU span;
- ``exposed_comm_us = M − overlap``: communication time not hidden by computation (the one
  definition of exposed communication, over the GPU span; ``exposed-comm``'s ``exposed_us`` over
  the step windows);
- ``hidden_share_of_shorter = overlap / min(C, M)`` (= ``1 − (T − max(C, M)) / (C + M − max(C, M))``),
  0–1: the share of the *shorter* of compute and communication that runs under the other (NaN
  when either is 0). Not an overlap efficiency: on a rank with little compute it is high while
  most communication is exposed. (Named ``overlap_efficiency`` before issue 17.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, Option, register
from ranksight.analyses._session import Session
from ranksight.views.gpu_work import gpu_work, gpu_work_of, intervals_by_type, intervals_of, merge, pct, segments

if TYPE_CHECKING:
    from ranksight.model.run import Run
    from ranksight.model.trace import Trace

__all__ = ["overlap_rank", "overlap", "shorter_hidden"]

_SCHEMA = {
    "rank": pl.Int64,
    "compute_us": pl.Float64,
    "comm_us": pl.Float64,
    "union_us": pl.Float64,
    "overlap_us": pl.Float64,
    "exposed_comm_us": pl.Float64,
    "comp_comm_overlap_pctg": pl.Float64,
    "hidden_share_of_shorter": pl.Float64,
}


def shorter_hidden(c: float, m: float, t: float) -> float:
    """``1 − (T − max(C, M)) / (C + M − max(C, M))`` = ``overlap / min(C, M)``; NaN when ``min(C, M) == 0``."""
    hi = max(c, m)
    lo = c + m - hi
    if lo <= 0:
        return float("nan")
    return 1.0 - (t - hi) / lo


def overlap_rank(trace: Trace, *, hta_compat: bool = False) -> pl.DataFrame:
    """One row: compute, communication, their union and overlap, exposed communication, HTA's
    percentage, and the hidden share of the shorter activity (all over the GPU span)."""
    g = gpu_work(trace, hta_compat=hta_compat)
    iv = intervals_by_type(g, [])
    return pl.DataFrame(
        [_overlap_row(trace.rank, g.height > 0, lambda t: intervals_of(iv, (t,)), hta_compat)],
        schema=_SCHEMA,
        orient="row",
    )


def _overlap_row(
    rank: int, has_work: bool, of: Callable[[str], tuple[np.ndarray, np.ndarray]], hta_compat: bool
) -> tuple[Any, ...]:
    """:func:`overlap_rank`'s row of one rank whose intervals by kernel type ``of`` gives."""
    if not has_work:  # no GPU work (CPU-only trace): nothing to compute, not zeros
        return (rank, *([None] * (len(_SCHEMA) - 1)))
    groups = {}
    lengths = {}
    for bit, ktype in ((1, "COMPUTATION"), (2, "COMMUNICATION")):
        s, e = merge(*of(ktype), hta_compat=hta_compat)
        groups[bit] = (s, e)
        lengths[bit] = int((e - s).sum())
    both = segments(groups).get(3, 0)
    c, m = lengths[1], lengths[2]
    t = c + m - both
    return (
        rank,
        c / 1e3,
        m / 1e3,
        t / 1e3,
        both / 1e3,
        (m - both) / 1e3,
        float(pct(both, m)),
        shorter_hidden(c, m, t),
    )


def overlap_of(work: pl.DataFrame, ranks: Sequence[int]) -> pl.DataFrame:
    """:func:`overlap_rank` (ranksight's definitions) of every rank of stacked GPU work (with a
    ``rank`` column), in ``ranks``' order: partitioned once, then numpy per rank."""
    iv = intervals_by_type(work, ["rank"])
    present = set(work["rank"].unique().to_list()) if work.height else set()
    rows = [
        _overlap_row(r, r in present, lambda t, r=r: intervals_of(iv, (r, t)), False)  # type: ignore[misc]
        for r in ranks
    ]
    return pl.DataFrame(rows, schema=_SCHEMA, orient="row")


def overlap(run: Run, *, ranks: Sequence[int] | None = None, hta_compat: bool = False) -> AnalysisResult:
    """Communication/computation overlap per rank over the GPU span."""
    sess = Session.of(run, ranks)
    stacked = None if hta_compat else sess.stacked_events()
    if stacked is not None:  # many small ranks: one pass over all of them (equal to rank by rank)
        work = sess.memo(("gpu_work_of",), lambda: gpu_work_of(stacked.lazy(), by=["rank"]))
        df = overlap_of(work, sess.ranks)
    else:
        df = pl.concat(list(sess.map(overlap_rank, hta_compat=hta_compat).values()))
    notes = []
    no_gpu = df.filter(pl.col("comm_us").is_null())["rank"].to_list()
    if no_gpu:
        notes.append(f"rank(s) {no_gpu} have no GPU work (CPU-only trace): no overlap")
    no_comm = df.filter(pl.col("comm_us") == 0)["rank"].to_list()
    if no_comm:
        notes.append(f"rank(s) {no_comm} have no communication kernel: overlap percentage is NaN")
    return AnalysisResult({"overlap": df}, notes)


register(
    AnalysisSpec(
        name="overlap",
        func=overlap,
        help="communication overlapped by computation per rank over the GPU span (HTA's comm-comp overlap), "
        "exposed communication",
        options=(Option("hta_compat", bool, False, "HTA v0.6 definitions (name regexes, µs rounding)", flag=True),),
    )
)
