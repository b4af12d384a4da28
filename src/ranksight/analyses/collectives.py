"""``collectives``: every collective of every rank, matched across ranks into instances.

The per-rank extraction (:func:`rank_collectives`, a pure function of one trace, cached) and the
cross-rank reduction (:func:`comm_data`: matching, clock alignment, per-instance wait / skew /
transfer) are shared by every distributed analysis (``alignment``, ``bandwidth``,
``stragglers``, ``alpha-beta``, ``exposed-comm``, ``bubble``, ``all-to-all``).

Definitions (times after clock alignment unless ``--no-align``; see docs/collectives.md):
- ``start``/``end``: the GPU kernel's (NCCL/RCCL/custom collective kernels) or the gloo
  annotation's; ``launch``: the host call that issued it;
- ``wait_us = last_start − start``; ``transfer_us = max(0, end − last_start)``; so
  ``dur = wait + transfer`` for every participant;
- ``skew_us = last_start − first_start`` per instance; ``late_rank`` started last.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, Option, register
from ranksight.analyses._session import Session
from ranksight.views.comm_extract import SCHEMA, empty_table, rank_collectives, seed_rank_collectives
from ranksight.views.comm_match import CommData, apply_offsets, estimate_offsets, instance_metrics, match_instances

if TYPE_CHECKING:
    from ranksight.model.run import Run
    from ranksight.model.trace import Trace

__all__ = [
    "rank_collectives",
    "seed_collectives",
    "comm_data",
    "collectives",
    "SCHEMA",
    "single_rank_note",
    "ALIGN_OPTION",
]

ALIGN_OPTION = Option("no_align", bool, False, "do not correct clock offsets between ranks/hosts", flag=True)


def single_rank_note(ranks: Sequence[int]) -> str:
    """The one-line note every cross-rank analysis gives when only one rank is loaded."""
    return f"cross-rank analysis needs several ranks: only rank {ranks[0]} loaded" if ranks else "no rank loaded"


def _rank_comm(trace: Trace) -> tuple[pl.DataFrame, int | None]:
    return rank_collectives(trace), trace.meta.world_size


def comm_data(run: Run | Session, ranks: Sequence[int] | None = None, *, align: bool = True) -> CommData:
    """Per-rank collectives of the selected ranks, matched, aligned, with per-instance metrics
    (computed once per session, ranks and ``align``)."""
    sess = Session.of(run, ranks)
    return sess.memo(("comm_data", align), lambda: _comm_data(sess, align))


def seed_collectives(sess: Session) -> None:
    """Many small ranks held here: every rank's collectives in one pass over the stacked events
    (issue 19), before the per-rank work reads them."""
    stacked = sess.stacked_events()
    if stacked is not None:
        seed_rank_collectives([sess.trace(r) for r in sess.ranks], stacked)


def _comm_data(sess: Session, align: bool) -> CommData:
    rs = sess.ranks
    seed_collectives(sess)
    per = sess.map(_rank_comm)  # per rank, on the run's engine
    tables = {r: per[r][0] for r in rs}
    sizes = {per[r][1] for r in rs if per[r][1]}
    per_rank = pl.concat([tables[r] for r in rs], how="vertical_relaxed") if tables else empty_table()
    matched = match_instances(per_rank)
    hosts = {r: (tables[r]["host"][0] if tables[r].height else None) for r in rs}
    offsets = estimate_offsets(matched, rs, hosts)
    if not align:
        offsets = offsets.with_columns(pl.lit(0, dtype=pl.Int64).alias("offset_ns"))
    aligned = apply_offsets(matched, offsets)
    instances, participants = instance_metrics(aligned, rs)
    notes = _notes(max(sizes) if sizes else None, rs, per_rank, instances, align)
    return CommData(aligned, offsets, instances, participants, rs, align, notes)


def _notes(world: int | None, rs: list[int], per_rank: pl.DataFrame, instances: pl.DataFrame, align: bool) -> list[str]:
    notes: list[str] = []
    if len(rs) < 2:
        notes.append(single_rank_note(rs))
    if per_rank.height == 0:
        notes.append("no collective found (no communication kernel, no gloo:* annotation)")
        return notes
    if world and world > len(rs) and len(rs) >= 2:
        notes.append(f"world size {world} but {len(rs)} ranks loaded: instances cover the loaded ranks only")
    assumed = per_rank.filter(pl.col("pg_desc").str.ends_with("(assumed)"))
    if assumed.height:
        notes.append(
            f"{assumed.height} collectives carry no process-group args: assumed the default group "
            f"(size from {', '.join(sorted(set(assumed['group_rule'].drop_nulls().to_list()))) or 'unknown'})"
        )
    unmatched = per_rank.filter(
        pl.col("coll_type").is_in(["send", "recv"]) & pl.col("src_rank").is_null() & pl.col("dst_rank").is_null()
    )
    if unmatched.height:
        notes.append(f"{unmatched.height} send/recv without a known peer are not matched across ranks")
    if len(rs) >= 2 and instances.height:
        partial = instances.filter(pl.col("missing_ranks").list.len() > 0)
        if partial.height:
            notes.append(f"{partial.height} of {instances.height} instances miss ranks (see missing_ranks)")
    if not align:
        notes.append("clock alignment off (--no-align)")
    return notes


def _rel_us(col: str, t0: int) -> pl.Expr:
    return ((pl.col(col) - t0) / 1e3).alias(col.replace("_ns", "_us"))


def collectives(run: Run, *, ranks: Sequence[int] | None = None, no_align: bool = False) -> AnalysisResult:
    """Every collective per rank (type and the rule that gave it, group, sizes, times, wait,
    transfer) and the matched instances with the ranks missing from each."""
    cd = comm_data(run, ranks, align=not no_align)
    p = cd.per_rank.join(
        cd.participants.select("rank", "idx", "wait_ns", "transfer_ns", "lateness_ns"),
        on=["rank", "idx"],
        how="left",
        maintain_order="left",
    )
    t0 = int(p["start_ns"].min()) if p.height else 0  # type: ignore[arg-type]
    per_rank = p.select(
        "rank",
        "idx",
        "instance",
        "coll_type",
        "type_rule",
        "pg_name",
        "group_size",
        "seq",
        "bytes",
        "dtype",
        "size_rule",
        pl.col("step"),
        _rel_us("start_ns", t0),
        _rel_us("end_ns", t0),
        (pl.col("dur_ns") / 1e3).alias("dur_us"),
        (pl.col("wait_ns") / 1e3).alias("wait_us"),
        (pl.col("transfer_ns") / 1e3).alias("transfer_us"),
        "source",
    ).sort(["rank", "idx"])
    inst = cd.instances.select(
        "instance",
        "coll_type",
        "pg_name",
        "group_size",
        "seq",
        "step",
        "bytes",
        "dtype",
        "ranks_present",
        "ranks_expected",
        pl.col("missing_ranks").list.eval(pl.element().cast(pl.String)).list.join(",").alias("missing_ranks"),
        _rel_us("first_start_ns", t0),
        (pl.col("skew_ns") / 1e3).alias("skew_us"),
        "late_rank",
        (pl.col("total_wait_ns") / 1e3).alias("total_wait_us"),
        (pl.col("transfer_ns") / 1e3).alias("transfer_us"),
    )
    rules = (
        cd.per_rank.group_by("source", "type_rule", "size_rule", "coll_type")
        .agg(pl.len().alias("count"))
        .sort(["source", "type_rule", "coll_type", "size_rule"], nulls_last=True)
    )
    notes = list(cd.notes)
    if p.height:
        notes.append(
            "times in µs from the earliest collective start; wait = last start − own start; transfer = end − last start"
        )
    return AnalysisResult({"collectives": per_rank, "instances": inst, "rules": rules}, notes)


register(
    AnalysisSpec(
        name="collectives",
        func=collectives,
        help="every collective per rank, matched across ranks (type rule, group, bytes, wait, transfer, missing ranks)",
        options=(ALIGN_OPTION,),
    )
)
