"""The ``[memory]`` events of one trace as allocation records: time, thread, step, device label and
the allocated / reserved totals (used by the ``memory`` analysis and by ``diff``'s per-step profile)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

if TYPE_CHECKING:
    from ranksight.model.trace import Trace

__all__ = ["DEVICE_TYPES", "GPU_DEVICE_TYPES", "memory_records"]

DEVICE_TYPES = {0: "cpu", 1: "cuda", 6: "hip"}
GPU_DEVICE_TYPES = (1, 6)


def _device_label() -> pl.Expr:
    t = pl.col("device_type")
    name = (
        pl.when(t == 1)
        .then(pl.lit("cuda"))
        .when(t == 6)
        .then(pl.lit("hip"))
        .otherwise(pl.lit("type") + t.cast(pl.String))
    )
    return (
        pl.when(t == 0)
        .then(pl.lit("cpu"))
        .otherwise(name + pl.lit(":") + pl.col("device_id").cast(pl.String))
        .alias("device")
    )


def memory_records(trace: Trace) -> pl.DataFrame:
    """``[memory]`` events of one trace with time, thread, step and a device label, in event order.

    Columns: ``row, ts_ns, tid, step, device, device_type, device_id, addr, bytes,
    allocated_bytes, reserved_bytes, allocated_source``.
    """
    mem = trace.table("memory")
    ev = trace.scan().filter(pl.col("row").is_in(mem["row"].implode())).select("row", "ts_ns", "tid", "step").collect()
    df = mem.join(ev, on="row", how="left").sort(["ts_ns", "row"])
    has_totals = df["total_allocated"].is_not_null().any() if df.height else False
    running = pl.col("bytes").fill_null(0).cum_sum().over("device_type", "device_id", order_by=["ts_ns", "row"])
    return df.with_columns(
        _device_label(),
        (pl.col("total_allocated") if has_totals else running).alias("allocated_bytes"),
        pl.col("total_reserved").alias("reserved_bytes"),
        pl.lit("total_allocated" if has_totals else "running_sum").alias("allocated_source"),
    ).select(
        "row",
        "ts_ns",
        "tid",
        "step",
        "device",
        "device_type",
        "device_id",
        "addr",
        "bytes",
        "allocated_bytes",
        "reserved_bytes",
        "allocated_source",
    )
