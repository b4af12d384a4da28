"""Memory from the caching allocator's ``[memory]`` events (``profile_memory=True``).

Definitions (per rank and device; a device is ``cpu``, ``cuda:N`` (c10 device type 1) or
``hip:N`` (type 6, ROCm), any other type ``typeT:N``; no device type is dropped):

- **allocated / reserved curve**: ``Total Allocated`` / ``Total Reserved`` after each event, in
  event order. 2021 traces carry only ``Bytes``: their allocated curve is the running sum of
  ``Bytes`` since the capture started (``allocated_source = "running_sum"``, relative to an unknown
  start) and reserved is empty.
- **op of an event**: ``alloc_op`` is the innermost ``cpu_op`` on the same thread enclosing the
  event; ``op`` is the same, or the op enclosing it when it only allocates (``aten::empty``,
  ``aten::empty_strided``, ``aten::empty_like``, ``aten::new_empty*``, ``aten::resize_``), as the TB
  plugin shows ``<op> (aten::empty)``.
- **peak**: the maximum of the allocated curve; ``peak_ts_ns`` is the first event reaching it and
  ``peak_op`` its ``op``.
- **fragmentation** at an event = ``1 − allocated / reserved`` (null where reserved is 0, i.e. on
  the CPU). Reported at the peak event (``fragmentation_at_peak``), time-weighted over the curve
  (each value held until the next event), and as ``max_unused_reserved_bytes`` = max(reserved −
  allocated).
- **allocation table**: an allocation (``Bytes > 0``) is paired with the next event of the same
  ``Addr`` on the same device when that event is a free (``Bytes < 0``); ``lifetime_us`` = free −
  allocation time. Allocations never freed in the window have no free time; frees of blocks
  allocated before the window are counted (``frees_without_alloc``).
- **capacity**: ``deviceProperties[id].totalGlobalMem`` of the GPU (``peak_pct_of_capacity``).

The reader for PyTorch's ``export_memory_timeline`` raw files is
:mod:`ranksight.io.memory_timeline`; ``timeline=PATH`` adds its per-category table.
``snapshot=PATH`` adds the ``snapshot_*`` tables of a PyTorch CUDA memory snapshot
(:mod:`ranksight.views.memory_snapshot`); with a snapshot, traces are optional (``run`` may be
None).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, Option, register
from ranksight.analyses._session import Session
from ranksight.views.enclosing import innermost_enclosing, parent_spans
from ranksight.views.event_source import EventSource, thread_key
from ranksight.views.memory_records import DEVICE_TYPES, GPU_DEVICE_TYPES, memory_records

if TYPE_CHECKING:
    from ranksight.model.run import Run
    from ranksight.model.trace import Trace

__all__ = [
    "memory",
    "memory_records",
    "attach_ops",
    "attach_ops_of",
    "memory_curve",
    "memory_peaks",
    "allocations",
    "timeline_categories",
    "DEVICE_TYPES",
    "ALLOC_PRIMITIVES",
]

#: c10 ``DeviceType`` values seen in ``[memory]`` events.
#: Ops that only allocate: an allocation inside one is charged to the op that called it.
ALLOC_PRIMITIVES = (
    "aten::empty",
    "aten::empty_strided",
    "aten::empty_like",
    "aten::new_empty",
    "aten::new_empty_strided",
    "aten::resize_",
)


def attach_ops(trace: Trace, df: pl.DataFrame, *, ts: str = "ts_ns") -> pl.DataFrame:
    """Add ``alloc_op`` (innermost ``cpu_op`` on the same thread enclosing ``df[ts]``) and ``op``
    (``alloc_op``, or the op enclosing it when ``alloc_op`` is one of :data:`ALLOC_PRIMITIVES`)
    to any frame with ``tid`` and a time column."""
    return attach_ops_of(EventSource.one(trace), df, ts=ts)


def attach_ops_of(src: EventSource, df: pl.DataFrame, *, ts: str = "ts_ns") -> pl.DataFrame:
    """:func:`attach_ops` over one rank or stacked ranks (``df`` then has a ``rank`` column; the
    ops of its own rank's thread enclose a row)."""
    by = src.by
    # names stay categorical (one string per op would be the bulk of the memory); cast once gathered
    ops = (
        src.ev.filter((pl.col("kind") == "cpu_op") & pl.col("dur_ns").is_not_null())
        .select(*by, "tid", "ts_ns", "end_ns", "name")
        .collect()
    )
    if ops.height == 0 or df.height == 0:
        return df.with_columns(
            pl.lit(None, dtype=pl.String).alias("op"), pl.lit(None, dtype=pl.String).alias("alloc_op")
        )
    if by:
        src.check_thread_key()
        key = thread_key(by).alias("tid")
        ops = ops.select(key, "ts_ns", "end_ns", "name")
        points = df.select(key, pl.col(ts).alias("ts_ns"))
    else:
        points = df.select("tid", pl.col(ts).alias("ts_ns"))
    idx = innermost_enclosing(ops, points)
    pidx = parent_spans(ops).gather(idx.fill_null(0))
    names = ops["name"]
    inner = (
        pl.select(pl.when(idx.is_null()).then(None).otherwise(names.gather(idx.fill_null(0))))
        .to_series()
        .cast(pl.String)
    )
    outer = (
        pl.select(pl.when(idx.is_null() | pidx.is_null()).then(None).otherwise(names.gather(pidx.fill_null(0))))
        .to_series()
        .cast(pl.String)
    )
    op = pl.select(
        pl.when(inner.is_in(ALLOC_PRIMITIVES) & outer.is_not_null()).then(outer).otherwise(inner)
    ).to_series()
    return df.with_columns(op.alias("op"), inner.alias("alloc_op"))


def memory_curve(rec: pl.DataFrame, t0_ns: int, points: int = 0) -> pl.DataFrame:
    """Allocated / reserved / fragmentation after each event; ``points > 0`` keeps, per device,
    the event of maximum allocated in each of ``points`` equal time buckets (peaks survive)."""
    c = rec.select(
        "device",
        "ts_ns",
        ((pl.col("ts_ns") - t0_ns) / 1e6).alias("time_ms"),
        "step",
        "allocated_bytes",
        "reserved_bytes",
        _frag().alias("fragmentation"),
    )
    if points <= 0 or c.height <= points:
        return c
    lo, hi = pl.col("ts_ns").min().over("device"), pl.col("ts_ns").max().over("device")
    b = ((pl.col("ts_ns") - lo) * points // (hi - lo + 1)).alias("__b")
    return (
        c.with_columns(b)
        .sort(["device", "__b", "allocated_bytes", "ts_ns"])
        .group_by(["device", "__b"], maintain_order=True)
        .last()
        .drop("__b")
        .sort(["device", "ts_ns"])
    )


def _frag() -> pl.Expr:
    r = pl.col("reserved_bytes")
    return pl.when(r > 0).then(1.0 - pl.col("allocated_bytes") / r).otherwise(None)


def _capacity(trace: Trace, device_type: int, device_id: int) -> int | None:
    if device_type not in GPU_DEVICE_TYPES:
        return None
    d = trace.meta.device(device_id)
    v = d.get("totalGlobalMem") if d else None
    return int(v) if v else None


def memory_peaks(trace: Trace, rec: pl.DataFrame, t0_ns: int) -> pl.DataFrame:
    """One row per device: peak, when, which op, capacity and fragmentation."""
    rows = []
    for (dev,), g in rec.group_by(["device"], maintain_order=True):
        rows.append(_peak_row(trace, str(dev), g, t0_ns))
    return pl.DataFrame(rows, schema=_PEAK_SCHEMA, orient="row")


_PEAK_SCHEMA = {
    "rank": pl.Int32,
    "device": pl.String,
    "events": pl.Int64,
    "allocs": pl.Int64,
    "frees": pl.Int64,
    "allocated_source": pl.String,
    "peak_allocated_bytes": pl.Int64,
    "peak_ts_ns": pl.Int64,
    "peak_time_ms": pl.Float64,
    "peak_step": pl.Int32,
    "peak_op": pl.String,
    "peak_reserved_bytes": pl.Int64,
    "capacity_bytes": pl.Int64,
    "peak_pct_of_capacity": pl.Float64,
    "peak_reserved_pct_of_capacity": pl.Float64,
    "fragmentation_at_peak": pl.Float64,
    "max_unused_reserved_bytes": pl.Int64,
    "mean_fragmentation": pl.Float64,
}


def _peak_row(trace: Trace, dev: str, g: pl.DataFrame, t0_ns: int) -> tuple[object, ...]:
    g = g.sort(["ts_ns", "row"])
    i = int(g["allocated_bytes"].arg_max() or 0)
    at = attach_ops(trace, g.slice(i, 1))
    peak = int(g["allocated_bytes"][i])
    res = g["reserved_bytes"]
    has_res = res.is_not_null().any() and (res.fill_null(0) > 0).any()
    cap = _capacity(trace, int(g["device_type"][0]), int(g["device_id"][0]))
    peak_res = int(res.max()) if has_res else None  # type: ignore[arg-type]
    frag_at = mean_frag = max_unused = None
    if has_res:
        r_at = res[i]
        frag_at = 1.0 - peak / float(r_at) if r_at else None
        max_unused = int((res - g["allocated_bytes"]).max())
        mean_frag = _time_weighted(g)
    return (
        trace.rank,
        dev,
        g.height,
        int((g["bytes"] > 0).sum()),
        int((g["bytes"] < 0).sum()),
        g["allocated_source"][0],
        peak,
        int(g["ts_ns"][i]),
        (int(g["ts_ns"][i]) - t0_ns) / 1e6,
        g["step"][i],
        at["op"][0],
        peak_res,
        cap,
        100.0 * peak / cap if cap else None,
        100.0 * peak_res / cap if cap and peak_res is not None else None,
        frag_at,
        max_unused,
        mean_frag,
    )


def _time_weighted(g: pl.DataFrame) -> float | None:
    """Fragmentation held from each event to the next, weighted by that time."""
    w = g.select(_frag().alias("f"), (pl.col("ts_ns").shift(-1) - pl.col("ts_ns")).alias("w")).drop_nulls()
    tot = float(w["w"].sum())
    return float((w["f"] * w["w"]).sum()) / tot if tot else None


def allocations(trace: Trace, rec: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """Allocation table (see module doc) and the number of frees without an allocation."""
    a = rec.filter(pl.col("addr").is_not_null()).sort(["device", "addr", "ts_ns", "row"])
    nxt_b = pl.col("bytes").shift(-1).over(["device", "addr"])
    nxt_t = pl.col("ts_ns").shift(-1).over(["device", "addr"])
    prv_b = pl.col("bytes").shift(1).over(["device", "addr"])
    a = a.with_columns(
        pl.when(nxt_b < 0).then(nxt_t).otherwise(None).alias("free_ts_ns"),
        ((pl.col("bytes") < 0) & ~(prv_b > 0).fill_null(False)).alias("__orphan"),
    )
    orphans = int(a["__orphan"].sum())
    al = a.filter(pl.col("bytes") > 0)
    al = attach_ops(trace, al).select(
        pl.lit(trace.rank, dtype=pl.Int32).alias("rank"),
        "device",
        "addr",
        "bytes",
        pl.col("ts_ns").alias("alloc_ts_ns"),
        "free_ts_ns",
        ((pl.col("free_ts_ns") - pl.col("ts_ns")) / 1e3).alias("lifetime_us"),
        "step",
        "op",
        "alloc_op",
    )
    return al.sort(["bytes", "alloc_ts_ns"], descending=[True, False]), orphans


def _by_op(allocs: pl.DataFrame) -> pl.DataFrame:
    op = pl.col("op").fill_null("<unknown>")
    return (
        allocs.with_columns(op)
        .group_by(["rank", "device", "op"])
        .agg(
            pl.len().alias("allocs"),
            pl.col("bytes").sum().alias("alloc_bytes"),
            pl.col("bytes").max().alias("max_bytes"),
            pl.col("lifetime_us").mean().alias("mean_lifetime_us"),
            pl.col("free_ts_ns").is_null().sum().alias("not_freed"),
        )
        .sort(["rank", "alloc_bytes", "device", "op"], descending=[False, True, False, False])  # ties in a stable order
    )


def _by_step(rank: int, rec: pl.DataFrame) -> pl.DataFrame:
    return (
        rec.filter(pl.col("step").is_not_null())
        .with_columns(_frag().alias("f"))
        .group_by(["device", "step"])
        .agg(
            pl.col("allocated_bytes").max().alias("peak_allocated_bytes"),
            pl.col("reserved_bytes").max().alias("peak_reserved_bytes"),
            pl.col("f").max().alias("max_fragmentation"),
        )
        .with_columns(pl.lit(rank, dtype=pl.Int32).alias("rank"))
        .select("rank", "device", "step", "peak_allocated_bytes", "peak_reserved_bytes", "max_fragmentation")
        .sort(["device", "step"])
    )


def timeline_categories(path: str) -> pl.DataFrame:
    """Peak bytes per category of a ``export_memory_timeline`` raw file, and at the total's peak."""
    from ranksight.io.memory_timeline import CATEGORIES, by_category, read_memory_timeline

    s = by_category(read_memory_timeline(path))
    if s.height == 0:
        return pl.DataFrame(schema={"category": pl.String, "peak_bytes": pl.Int64, "at_total_peak_bytes": pl.Int64})
    cols = [c for c in CATEGORIES]
    i = int(s.select(pl.sum_horizontal(cols)).to_series().arg_max() or 0)
    return pl.DataFrame(
        {
            "category": cols + ["Total"],
            "peak_bytes": [int(s[c].max()) for c in cols] + [int(s.select(pl.sum_horizontal(cols)).to_series().max())],  # type: ignore[arg-type]
            "at_total_peak_bytes": [int(s[c][i]) for c in cols] + [int(sum(s[c][i] for c in cols))],
        }
    )


def _rank_tables(trace: Trace, points: int, top: int) -> dict[str, pl.DataFrame] | None:
    rec = memory_records(trace)
    if rec.height == 0:
        return None
    t0 = trace.span_ns[0] if trace.span_ns else int(rec["ts_ns"].min())  # type: ignore[arg-type]
    allocs, orphans = allocations(trace, rec)
    peaks = memory_peaks(trace, rec, t0).with_columns(pl.lit(orphans, dtype=pl.Int64).alias("frees_without_alloc"))
    curve = memory_curve(rec, t0, points).with_columns(pl.lit(trace.rank, dtype=pl.Int32).alias("rank"))
    by_op = _by_op(allocs)
    return {
        "peaks": peaks,
        "curve": curve.select("rank", *[c for c in curve.columns if c != "rank"]),
        "by_step": _by_step(trace.rank, rec),
        "by_op": by_op.head(top) if top > 0 else by_op,
        "allocations": allocs.head(top) if top > 0 else allocs,
    }


def memory(
    run: Run | None,
    *,
    ranks: Sequence[int] | None = None,
    points: int = 200,
    top: int = 20,
    timeline: str | None = None,
    snapshot: str | None = None,
) -> AnalysisResult:
    """Memory curves, peaks, fragmentation and allocations per rank and device (see module doc)."""
    from ranksight.errors import MissingDataError

    parts = Session.of(run, ranks).map(_rank_tables, points=points, top=top)
    have = {r: p for r, p in parts.items() if p is not None}
    notes = [f"rank {r}: no [memory] events" for r, p in parts.items() if p is None and (have or snapshot is not None)]
    if not have and timeline is None and snapshot is None:
        raise MissingDataError("no [memory] events in these traces (profile with profile_memory=True)")
    tables: dict[str, pl.DataFrame] = {}
    for name in ("peaks", "by_step", "by_op", "allocations", "curve"):
        if have:
            tables[name] = pl.concat([p[name] for p in have.values()], how="vertical_relaxed")
    if have and (tables["peaks"]["allocated_source"] == "running_sum").any():
        notes.append(
            "no Total Allocated/Addr in [memory] events (pre-1.10 trace): allocated = running sum of Bytes since the "
            "capture started; no allocation table"
        )
    if have and points > 0:
        notes.append(
            f"curve: at most {points} points per device (the largest allocated per time bucket); --points 0 for all"
        )
    if timeline is not None:
        tables["timeline_categories"] = timeline_categories(timeline)
    if snapshot is not None:
        from ranksight.views.memory_snapshot import snapshot_tables

        snap_tables, snap_notes = snapshot_tables(snapshot, points=points, top=top)
        tables.update(snap_tables)
        notes.extend(snap_notes)
    return AnalysisResult(tables, notes)


register(
    AnalysisSpec(
        name="memory",
        func=memory,
        help="allocated/reserved curves, peak and its op, fragmentation, allocations ([memory] events)",
        options=(
            Option("points", int, 200, "curve points per device (0: every event)"),
            Option("top", int, 20, "rows of the allocation and per-op tables per rank (0: all)"),
            Option("timeline", str, None, "also read a PyTorch export_memory_timeline raw file (.raw.gz / .json)"),
            Option(
                "snapshot",
                str,
                None,
                "also (or only) read a PyTorch CUDA memory snapshot (torch.cuda.memory._dump_snapshot pickle)",
            ),
        ),
        standalone=("snapshot",),
    )
)
