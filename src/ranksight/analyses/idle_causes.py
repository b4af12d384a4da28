"""``idle-causes``: why the GPU is idle — every idle gap of each rank and step attributed to what
held the next GPU work back.

Per rank (:func:`rank_idle_causes`, on the run's engine): the idle pieces of
:func:`ranksight.views.idle_gaps.idle_pieces` (definitions and precedence there and in
``docs/idle-causes.md``). Cross-rank: each rank's waits for late peers, from the matched
collectives (``collectives.comm_data``, memoised per session), in the rank's own clock.

Tables:
- ``by_rank``: per rank and cause, idle inside the rank's GPU span (their sum is ``temporal``'s
  ``idle_us``): ``idle_us``, ``gaps`` (gaps with some of this cause), ``share_pct`` of the idle;
- ``by_step``: the same per ProfilerStep window (sum = ``temporal --per-step`` ``idle_us``);
- ``call_sites``: per rank and cause, the call sites (op, annotation, frame, sync or launch call)
  holding the most idle time (``top`` per cause), over every idle piece (span and step windows);
- ``gaps``: every attributed piece: rank, gap, step, ``in_span``, start/end (ns, the trace's
  clock), ``dur_us``, cause, call site and detail; longest first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, Option, register
from ranksight.analyses._session import Missing, Session
from ranksight.analyses.collectives import comm_data
from ranksight.model.kinds import GPU_KINDS
from ranksight.views.gpu_work import gpu_work_categorical, step_windows
from ranksight.views.idle_gaps import CAUSES, PIECE_SCHEMA, WAIT_SCHEMA, idle_pieces, idle_pieces_many
from ranksight.views.rank_slices import RankSlices, rank_rows

if TYPE_CHECKING:
    from ranksight.model.run import Run
    from ranksight.model.trace import Trace

__all__ = ["idle_causes", "rank_idle_causes", "peer_waits", "CAUSES"]

GAP_SCHEMA = {
    "rank": pl.Int32,
    "gap": pl.Int64,
    "step": pl.Int32,
    "in_span": pl.Boolean,
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "dur_us": pl.Float64,
    "cause": pl.String,
    "call_site": pl.String,
    "detail": pl.String,
}
#: A piece's length in integer ns (sums of pieces are taken in ns, then shown in µs).
_NS = pl.col("end_ns") - pl.col("start_ns")


def rank_idle_causes(trace: Trace, waits: pl.DataFrame | RankSlices | None = None) -> tuple[pl.DataFrame, bool]:
    """The attributed idle pieces of one rank (``waits``: every rank's waits, or them cut by rank;
    this rank's are used) and whether the rank has GPU work at all."""
    own = None
    if waits is not None:
        own = rank_rows(waits, trace.rank).drop("rank")
    p = idle_pieces(trace, own)
    has_gpu = trace.kind(*GPU_KINDS, columns=["row"]).height > 0
    return p.select(pl.lit(trace.rank, dtype=pl.Int32).alias("rank"), *list(PIECE_SCHEMA)), has_gpu


def peer_waits(sess: Session) -> pl.DataFrame | None:
    """Each rank's waits for late peers (``rank`` + :data:`WAIT_SCHEMA`), in the rank's own clock:
    ``[start, start + wait)`` of every matched collective it joined before the last peer. None with
    fewer than two ranks."""
    if len(sess.ranks) < 2:
        return None
    cd = comm_data(sess)
    p = (
        cd.participants.filter(pl.col("wait_ns") > 0)
        .join(cd.offsets.select("rank", "offset_ns"), on="rank")
        .join(cd.instances.select("instance", "late_rank"), on="instance", how="left")
    )
    return p.select(
        pl.col("rank").cast(pl.Int32),
        (pl.col("start_ns") + pl.col("offset_ns")).alias("start_ns"),
        (pl.col("start_ns") + pl.col("wait_ns") + pl.col("offset_ns")).alias("end_ns"),
        pl.col("late_rank").cast(pl.Int64),
        pl.col("coll_type").cast(pl.String),
        pl.col("instance").cast(pl.Int64),
    ).cast({k: v for k, v in WAIT_SCHEMA.items()})


def _idle(df: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """Per group: ``idle_us`` (summed in integer ns, then µs) and ``gaps`` (distinct gaps)."""
    return (
        df.group_by(by)
        .agg(_NS.sum().alias("__ns"), pl.col("gap").n_unique().cast(pl.Int64).alias("gaps"))
        .with_columns((pl.col("__ns") / 1e3).round(3).alias("idle_us"))  # round: exact µs.ns in the text
        .select(*by, "idle_us", "gaps")
    )


def _aggregate(df: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """Idle µs, gaps and share of the group's idle per cause."""
    total = pl.col("idle_us").sum().over(by)
    return (
        _idle(df, [*by, "cause"])
        .with_columns((100 * pl.col("idle_us") / total).round(2).alias("share_pct"))
        .sort([*by, "idle_us", "cause"], descending=[False] * len(by) + [True, False])
    )


def idle_causes(run: Run, *, ranks: Sequence[int] | None = None, top: int = 5) -> AnalysisResult:
    """Every GPU idle gap of each rank and step attributed to its cause (see the module doc)."""
    sess = Session.of(run, ranks)
    notes: list[str] = []
    waits = sess.try_memo(("idle-causes", "waits"), lambda: peer_waits(sess), "collectives")
    if isinstance(waits, Missing):
        notes.append(f"no collective waits: {waits.reason}")
        waits = None
    elif waits is None:
        notes.append("one rank loaded: waits for late peers (collective_wait) need several ranks")
    stacked = sess.stacked_events()
    if stacked is not None:  # many small ranks: every rank in one pass (equal to rank by rank)
        traces = {r: sess.trace(r) for r in sess.ranks}
        gaps = idle_pieces_many(
            stacked.lazy(), {r: (gpu_work_categorical(t), step_windows(t)) for r, t in traces.items()}, waits
        )
        with_gpu = set(
            stacked.lazy().filter(pl.col("kind").is_in(list(GPU_KINDS))).select("rank").unique().collect()["rank"]
        )
        has_gpu = {r: r in with_gpu for r in sess.ranks}
    else:
        per = sess.map(rank_idle_causes, waits=RankSlices(waits) if waits is not None else None)
        frames = [per[r][0] for r in sess.ranks]
        gaps = (
            pl.concat(frames) if frames else pl.DataFrame(schema={c: t for c, t in GAP_SCHEMA.items() if c != "dur_us"})
        )
        has_gpu = {r: per[r][1] for r in sess.ranks}
    gaps = gaps.with_columns((_NS / 1e3).round(3).alias("dur_us")).select(list(GAP_SCHEMA))
    by_rank = _aggregate(gaps.filter("in_span"), ["rank"])
    by_step = _aggregate(gaps.filter(pl.col("step").is_not_null()), ["rank", "step"])
    sites = (
        _idle(gaps.filter(pl.col("call_site").is_not_null()), ["rank", "cause", "call_site"])
        .sort(["rank", "cause", "idle_us", "call_site"], descending=[False, False, True, False])
        .group_by("rank", "cause", maintain_order=True)
        .head(top)
        .join(_idle(gaps, ["rank"]).select("rank", pl.col("idle_us").alias("__all")), on="rank")
        .with_columns((100 * pl.col("idle_us") / pl.col("__all")).round(2).alias("share_pct"))
        .drop("__all")
        .sort(["rank", "idle_us", "cause", "call_site"], descending=[False, True, False, False])
    )
    gaps = gaps.sort(["dur_us", "rank", "start_ns"], descending=[True, False, False])
    no_gpu = [r for r in sess.ranks if not has_gpu[r]]
    if no_gpu:
        notes.append(
            f"rank(s) {no_gpu} have no GPU work (CPU-only): no GPU idle to explain, nothing attributed "
            "(temporal --per-step counts their whole steps as idle)"
        )
    notes.append(
        "by_rank: idle inside the GPU span (= temporal idle_us); by_step: inside each ProfilerStep window "
        "(= temporal --per-step idle_us); call_sites and gaps: every idle piece of either"
    )
    return AnalysisResult({"by_rank": by_rank, "by_step": by_step, "call_sites": sites, "gaps": gaps}, notes)


register(
    AnalysisSpec(
        name="idle-causes",
        func=idle_causes,
        help="why the GPU is idle: every idle gap per rank and step attributed to the CPU op, sync, DataLoader, "
        "collective wait, launch latency or unexplained",
        options=(Option("top", int, 5, "call sites shown per rank and cause"),),
    )
)
