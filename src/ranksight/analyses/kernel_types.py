"""GPU time by kernel type, with the overlap segments (HTA's kernel-type breakdown).

Definition, per rank (GPU work as in :mod:`ranksight.views.gpu_work`; OTHER rows ignored):

- the intervals of each type (COMPUTATION, COMMUNICATION and, with ``include_memory``, MEMORY)
  are merged separately;
- the timeline is cut at every merged start and end; each piece where at least one type runs is
  labelled with the set of running types in that order, joined by ``" overlapping "``, e.g.
  ``COMPUTATION overlapping COMMUNICATION`` (see :func:`~ranksight.views.gpu_work.segments`; at
  equal timestamps ends sort before starts, so no zero-length piece gets a label; with
  ``hta_compat``, HTA's order and its zero-length labels: :func:`~ranksight.views.gpu_work.hta_segments`);
- ``sum_us`` per label is summed over the selected ranks; ``pct = round(100 × sum / Σ sums, 1)``;
  rows sorted by sum, largest first. The pieces of one rank are disjoint, so Σ sums per rank is
  the union of its GPU work of these types.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, Option, register
from ranksight.analyses._session import Session
from ranksight.views.gpu_work import (
    TYPE_BITS,
    gpu_work,
    gpu_work_of,
    hta_segments,
    intervals_by_type,
    intervals_of,
    merge,
    parse_bool,
    pct,
    segments,
)

if TYPE_CHECKING:
    from ranksight.model.run import Run
    from ranksight.model.trace import Trace

__all__ = ["kernel_type_rank", "kernel_types", "label_of"]

_SCHEMA = {"rank": pl.Int64, "kernel_type": pl.String, "sum_ns": pl.Int64}


def label_of(value: int) -> str:
    """The label of a set of running types given as bits (1 COMPUTATION, 2 COMMUNICATION, 4 MEMORY)."""
    return " overlapping ".join(t for t, b in TYPE_BITS.items() if value & b)


def kernel_type_rank(trace: Trace, *, include_memory: bool = True, hta_compat: bool = False) -> pl.DataFrame:
    """Time per overlap label on one rank: ``rank, kernel_type, sum_ns``."""
    iv = intervals_by_type(gpu_work(trace, hta_compat=hta_compat), [])
    rows = _type_sums(lambda t: intervals_of(iv, (t,)), include_memory, hta_compat)
    return _rows_frame([(trace.rank, label, ns) for label, ns in rows])


def _type_sums(
    of: Callable[[str], tuple[np.ndarray, np.ndarray]], include_memory: bool, hta_compat: bool
) -> list[tuple[str, int]]:
    """``(label, ns)`` per overlap label of one rank, its intervals by type given by ``of``."""
    groups = {}
    for t, bit in TYPE_BITS.items():
        if t == "MEMORY" and not include_memory:
            continue
        s, e = of(t)
        if s.size or hta_compat:  # HTA sorts its edges again for every type, empty or not
            groups[bit] = merge(s, e, hta_compat=hta_compat)
    seg = hta_segments(list(groups.items())) if hta_compat else segments(groups)
    return [(label_of(v), n) for v, n in sorted(seg.items())]


def _rows_frame(rows: list[tuple[int, str, int]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=_SCHEMA, orient="row")


def kernel_types_of(work: pl.DataFrame, ranks: Sequence[int], *, include_memory: bool = True) -> pl.DataFrame:
    """:func:`kernel_type_rank` (ranksight's definitions) of every rank of stacked GPU work
    (:func:`~ranksight.views.gpu_work.gpu_work_of` with a ``rank`` column), in ``ranks``' order:
    the work partitioned once, then numpy per rank (no query per rank)."""
    iv = intervals_by_type(work, ["rank"])
    rows = [
        (r, label, ns)
        for r in ranks
        for label, ns in _type_sums(lambda t, r=r: intervals_of(iv, (r, t)), include_memory, False)  # type: ignore[misc]
    ]
    return _rows_frame(rows)


def kernel_types(
    run: Run, *, ranks: Sequence[int] | None = None, include_memory: bool = True, hta_compat: bool = False
) -> AnalysisResult:
    """Time by kernel type and overlap segment over the selected ranks, and per rank."""
    sess = Session.of(run, ranks)
    stacked = None if hta_compat else sess.stacked_events()
    if stacked is not None:  # many small ranks: one pass over all of them (equal to rank by rank)
        work = sess.memo(("gpu_work_of",), lambda: gpu_work_of(stacked.lazy(), by=["rank"]))
        per = kernel_types_of(work, sess.ranks, include_memory=include_memory)
    else:
        per = pl.concat(list(sess.map(kernel_type_rank, include_memory=include_memory, hta_compat=hta_compat).values()))
    total = (
        per.group_by("kernel_type")
        .agg(pl.col("sum_ns").sum())
        .sort(["sum_ns", "kernel_type"], descending=[True, False])
    )
    grand = int(total["sum_ns"].sum()) if total.height else 0
    total = total.select(
        "kernel_type",
        (pl.col("sum_ns") / 1e3).alias("sum_us"),
        pl.Series("pct", pct(total["sum_ns"].to_numpy(), grand, 1)),
    )
    per_rank = (
        per.with_columns(
            (pl.col("sum_ns") / 1e3).alias("sum_us"),
            pl.Series("pct", _rank_pct(per)),
        )
        .select("rank", "kernel_type", "sum_us", "pct")
        .sort(["rank", "sum_us"], descending=[False, True])
    )
    notes = [] if total.height else ["no GPU kernels in these traces"]
    return AnalysisResult({"kernel_types": total, "per_rank": per_rank}, notes)


def _rank_pct(per: pl.DataFrame) -> np.ndarray:
    if per.height == 0:
        return np.empty(0)
    whole = per.select(pl.col("sum_ns").sum().over("rank"))["sum_ns"].to_numpy()
    return pct(per["sum_ns"].to_numpy(), whole, 1)


register(
    AnalysisSpec(
        name="kernel-types",
        func=kernel_types,
        help="GPU time by kernel type (computation, communication, memory) and their overlaps",
        options=(
            Option("include_memory", parse_bool, True, "count memcpy/memset (true/false)"),
            Option("hta_compat", bool, False, "HTA v0.6 definitions (name regexes, µs rounding)", flag=True),
        ),
    )
)
