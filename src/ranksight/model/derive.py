"""Columns derived once per trace, vectorised over the decoded columns.

- ``row``: position of the event in ``traceEvents``;
- ``end_ns``: ``ts_ns + dur_ns`` (``ts_ns`` for events without a duration);
- ``kind`` and ``kernel_class`` (see :mod:`ranksight.model.kinds`);
- ``stream`` / ``device`` of GPU rows filled from ``tid`` / ``pid`` when the args lack them
  (2021 traces), so CUDA (default stream 7) and ROCm (default stream 0) read alike;
- ``launch_row``: for GPU activities, the row of the runtime/driver call with the same
  ``correlation`` (any launch API, CUDA graphs and HIP included); ac2g flows are used only for
  events that carry no correlation;
- ``step``: the ProfilerStep an event falls in: CPU events by a sorted interval lookup on their
  start time, GPU events through their launch.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl

from ranksight.model.kinds import (
    CPU_KINDS,
    GPU_KINDS,
    KERNEL_CLASS_DTYPE,
    KERNEL_CLASSES,
    KIND_DTYPE,
    LAUNCH_KINDS,
    kernel_class_of_name,
    kind_of_category,
)

__all__ = ["derive", "build_steps", "STEP_RE"]

STEP_RE = re.compile(r"^ProfilerStep\s*#\s*(\d+)$")

#: Rows per chunk of the step lookup (bounded temporaries on multi-GB traces).
_CHUNK = 1 << 20


def _map_categorical(col: pl.Series, fn: Callable[[str], Any], dtype: pl.DataType) -> pl.Series:
    """``fn`` applied once per distinct value of a categorical column, broadcast through the codes."""
    uniq = col.unique().drop_nulls()
    codes = uniq.to_physical()
    vals = pl.Series([fn(v) for v in uniq.cast(pl.String).to_list()], dtype=dtype)
    return col.to_physical().replace_strict(codes, vals, default=None, return_dtype=dtype)


def _positions(ev: pl.DataFrame, rows: np.ndarray) -> np.ndarray:
    """Positions in ``ev`` of the given ``row`` values (``row`` is sorted; it skips the flow
    events, which live in the ``flow`` table only). Rows not in ``ev`` map to -1."""
    all_rows = ev["row"].to_numpy()
    if all_rows.size == 0 or all_rows[-1] == all_rows.size - 1:  # dense: row == position
        return rows.astype(np.int64)
    pos = np.searchsorted(all_rows, rows)
    pos[pos >= all_rows.size] = 0
    return np.where(all_rows[pos] == rows, pos, -1)


def derive(events: pl.DataFrame | list[pl.DataFrame], tables: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """Add the derived columns to a decoded events table (which may already have ``row``). Given
    as a one-item list, the table is taken out of it (the caller keeps no reference)."""
    if isinstance(events, list):
        events = events.pop()
    n = events.height
    ev = events if "row" in events.columns else events.with_columns(pl.int_range(0, n, dtype=pl.UInt32).alias("row"))
    del events
    if n:
        base = _map_categorical(ev["cat"], lambda c: kind_of_category(c or "", "X", ""), KIND_DTYPE)
        ph = pl.col("ph")

        def lit(k: str) -> pl.Expr:
            return pl.lit(k, dtype=KIND_DTYPE)

        kind = ev.select(
            pl.when(ph == "M")
            .then(lit("metadata"))
            .when(ph == "C")
            .then(lit("counter"))
            .when((ph == "s") | (ph == "t") | (ph == "f"))
            .then(lit("flow"))
            .when(pl.col("name") == "[memory]")
            .then(lit("memory"))
            .otherwise(base)
        ).to_series()
    else:
        kind = pl.Series("kind", [], dtype=KIND_DTYPE)
    ev = ev.with_columns(kind.alias("kind"))
    is_gpu_side = pl.col("kind").is_in(list(GPU_KINDS) + ["sync", "gpu_user_annotation"])
    # one column at a time (each one's temporaries are freed before the next), and only when needed
    if ev.select((is_gpu_side & pl.col("stream").is_null()).any()).item():
        ev = ev.with_columns(
            pl.when(is_gpu_side).then(pl.coalesce("stream", "tid")).otherwise(pl.col("stream")).alias("stream")
        )
    fill_device = is_gpu_side & pl.col("device").is_null() & (pl.col("pid") >= 0) & (pl.col("pid") < 1 << 20)
    if ev.select(fill_device.any()).item():
        ev = ev.with_columns(
            pl.when(fill_device).then(pl.col("pid").cast(pl.Int32)).otherwise(pl.col("device")).alias("device")
        )
    ev = ev.with_columns(pl.coalesce(pl.col("ts_ns") + pl.col("dur_ns"), pl.col("ts_ns")).alias("end_ns"))
    # kernel class, per distinct (kind, name) among GPU rows
    gpu_mask = ev["kind"].is_in(list(GPU_KINDS))
    kc = pl.Series("kernel_class", [], dtype=KERNEL_CLASS_DTYPE).extend_constant(None, n)
    if gpu_mask.any():
        g = ev.select("name", "kind").filter(gpu_mask)  # select first: a filter copies every column it keeps
        by_name = _map_categorical(g["name"], lambda nm: kernel_class_of_name("kernel", nm or ""), KERNEL_CLASS_DTYPE)
        cls = g.select(
            pl.when(pl.col("kind") == "kernel").then(by_name).otherwise(pl.lit("MEMORY", dtype=KERNEL_CLASS_DTYPE))
        ).to_series()
        arr = np.full(n, -1, dtype=np.int8)
        arr[np.flatnonzero(gpu_mask.to_numpy())] = cls.to_physical().fill_null(-1).cast(pl.Int8).to_numpy()
        coll = tables.get("collective")
        if coll is not None and coll.height:
            pos = _positions(ev, coll["row"].to_numpy())
            pos = pos[pos >= 0]
            is_k = (ev["kind"] == "kernel").to_numpy()[pos]
            arr[pos[is_k]] = KERNEL_CLASSES.index("COMMUNICATION")  # collective args on the kernel row
        kc = pl.Series("kernel_class", arr).replace_strict(
            dict(enumerate(KERNEL_CLASSES)), default=None, return_dtype=KERNEL_CLASS_DTYPE
        )
    ev = ev.with_columns(kc)
    ev = _link_launches(ev, tables)
    ev = _assign_steps(ev)
    return ev


def _link_launches(ev: pl.DataFrame, tables: dict[str, pl.DataFrame]) -> pl.DataFrame:
    n = ev.height
    corr = ev["correlation"]
    flow = tables.get("flow")
    gpu = ev["kind"].is_in(list(GPU_KINDS))
    launch_kind = ev["kind"].is_in(list(LAUNCH_KINDS))
    # ac2g fallback: only for GPU or runtime rows without a correlation arg
    if flow is not None and flow.height and ((gpu | launch_kind) & corr.is_null()).any():
        fl = flow.filter(
            pl.col("cat").cast(pl.String).str.to_lowercase().is_in(["ac2g", "async", "async_cpu_to_gpu"])
            & pl.col("flow_id").is_not_null()
        )
        fill = []
        for phase, mask in (("f", gpu), ("s", launch_kind)):
            ends = (
                fl.filter(pl.col("ph") == phase)
                .select("pid", "tid", "ts_ns", pl.col("flow_id").alias("__fid"))
                .unique(["pid", "tid", "ts_ns"])
            )
            cand = ev.select("row", "pid", "tid", "ts_ns", "correlation").filter(mask & pl.col("correlation").is_null())
            fill.append(cand.join(ends, on=["pid", "tid", "ts_ns"], how="inner").select("row", "__fid"))
        f = pl.concat(fill)
        if f.height:
            c = corr.to_numpy().astype(np.float64) if corr.null_count() else corr.to_numpy().astype(np.float64)
            c[_positions(ev, f["row"].to_numpy())] = f["__fid"].to_numpy().astype(np.float64)
            ev = ev.with_columns(pl.Series("correlation", c).fill_nan(None).cast(pl.Int64))
    # each correlation's first launch (lowest row), by a stable sort and a binary search (a hash
    # unique/join over millions of launches costs several times the columns)
    corr = ev["correlation"]
    rows = ev["row"]
    lmask = launch_kind & corr.is_not_null()
    l_corr, l_row = corr.filter(lmask).to_numpy(), rows.filter(lmask).to_numpy()
    order = np.argsort(l_corr, kind="stable")
    l_corr, l_row = l_corr[order], l_row[order]
    del order
    first = np.ones(l_corr.size, dtype=bool)
    first[1:] = l_corr[1:] != l_corr[:-1]
    l_corr, l_row = l_corr[first], l_row[first]
    del first
    # only GPU rows get a launch: found by correlation, then scattered into a full-length column
    gmask = gpu & corr.is_not_null()
    g_corr, g_row = corr.filter(gmask).to_numpy(), rows.filter(gmask).to_numpy()
    del corr, rows
    pos = np.minimum(np.searchsorted(l_corr, g_corr), max(l_corr.size - 1, 0))
    hit = l_corr[pos] == g_corr if l_corr.size else np.zeros(g_corr.size, dtype=bool)
    linked_row, linked_launch = g_row[hit], l_row[pos[hit]]
    del pos, hit, g_corr, g_row, l_corr, l_row
    lr = np.full(n, np.iinfo(np.uint32).max, dtype=np.uint32)
    lr[_positions(ev, linked_row)] = linked_launch
    lr_s = pl.Series("launch_row", lr)
    ev = ev.with_columns(pl.when(lr_s != np.iinfo(np.uint32).max).then(lr_s).otherwise(None).alias("launch_row"))
    del lr, lr_s
    # how many GPU activities each launch owns (graph launches own many)
    gc = np.zeros(n, dtype=np.int32)
    if linked_launch.size:
        np.add.at(gc, _positions(ev, linked_launch), 1)
    ev = ev.with_columns(pl.Series("gpu_count", gc).cast(pl.Int32))
    return ev


def _step_rows(ev: pl.DataFrame | pl.LazyFrame, extra: list[str] | None = None) -> pl.DataFrame:
    """The CPU rows named ``ProfilerStep#N``, with ``__step`` = N (the names are mapped once per
    distinct value, then only the matching rows are read); ``extra`` columns are kept too."""
    lf = ev.lazy()
    names = lf.select(pl.col("name").unique().drop_nulls()).collect().to_series().cast(pl.String)
    nums = {}
    for nm in names.filter(names.str.starts_with("ProfilerStep")).to_list():
        m = STEP_RE.match(nm)
        if m:
            nums[nm] = int(m.group(1))
    cols = [*(extra or []), "row", "name", "tid", "ts_ns", "dur_ns", "end_ns"]
    if not nums:
        return lf.select(cols).limit(0).collect().with_columns(pl.lit(None, dtype=pl.Int64).alias("__step"))
    cand = (
        lf.filter(pl.col("name").is_in(list(nums)) & pl.col("kind").is_in(["cpu_op", "user_annotation"]))
        .select(cols)
        .collect()
    )
    return cand.with_columns(pl.col("name").cast(pl.String).replace_strict(nums, return_dtype=pl.Int64).alias("__step"))


def build_steps(ev: pl.DataFrame | pl.LazyFrame, by: list[str] | None = None) -> pl.DataFrame:
    """One row per ProfilerStep (CPU side), with the span of the GPU work it launched; ``by`` are
    the columns that tell traces apart when ``ev`` holds several (kept in front)."""
    by = by or []
    return (
        _step_rows(ev, by)
        .filter(pl.col("__step").is_not_null() & pl.col("dur_ns").is_not_null())
        .sort([*by, "ts_ns"], maintain_order=True)  # stable: the first of equal starts is the first row
        .unique([*by, "__step"], keep="first", maintain_order=True)
        .select(
            *by,
            pl.col("__step").cast(pl.Int32).alias("step"),
            pl.col("name").cast(pl.String).alias("name"),
            "row",
            "tid",
            pl.col("ts_ns").alias("start_ns"),
            pl.col("end_ns"),
        )
    )


def with_gpu_spans(st: pl.DataFrame, ev: pl.DataFrame | pl.LazyFrame, by: list[str]) -> pl.DataFrame:
    """ProfilerSteps (:func:`build_steps`) with the span and kernel count of the GPU work each
    launched, and ``incomplete`` (fewer than 80 % of the previous step's kernels); ``by`` are the
    columns that tell traces apart when ``ev`` holds several (empty for one trace)."""
    g = (
        ev.lazy()
        .filter(pl.col("kind").is_in(list(GPU_KINDS)) & pl.col("step").is_not_null())
        .group_by([*by, "step"])
        .agg(
            pl.col("ts_ns").min().alias("gpu_start_ns"),
            pl.col("end_ns").max().alias("gpu_end_ns"),
            (pl.col("kind") == "kernel").sum().cast(pl.Int64).alias("kernel_count"),
        )
        .collect()
    )
    st = st.join(g, on=[*by, "step"], how="left", maintain_order="left").with_columns(
        pl.col("kernel_count").fill_null(0)
    )
    prev = pl.col("kernel_count").shift(1)
    if by:
        prev = prev.over(by)
    return st.with_columns((prev.is_not_null() & (pl.col("kernel_count") < 0.8 * prev)).alias("incomplete"))


def steps_many(ev: pl.DataFrame, sizes: list[int]) -> list[pl.DataFrame]:
    """:attr:`Trace.steps <ranksight.model.trace.Trace.steps>` of each trace of stacked derived
    events (trace ``i`` = the ``i``-th run of ``sizes[i]`` rows), found by one query over all of
    them instead of two per trace; equal to each trace's own (tests/integration/test_batched_load)."""
    k = len(sizes)
    f = pl.Series("__f", np.repeat(np.arange(k, dtype=np.int32), np.asarray(sizes, dtype=np.int64)))
    evf = ev.select("name", "kind", "ts_ns", "dur_ns", "end_ns", "row", "tid", "step").with_columns(f)
    st = build_steps(evf, ["__f"])
    st = with_gpu_spans(st, evf, ["__f"])
    parts = st.partition_by("__f", as_dict=True, include_key=False, maintain_order=True)
    empty = st.drop("__f").clear()
    return [parts.get((i,), empty) for i in range(k)]


def _assign_steps(ev: pl.DataFrame) -> pl.DataFrame:
    n = ev.height
    steps = build_steps(ev)
    step = np.full(n, -1, dtype=np.int32)
    if steps.height:
        st = steps.sort("start_ns")
        starts = st["start_ns"].to_numpy()
        ends = st["end_ns"].to_numpy()
        nums = st["step"].to_numpy().astype(np.int32)
        # CPU events by position, in bounded chunks (no full-length int64 temporaries)
        tsc = ev["ts_ns"]
        ts_all = (tsc.fill_null(0) if tsc.null_count() else tsc).to_numpy()  # int64 (a float copy would round epoch ns)
        is_cpu = ev["kind"].is_in(list(CPU_KINDS)).to_numpy() & ~tsc.is_null().to_numpy()
        for lo in range(0, n, _CHUNK):
            hi = min(lo + _CHUNK, n)
            ts = ts_all[lo:hi]
            k = np.searchsorted(starts, ts, side="right") - 1  # the last step starting at or before ts
            inside = is_cpu[lo:hi] & (k >= 0)
            inside[inside] = ts[inside] < ends[k[inside]]
            step[lo:hi][inside] = nums[k[inside]]
        del tsc, ts_all, is_cpu
        g = ev.select("row", "launch_row").filter(pl.col("launch_row").is_not_null())
        if g.height:
            step[_positions(ev, g["row"].to_numpy())] = step[_positions(ev, g["launch_row"].to_numpy())]
    s = pl.Series("step", step)
    return ev.with_columns(pl.when(s >= 0).then(s).otherwise(None).alias("step"))


# ---- many traces at once (issue 19) ----------------------------------------------------------


def derive_many(
    events: list[pl.DataFrame], tables: list[dict[str, pl.DataFrame]], extras: dict[str, Any] | None = None
) -> list[pl.DataFrame]:
    """:func:`derive` of several traces at once (many small rank files): the polars work runs once
    over the traces' events stacked, the per-trace work (launch links by correlation, steps) is
    numpy on each trace's slice, and the derived tables come back as slices of the stacked one.
    Equal, column for column, to :func:`derive` of each trace (a test checks it on every
    multi-rank trace of the corpus). ``events`` is emptied (the caller keeps no reference). With
    ``extras``, it also gets, per trace, ``devices_used`` (the sorted device ids of its GPU work)
    and ``runtime_names`` (the names of its launch calls), found once over the stacked events."""
    evs = [events.pop(0) for _ in range(len(events))]
    evs = [
        e if "row" in e.columns else e.with_columns(pl.int_range(0, e.height, dtype=pl.UInt32).alias("row"))
        for e in evs
    ]
    sizes = np.array([e.height for e in evs], dtype=np.int64)
    offs = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    n = int(offs[-1])
    k = len(evs)
    if k == 0:
        return []
    ev = pl.concat(evs, how="vertical") if k > 1 else evs[0]
    del evs
    fid = np.repeat(np.arange(k, dtype=np.int64), sizes)
    # --- kind, stream, device, end_ns: row by row, as in derive ---
    if n:
        base = _map_categorical(ev["cat"], lambda c: kind_of_category(c or "", "X", ""), KIND_DTYPE)
        ph = pl.col("ph")

        def lit(x: str) -> pl.Expr:
            return pl.lit(x, dtype=KIND_DTYPE)

        kind = ev.select(
            pl.when(ph == "M")
            .then(lit("metadata"))
            .when(ph == "C")
            .then(lit("counter"))
            .when((ph == "s") | (ph == "t") | (ph == "f"))
            .then(lit("flow"))
            .when(pl.col("name") == "[memory]")
            .then(lit("memory"))
            .otherwise(base)
        ).to_series()
    else:
        kind = pl.Series("kind", [], dtype=KIND_DTYPE)
    ev = ev.with_columns(kind.alias("kind"))
    is_gpu_side = pl.col("kind").is_in(list(GPU_KINDS) + ["sync", "gpu_user_annotation"])
    fill_device = is_gpu_side & pl.col("device").is_null() & (pl.col("pid") >= 0) & (pl.col("pid") < 1 << 20)
    ev = ev.with_columns(
        pl.when(is_gpu_side).then(pl.coalesce("stream", "tid")).otherwise(pl.col("stream")).alias("stream"),
        pl.when(fill_device).then(pl.col("pid").cast(pl.Int32)).otherwise(pl.col("device")).alias("device"),
    )
    ev = ev.with_columns(pl.coalesce(pl.col("ts_ns") + pl.col("dur_ns"), pl.col("ts_ns")).alias("end_ns"))
    # --- kernel class: per distinct (kind, name) among GPU rows; collective args per trace ---
    kind_s = ev["kind"]
    gpu = kind_s.is_in(list(GPU_KINDS)).to_numpy()
    row_np = ev["row"].to_numpy()
    arr = np.full(n, -1, dtype=np.int8)
    if gpu.any():
        g = ev.select("name", "kind").filter(pl.Series(gpu))
        by_name = _map_categorical(g["name"], lambda nm: kernel_class_of_name("kernel", nm or ""), KERNEL_CLASS_DTYPE)
        cls = g.select(
            pl.when(pl.col("kind") == "kernel").then(by_name).otherwise(pl.lit("MEMORY", dtype=KERNEL_CLASS_DTYPE))
        ).to_series()
        arr[np.flatnonzero(gpu)] = cls.to_physical().fill_null(-1).cast(pl.Int8).to_numpy()
        is_kernel = (kind_s == "kernel").to_numpy()
        for i in range(k):
            coll = tables[i].get("collective")
            a, b = offs[i], offs[i + 1]
            if coll is None or not coll.height or not gpu[a:b].any():
                continue
            pos = _positions_in(row_np[a:b], coll["row"].to_numpy())
            pos = pos[pos >= 0] + a
            arr[pos[is_kernel[pos]]] = KERNEL_CLASSES.index("COMMUNICATION")
    kc = pl.Series("kernel_class", arr).replace_strict(
        dict(enumerate(KERNEL_CLASSES)), default=None, return_dtype=KERNEL_CLASS_DTYPE
    )
    ev = ev.with_columns(kc)
    # --- launches: by correlation within each trace ---
    launch = kind_s.is_in(list(LAUNCH_KINDS)).to_numpy()
    corr_s = ev["correlation"]
    unlinked = (gpu | launch) & corr_s.is_null().to_numpy()
    need_flow = [
        i
        for i in range(k)
        if (fl := tables[i].get("flow")) is not None and fl.height and unlinked[offs[i] : offs[i + 1]].any()
    ]
    if need_flow:  # the ac2g fallback (traces without correlation args): each such trace alone
        parts = []
        for i in range(k):
            part = ev.slice(int(offs[i]), int(sizes[i]))
            if i in need_flow:
                part = part.with_columns(_link_launches(part.select(list(part.columns)), tables[i])["correlation"])
            parts.append(part)
        ev = pl.concat(parts, how="vertical")
        corr_s = ev["correlation"]
    has_corr = corr_s.is_not_null().to_numpy()
    corr = corr_s.fill_null(0).to_numpy()
    lr = np.full(n, np.iinfo(np.uint32).max, dtype=np.uint32)
    gc = np.zeros(n, dtype=np.int32)
    lmask_all = launch & has_corr
    gmask_all = gpu & has_corr
    for i in range(k):
        a, b = int(offs[i]), int(offs[i + 1])
        lm, gm = lmask_all[a:b], gmask_all[a:b]
        if not gm.any():
            continue
        rows = row_np[a:b]
        c = corr[a:b]
        l_corr, l_row = c[lm], rows[lm]
        order = np.argsort(l_corr, kind="stable")
        l_corr, l_row = l_corr[order], l_row[order]
        first = np.ones(l_corr.size, dtype=bool)
        first[1:] = l_corr[1:] != l_corr[:-1]
        l_corr, l_row = l_corr[first], l_row[first]
        g_corr, g_row = c[gm], rows[gm]
        pos = np.minimum(np.searchsorted(l_corr, g_corr), max(l_corr.size - 1, 0))
        hit = l_corr[pos] == g_corr if l_corr.size else np.zeros(g_corr.size, dtype=bool)
        linked_row, linked_launch = g_row[hit], l_row[pos[hit]]
        lr[_positions_in(rows, linked_row) + a] = linked_launch
        if linked_launch.size:
            np.add.at(gc, _positions_in(rows, linked_launch) + a, 1)
    lr_s = pl.Series("launch_row", lr)
    ev = ev.with_columns(
        pl.when(lr_s != np.iinfo(np.uint32).max).then(lr_s).otherwise(None).alias("launch_row"),
        pl.Series("gpu_count", gc).cast(pl.Int32),
    )
    del lr_s
    # --- steps: each trace's ProfilerSteps, found once over the stacked events ---
    step = np.full(n, -1, dtype=np.int32)
    st_all = _step_rows(
        ev.select("name", "kind", "ts_ns", "dur_ns", "end_ns", "row", "tid", pl.Series("__f", fid)), ["__f"]
    )
    if st_all.height:
        st_all = (
            st_all.filter(pl.col("__step").is_not_null() & pl.col("dur_ns").is_not_null())
            .sort("__f", "ts_ns", maintain_order=True)
            .unique(["__f", "__step"], keep="first", maintain_order=True)
            .sort("__f", "ts_ns", maintain_order=True)
        )
        f_col = st_all["__f"].to_numpy()
        starts_all = st_all["ts_ns"].to_numpy()
        ends_all = st_all["end_ns"].to_numpy()
        nums_all = st_all["__step"].to_numpy().astype(np.int32)
        cpu = kind_s.is_in(list(CPU_KINDS)).to_numpy()
        tsc = ev["ts_ns"]
        ts_all = tsc.fill_null(0).to_numpy()
        cpu &= ~tsc.is_null().to_numpy()
        launch_row = ev["launch_row"]
        lr_valid = launch_row.is_not_null().to_numpy()
        lr_np = launch_row.fill_null(0).to_numpy()
        bounds = np.searchsorted(f_col, np.arange(k + 1))
        for i in range(k):
            s0, s1 = bounds[i], bounds[i + 1]
            if s0 == s1:
                continue
            a, b = int(offs[i]), int(offs[i + 1])
            starts, ends, nums = starts_all[s0:s1], ends_all[s0:s1], nums_all[s0:s1]
            ts = ts_all[a:b]
            kk = np.searchsorted(starts, ts, side="right") - 1
            inside = cpu[a:b] & (kk >= 0)
            inside[inside] = ts[inside] < ends[kk[inside]]
            sl = step[a:b]
            sl[inside] = nums[kk[inside]]
            v = lr_valid[a:b]
            if v.any():
                rows = row_np[a:b]
                sl[_positions_in(rows, rows[v])] = sl[_positions_in(rows, lr_np[a:b][v])]
    s = pl.Series("step", step)
    ev = ev.with_columns(pl.when(s >= 0).then(s).otherwise(None).alias("step"))
    if extras is not None:
        extras["steps"] = steps_many(ev, [int(x) for x in sizes])
        f = pl.Series("__f", fid)
        dev = (
            ev.select("kind", "device", f)
            .filter(pl.col("kind").is_in(list(GPU_KINDS)) & pl.col("device").is_not_null())
            .unique(["__f", "device"])
        )
        devices: list[list[int]] = [[] for _ in range(k)]
        for i, d in dev.select("__f", "device").iter_rows():
            devices[i].append(int(d))
        extras["devices_used"] = [sorted(d) for d in devices]
        rt = ev.select("kind", "name", f).filter(pl.col("kind").is_in(list(LAUNCH_KINDS))).unique(["__f", "name"])
        names: list[set[str]] = [set() for _ in range(k)]
        for i, nm in rt.select("__f", pl.col("name").cast(pl.String)).iter_rows():
            names[i].add(nm)
        extras["runtime_names"] = names
    return [ev.slice(int(offs[i]), int(sizes[i])) for i in range(k)]


def _positions_in(all_rows: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """:func:`_positions` on a trace's ``row`` values given as an array."""
    if all_rows.size == 0 or all_rows[-1] == all_rows.size - 1:
        return rows.astype(np.int64)
    pos = np.searchsorted(all_rows, rows)
    pos[pos >= all_rows.size] = 0
    return np.where(all_rows[pos] == rows, pos, -1)
