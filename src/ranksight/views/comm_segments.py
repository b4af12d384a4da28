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
from ranksight.views.intervals import with_outermost

if TYPE_CHECKING:
    from ranksight.model.trace import Trace

__all__ = ["segments", "segment_work", "WORK_SCHEMA", "DATA_FETCH_RE"]

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


def _in_segments(items: pl.DataFrame, seg: pl.DataFrame, lo: str, hi: str, by: str | None) -> pl.DataFrame:
    """``items`` (``ts_ns``, ``name``, ``dur_ns`` [+ ``by``]) assigned to the segment that contains
    their start (segments of one rank are disjoint per ``by``)."""
    right = (
        seg.select(
            "instance",
            pl.col(lo).alias("__lo"),
            pl.col(hi).alias("__hi"),
            *([pl.col("launch_tid").alias(by)] if by else []),
        )
        .drop_nulls(["__lo", "__hi"])
        .sort("__lo")
    )
    left = items.sort("ts_ns")
    j = left.join_asof(right, left_on="ts_ns", right_on="__lo", by=by, strategy="backward", check_sortedness=False)
    return j.filter(pl.col("instance").is_not_null() & (pl.col("ts_ns") < pl.col("__hi")))


#: Input-pipeline fetches: the names PyTorch's DataLoader and DataPipe iterators record.
DATA_FETCH_RE = r"^enumerate\((DataLoader|DataPipe)\)"


def _top_level_ops(trace: Trace, tids: list[int]) -> pl.DataFrame:
    """cpu_ops (and DataLoader / DataPipe fetches, which are user annotations in recent traces) on
    the given threads that no earlier op of the same thread contains."""
    n = pl.col("name").cast(pl.String)
    ops = (
        trace.scan()
        .filter(
            ((pl.col("kind") == "cpu_op") | ((pl.col("kind") == "user_annotation") & n.str.contains(DATA_FETCH_RE)))
            & pl.col("tid").is_in(tids)
            & pl.col("dur_ns").is_not_null()
            & ~n.str.starts_with("ProfilerStep")
        )
        .select(pl.col("tid").cast(pl.Int64), "ts_ns", "end_ns", "dur_ns", pl.col("name").cast(pl.String))
        .collect()
    )
    return with_outermost(ops, "tid").filter("outer").drop("outer")


def segment_work(trace: Trace, seg: pl.DataFrame) -> pl.DataFrame:
    """Per segment (``instance``) and name: total time and count of host ops (``side='cpu'``: top-level
    ops of the launching thread and of the training loop's thread) and GPU work (``side='gpu'``)
    that started in the segment (schema :data:`WORK_SCHEMA`)."""
    if seg.height == 0:
        return pl.DataFrame(schema=WORK_SCHEMA)
    out = []
    tids = [int(t) for t in seg["launch_tid"].drop_nulls().unique().to_list()]
    if tids:
        ops = _top_level_ops(trace, tids).rename({"tid": "launch_tid"})
        cpu = [_in_segments(ops, seg, "cpu_from_ns", "cpu_to_ns", "launch_tid").select("instance", "name", "dur_ns")]
        # the training loop's thread (ProfilerSteps) when collectives are issued from another one
        # (DDP enqueues from the autograd thread): a late input fetch there delays everything after it
        loop = (
            sorted({int(t) for t in trace.steps["tid"].drop_nulls().to_list()} - set(tids))
            if trace.steps.height
            else []
        )
        if loop:
            lops = _top_level_ops(trace, loop).drop("tid")
            cpu.append(_in_segments(lops, seg, "cpu_from_ns", "cpu_to_ns", None).select("instance", "name", "dur_ns"))
        out.append(
            pl.concat(cpu)
            .group_by("instance", "name")
            .agg(pl.col("dur_ns").sum().alias("total_ns"), pl.len().cast(pl.Int64).alias("count"))
            .with_columns(pl.lit("cpu").alias("side"))
        )
    gseg = seg.filter(pl.col("source") == "kernel")
    if gseg.height:
        g = (
            trace.scan()
            .filter(
                pl.col("kind").is_in(list(GPU_KINDS))
                & (pl.col("kernel_class") != "COMMUNICATION")
                & pl.col("dur_ns").is_not_null()
            )
            .select("ts_ns", "dur_ns", pl.col("name").cast(pl.String))
            .collect()
        )
        gpu = _in_segments(g, gseg, "gpu_from_ns", "gpu_to_ns", None)
        out.append(
            gpu.group_by("instance", "name")
            .agg(pl.col("dur_ns").sum().alias("total_ns"), pl.len().cast(pl.Int64).alias("count"))
            .with_columns(pl.lit("gpu").alias("side"))
        )
    if not out:
        return pl.DataFrame(schema=WORK_SCHEMA)
    df = pl.concat(out, how="vertical_relaxed").with_columns(pl.lit(trace.rank, dtype=pl.Int32).alias("rank"))
    return df.select([pl.col(c).cast(t) for c, t in WORK_SCHEMA.items()])
