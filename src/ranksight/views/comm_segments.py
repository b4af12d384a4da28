"""Per-rank work between collectives, for the straggler evidence.

A rank's *segment* before collective *i* is the time since its previous collective in the same
ProfilerStep (or since the step started, for the first one):
- host side: ``[previous launch, this launch)`` on the thread that launched collective *i*;
- GPU side: ``[previous collective end, this collective start)``.
:func:`segment_work` (a pure function of one trace) sums, per segment and name, the top-level
``cpu_op`` time starting in the host segment on the launching thread and the non-communication
GPU work (kernels, memcpy, memset) starting in the GPU segment.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from ranksight.model.kinds import GPU_KINDS
from ranksight.views.event_source import EventSource
from ranksight.views.intervals import with_outermost

if TYPE_CHECKING:
    from ranksight.model.trace import Trace

__all__ = ["segments", "segment_work", "segment_work_many", "WORK_SCHEMA", "DATA_FETCH_RE"]

WORK_SCHEMA = {
    "rank": pl.Int32,
    "instance": pl.Int64,
    "side": pl.String,
    "name": pl.String,
    "total_ns": pl.Int64,
    "count": pl.Int64,
}


def segments(coll: pl.DataFrame, steps: pl.DataFrame, span_start_ns: int | None) -> pl.DataFrame:
    """Segments of one rank (raw, unaligned times) from its matched collectives and its steps.

    Columns: ``rank, instance, step, first_in_step, cpu_from_ns, cpu_to_ns, gpu_from_ns, gpu_to_ns,
    launch_tid``.
    """
    c = coll.filter(pl.col("instance").is_not_null()).sort("idx")
    st = steps.select(pl.col("step"), pl.col("start_ns").alias("__step_start"))
    c = c.join(st, on="step", how="left", maintain_order="left")
    prev_launch = pl.col("launch_ns").shift(1).over("step")
    prev_end = pl.col("end_ns").shift(1).over("step")
    fallback = pl.coalesce(pl.col("__step_start"), pl.lit(span_start_ns, dtype=pl.Int64))
    return c.select(
        "rank",
        "instance",
        "step",
        prev_launch.is_null().alias("first_in_step"),
        pl.coalesce(prev_launch, fallback).alias("cpu_from_ns"),
        pl.col("launch_ns").alias("cpu_to_ns"),
        pl.coalesce(prev_end, fallback).alias("gpu_from_ns"),
        pl.col("start_ns").alias("gpu_to_ns"),
        "launch_tid",
        "source",
    )


def _in_segments(items: pl.DataFrame, seg: pl.DataFrame, lo: str, hi: str, by: list[str]) -> pl.DataFrame:
    """``items`` (``ts_ns``, ``name``, ``dur_ns`` [+ ``by``]) assigned to the segment that contains
    their start (segments of one rank are disjoint per ``by``: the rank and, on the host side, the
    launching thread ``launch_tid``)."""
    right = (
        seg.select("instance", pl.col(lo).alias("__lo"), pl.col(hi).alias("__hi"), *by)
        .drop_nulls(["__lo", "__hi"])
        .sort("__lo")
    )
    left = items.sort("ts_ns")
    j = left.join_asof(
        right, left_on="ts_ns", right_on="__lo", by=by or None, strategy="backward", check_sortedness=False
    )
    return j.filter(pl.col("instance").is_not_null() & (pl.col("ts_ns") < pl.col("__hi")))


#: Input-pipeline fetches: the names PyTorch's DataLoader and DataPipe iterators record.
DATA_FETCH_RE = r"^enumerate\((DataLoader|DataPipe)\)"


def _top_level_ops(src: EventSource, threads: pl.DataFrame) -> pl.DataFrame:
    """cpu_ops (and DataLoader / DataPipe fetches, which are user annotations in recent traces) on
    the given threads (``threads``: ``*by, tid``) that no earlier op of the same thread contains:
    ``*by, tid, ts_ns, end_ns, dur_ns, name``."""
    by = src.by
    n = pl.col("name").cast(pl.String)
    ops = (
        src.ev.filter(
            ((pl.col("kind") == "cpu_op") | ((pl.col("kind") == "user_annotation") & n.str.contains(DATA_FETCH_RE)))
            & pl.col("dur_ns").is_not_null()
            & ~n.str.starts_with("ProfilerStep")
        )
        .select(*by, pl.col("tid").cast(pl.Int64), "ts_ns", "end_ns", "dur_ns", pl.col("name").cast(pl.String))
        .join(threads.lazy(), on=[*by, "tid"], how="semi", maintain_order="left")
        .collect()
    )
    return with_outermost(ops, [*by, "tid"]).filter("outer").drop("outer")


def segment_work(trace: Trace, seg: pl.DataFrame) -> pl.DataFrame:
    """Per segment (``instance``) and name: total time and count of host ops (``side='cpu'``: top-level
    ops of the launching thread and of the training loop's thread) and GPU work (``side='gpu'``)
    that started in the segment (schema :data:`WORK_SCHEMA`)."""
    return segment_work_many(EventSource.one(trace), seg.with_columns(pl.lit(trace.rank, dtype=pl.Int32).alias("rank")))


def segment_work_many(src: EventSource, seg: pl.DataFrame) -> pl.DataFrame:
    """:func:`segment_work` of the ranks of ``src`` (one trace, or stacked ranks: issue 19) from
    their segments ``seg`` (a ``rank`` column; each rank's own clock), in one pass."""
    by = src.by
    if seg.height == 0:
        return pl.DataFrame(schema=WORK_SCHEMA)
    out = []
    launch = seg.select(*by, pl.col("launch_tid").cast(pl.Int64).alias("tid")).drop_nulls().unique()
    if launch.height:
        ops = _top_level_ops(src, launch).rename({"tid": "launch_tid"})
        seg_t = seg.with_columns(pl.col("launch_tid").cast(pl.Int64))
        cpu = [
            _in_segments(ops, seg_t, "cpu_from_ns", "cpu_to_ns", [*by, "launch_tid"]).select(
                *by, "instance", "name", "dur_ns"
            )
        ]
        # the training loop's thread (ProfilerSteps) when collectives are issued from another one
        # (DDP enqueues from the autograd thread): a late input fetch there delays everything after it
        with_launch = set(launch["rank"].to_list()) if by else {src.traces[0].rank}
        steps = [
            t.steps.select(pl.lit(t.rank, dtype=pl.Int32).alias("rank"), pl.col("tid").cast(pl.Int64))
            for t in src.traces
            if t.rank in with_launch and t.steps.height
        ]
        loop = (
            pl.concat(steps)
            .drop_nulls()
            .unique()
            .join(
                launch if by else launch.with_columns(pl.lit(src.traces[0].rank, dtype=pl.Int32).alias("rank")),
                on=["rank", "tid"],
                how="anti",
            )
            if steps
            else pl.DataFrame(schema={"rank": pl.Int32, "tid": pl.Int64})
        )
        if loop.height:
            lops = _top_level_ops(src, loop if by else loop.drop("rank")).drop("tid")
            cpu.append(
                _in_segments(lops, seg, "cpu_from_ns", "cpu_to_ns", by).select(*by, "instance", "name", "dur_ns")
            )
        out.append(
            pl.concat(cpu)
            .group_by(*by, "instance", "name")
            .agg(pl.col("dur_ns").sum().alias("total_ns"), pl.len().cast(pl.Int64).alias("count"))
            .with_columns(pl.lit("cpu").alias("side"))
        )
    gseg = seg.filter(pl.col("source") == "kernel")
    if gseg.height:
        g = (
            src.ev.filter(
                pl.col("kind").is_in(list(GPU_KINDS))
                & (pl.col("kernel_class") != "COMMUNICATION")
                & pl.col("dur_ns").is_not_null()
            )
            .select(*by, "ts_ns", "dur_ns", pl.col("name").cast(pl.String))
            .collect()
        )
        gpu = _in_segments(g, gseg, "gpu_from_ns", "gpu_to_ns", by)
        out.append(
            gpu.group_by(*by, "instance", "name")
            .agg(pl.col("dur_ns").sum().alias("total_ns"), pl.len().cast(pl.Int64).alias("count"))
            .with_columns(pl.lit("gpu").alias("side"))
        )
    if not out:
        return pl.DataFrame(schema=WORK_SCHEMA)
    df = pl.concat(out, how="vertical_relaxed")
    if not by:
        df = df.with_columns(pl.lit(src.traces[0].rank, dtype=pl.Int32).alias("rank"))
    return df.select([pl.col(c).cast(t) for c, t in WORK_SCHEMA.items()])
