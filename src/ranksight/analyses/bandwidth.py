"""``bandwidth``: per collective instance the arrival skew, the wait it caused, the transfer-time
estimate and algorithm / bus bandwidth, summarised by type, size bucket and process group.

Definitions (per matched instance with at least two ranks, aligned times):
- ``skew_us = last start − first start``; ``total_wait_us = Σ_r (last start − start_r)``;
- ``transfer_us`` = median over participants of ``max(0, end_r − last start)`` — the time after
  the last rank arrived, i.e. the collective without the waiting (trace-format trap 13);
- ``algbw_gbps = bytes / transfer`` (1 GB = 10⁹ bytes); ``bytes`` follows nccl-tests: all_gather
  the gathered output, reduce_scatter the full input, others the input (largest over ranks);
- ``busbw_gbps = algbw × factor`` with nccl-tests' factors: all_reduce 2(n−1)/n; all_gather,
  reduce_scatter, all_to_all (n−1)/n; broadcast, reduce, send/recv 1 (n = group size).
  The factors assume flat rings; tree, NVLS and CollNet algorithms can show busbw above the link
  rate, so algbw is always shown next to busbw.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, register
from ranksight.analyses.collectives import ALIGN_OPTION, comm_data

if TYPE_CHECKING:
    from ranksight.model.run import Run

__all__ = ["bandwidth", "ASSUMPTION"]

ASSUMPTION = (
    "busbw = algbw × nccl-tests factor (all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all (n-1)/n; "
    "broadcast, reduce, send/recv 1): flat-ring assumption, tree/NVLS/CollNet can exceed link rate; "
    "algbw = bytes / transfer time (after the last rank arrived), 1 GB = 1e9 bytes"
)


def _us(col: str) -> pl.Expr:
    return (pl.col(col) / 1e3).alias(col.replace("_ns", "_us"))


def bandwidth(run: Run, *, ranks: Sequence[int] | None = None, no_align: bool = False) -> AnalysisResult:
    """Per-instance skew, wait, transfer and bandwidth, and their summary by type/size/group."""
    cd = comm_data(run, ranks, align=not no_align)
    inst = cd.instances.filter(pl.col("ranks_present") >= 2) if cd.instances.height else cd.instances
    per = (
        inst.select(
            "instance",
            "coll_type",
            "pg_name",
            "group_size",
            "step",
            "bytes",
            "size_bucket",
            "ranks_present",
            _us("skew_ns"),
            "late_rank",
            _us("total_wait_ns"),
            _us("transfer_ns"),
            _us("min_dur_ns"),
            _us("max_dur_ns"),
            "algbw_gbps",
            "busbw_gbps",
            "factor_formula",
            "algorithm",
            "protocol",
        )
        if inst.height
        else pl.DataFrame()
    )
    summary = (
        inst.group_by("coll_type", "size_bucket", "pg_name", "group_size")
        .agg(
            pl.len().alias("instances"),
            pl.col("bytes").sum().alias("total_bytes"),
            (pl.col("skew_ns").mean() / 1e3).alias("mean_skew_us"),
            (pl.col("total_wait_ns").sum() / 1e3).alias("total_wait_us"),
            (pl.col("transfer_ns").sum() / 1e3).alias("total_transfer_us"),
            (pl.col("transfer_ns").median() / 1e3).alias("median_transfer_us"),
            pl.col("algbw_gbps").median().alias("median_algbw_gbps"),
            pl.col("busbw_gbps").median().alias("median_busbw_gbps"),
            pl.col("busbw_gbps").max().alias("max_busbw_gbps"),
            pl.col("factor_formula").first(),
        )
        .sort(["coll_type", "pg_name", "total_bytes"])
        if inst.height
        else pl.DataFrame()
    )
    notes = [n for n in cd.notes if not n.startswith("times in")]
    if inst.height:
        notes.append(ASSUMPTION)
    elif len(cd.ranks) >= 2:
        notes.append("no collective matched on two or more ranks: nothing to measure")
    return AnalysisResult({"instances": per, "by_type_size_group": summary}, notes)


register(
    AnalysisSpec(
        name="bandwidth",
        func=bandwidth,
        help="per collective instance: skew, wait, transfer time, algbw and busbw (nccl-tests factors), by "
        "type/size/group",
        options=(ALIGN_OPTION,),
    )
)
