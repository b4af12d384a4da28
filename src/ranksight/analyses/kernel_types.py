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

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, Option, register
from ranksight.analyses._session import Session
from ranksight.views.gpu_work import TYPE_BITS, gpu_work, hta_segments, merge, parse_bool, pct, segments

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
    g = gpu_work(trace, hta_compat=hta_compat)
    groups = {}
    for t, bit in TYPE_BITS.items():
        if t == "MEMORY" and not include_memory:
            continue
        sub = g.filter(pl.col("kernel_type") == t)
        if sub.height or hta_compat:  # HTA sorts its edges again for every type, empty or not
            groups[bit] = merge(sub["ts_ns"].to_numpy(), sub["end_ns"].to_numpy(), hta_compat=hta_compat)
    seg = hta_segments(list(groups.items())) if hta_compat else segments(groups)
    rows = sorted(seg.items())
    return pl.DataFrame(
        {
            "rank": [trace.rank] * len(rows),
            "kernel_type": [label_of(v) for v, _ in rows],
            "sum_ns": [s for _, s in rows],
        },
        schema=_SCHEMA,
    )


def kernel_types(
    run: Run, *, ranks: Sequence[int] | None = None, include_memory: bool = True, hta_compat: bool = False
) -> AnalysisResult:
    """Time by kernel type and overlap segment over the selected ranks, and per rank."""
    sess = Session.of(run, ranks)
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
