"""GPU idle gaps of one rank, each piece attributed to what held the next GPU work back.

The full definitions, with examples, are in ``docs/idle-causes.md``; in short (all ns, half-open):

- **Idle**: the rank's *scope* (its GPU span ``[first start, last end)`` united with its
  device-extended step windows, :func:`~ranksight.views.gpu_work.step_windows`) minus the union of
  its GPU work (:func:`~ranksight.views.gpu_work.gpu_work`, ranksight's definition). Inside the span
  this is ``temporal``'s ``idle_us``; inside a step window it is ``temporal --per-step``'s.
- **Gap** ``k``: the idle stretch between busy block ``k−1`` (ending at ``a``) and busy block
  ``k`` (starting at ``b``); the first gap has no ``a``, the last (after the last block) no ``b``.
  Idle is cut into **pieces** at busy-block, span and window boundaries, so each piece lies in one
  gap, in at most one step and wholly inside or outside the span.
- **Next work** of gap ``k``: the GPU work that starts at ``b`` (several: the one launched first,
  then the lowest row); its launch (``launch_row``: the runtime call with the same correlation) at
  ``l`` on thread ``T``. For the last gap (no next work) ``T`` is the thread that launched the work
  ending at ``a`` (the latest launched) and there is no ``l``.
- A piece ``[s, e)`` splits at ``l`` into a **launch-latency** part ``[max(s, l), e)`` (the work
  was already launched, the GPU had not started it) and a **CPU part** ``[s, min(e, l))`` (the
  work was not launched yet). Without a recorded launch the piece is ``unexplained``.
- The CPU part is cut at every boundary of a span of ``T`` (``cpu_op``, ``user_annotation``,
  ``python_function``, runtime and driver calls) and of the rank's collective waits; each bit takes
  the first cause that holds, in this order:

  1. ``dataloader``: inside a DataLoader/DataPipe fetch (``enumerate(DataLoader)#…``);
  2. ``collective_wait``: inside a collective call (``c10d::*``, ``gloo:*``, ``nccl:*``,
     ``record_param_comms``, …) while the rank waits for a late peer of a matched collective
     (``[start, last peer's start)``, from ``comm_data``; GPU collectives wait inside their kernel,
     which is busy time, so only host-side collectives such as gloo's show here);
  3. ``sync``: inside a host synchronisation call (``cuda/hip{Stream,Device,Event,Ctx}Synchronize``,
     ``cuStreamSynchronize``, ``cuCtxSynchronize``, ``cuEventSynchronize``, synchronous
     ``cudaMemcpy``/``hipMemcpy``, or a runtime call with a ``cuda_sync`` event other than ``Stream
     Wait Event``);
  4. ``sync`` (drained): the gap opened while ``T`` was blocked in a synchronisation that started at
     ``ss < a``: the sync emptied the GPU's queue, and without it the CPU would have been ``a − ss``
     further ahead; the first ``a − ss`` of the gap's remaining CPU time (bits not taken by 1–3, in
     time order) is charged to it;
  5. ``cpu_op``: the innermost span of ``T`` enclosing it (:mod:`ranksight.views.enclosing`) — the
     CPU op, annotation (``ProfilerStep#*`` when no op is recorded inside the step), Python frame or
     runtime call running there;
  6. ``unexplained``: no span of ``T`` encloses it.

Vectorised: interval cuts with ``numpy.searchsorted``, enclosing spans with the Rust sweep; one
Python iteration per distinct launching thread (a handful), none per gap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from ranksight.model.kinds import LAUNCH_KINDS
from ranksight.views.comm_extract import COLLECTIVE_OP_RE
from ranksight.views.comm_segments import DATA_FETCH_RE
from ranksight.views.enclosing import innermost_enclosing, parent_spans
from ranksight.views.gpu_work import gpu_work, step_windows
from ranksight.views.intervals import intersect, subtract, union
from ranksight.views.names import normalize_kernel

if TYPE_CHECKING:
    from ranksight.model.trace import Trace

__all__ = [
    "CAUSES",
    "PIECE_SCHEMA",
    "WAIT_SCHEMA",
    "SPAN_KINDS",
    "HOST_SYNC_API_RE",
    "idle_pieces",
    "cut",
]

#: Causes in precedence order (launch latency and unexplained are decided before the CPU part).
CAUSES = ("dataloader", "collective_wait", "sync", "cpu_op", "launch_latency", "unexplained")
#: Events that run on a CPU thread for a time (the spans that can hold the next launch back).
SPAN_KINDS = ("cpu_op", "user_annotation", "python_function", "cuda_runtime", "cuda_driver")
#: Runtime / driver calls that block the host until the GPU has finished work.
HOST_SYNC_API_RE = (
    r"^(cuda|hip)(Stream|Device|Event|Ctx)Synchronize$|^(cuda|hip)Memcpy(2D|3D)?$"
    r"|^cu(Ctx|Stream|Event)Synchronize$"
)
_CUDA_SYNC_NOT_BLOCKING = "Stream Wait Event"  # a device-side wait: the host does not block
#: Calls CUPTI records as ``Event Sync`` that return at once (documented as non-blocking queries).
_QUERY_API_RE = r"^(cuda|hip)(Event|Stream)Query$"
_STEP_RE = r"^ProfilerStep#\d+$"
_ADDR_RE = r"0x[0-9a-fA-F]{4,}"

PIECE_SCHEMA: dict[str, Any] = {
    "gap": pl.Int64,
    "step": pl.Int32,
    "in_span": pl.Boolean,
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "cause": pl.String,
    "call_site": pl.String,
    "detail": pl.String,
}
#: A rank's waits for late peers, in its own clock (see ``analyses.idle_causes``).
WAIT_SCHEMA: dict[str, Any] = {
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "late_rank": pl.Int64,
    "coll_type": pl.String,
    "instance": pl.Int64,
}
_I64 = np.int64


def empty_pieces() -> pl.DataFrame:
    return pl.DataFrame(schema=PIECE_SCHEMA)


# ---- interval helpers ----------------------------------------------------------------------------


def cut(s: np.ndarray, e: np.ndarray, points: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cut intervals ``[s, e)`` at every point of sorted ``points`` strictly inside them.

    Returns ``(idx, starts, ends)``: the index of the interval each piece comes from, in order."""
    s = np.asarray(s, dtype=_I64)
    e = np.asarray(e, dtype=_I64)
    if points.size == 0 or s.size == 0:
        return np.arange(s.size), s.copy(), e.copy()
    lo = np.searchsorted(points, s, side="right")  # first point > s
    hi = np.searchsorted(points, e, side="left")  # first point >= e
    n = np.maximum(hi - lo, 0)
    idx = np.repeat(np.arange(s.size), n + 1)
    first = np.repeat(np.cumsum(n + 1) - (n + 1), n + 1)
    pos = np.arange(idx.size) - first
    last = points.size - 1
    starts = np.where(pos == 0, s[idx], points[np.clip(lo[idx] + pos - 1, 0, last)])
    ends = np.where(pos == n[idx], e[idx], points[np.clip(lo[idx] + pos, 0, last)])
    return idx, starts, ends


def _member(t: np.ndarray, ss: np.ndarray, se: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For instants ``t``: whether a disjoint sorted interval ``[ss, se)`` holds each, and its index."""
    if ss.size == 0:
        return np.zeros(t.size, dtype=bool), np.full(t.size, -1)
    k = np.searchsorted(ss, t, side="right") - 1
    kk = np.maximum(k, 0)
    return (k >= 0) & (t < se[kk]), k


def _innermost(spans: pl.DataFrame, t: np.ndarray) -> np.ndarray:
    """Index in ``spans`` (one thread) of the innermost span enclosing each instant, −1 for none."""
    if spans.height == 0 or t.size == 0:
        return np.full(t.size, -1)
    pts = pl.DataFrame({"k": np.zeros(t.size, dtype=_I64), "ts_ns": t})
    sp = spans.select(pl.lit(0, dtype=pl.Int64).alias("k"), "ts_ns", "end_ns")
    return innermost_enclosing(sp, pts, key="k").fill_null(-1).cast(pl.Int64).to_numpy()


# ---- the gaps and their next work --------------------------------------------------------------


def _launches(trace: Trace, rows: pl.Series) -> pl.DataFrame:
    """``launch_row, l_ts_ns, pid, tid, api`` of the given launch rows."""
    rows = rows.drop_nulls().unique().cast(pl.UInt32)
    return (
        trace.scan()
        .filter(pl.col("row").is_in(rows.implode()))
        .select(
            pl.col("row").alias("launch_row"),
            pl.col("ts_ns").alias("l_ts_ns"),
            pl.col("pid").cast(pl.Int64),
            pl.col("tid").cast(pl.Int64),
            pl.col("name").cast(pl.String).alias("api"),
        )
        .collect()
    )


def _gap_heads(g: pl.DataFrame, ms: np.ndarray, me: np.ndarray, trace: Trace) -> pl.DataFrame:
    """One row per gap ``k`` (0..nb): the next work (``next_name``, launch ``l_ts_ns``, ``pid``,
    ``tid``, ``api``; ``has_next``) or, for the last gap, the launching thread of the work that
    ends the last block (``has_next`` false, no ``l_ts_ns``)."""
    nb = ms.size
    ts = g["ts_ns"].to_numpy()
    block = np.searchsorted(ms, ts, side="right") - 1
    w = g.select("row", "name", "launch_row", "ts_ns", "end_ns").with_columns(pl.Series("block", block))
    lw = _launches(trace, w["launch_row"])
    w = w.join(lw, on="launch_row", how="left")
    first = (
        w.with_columns(pl.Series("bstart", ms[block]))
        .filter(pl.col("ts_ns") == pl.col("bstart"))
        .sort(["block", "l_ts_ns", "row"], nulls_last=True)
        .group_by("block", maintain_order=True)
        .first()
        .select(
            pl.col("block").cast(pl.Int64).alias("gap"),
            pl.col("name").alias("next_name"),
            "l_ts_ns",
            "pid",
            "tid",
            "api",
            pl.lit(True).alias("has_next"),
        )
    )
    last = (
        w.filter((pl.col("block") == nb - 1) & (pl.col("end_ns") == int(me[-1])))
        .sort(["l_ts_ns", "row"], descending=[True, False], nulls_last=True)
        .head(1)
        .select(
            pl.lit(nb, dtype=pl.Int64).alias("gap"),
            pl.lit(None, dtype=pl.String).alias("next_name"),
            pl.lit(None, dtype=pl.Int64).alias("l_ts_ns"),
            "pid",
            "tid",
            "api",
            pl.lit(False).alias("has_next"),
        )
    )
    return pl.concat([first, last], how="vertical_relaxed")


def _thread_spans(trace: Trace, threads: pl.DataFrame) -> pl.DataFrame:
    """Spans (``SPAN_KINDS``, positive length) of the given ``pid, tid`` threads with their roles:
    ``is_sync``, ``is_fetch``, ``is_coll``; sorted by thread and start."""
    ev = trace.scan()
    sync_corr = (
        ev.filter((pl.col("kind") == "sync") & (pl.col("name").cast(pl.String) != _CUDA_SYNC_NOT_BLOCKING))
        .select("correlation")
        .drop_nulls()
        .collect()["correlation"]
    )
    sp = (
        ev.filter(
            pl.col("kind").is_in(list(SPAN_KINDS))
            & pl.col("ts_ns").is_not_null()
            & pl.col("dur_ns").is_not_null()
            & (pl.col("dur_ns") > 0)
        )
        .select(
            "row",
            pl.col("pid").cast(pl.Int64),
            pl.col("tid").cast(pl.Int64),
            "ts_ns",
            "end_ns",
            pl.col("kind").cast(pl.String),
            "name",
            "correlation",
        )
        .collect()
        .join(threads, on=["pid", "tid"], how="semi")
    )
    names = sp["name"].cast(pl.String).unique().drop_nulls()
    sync_names = names.filter(names.str.contains(HOST_SYNC_API_RE))
    query_names = names.filter(names.str.contains(_QUERY_API_RE))
    fetch_names = names.filter(names.str.contains(DATA_FETCH_RE))
    coll_names = names.filter(names.str.contains(COLLECTIVE_OP_RE))
    n = pl.col("name").cast(pl.String)
    launch = pl.col("kind").is_in(list(LAUNCH_KINDS))
    return (
        sp.with_columns(
            (
                launch
                & (n.is_in(sync_names.implode()) | pl.col("correlation").is_in(sync_corr.implode()))
                & ~n.is_in(query_names.implode())
            ).alias("is_sync"),
            n.is_in(fetch_names.implode()).alias("is_fetch"),
            n.is_in(coll_names.implode()).alias("is_coll"),
            n.alias("name"),
        )
        .drop("correlation")
        .sort(["pid", "tid", "ts_ns", "end_ns"], descending=[False, False, False, True])
    )


def _sync_sites(spans: pl.DataFrame) -> np.ndarray:
    """Call site of each span of one thread read as a synchronisation: its parent op or Python
    frame when it has one (``aten::_local_scalar_dense`` for ``.item()``, ``aten::copy_`` for
    ``.cpu()``), else its own name."""
    par = parent_spans(spans.select(pl.lit(0, dtype=pl.Int64).alias("k"), "ts_ns", "end_ns"), key="k")
    p = par.fill_null(0).cast(pl.Int64).to_numpy()
    kinds = spans["kind"].to_numpy()
    names = spans["name"].to_numpy()
    ok = par.is_not_null().to_numpy() & np.isin(kinds[p], ["cpu_op", "python_function"])
    return np.where(ok, names[p], names)


def _rows_of(rows: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Map indices ``j`` into a subset (−1: none) to indices into the whole table."""
    if rows.size == 0:
        return np.full(j.size, -1)
    return np.where(j >= 0, rows[np.maximum(j, 0)], -1)


def _attribute_thread(spans: pl.DataFrame, parts: pl.DataFrame, waits: pl.DataFrame) -> pl.DataFrame:
    """Attribute the CPU parts (``gap, step, in_span, start_ns, end_ns, a_ns``, in time order) of
    one thread whose spans are ``spans`` (module doc, steps 1–6). Returns the pieces with
    ``cause`` and the evidence columns ``span`` (index into ``spans``), ``wait`` (index into
    ``waits``), ``blocked_ns`` (drained syncs)."""
    ss, se = spans["ts_ns"].to_numpy(), spans["end_ns"].to_numpy()
    role = {r: np.flatnonzero(spans[r].to_numpy()) for r in ("is_sync", "is_fetch", "is_coll")}
    sy = union(ss[role["is_sync"]], se[role["is_sync"]])
    dl = union(ss[role["is_fetch"]], se[role["is_fetch"]])
    wt = union(waits["start_ns"].to_numpy(), waits["end_ns"].to_numpy())
    cw = intersect(union(ss[role["is_coll"]], se[role["is_coll"]]), wt)
    points = np.unique(np.concatenate([ss, se, cw[0], cw[1]]))
    idx, ps, pe = cut(parts["start_ns"].to_numpy(), parts["end_ns"].to_numpy(), points)
    in_dl, _ = _member(ps, *dl)
    in_cw, _ = _member(ps, *cw)
    in_sy, _ = _member(ps, *sy)
    cause = np.where(in_dl, "dataloader", np.where(in_cw, "collective_wait", np.where(in_sy, "sync", "")))
    span = np.full(ps.size, -1)
    for c, r in (("dataloader", "is_fetch"), ("collective_wait", "is_coll"), ("sync", "is_sync")):
        sel = np.flatnonzero(cause == c)
        if sel.size:
            span[sel] = _rows_of(role[r], _innermost(spans[role[r]], ps[sel]))
    wait = np.full(ps.size, -1)
    sel = np.flatnonzero(cause == "collective_wait")
    if sel.size:
        wait[sel] = _innermost(waits.rename({"start_ns": "ts_ns"}), ps[sel])
    # 4. drained: the gap opened (at a) while this thread was blocked in a sync begun at ss < a;
    # the first a − ss of the gap's remaining CPU time (in time order) is charged to that sync
    a_ok = parts["a_ns"].is_not_null().to_numpy()[idx]
    a = parts["a_ns"].fill_null(0).to_numpy()[idx]
    drained, comp = _member(a, *sy)
    drained &= a_ok
    blocked = np.where(drained, a - (sy[0][np.maximum(comp, 0)] if sy[0].size else 0), 0)
    drain_span = np.where(drained, _rows_of(role["is_sync"], _innermost(spans[role["is_sync"]], a)), -1)
    rest = cause == ""
    gap = parts["gap"].to_numpy()[idx]
    length = pe - ps
    rl = np.where(rest, length, 0)
    before = np.cumsum(rl) - rl  # rest time before each piece on this thread
    first_of_gap = np.r_[0, np.flatnonzero(np.diff(gap)) + 1]
    before -= np.repeat(before[first_of_gap], np.diff(np.r_[first_of_gap, ps.size]))
    take = np.where(rest, np.clip(blocked - before, 0, length), 0)
    inner = _innermost(spans, ps)
    # the pieces: decided ones, drained heads, then the rest (split where a drain ends inside)
    head = rest & (take > 0)
    tail = rest & (take < length)
    sel = np.concatenate([np.flatnonzero(~rest), np.flatnonzero(head), np.flatnonzero(tail)])
    n1, n2 = int((~rest).sum()), int(head.sum())
    kind = np.empty(sel.size, dtype=object)
    kind[:n1] = cause[sel[:n1]]
    kind[n1 : n1 + n2] = "sync"
    kind[n1 + n2 :] = np.where(inner[sel[n1 + n2 :]] >= 0, "cpu_op", "unexplained")
    start = np.concatenate([ps[sel[:n1]], ps[sel[n1 : n1 + n2]], ps[sel[n1 + n2 :]] + take[sel[n1 + n2 :]]])
    end = np.concatenate([pe[sel[:n1]], ps[sel[n1 : n1 + n2]] + take[sel[n1 : n1 + n2]], pe[sel[n1 + n2 :]]])
    sp = np.concatenate([span[sel[:n1]], drain_span[sel[n1 : n1 + n2]], inner[sel[n1 + n2 :]]])
    drain = np.zeros(sel.size, dtype=bool)
    drain[n1 : n1 + n2] = True
    meta = parts.select("gap", "step", "in_span")[idx[sel]]
    return meta.with_columns(
        pl.Series("start_ns", start, dtype=pl.Int64),
        pl.Series("end_ns", end, dtype=pl.Int64),
        pl.Series("cause", kind, dtype=pl.String),
        pl.Series("span", sp, dtype=pl.Int64),
        pl.Series("wait", wait[sel], dtype=pl.Int64),
        pl.Series("blocked_ns", np.where(drain, blocked[sel], 0), dtype=pl.Int64),
        pl.Series("drained", drain),
    )


def _evidence(out: pl.DataFrame, spans: pl.DataFrame, waits: pl.DataFrame, tid: int) -> pl.DataFrame:
    """``call_site`` and ``detail`` of attributed CPU pieces of one thread (from their evidence)."""
    sync_site = pl.Series(_sync_sites(spans) if spans.height else np.empty(0, dtype=object), dtype=pl.String)
    sp = out["span"]
    ok = sp >= 0
    at = sp.clip(0)

    def take(col: pl.Series, idx: pl.Series, mask: pl.Series) -> pl.Series:
        if col.len() == 0:
            return pl.Series([None] * idx.len(), dtype=pl.String)
        return pl.select(pl.when(mask).then(col.gather(idx))).to_series()

    name = take(spans["name"], at, ok)
    kind = take(spans["kind"], at, ok)
    site = take(sync_site, at, ok)
    wok = out["wait"] >= 0
    wat = out["wait"].clip(0)
    late = take(waits["late_rank"].cast(pl.String), wat, wok)
    ctype = take(waits["coll_type"], wat, wok)
    inst = take(waits["instance"].cast(pl.String), wat, wok)
    c = pl.col("cause")
    t = pl.lit(f"tid {tid}")
    blocked = (pl.col("blocked_ns") / 1e3).round(1).cast(pl.String)
    return out.with_columns(
        name.alias("__name"),
        kind.alias("__kind"),
        site.alias("__site"),
        late.alias("__late"),
        ctype.alias("__ctype"),
        inst.alias("__inst"),
    ).select(
        "gap",
        "step",
        "in_span",
        "start_ns",
        "end_ns",
        "cause",
        pl.when(c == "sync").then(pl.col("__site")).otherwise(pl.col("__name")).alias("call_site"),
        pl.when(c == "dataloader")
        .then(pl.concat_str([t, pl.lit(" fetching a batch")]))
        .when(c == "collective_wait")
        .then(pl.format("waits for rank {} ({}, instance {})", "__late", "__ctype", "__inst"))
        .when(pl.col("drained"))
        .then(
            pl.format(
                "queue drained by {}: tid {} was blocked {} µs before the GPU went idle", "__name", pl.lit(tid), blocked
            )
        )
        .when(c == "sync")
        .then(pl.format("{} blocked in {}", t, "__name"))
        .when(c == "cpu_op")
        .then(pl.format("{} in a {}", t, "__kind"))
        .otherwise(pl.concat_str([t, pl.lit(": no span recorded on the launching thread")]))
        .alias("detail"),
    )


def _merge_touching(df: pl.DataFrame) -> pl.DataFrame:
    """Adjacent pieces with the same gap, step, scope, cause, call site and detail become one."""
    keys = ["gap", "step", "in_span", "cause", "call_site", "detail"]
    df = df.sort("start_ns")
    same = pl.all_horizontal([pl.col(k).eq_missing(pl.col(k).shift(1)) for k in keys])
    new = ~(same & (pl.col("start_ns") == pl.col("end_ns").shift(1))).fill_null(False)
    return (
        df.with_columns(new.cum_sum().alias("__grp"))
        .group_by("__grp", maintain_order=True)
        .agg(*[pl.col(k).first() for k in keys], pl.col("start_ns").min(), pl.col("end_ns").max())
        .select(list(PIECE_SCHEMA))
    )


def idle_pieces(trace: Trace, waits: pl.DataFrame | None = None) -> pl.DataFrame:
    """Every idle piece of one rank with its cause (schema :data:`PIECE_SCHEMA`, sorted by start).

    ``waits`` (:data:`WAIT_SCHEMA`) are the rank's waits for late peers in its own clock; without
    them no time is ``collective_wait``. A rank without GPU work gives no piece."""
    waits = (
        pl.DataFrame(schema=WAIT_SCHEMA)
        if waits is None
        else waits.select([pl.col(c).cast(t) for c, t in WAIT_SCHEMA.items()])
    )
    waits = waits.sort("start_ns")
    g = gpu_work(trace)
    if g.height == 0:
        return empty_pieces()
    ms, me = union(g["ts_ns"].to_numpy(), g["end_ns"].to_numpy())
    win = step_windows(trace)
    ws, we = win["start_ns"].to_numpy(), win["end_ns"].to_numpy()
    scope = union(np.r_[ms[0], ws], np.r_[me[-1], we])
    i_s, i_e = subtract(scope, (ms, me))
    if i_s.size == 0:
        return empty_pieces()
    _, ps, pe = cut(i_s, i_e, np.unique(np.concatenate([ms, me, ws, we])))
    k = np.searchsorted(ms, ps, side="right")  # the busy block that ends the gap
    j = np.searchsorted(ws, ps, side="right") - 1
    in_win = (j >= 0) & (ps < we[np.maximum(j, 0)]) if ws.size else np.zeros(ps.size, dtype=bool)
    steps = win["step"].gather(pl.Series(np.maximum(j, 0))) if ws.size else pl.Series([None] * ps.size)
    pieces = pl.DataFrame(
        {
            "gap": k.astype(_I64),
            "step": pl.select(pl.when(pl.Series(in_win)).then(steps)).to_series().cast(pl.Int32),
            "in_span": (ps >= ms[0]) & (pe <= me[-1]),
            "start_ns": ps,
            "end_ns": pe,
            "a_ns": pl.select(pl.when(pl.Series(k >= 1)).then(pl.Series(me[np.maximum(k - 1, 0)]))).to_series(),
            "b_ns": pl.select(
                pl.when(pl.Series(k < ms.size)).then(pl.Series(ms[np.minimum(k, ms.size - 1)]))
            ).to_series(),
        }
    ).join(_gap_heads(g, ms, me, trace), on="gap", how="left")
    kernels = pieces["next_name"].unique().drop_nulls().to_list()
    pieces = pieces.with_columns(pl.col("next_name").replace({n: normalize_kernel(n) for n in kernels}))
    base = ["gap", "step", "in_span", "start_ns", "end_ns"]
    lt, s, e = pl.col("l_ts_ns"), pl.col("start_ns"), pl.col("end_ns")
    has_next = pl.col("has_next")
    known = has_next & lt.is_not_null()
    # launch latency: [max(s, lt), e) where the next work was launched before the piece ends
    ll = pieces.filter(known & (lt < e)).select(
        *base[:3],
        pl.max_horizontal(s, lt).alias("start_ns"),
        "end_ns",
        pl.lit("launch_latency").alias("cause"),
        pl.col("api").alias("call_site"),
        pl.format(
            "{} launched by {} on tid {} {} µs before it started",
            pl.col("next_name").str.slice(0, 80),
            "api",
            "tid",
            ((pl.col("b_ns") - lt) / 1e3).round(1),
        ).alias("detail"),
    )
    # no launch recorded (or, after the last work, no launching thread known)
    lost = pieces.filter(pl.col("pid").is_null() | (has_next & lt.is_null())).select(
        *base,
        pl.lit("unexplained").alias("cause"),
        pl.lit(None, dtype=pl.String).alias("call_site"),
        pl.when(has_next)
        .then(pl.format("no launch recorded for the next GPU work {}", pl.col("next_name").str.slice(0, 80)))
        .otherwise(pl.lit("no GPU work after this gap, and no launch recorded for the last one"))
        .alias("detail"),
    )
    # CPU parts: [s, min(e, lt)) on the launching thread (the whole piece after the last work)
    cpu = pieces.filter(pl.col("pid").is_not_null() & (~has_next | (known & (lt > s)))).select(
        *base[:4],
        pl.when(has_next).then(pl.min_horizontal(e, lt)).otherwise(e).alias("end_ns"),
        "a_ns",
        "pid",
        "tid",
    )
    frames = [ll, lost]
    if cpu.height:
        threads = cpu.select("pid", "tid").unique().sort(["pid", "tid"])
        spans = _thread_spans(trace, threads)
        for pid, tid in threads.iter_rows():  # one iteration per launching thread
            parts = cpu.filter((pl.col("pid") == pid) & (pl.col("tid") == tid)).sort("start_ns")
            sp = spans.filter((pl.col("pid") == pid) & (pl.col("tid") == tid))
            out = _attribute_thread(sp, parts, waits)
            frames.append(_evidence(out, sp, waits, tid))
    df = pl.concat(
        [f.cast({c: t for c, t in PIECE_SCHEMA.items() if c in f.columns}) for f in frames], how="vertical_relaxed"
    )
    df = df.filter(pl.col("end_ns") > pl.col("start_ns"))
    # run-specific values out of call sites (step numbers, object addresses), so they group
    site = pl.col("call_site").str.replace(_STEP_RE, "ProfilerStep#*").str.replace_all(_ADDR_RE, "0x…")
    df = df.with_columns(site)
    return _merge_touching(df)
