"""``stragglers``: which ranks arrive last at collectives, how much waiting they cost the others,
and why they were late.

Per matched instance (aligned times, at least two ranks, skew ≥ ``min_skew_us``):
- the **late rank** started last; ``wait_caused = Σ_r (last start − start_r)``;
- its ``lateness L = start − median start`` splits into
  - ``launch H = clamp(launch − median launch, 0, L)``: the host issued the collective late;
  - ``after_launch = L − H``: issued on time but started late (GPU busy with earlier kernels on a
    GPU collective; gloo thread still busy for a CPU collective);
  - ``H`` further into ``carried`` (the rank was already late when the segment began: it entered
    the step late, or launched its previous collective late) and ``segment`` (host time since
    then beyond the median rank's): ``carried = clamp(segment start − median segment start, 0, H)``,
    ``segment = H − carried``; the segment starts at the rank's previous collective launch in the
    step, or at the step start for the first one.
- **cause**: for GPU collectives ``host`` (late launch, H ≥ after_launch) or ``compute`` (GPU work
  before the collective); for CPU (gloo) collectives ``compute`` (CPU ops before the enqueue) or
  ``host`` (gloo thread busy); ``transfer`` when the transfer time is more than twice the median of
  at least 3 instances of the same type, group size and size, and the excess exceeds the skew.
  ``data`` when host-side lateness that arose in the segment is mostly the rank's input-pipeline
  fetches (DataLoader/DataPipe) beyond the median rank's; a launch mostly carried in from the
  rank's previous collective of the step takes that earlier late arrival's cause.
- **evidence**: the ops (host side: launching thread and training-loop thread) and kernels (GPU
  side) of the late rank's segment whose total
  time exceeds the median rank's total for the same name most, and the step-start lateness.

Per rank: times last, wait caused, own wait, and the rank × step table of own wait time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, Option, register
from ranksight.analyses._session import Session
from ranksight.analyses.collectives import ALIGN_OPTION, comm_data, single_rank_note
from ranksight.views.comm_segments import DATA_FETCH_RE, WORK_SCHEMA, segment_work, segment_work_many, segments
from ranksight.views.event_source import EventSource
from ranksight.views.rank_slices import RankSlices, rank_rows

if TYPE_CHECKING:
    from ranksight.model.run import Run
    from ranksight.model.trace import Trace
    from ranksight.views.comm_match import CommData

#: A rank is named a straggler when its share of the wait is ≥ 2/n, capped here (2 ranks: 0.75).
NAMED_SHARE_MAX = 0.75

__all__ = ["stragglers", "late_instances", "straggler_ranks", "rank_segments", "rank_segment_work"]


def rank_segments(
    trace: Trace, per_rank: pl.DataFrame | RankSlices, offsets: pl.DataFrame | dict[int, int]
) -> pl.DataFrame:
    """The segments of one rank in aligned time (its steps aligned with the same offset);
    ``per_rank`` may come cut by rank and ``offsets`` as ``{rank: offset_ns}`` (a caller mapping
    over many ranks makes them once)."""
    r = trace.rank
    off = _offset(offsets, r)
    st = trace.steps.with_columns((pl.col("start_ns") - off).alias("start_ns"))
    span = trace.span_ns
    return segments(rank_rows(per_rank, r), st, (span[0] - off) if span else None)


def _offset(offsets: pl.DataFrame | dict[int, int], rank: int) -> int:
    if isinstance(offsets, dict):
        return offsets[rank]
    return int(offsets.filter(pl.col("rank") == rank)["offset_ns"].item())


def _segments_all(sess: Session, cd: CommData) -> pl.DataFrame:
    """Segments of every rank in aligned time."""
    seg = sess.map(rank_segments, cd.ranks, per_rank=RankSlices(cd.per_rank), offsets=cd.offset_map())
    return pl.concat([seg[r] for r in cd.ranks], how="vertical_relaxed") if seg else pl.DataFrame()


def late_instances(cd: CommData, seg: pl.DataFrame, min_skew_ns: int) -> pl.DataFrame:
    """One row per instance with a late rank: lateness and its split (see module doc)."""
    p = cd.participants.join(
        seg.select("rank", "instance", "first_in_step", "cpu_from_ns", "source"), on=["rank", "instance"], how="left"
    )
    rel = pl.col("cpu_from_ns") - pl.col("cpu_from_ns").min().over("instance")
    p = p.with_columns((rel - rel.median().over("instance")).round(0).cast(pl.Int64).alias("__from_late"))
    inst = cd.instances.filter((pl.col("ranks_present") >= 2) & (pl.col("skew_ns") >= min_skew_ns))
    late = p.filter(pl.col("is_last")).join(
        inst.select("instance", "skew_ns", "total_wait_ns", "transfer_ns", "bytes", "group_size"),
        on="instance",
        how="inner",
    )
    late = _expected_transfer(late, cd.instances)
    L = pl.col("lateness_ns").clip(0)
    H = pl.col("launch_lateness_ns").fill_null(0).clip(0, L)
    late = late.with_columns(L.alias("lateness_ns"), H.alias("late_launch_ns"), (L - H).alias("after_launch_ns"))
    also = (
        p.join(late.select("instance", pl.col("lateness_ns").alias("__lmax")), on="instance")
        .filter((pl.col("lateness_ns") >= 0.5 * pl.col("__lmax")) & (pl.col("__lmax") > 0))
        .sort(["instance", "rank"])
        .group_by("instance", maintain_order=True)
        .agg(pl.col("rank").cast(pl.String).str.join(",").alias("late_ranks"))
    )
    late = late.join(also, on="instance", how="left")
    carried = pl.col("__from_late").fill_null(0).clip(0, pl.col("late_launch_ns"))
    late = late.with_columns(carried.alias("carried_ns")).with_columns(
        (pl.col("late_launch_ns") - pl.col("carried_ns")).alias("segment_ns")
    )
    gpu = pl.col("source") == "kernel"
    launch_cause = pl.when(gpu).then(pl.lit("host")).otherwise(pl.lit("compute"))
    after_cause = pl.when(gpu).then(pl.lit("compute")).otherwise(pl.lit("host"))
    slow = pl.col("slow_transfer") & ((pl.col("transfer_ns") - pl.col("expected_transfer_ns")) > pl.col("skew_ns"))
    late = late.with_columns(
        pl.when(slow)
        .then(pl.lit("transfer"))
        .when(pl.col("late_launch_ns") >= pl.col("after_launch_ns"))
        .then(launch_cause)
        .otherwise(after_cause)
        .alias("cause")
    )
    return late.sort("instance")


def _expected_transfer(late: pl.DataFrame, instances: pl.DataFrame) -> pl.DataFrame:
    ref = (
        instances.filter(pl.col("transfer_ns").is_not_null())
        .group_by("coll_type", "group_size", "bytes")
        .agg(pl.len().alias("__n"), pl.col("transfer_ns").median().alias("expected_transfer_ns"))
        .filter(pl.col("__n") >= 3)
        .drop("__n")
    )
    late = late.join(ref, on=["coll_type", "group_size", "bytes"], how="left", nulls_equal=True)
    return late.with_columns(
        (pl.col("transfer_ns") > 2 * pl.col("expected_transfer_ns")).fill_null(False).alias("slow_transfer")
    )


def _excess(work: pl.DataFrame, late: pl.DataFrame, ranks: list[int]) -> pl.DataFrame:
    """Per late instance, side and name: the late rank's time minus the median rank's
    (``excess_ns``; a rank without the name counts 0)."""
    grid = (
        work.select("instance", "side", "name")
        .unique()
        .join(pl.DataFrame({"rank": ranks}, schema={"rank": pl.Int32}), how="cross")
    )
    full = grid.join(work, on=["instance", "side", "name", "rank"], how="left").with_columns(
        pl.col("total_ns").fill_null(0)
    )
    med = full.group_by("instance", "side", "name").agg(pl.col("total_ns").median().alias("__med"))
    lw = full.join(late.select("instance", pl.col("rank").alias("__late")), on="instance").filter(
        pl.col("rank") == pl.col("__late")
    )
    return lw.join(med, on=["instance", "side", "name"]).with_columns(
        (pl.col("total_ns") - pl.col("__med")).alias("excess_ns")
    )


def _evidence(work: pl.DataFrame, late: pl.DataFrame, ranks: list[int], top: int) -> pl.DataFrame:
    """Per late instance: the names whose time on the late rank most exceeds the median rank's
    (only excesses of at least 1 µs and 10 % of the lateness that arose in the segment; none when
    all of it was carried in)."""
    if work.height == 0 or late.height == 0:
        return pl.DataFrame(schema={"instance": pl.Int64, "evidence": pl.String})
    lw = _excess(work, late, ranks)
    own = pl.col("segment_ns") + pl.col("after_launch_ns")  # lateness that arose in this segment
    lw = lw.join(late.filter(own > 0).select("instance", (0.1 * own).alias("__min")), on="instance")
    lw = lw.filter((pl.col("excess_ns") >= 1000) & (pl.col("excess_ns") >= pl.col("__min"))).sort(
        ["instance", "excess_ns", "side", "name"],
        descending=[False, True, False, False],  # ties: by name
    )
    lw = lw.group_by("instance", maintain_order=True).head(top)
    text = pl.concat_str(
        [
            pl.lit("["),
            pl.col("side"),
            pl.lit("] "),
            pl.col("name").str.slice(0, 60),
            pl.lit(" +"),
            (pl.col("excess_ns") / 1e3).round(1).cast(pl.String),
            pl.lit(" µs"),
        ]
    )
    return lw.group_by("instance", maintain_order=True).agg(text.str.join("; ").alias("evidence"))


def _data_cause(work: pl.DataFrame, late: pl.DataFrame, ranks: list[int]) -> pl.DataFrame:
    """``cause = data`` where the lateness arose on the host in the segment (late launch, more of
    it in the segment than carried in) and the late rank's input-pipeline fetches
    (``enumerate(DataLoader)#…``, ``enumerate(DataPipe)#…``) there exceed the median rank's by at
    least half of that segment lateness; ``data_excess_ns`` is that excess."""
    late = late.with_columns(pl.lit(None, pl.Int64).alias("data_excess_ns"))
    if work.height == 0 or late.height == 0:
        return late
    fetch = work.filter((pl.col("side") == "cpu") & pl.col("name").str.contains(DATA_FETCH_RE))
    if fetch.height == 0:
        return late
    ex = _excess(fetch, late, ranks).group_by("instance").agg(pl.col("excess_ns").sum().cast(pl.Int64).alias("__dx"))
    late = late.join(ex, on="instance", how="left")
    host_late = (
        (pl.col("cause") != "transfer")
        & (pl.col("late_launch_ns") >= pl.col("after_launch_ns"))
        & (pl.col("segment_ns") > pl.col("carried_ns"))
    )
    is_data = host_late & (pl.col("__dx").fill_null(0) >= 0.5 * pl.col("segment_ns")) & (pl.col("__dx") > 0)
    return late.with_columns(
        pl.when(is_data).then(pl.lit("data")).otherwise(pl.col("cause")).alias("cause"),
        pl.when(is_data).then(pl.col("__dx")).otherwise(pl.col("data_excess_ns")).alias("data_excess_ns"),
    ).drop("__dx")


def _carried_cause(late: pl.DataFrame) -> pl.DataFrame:
    """A late launch mostly carried in from the rank's previous collective of the same step
    (``carried ≥ segment``, not the step's first) takes the cause of the rank's latest earlier late
    arrival in that step: the delay that made it late there is the one it still carries."""
    if late.height == 0:
        return late
    carried = (
        (pl.col("cause") != "transfer")
        & (pl.col("late_launch_ns") >= pl.col("after_launch_ns"))
        & (pl.col("carried_ns") >= pl.col("segment_ns"))
        & ~pl.col("first_in_step").fill_null(False)
    )
    late = late.sort("instance").with_columns(pl.when(carried).then(None).otherwise(pl.col("cause")).alias("__c"))
    inherited = pl.col("__c").forward_fill().over("rank", "step")
    return late.with_columns(pl.coalesce(inherited, pl.col("cause")).alias("cause")).drop("__c")


def _detail(late: pl.DataFrame) -> pl.Expr:
    us = lambda c: (pl.col(c) / 1e3).round(0).cast(pl.Int64).cast(pl.String)  # noqa: E731
    carried = (
        pl.when(pl.col("first_in_step").fill_null(False))
        .then(
            pl.concat_str(
                [
                    pl.lit("entered step "),
                    pl.col("step").cast(pl.String),
                    pl.lit(" "),
                    us("carried_ns"),
                    pl.lit(" µs after the median rank"),
                ]
            )
        )
        .otherwise(pl.concat_str([pl.lit("already "), us("carried_ns"), pl.lit(" µs late at its previous collective")]))
    )
    gpu = pl.col("source") == "kernel"
    issued = pl.when(gpu).then(pl.lit("launched ")).otherwise(pl.lit("enqueued "))
    work = pl.when(gpu).then(pl.lit("host work")).otherwise(pl.lit("CPU work"))
    return (
        pl.when(pl.col("cause") == "transfer")
        .then(
            pl.concat_str(
                [
                    pl.lit("transfer "),
                    us("transfer_ns"),
                    pl.lit(" µs vs median "),
                    us("expected_transfer_ns"),
                    pl.lit(" µs"),
                ]
            )
        )
        .when((pl.col("cause") == "data") & pl.col("data_excess_ns").is_not_null())
        .then(
            pl.concat_str(
                [
                    issued,
                    us("late_launch_ns"),
                    pl.lit(" µs late: input pipeline (DataLoader) +"),
                    us("data_excess_ns"),
                    pl.lit(" µs over the median rank since previous collective"),
                ]
            )
        )
        .when(pl.col("late_launch_ns") >= pl.col("after_launch_ns"))
        .then(
            pl.concat_str(
                [
                    issued,
                    us("late_launch_ns"),
                    pl.lit(" µs late: "),
                    pl.when(pl.col("carried_ns") >= pl.col("segment_ns"))
                    .then(carried)
                    .otherwise(
                        pl.concat_str([work, pl.lit(" since previous collective +"), us("segment_ns"), pl.lit(" µs")])
                    ),
                ]
            )
        )
        .otherwise(
            pl.concat_str(
                [
                    pl.lit("started "),
                    us("after_launch_ns"),
                    pl.lit(" µs after issue: "),
                    pl.when(gpu).then(pl.lit("GPU busy with earlier work")).otherwise(pl.lit("gloo thread busy")),
                ]
            )
        )
    )


def straggler_ranks(cd: CommData, late: pl.DataFrame) -> pl.DataFrame:
    """Per rank: times last, wait caused (and share), own wait, mean lateness, main cause."""
    base = cd.participants.group_by("rank").agg(
        pl.len().alias("instances"),
        (pl.col("wait_ns").sum() / 1e3).alias("own_wait_us"),
        (pl.col("lateness_ns").mean() / 1e3).alias("mean_lateness_us"),
    )
    caused = late.group_by("rank").agg(
        pl.len().alias("times_last"),
        (pl.col("total_wait_ns").sum() / 1e3).alias("wait_caused_us"),
        (pl.col("late_launch_ns").sum() / 1e3).alias("late_launch_us"),
        (pl.col("after_launch_ns").sum() / 1e3).alias("after_launch_us"),
        pl.col("cause").sort_by("total_wait_ns", descending=True).first().alias("main_cause"),
    )
    total = float(late["total_wait_ns"].sum()) / 1e3 if late.height else 0.0
    out = base.join(caused, on="rank", how="left").with_columns(
        pl.col("times_last").fill_null(0),
        pl.col("wait_caused_us").fill_null(0.0),
    )
    out = out.with_columns((pl.col("wait_caused_us") / total if total else pl.lit(0.0)).alias("wait_share"))
    return out.select(
        "rank",
        "instances",
        "times_last",
        "wait_caused_us",
        "wait_share",
        "own_wait_us",
        "mean_lateness_us",
        "late_launch_us",
        "after_launch_us",
        "main_cause",
    ).sort(["wait_caused_us", "rank"], descending=[True, False])


def _wait_by_step(cd: CommData) -> pl.DataFrame:
    p = cd.participants.filter(pl.col("ranks_present") >= 2)
    if p.height == 0:
        return pl.DataFrame()
    w = p.with_columns(pl.concat_str([pl.lit("step_"), pl.col("step").cast(pl.String).fill_null("none")]).alias("__s"))
    w = w.group_by("rank", "__s").agg((pl.col("wait_ns").sum() / 1e3).alias("wait_us"))
    wide = w.pivot(on="__s", index="rank", values="wait_us", sort_columns=True).sort("rank")
    return wide.with_columns(pl.exclude("rank").fill_null(0.0))


def _by_step(late: pl.DataFrame, cd: CommData) -> pl.DataFrame:
    if late.height == 0:
        return pl.DataFrame()
    per = late.group_by("step", "rank").agg(pl.len().alias("times_last"), pl.col("total_wait_ns").sum().alias("__w"))
    top = (
        per.sort(["step", "__w", "rank"], descending=[False, True, False]).group_by("step", maintain_order=True).first()
    )
    tot = (
        cd.instances.filter(pl.col("ranks_present") >= 2)
        .group_by("step")
        .agg(
            pl.len().alias("instances"),
            (pl.col("total_wait_ns").sum() / 1e3).alias("total_wait_us"),
            (pl.col("skew_ns").max() / 1e3).alias("max_skew_us"),
        )
    )
    slow = late.group_by("step").agg(pl.col("slow_transfer").sum().alias("slow_transfers"))
    return (
        tot.join(
            top.select(
                "step",
                pl.col("rank").alias("top_late_rank"),
                "times_last",
                (pl.col("__w") / 1e3).alias("wait_caused_us"),
            ),
            on="step",
            how="left",
        )
        .join(slow, on="step", how="left")
        .sort("step")
    )


def stragglers(
    run: Run,
    *,
    ranks: Sequence[int] | None = None,
    no_align: bool = False,
    min_skew_us: float = 10.0,
    evidence: int = 3,
) -> AnalysisResult:
    """Late ranks per collective, per step and overall, with the cause and the evidence."""
    sess = Session.of(run, ranks)
    cd = comm_data(sess, align=not no_align)
    notes = [n for n in cd.notes if not n.startswith("times in")]
    if len(cd.ranks) < 2 or cd.participants.filter(pl.col("ranks_present") >= 2).height == 0:
        if len(cd.ranks) >= 2:
            notes.append("no collective matched on two or more ranks: no straggler can be named")
        empty = pl.DataFrame()
        return AnalysisResult(
            {"ranks": empty, "instances": empty, "steps": empty, "wait_by_step": empty},
            notes if len(cd.ranks) >= 2 else [single_rank_note(cd.ranks)],
        )
    seg = _segments_all(sess, cd)
    late = late_instances(cd, seg, int(min_skew_us * 1e3))
    work = _work(sess, cd, seg, late)
    ev = _evidence(work, late, cd.ranks, evidence)
    late = (
        _carried_cause(_data_cause(work, late, cd.ranks))
        .join(ev, on="instance", how="left")
        .with_columns(_detail(late).alias("detail"))
    )
    per_inst = late.select(
        "instance",
        "step",
        "coll_type",
        "bytes",
        pl.col("rank").alias("late_rank"),
        "late_ranks",
        (pl.col("lateness_ns") / 1e3).alias("lateness_us"),
        (pl.col("skew_ns") / 1e3).alias("skew_us"),
        (pl.col("total_wait_ns") / 1e3).alias("wait_caused_us"),
        "cause",
        (pl.col("late_launch_ns") / 1e3).alias("late_launch_us"),
        (pl.col("carried_ns") / 1e3).alias("carried_us"),
        (pl.col("segment_ns") / 1e3).alias("segment_us"),
        (pl.col("after_launch_ns") / 1e3).alias("after_launch_us"),
        (pl.col("transfer_ns") / 1e3).alias("transfer_us"),
        "slow_transfer",
        "detail",
        "evidence",
    )
    rk = straggler_ranks(cd, late)
    notes = _verdict(rk, late, len(cd.ranks)) + notes
    return AnalysisResult(
        {"ranks": rk, "instances": per_inst, "steps": _by_step(late, cd), "wait_by_step": _wait_by_step(cd)}, notes
    )


def rank_segment_work(
    trace: Trace, seg: pl.DataFrame | RankSlices, offsets: pl.DataFrame | dict[int, int]
) -> pl.DataFrame:
    """Segment work of one rank (its segments moved back to its own clock)."""
    off = _offset(offsets, trace.rank)
    s = rank_rows(seg, trace.rank)
    s = s.with_columns([(pl.col(c) + off) for c in ("cpu_from_ns", "cpu_to_ns", "gpu_from_ns", "gpu_to_ns")])
    return segment_work(trace, s)


def _work(sess: Session, cd: CommData, seg: pl.DataFrame, late: pl.DataFrame) -> pl.DataFrame:
    """Segment work of every rank for the late instances only."""
    wanted = seg.filter(pl.col("instance").is_in(late["instance"].unique().implode()))
    stacked = sess.stacked_events()
    if stacked is not None:  # many small ranks: one pass over every rank (issue 19)
        offs = pl.DataFrame(
            {"rank": list(cd.offset_map()), "__off": list(cd.offset_map().values())},
            schema={"rank": pl.Int32, "__off": pl.Int64},
        )
        own = wanted.join(offs, on="rank", how="left", maintain_order="left").with_columns(
            [(pl.col(c) + pl.col("__off")) for c in ("cpu_from_ns", "cpu_to_ns", "gpu_from_ns", "gpu_to_ns")]
        )
        src = EventSource.stacked([sess.trace(r) for r in cd.ranks], stacked)
        return segment_work_many(src, own.drop("__off"))
    out = sess.map(rank_segment_work, cd.ranks, seg=RankSlices(wanted), offsets=cd.offset_map())
    return pl.concat([out[r] for r in cd.ranks], how="vertical_relaxed") if out else pl.DataFrame(schema=WORK_SCHEMA)


def _also_late(row: dict[str, object]) -> str:
    others = [r for r in str(row.get("late_ranks") or "").split(",") if r and r != str(row["rank"])]
    if not others:
        return ""
    return f"; also late there (≥ half its lateness): rank{'s' if len(others) > 1 else ''} {', '.join(others)}"


def _verdict(rk: pl.DataFrame, late: pl.DataFrame, n: int) -> list[str]:
    """One line per named straggler: a rank that caused at least twice its fair share of wait
    (with two ranks, at least 75 % of it)."""
    if late.height == 0:
        return ["no collective with skew above the threshold: no straggler"]
    named = rk.filter(pl.col("wait_share") >= min(NAMED_SHARE_MAX, 2.0 / n))
    lines = []
    for r in named.iter_rows(named=True):
        mine = late.filter(pl.col("rank") == r["rank"]).sort("total_wait_ns", descending=True)
        worst = mine.row(0, named=True)
        lines.append(
            f"straggler: rank {r['rank']} arrived last at {r['times_last']} of {r['instances']} collectives and cost "
            "the others "
            f"{r['wait_caused_us']:,.0f} µs of wait ({100 * r['wait_share']:.0f} %); main cause {r['main_cause']}; "
            "worst: instance "
            f"{worst['instance']} ({worst['coll_type']}, step {worst['step']}): {worst['detail']}" + _also_late(worst)
        )
    if not lines:
        lines.append("no rank caused more than twice its fair share of the wait: lateness is spread across ranks")
    return lines


register(
    AnalysisSpec(
        name="stragglers",
        func=stragglers,
        help="ranks that arrive last at collectives, the wait they cost, and why (host launch, compute, input "
        "pipeline, transfer)",
        options=(
            ALIGN_OPTION,
            Option("min_skew_us", float, 10.0, "ignore instances whose arrival skew is below this (µs)"),
            Option("evidence", int, 3, "ops/kernels listed as evidence per late collective"),
        ),
    )
)
