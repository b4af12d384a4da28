"""``all-to-all``: per rank and rank pair, what each all-to-all moved and how long it took, and
how unbalanced it was.

- per rank and instance: ``send_bytes`` = input elements × element size, ``recv_bytes`` = output
  elements × element size (all-to-all-v sends different amounts per rank), its duration, wait
  (``last start − start``) and transfer (``end − last start``);
- per rank pair (only where ``In split size`` / ``Out split size`` are recorded):
  ``bytes[src → dst]`` = src's input split for dst × element size; the peer of split *i* is the
  group's *i*-th rank (``Process Group Ranks``, else rank *i*);
- per instance imbalance: ``send_imbalance = max / mean`` of send bytes over ranks (1 = even),
  ``recv_imbalance`` likewise, ``transfer_imbalance = max / median`` of per-rank transfer times.
  A pair's time cannot be measured from kernel traces: per-pair rows carry bytes only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, register
from ranksight.analyses.collectives import ALIGN_OPTION, comm_data, single_rank_note

if TYPE_CHECKING:
    from ranksight.model.run import Run

__all__ = ["all_to_all", "pair_bytes"]


def pair_bytes(a2a: pl.DataFrame) -> pl.DataFrame:
    """``instance, src, dst, bytes`` from the input splits of each rank's all-to-all rows."""
    schema = {"instance": pl.Int64, "src": pl.Int32, "dst": pl.Int32, "bytes": pl.Int64}
    d = a2a.filter(pl.col("in_split").is_not_null() & pl.col("elem_bytes").is_not_null() & (pl.col("in_split") != "[]"))
    if d.height == 0:
        return pl.DataFrame(schema=schema)
    d = d.with_columns(
        pl.col("in_split").str.json_decode(pl.List(pl.Int64)).alias("__split"),
        pl.col("group_ranks").str.json_decode(pl.List(pl.Int64)).alias("__peers"),
    )
    # the peer of split i is the group's i-th rank, else rank i
    d = d.with_columns(
        pl.when(pl.col("__peers").list.len() == pl.col("__split").list.len())
        .then(pl.col("__peers"))
        .otherwise(pl.int_ranges(0, pl.col("__split").list.len()))
        .alias("__peers")
    )
    e = d.select("instance", pl.col("rank").alias("src"), "elem_bytes", "__split", "__peers").explode(
        ["__split", "__peers"]
    )
    return e.select(
        "instance",
        pl.col("src").cast(pl.Int32),
        pl.col("__peers").cast(pl.Int32).alias("dst"),
        (pl.col("__split") * pl.col("elem_bytes")).cast(pl.Int64).alias("bytes"),
    )


def all_to_all(run: Run, *, ranks: Sequence[int] | None = None, no_align: bool = False) -> AnalysisResult:
    """Per-rank and per-pair sizes and times of all-to-all collectives, and their imbalance."""
    cd = comm_data(run, ranks, align=not no_align)
    notes = [n for n in cd.notes if not n.startswith("times in")]
    a2a = cd.per_rank.filter(pl.col("coll_type") == "all_to_all")
    if a2a.height == 0:
        notes.append("no all-to-all collective in these traces")
        return AnalysisResult({"per_rank": pl.DataFrame(), "imbalance": pl.DataFrame(), "pairs": pl.DataFrame()}, notes)
    p = a2a.join(cd.participants.select("rank", "idx", "wait_ns", "transfer_ns"), on=["rank", "idx"], how="left")
    per_rank = p.select(
        "instance",
        "rank",
        "step",
        "dtype",
        (pl.col("in_nelems") * pl.col("elem_bytes")).alias("send_bytes"),
        (pl.col("out_nelems") * pl.col("elem_bytes")).alias("recv_bytes"),
        (pl.col("dur_ns") / 1e3).alias("dur_us"),
        (pl.col("wait_ns") / 1e3).alias("wait_us"),
        (pl.col("transfer_ns") / 1e3).alias("transfer_us"),
    ).sort(["instance", "rank"])
    imb = (
        per_rank.group_by("instance")
        .agg(
            pl.col("step").min(),
            pl.len().alias("ranks"),
            pl.col("send_bytes").sum().alias("total_send_bytes"),
            (pl.col("send_bytes").max() / pl.col("send_bytes").mean()).alias("send_imbalance"),
            (pl.col("recv_bytes").max() / pl.col("recv_bytes").mean()).alias("recv_imbalance"),
            (pl.col("transfer_us").max() / pl.col("transfer_us").median()).alias("transfer_imbalance"),
            pl.col("rank").sort_by("send_bytes", descending=True).first().alias("max_send_rank"),
            pl.col("rank").sort_by("recv_bytes", descending=True).first().alias("max_recv_rank"),
        )
        .sort("instance")
    )
    pairs = pair_bytes(a2a)
    tables = {"per_rank": per_rank, "imbalance": imb}
    if pairs.height:
        tables["pairs"] = pairs.sort(["instance", "src", "dst"])
        matrix = pairs.group_by("src", "dst").agg(pl.col("bytes").sum())
        tables["matrix_bytes"] = matrix.pivot(on="dst", index="src", values="bytes", sort_columns=True).sort("src")
    else:
        notes.append(
            "split sizes not recorded (In/Out split size args empty or absent): per-rank totals only, no rank-pair "
            "matrix"
        )
    if len(cd.ranks) < 2:
        notes.insert(0, single_rank_note(cd.ranks))
    notes.append(
        "imbalance = max / mean over ranks (1 = even); transfer imbalance = max / median of per-rank transfer time"
    )
    return AnalysisResult(tables, notes)


register(
    AnalysisSpec(
        name="all-to-all",
        func=all_to_all,
        help="all-to-all sizes and times per rank and rank pair (from split sizes), and their imbalance",
        options=(ALIGN_OPTION,),
    )
)
