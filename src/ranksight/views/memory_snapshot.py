"""Memory analysis of a PyTorch CUDA memory snapshot (``memory --snapshot FILE``).

Definitions (per CUDA device of the snapshot; bytes are the allocator's, after rounding):

- **reserved** = Σ ``total_size`` of the segments (memory the caching allocator holds from CUDA);
- **allocated** = Σ ``size`` of blocks in state ``active_allocated``; **pending free** = blocks
  freed by the program but still used by a stream (``active_pending_free``); **cached free** =
  ``inactive`` blocks; ``requested`` = Σ ``requested_size`` of allocated blocks, so
  ``rounding_bytes`` = allocated − requested is the allocator's rounding;
- **fragmentation** = 1 − allocated / reserved (the share of reserved memory not allocated, as in
  the trace-based ``memory`` analysis); ``largest_free_block_bytes`` is the largest ``inactive``
  block: the largest request served without a new ``cudaMalloc``;
- **history** (``device_traces``): ``alloc`` adds ``size`` to allocated and ``free_completed``
  removes it; ``segment_alloc`` / ``segment_map`` add to reserved and ``segment_free`` /
  ``segment_unmap`` remove it. The history is a ring buffer that may have lost its beginning, so
  levels are anchored at the snapshot: the level after an action = the snapshot's value (allocated
  + pending free, reserved) − the sum of the changes recorded after that action. ``peak`` is the
  maximum of that curve (or the snapshot's value without history); ``time_ms`` counts from the
  first recorded action of any device;
- **top frame** of a stack: the innermost Python frame outside the ``torch`` package, else the
  innermost Python frame, else the innermost frame that is not bookkeeping; ``stack`` lists the
  first Python frames (when none is Python, the first frames that are not bookkeeping), innermost
  first, as ``name (dir/file.py:line)``. Bookkeeping frames, which ``context="all"`` snapshots
  record around every allocation, are the stack unwinder's (``unwind::unwind``,
  ``CapturedTraceback::gather``, ``gather_with_cpp``), the caching allocator's
  (``CUDACachingAllocator``) and its factories (``at::empty*``, ``at::detail::empty*``), the
  dispatcher's (``core/boxing``, ``Register*``, ``Redispatch``, ``wrap_kernel_functor``,
  ``at::_ops::*::call``) and the interpreter's (``_start``, ``__libc_start_main``, ``PyEval_``,
  ``PyObject_``, ``PyFunction_``, ``_PyEval``): the list of PyTorch's ``torch.cuda._memory_viz``
  frame filter plus the allocator, its factories and the dispatcher;
- **largest allocations**: live blocks at the snapshot (``snapshot_blocks``) and ``alloc`` actions
  of the history (``snapshot_allocs``, with whether and when the same address was freed).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from ranksight.io.memory_snapshot import FRAME, MemorySnapshot, read_snapshot

__all__ = ["snapshot_tables", "snapshot_summary", "history_curve", "top_frames", "STACK_FRAMES"]

#: Frames shown in a ``stack`` column.
STACK_FRAMES = 6

_ALLOC_DELTA = {"alloc": 1, "free_completed": -1}
_SEGMENT_DELTA = {"segment_alloc": 1, "segment_map": 1, "segment_free": -1, "segment_unmap": -1}


#: Frames skipped when a stack has no Python frame (see the module doc).
_BOOKKEEPING_NAME = (
    r"unwind::unwind|CapturedTraceback::gather|gather_with_cpp|CUDACachingAllocator|^_start$|__libc_start_main"
    r"|PyEval_|PyObject_|PyFunction_|_PyEval|wrap_kernel_functor|::redispatch\(|at::_ops::\w+::call\("
    r"|at::(detail::|native::)?empty\w*\(|wrapper_\w*empty\w*\("
)
_BOOKKEEPING_FILE = (
    r"core/boxing|(^|/)Register\w*\.cpp$|(^|/)Redispatch|pythonrun\.c|Modules/main\.c|Objects/call\.c|ceval\.c"
)


def _frame_text() -> pl.Expr:
    f = pl.element()
    short = f.struct.field("filename").str.extract(r"((?:[^/]*/)?[^/]*)$", 1)
    return pl.format("{} ({}:{})", f.struct.field("name"), short, f.struct.field("line").fill_null(0))


def top_frames(df: pl.DataFrame) -> pl.DataFrame:
    """Add ``top_frame`` and ``stack`` (see the module doc) to a frame with a ``frames`` column."""
    if df.height == 0:
        return df.with_columns(pl.lit(None, pl.String).alias("top_frame"), pl.lit(None, pl.String).alias("stack"))
    fr = pl.col("frames").fill_null(pl.lit([], pl.List(FRAME)))
    is_py = pl.element().struct.field("filename").str.ends_with(".py")
    in_torch = pl.element().struct.field("filename").str.contains(r"(^|/)torch/")
    useful = ~(
        pl.element().struct.field("name").str.contains(_BOOKKEEPING_NAME)
        | pl.element().struct.field("filename").str.contains(_BOOKKEEPING_FILE)
    )
    native = pl.when(fr.list.eval(useful).list.any()).then(fr.list.filter(useful)).otherwise(fr)
    pick = pl.coalesce(
        fr.list.filter(is_py & ~in_torch).list.first(),
        fr.list.filter(is_py).list.first(),
        native.list.first(),
    )
    text = pl.format(
        "{} ({}:{})",
        pick.struct.field("name"),
        pick.struct.field("filename").str.extract(r"((?:[^/]*/)?[^/]*)$", 1),
        pick.struct.field("line").fill_null(0),
    )
    return df.with_columns(
        pl.when(pick.is_not_null()).then(text).alias("top_frame"),
        pl.when(fr.list.eval(is_py).list.any())
        .then(fr.list.filter(is_py))
        .otherwise(native)
        .list.head(STACK_FRAMES)
        .list.eval(_frame_text())
        .list.join("; ")
        .alias("stack"),
    )


def _device_label(col: str = "device") -> pl.Expr:
    return pl.format("cuda:{}", pl.col(col)).alias(col)


def history_curve(snap: MemorySnapshot) -> pl.DataFrame:
    """Every recorded action with the allocated and reserved levels after it (anchored at the
    snapshot, see the module doc): ``device, idx, time_us, action, addr, size, frames,
    allocated_bytes, reserved_bytes``."""
    tr = snap.trace
    if tr.height == 0:
        return tr.with_columns(
            pl.lit(None, pl.Int64).alias("allocated_bytes"), pl.lit(None, pl.Int64).alias("reserved_bytes")
        )
    end = _end_levels(snap)
    size = pl.col("size").fill_null(0)
    da = pl.col("action").replace_strict(_ALLOC_DELTA, default=0, return_dtype=pl.Int64) * size
    dr = pl.col("action").replace_strict(_SEGMENT_DELTA, default=0, return_dtype=pl.Int64) * size
    c = tr.sort(["device", "idx"]).with_columns(da.alias("__da"), dr.alias("__dr"))
    after_a = pl.col("__da").sum().over("device") - pl.col("__da").cum_sum().over("device")
    after_r = pl.col("__dr").sum().over("device") - pl.col("__dr").cum_sum().over("device")
    c = c.join(end, on="device", how="left").with_columns(
        (pl.col("__end_active").fill_null(0) - after_a).alias("allocated_bytes"),
        (pl.col("__end_reserved").fill_null(0) - after_r).alias("reserved_bytes"),
    )
    return c.drop("__da", "__dr", "__end_active", "__end_reserved")


def _end_levels(snap: MemorySnapshot) -> pl.DataFrame:
    b = snap.blocks.group_by("device").agg(
        pl.col("size")
        .filter(pl.col("state").is_in(["active_allocated", "active_pending_free"]))
        .sum()
        .alias("__end_active")
    )
    s = snap.segments.group_by("device").agg(pl.col("total_size").sum().alias("__end_reserved"))
    return s.join(b, on="device", how="full", coalesce=True)


def snapshot_summary(snap: MemorySnapshot, curve: pl.DataFrame, t0_us: int | None) -> pl.DataFrame:
    """One row per device (module doc)."""
    st = pl.col("state")
    blocks = snap.blocks.group_by("device").agg(
        pl.len().alias("blocks"),
        pl.col("size").filter(st == "active_allocated").sum().alias("allocated_bytes"),
        pl.col("requested_size").filter(st == "active_allocated").sum().alias("requested_bytes"),
        pl.col("size").filter(st == "active_pending_free").sum().alias("pending_free_bytes"),
        pl.col("size").filter(st == "inactive").sum().alias("cached_free_bytes"),
        pl.col("size").filter(st == "inactive").max().fill_null(0).alias("largest_free_block_bytes"),
    )
    segs = snap.segments.group_by("device").agg(
        pl.len().alias("segments"), pl.col("total_size").sum().alias("reserved_bytes")
    )
    out = segs.join(blocks, on="device", how="full", coalesce=True)
    if curve.height:
        i = pl.col("allocated_bytes").arg_max()
        hist = curve.group_by("device").agg(
            pl.len().alias("history_actions"),
            pl.col("allocated_bytes").max().alias("peak_allocated_bytes"),
            pl.col("time_us").gather(i).first().alias("__peak_us"),
            pl.col("reserved_bytes").max().alias("peak_reserved_bytes"),
            (pl.col("action") == "oom").sum().cast(pl.Int64).alias("ooms"),
        )
        out = out.join(hist, on="device", how="full", coalesce=True)
    else:
        out = out.with_columns(
            pl.lit(0, pl.Int64).alias("history_actions"),
            pl.lit(None, pl.Int64).alias("peak_allocated_bytes"),
            pl.lit(None, pl.Int64).alias("__peak_us"),
            pl.lit(None, pl.Int64).alias("peak_reserved_bytes"),
            pl.lit(0, pl.Int64).alias("ooms"),
        )
    z = [
        c
        for c in (
            "segments",
            "blocks",
            "reserved_bytes",
            "allocated_bytes",
            "requested_bytes",
            "pending_free_bytes",
            "cached_free_bytes",
            "largest_free_block_bytes",
            "history_actions",
            "ooms",
        )
    ]
    res = pl.col("reserved_bytes")
    return (
        out.with_columns([pl.col(c).fill_null(0).cast(pl.Int64) for c in z])
        .with_columns(
            (pl.col("allocated_bytes") - pl.col("requested_bytes")).alias("rounding_bytes"),
            pl.when(res > 0).then(1.0 - pl.col("allocated_bytes") / res).alias("fragmentation"),
            pl.coalesce("peak_allocated_bytes", pl.col("allocated_bytes") + pl.col("pending_free_bytes")).alias(
                "peak_allocated_bytes"
            ),
            pl.coalesce("peak_reserved_bytes", "reserved_bytes").alias("peak_reserved_bytes"),
            (((pl.col("__peak_us") - t0_us) / 1e3) if t0_us is not None else pl.lit(None, pl.Float64)).alias(
                "peak_time_ms"
            ),
        )
        .sort("device")
        .select(
            _device_label(),
            "segments",
            "blocks",
            "reserved_bytes",
            "allocated_bytes",
            "requested_bytes",
            "rounding_bytes",
            "pending_free_bytes",
            "cached_free_bytes",
            "largest_free_block_bytes",
            "fragmentation",
            "history_actions",
            "peak_allocated_bytes",
            "peak_time_ms",
            "peak_reserved_bytes",
            "ooms",
        )
    )


def _segment_table(snap: MemorySnapshot) -> pl.DataFrame:
    st = pl.col("state")
    per_seg = snap.blocks.group_by("device", "segment_address").agg(
        pl.col("size").filter(st == "active_allocated").sum().alias("allocated_bytes"),
        pl.col("size").filter(st == "inactive").sum().alias("cached_free_bytes"),
    )
    s = snap.segments.join(per_seg, left_on=["device", "address"], right_on=["device", "segment_address"], how="left")
    return (
        s.group_by("device", "segment_type", "stream")
        .agg(
            pl.len().alias("segments"),
            pl.col("blocks").sum().alias("blocks"),
            pl.col("total_size").sum().alias("reserved_bytes"),
            pl.col("allocated_bytes").fill_null(0).sum().alias("allocated_bytes"),
            pl.col("cached_free_bytes").fill_null(0).sum().alias("cached_free_bytes"),
            pl.col("total_size").max().alias("largest_segment_bytes"),
        )
        .with_columns(
            pl.when(pl.col("reserved_bytes") > 0)
            .then(1.0 - pl.col("allocated_bytes") / pl.col("reserved_bytes"))
            .alias("fragmentation")
        )
        .sort(["device", "reserved_bytes"], descending=[False, True])
        .with_columns(_device_label())
    )


def _largest_blocks(snap: MemorySnapshot, top: int) -> pl.DataFrame:
    b = snap.blocks.filter(pl.col("state") == "active_allocated").sort(
        ["size", "device", "address"], descending=[True, False, False]
    )
    b = top_frames(b.head(top) if top > 0 else b)
    return b.select(
        _device_label(), "size", "requested_size", "address", "stream", "segment_type", "top_frame", "stack"
    )


def _largest_allocs(curve: pl.DataFrame, t0_us: int | None, top: int) -> pl.DataFrame:
    if curve.height == 0:
        return pl.DataFrame(
            schema={
                "device": pl.String,
                "size": pl.Int64,
                "time_ms": pl.Float64,
                "freed": pl.Boolean,
                "lifetime_ms": pl.Float64,
                "top_frame": pl.String,
                "stack": pl.String,
            }
        )
    ev = curve.filter(pl.col("action").is_in(["alloc", "free_completed"])).sort(["device", "addr", "idx"])
    nxt = pl.col("action").shift(-1).over(["device", "addr"])
    nxt_t = pl.col("time_us").shift(-1).over(["device", "addr"])
    a = ev.with_columns((nxt == "free_completed").fill_null(False).alias("freed"), nxt_t.alias("__free_us")).filter(
        pl.col("action") == "alloc"
    )
    a = a.sort(["size", "device", "idx"], descending=[True, False, False])
    a = top_frames(a.head(top) if top > 0 else a)
    t0 = t0_us or 0
    return a.select(
        _device_label(),
        "size",
        (((pl.col("time_us") - t0) / 1e3) if t0_us is not None else pl.lit(None, pl.Float64)).alias("time_ms"),
        "freed",
        pl.when(pl.col("freed")).then((pl.col("__free_us") - pl.col("time_us")) / 1e3).alias("lifetime_ms"),
        "top_frame",
        "stack",
    )


def _by_frame(snap: MemorySnapshot, top: int) -> pl.DataFrame:
    b = top_frames(snap.blocks.filter(pl.col("state") == "active_allocated"))
    g = (
        b.with_columns(pl.col("top_frame").fill_null("<no frames>"))
        .group_by("device", "top_frame")
        .agg(pl.len().alias("blocks"), pl.col("size").sum().alias("bytes"), pl.col("size").max().alias("largest_bytes"))
        .sort(["device", "bytes", "top_frame"], descending=[False, True, False])
        .with_columns(_device_label())
    )
    return g.group_by("device", maintain_order=True).head(top) if top > 0 else g


def _curve_points(curve: pl.DataFrame, t0_us: int | None, points: int) -> pl.DataFrame:
    c = curve.select(
        "device",
        "idx",
        (((pl.col("time_us") - t0_us) / 1e3) if t0_us is not None else pl.lit(None, pl.Float64)).alias("time_ms"),
        "action",
        "size",
        "allocated_bytes",
        "reserved_bytes",
    )
    if points > 0 and c.height > points:
        n = pl.len().over("device")
        b = (pl.col("idx") * points // n).alias("__b")
        c = (
            c.with_columns(b)
            .sort(["device", "__b", "allocated_bytes", "idx"])
            .group_by(["device", "__b"], maintain_order=True)
            .last()
        )
        c = c.drop("__b").sort(["device", "idx"])
    return c.with_columns(_device_label())


def _ooms(curve: pl.DataFrame, t0_us: int | None) -> pl.DataFrame:
    o = curve.filter(pl.col("action") == "oom")
    return o.select(
        _device_label(),
        (((pl.col("time_us") - t0_us) / 1e3) if t0_us is not None else pl.lit(None, pl.Float64)).alias("time_ms"),
        pl.col("size").alias("requested_bytes"),
        pl.col("device_free").alias("device_free_bytes"),
        "allocated_bytes",
        "reserved_bytes",
    )


def snapshot_tables(path: str, *, points: int = 200, top: int = 20) -> tuple[dict[str, pl.DataFrame], list[str]]:
    """All snapshot tables (prefixed ``snapshot_``) and notes."""
    snap = read_snapshot(path)
    curve = history_curve(snap)
    t = curve["time_us"].drop_nulls() if curve.height else pl.Series([], dtype=pl.Int64)
    t0 = int(t.min()) if t.len() else None  # type: ignore[arg-type]
    notes = list(snap.warnings)
    tables: dict[str, Any] = {
        "snapshot_devices": snapshot_summary(snap, curve, t0),
        "snapshot_segments": _segment_table(snap),
        "snapshot_blocks": _largest_blocks(snap, top),
        "snapshot_by_frame": _by_frame(snap, top),
        "snapshot_allocs": _largest_allocs(curve, t0, top),
        "snapshot_curve": _curve_points(curve, t0, points),
    }
    ooms = _ooms(curve, t0)
    if ooms.height:
        tables["snapshot_oom"] = ooms
        notes.append(f"{ooms.height} out-of-memory event(s) recorded: see snapshot_oom")
    if curve.height == 0:
        notes.append(
            "snapshot without history (device_traces empty: record with torch.cuda.memory._record_memory_history()): "
            "peak = the snapshot's allocated"
        )
    else:
        notes.append(
            "history levels anchored at the snapshot's segments (the history is a ring buffer): level = snapshot − "
            "changes recorded later"
        )
        neg = curve.filter(pl.col("allocated_bytes") < 0)
        if neg.height:
            notes.append(
                f"{neg.height} history points fall below 0: actions after the history stopped, or a history from "
                "another snapshot"
            )
        if t0 is None:
            notes.append(
                "history entries carry no time_us (PyTorch < 2.1): times are empty, order is the recorded order"
            )
    if points > 0 and curve.height > points:
        notes.append(
            f"snapshot_curve: at most {points} points per device (the largest allocated per bucket of actions); "
            "--points 0 for all"
        )
    return tables, notes
