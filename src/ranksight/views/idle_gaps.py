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

Vectorised: interval cuts with ``numpy.searchsorted``, enclosing spans with the Rust sweep; every
launching thread of every rank attributed in one pass (:func:`idle_pieces_many`: each thread on a
lane of its own), no Python iteration per gap or thread; one numpy pass per rank for its pieces.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from ranksight.model.kinds import LAUNCH_KINDS
from ranksight.views.comm_extract import COLLECTIVE_OP_RE
from ranksight.views.comm_segments import DATA_FETCH_RE
from ranksight.views.enclosing import innermost_enclosing, parent_spans
from ranksight.views.gpu_work import gpu_work_categorical, step_windows
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
#
# Several ranks run in one pass (issue 19): each rank's busy blocks, scope and pieces are numpy work
# on its own arrays; everything that needs the events (launches, thread spans) is one query over
# the stacked events keyed by rank. The CPU attribution runs on *lanes*: each (rank, pid, tid)
# thread's times are moved into a stretch of their own, [lane × stride, (lane + 1) × stride), so
# the interval sweeps over every lane at once see each thread alone, exactly as one thread's sweep.


def _launches(ev: pl.LazyFrame, w: pl.DataFrame) -> pl.DataFrame:
    """``rank, launch_row, l_ts_ns, pid, tid, api`` of the launch rows of the GPU work ``w``."""
    want = w.select("rank", pl.col("launch_row").alias("row")).drop_nulls().unique()
    return (
        ev.select("rank", "row", "ts_ns", "pid", "tid", "name")
        .join(want.lazy(), on=["rank", "row"], how="semi")
        .select(
            "rank",
            pl.col("row").alias("launch_row"),
            pl.col("ts_ns").alias("l_ts_ns"),
            pl.col("pid").cast(pl.Int64),
            pl.col("tid").cast(pl.Int64),
            pl.col("name").cast(pl.String).alias("api"),
        )
        .collect()
    )


def _gap_heads(w: pl.DataFrame, ev: pl.LazyFrame) -> pl.DataFrame:
    """One row per rank and gap ``k`` (0..nb): the next work (``next_name``, launch ``l_ts_ns``,
    ``pid``, ``tid``, ``api``; ``has_next``) or, for the last gap, the launching thread of the work
    that ends the last block (``has_next`` false, no ``l_ts_ns``). ``w``: the GPU work with
    ``rank, block, is_head`` (starts its block), ``is_tail`` (ends the last block) and ``nb``."""
    w = w.join(_launches(ev, w), on=["rank", "launch_row"], how="left")
    first = (
        w.filter("is_head")
        .sort(["rank", "block", "l_ts_ns", "row"], nulls_last=True)
        .group_by("rank", "block", maintain_order=True)
        .first()
        .select(
            "rank",
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
        w.filter("is_tail")
        .sort(["rank", "l_ts_ns", "row"], descending=[False, True, False], nulls_last=True)
        .group_by("rank", maintain_order=True)
        .first()
        .select(
            "rank",
            pl.col("nb").cast(pl.Int64).alias("gap"),
            pl.lit(None, dtype=pl.String).alias("next_name"),
            pl.lit(None, dtype=pl.Int64).alias("l_ts_ns"),
            "pid",
            "tid",
            "api",
            pl.lit(False).alias("has_next"),
        )
    )
    return pl.concat([first, last], how="vertical_relaxed")


def _thread_spans(ev: pl.LazyFrame, threads: pl.DataFrame) -> pl.DataFrame:
    """Spans (``SPAN_KINDS``, positive length) of the given ``rank, pid, tid`` threads with their
    roles: ``is_sync``, ``is_fetch``, ``is_coll``; sorted by rank, thread and start."""
    sync_corr = (
        ev.filter((pl.col("kind") == "sync") & (pl.col("name").cast(pl.String) != _CUDA_SYNC_NOT_BLOCKING))
        .select("rank", "correlation")
        .drop_nulls()
        .unique()
        .with_columns(pl.lit(True).alias("__sc"))
    )
    sp = (
        ev.filter(
            pl.col("kind").is_in(list(SPAN_KINDS))
            & pl.col("ts_ns").is_not_null()
            & pl.col("dur_ns").is_not_null()
            & (pl.col("dur_ns") > 0)
        )
        .select(
            "rank",
            "row",
            pl.col("pid").cast(pl.Int64),
            pl.col("tid").cast(pl.Int64),
            "ts_ns",
            "end_ns",
            pl.col("kind").cast(pl.String),
            "name",
            "correlation",
        )
        .join(threads.lazy(), on=["rank", "pid", "tid"], how="semi")
        .join(sync_corr, on=["rank", "correlation"], how="left", maintain_order="left")
        .collect()
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
                & (n.is_in(sync_names.implode()) | pl.col("__sc").fill_null(False))
                & ~n.is_in(query_names.implode())
            ).alias("is_sync"),
            n.is_in(fetch_names.implode()).alias("is_fetch"),
            n.is_in(coll_names.implode()).alias("is_coll"),
            n.alias("name"),
        )
        .drop("correlation", "__sc")
        .sort(
            ["rank", "pid", "tid", "ts_ns", "end_ns"],
            descending=[False, False, False, False, True],
            maintain_order=True,
        )
    )


def _sync_sites(spans: pl.DataFrame) -> np.ndarray:
    """Call site of each span read as a synchronisation (spans of one thread, or of every lane in
    lane times): its parent op or Python frame when it has one (``aten::_local_scalar_dense`` for
    ``.item()``, ``aten::copy_`` for ``.cpu()``), else its own name."""
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


def _attribute(spans: pl.DataFrame, parts: pl.DataFrame, waits: pl.DataFrame) -> pl.DataFrame:
    """Attribute the CPU parts (``gkey, rank, gap, step, in_span, tid, start_ns, end_ns, a_ns``, in
    lane times, sorted by lane and start; ``gkey`` one value per rank and gap) of the threads whose
    spans are ``spans`` (lane times, by lane and start; module doc, steps 1–6), ``waits`` each lane's
    copy of its rank's waits (lane times). Returns the pieces with ``cause`` and the evidence
    columns ``span`` (index into ``spans``), ``wait`` (index into ``waits``), ``blocked_ns``
    (drained syncs); times still in lane times."""
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
    gap = parts["gkey"].to_numpy()[idx]
    length = pe - ps
    rl = np.where(rest, length, 0)
    before = np.cumsum(rl) - rl  # rest time before each piece of its gap
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
    meta = parts.select("rank", "gap", "step", "in_span", "tid", "shift")[idx[sel]]
    return meta.with_columns(
        pl.Series("start_ns", start, dtype=pl.Int64),
        pl.Series("end_ns", end, dtype=pl.Int64),
        pl.Series("cause", kind, dtype=pl.String),
        pl.Series("span", sp, dtype=pl.Int64),
        pl.Series("wait", wait[sel], dtype=pl.Int64),
        pl.Series("blocked_ns", np.where(drain, blocked[sel], 0), dtype=pl.Int64),
        pl.Series("drained", drain),
    )


def _evidence(out: pl.DataFrame, spans: pl.DataFrame, waits: pl.DataFrame) -> pl.DataFrame:
    """``call_site`` and ``detail`` of attributed CPU pieces (from their evidence); times back in
    the rank's clock."""
    sync_site = pl.Series(_sync_sites(spans) if spans.height else np.empty(0, dtype=object), dtype=pl.String)
    sp = out["span"]
    ok = sp >= 0
    at = sp.clip(0)
    wok = out["wait"] >= 0
    wat = out["wait"].clip(0)

    def take(col: pl.Series, idx: pl.Series, mask: pl.Series) -> pl.Expr:
        if col.len() == 0:
            return pl.lit(None, dtype=pl.String)
        return pl.when(mask).then(col.gather(idx))

    c = pl.col("cause")
    t = pl.format("tid {}", "tid")
    blocked = (pl.col("blocked_ns") / 1e3).round(1).cast(pl.String)
    return out.with_columns(
        take(spans["name"], at, ok).alias("__name"),
        take(spans["kind"], at, ok).alias("__kind"),
        take(sync_site, at, ok).alias("__site"),
        take(waits["late_rank"].cast(pl.String), wat, wok).alias("__late"),
        take(waits["coll_type"], wat, wok).alias("__ctype"),
        take(waits["instance"].cast(pl.String), wat, wok).alias("__inst"),
    ).select(
        "rank",
        "gap",
        "step",
        "in_span",
        pl.col("start_ns") - pl.col("shift"),
        pl.col("end_ns") - pl.col("shift"),
        "cause",
        pl.when(c == "sync").then(pl.col("__site")).otherwise(pl.col("__name")).alias("call_site"),
        pl.when(c == "dataloader")
        .then(pl.concat_str([t, pl.lit(" fetching a batch")]))
        .when(c == "collective_wait")
        .then(pl.format("waits for rank {} ({}, instance {})", "__late", "__ctype", "__inst"))
        .when(pl.col("drained"))
        .then(
            pl.format(
                "queue drained by {}: tid {} was blocked {} µs before the GPU went idle", "__name", "tid", blocked
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
    """Adjacent pieces of a rank with the same gap, step, scope, cause, call site and detail become one."""
    keys = ["gap", "step", "in_span", "cause", "call_site", "detail"]
    df = df.sort(["rank", "start_ns"])
    same = pl.all_horizontal([pl.col(k).eq_missing(pl.col(k).shift(1)) for k in ["rank", *keys]])
    new = ~(same & (pl.col("start_ns") == pl.col("end_ns").shift(1))).fill_null(False)
    return (
        df.with_columns(new.cum_sum().alias("__grp"))
        .group_by("__grp", maintain_order=True)
        .agg(
            pl.col("rank").first(), *[pl.col(k).first() for k in keys], pl.col("start_ns").min(), pl.col("end_ns").max()
        )
        .select("rank", *PIECE_SCHEMA)
    )


def idle_pieces(trace: Trace, waits: pl.DataFrame | None = None) -> pl.DataFrame:
    """Every idle piece of one rank with its cause (schema :data:`PIECE_SCHEMA`, sorted by start).

    ``waits`` (:data:`WAIT_SCHEMA`) are the rank's waits for late peers in its own clock; without
    them no time is ``collective_wait``. A rank without GPU work gives no piece."""
    ev = trace.scan().with_columns(pl.lit(trace.rank, dtype=pl.Int32).alias("rank"))
    w = None if waits is None else waits.with_columns(pl.lit(trace.rank, dtype=pl.Int32).alias("rank"))
    return idle_pieces_many(ev, {trace.rank: (gpu_work_categorical(trace), step_windows(trace))}, w).drop("rank")


RANK_PIECE_SCHEMA: dict[str, Any] = {"rank": pl.Int32, **PIECE_SCHEMA}


def idle_pieces_many(
    ev: pl.LazyFrame, inputs: dict[int, tuple[pl.DataFrame, pl.DataFrame]], waits: pl.DataFrame | None = None
) -> pl.DataFrame:
    """:func:`idle_pieces` of several ranks in one pass (``rank`` + :data:`PIECE_SCHEMA`, sorted by
    rank and start; each rank's rows are its :func:`idle_pieces`). ``ev``: the ranks' events with a
    ``rank`` column (Int32), e.g. :meth:`Session.stacked_events
    <ranksight.analyses.Session.stacked_events>`; ``inputs``: ``{rank: (GPU work, step windows)}``
    (:func:`~ranksight.views.gpu_work.gpu_work`, :func:`~ranksight.views.gpu_work.step_windows`);
    ``waits``: ``rank`` + :data:`WAIT_SCHEMA` of every rank (None: none)."""
    if waits is None:
        waits = pl.DataFrame(schema={"rank": pl.Int32, **WAIT_SCHEMA})
    else:
        waits = waits.select(pl.col("rank").cast(pl.Int32), *[pl.col(c).cast(t) for c, t in WAIT_SCHEMA.items()])
    waits = waits.sort(["rank", "start_ns"], maintain_order=True)
    # per rank (numpy only): busy blocks, scope, the idle cut into pieces, each work's block
    keys = ("rank", "gap", "start", "end", "a", "a_ok", "b", "b_ok", "win", "in_win", "in_span")
    cols: dict[str, list[np.ndarray]] = {k: [] for k in keys}
    works: list[pl.DataFrame] = []
    wcols: dict[str, list[np.ndarray]] = {k: [] for k in ("rank", "block", "is_head", "is_tail", "nb")}
    steps: list[pl.Series] = []
    n_win = 0
    for r, (g, win) in inputs.items():
        if g.height == 0:
            continue
        ms, me = union(g["ts_ns"].to_numpy(), g["end_ns"].to_numpy())
        ws, we = win["start_ns"].to_numpy(), win["end_ns"].to_numpy()
        scope = union(np.r_[ms[0], ws], np.r_[me[-1], we])
        i_s, i_e = subtract(scope, (ms, me))
        if i_s.size == 0:
            continue
        _, ps, pe = cut(i_s, i_e, np.unique(np.concatenate([ms, me, ws, we])))
        k = np.searchsorted(ms, ps, side="right")  # the busy block that ends the gap
        j = np.searchsorted(ws, ps, side="right") - 1
        cols["rank"].append(np.full(ps.size, r, dtype=np.int32))
        cols["gap"].append(k.astype(_I64))
        cols["start"].append(ps)
        cols["end"].append(pe)
        cols["a"].append(me[np.maximum(k - 1, 0)])
        cols["a_ok"].append(k >= 1)
        cols["b"].append(ms[np.minimum(k, ms.size - 1)])
        cols["b_ok"].append(k < ms.size)
        cols["win"].append(n_win + np.maximum(j, 0))
        cols["in_win"].append((j >= 0) & (ps < we[np.maximum(j, 0)]) if ws.size else np.zeros(ps.size, dtype=bool))
        cols["in_span"].append((ps >= ms[0]) & (pe <= me[-1]))
        steps.append(win["step"].cast(pl.Int32))
        n_win += win.height
        ts, end = g["ts_ns"].to_numpy(), g["end_ns"].to_numpy()
        block = np.searchsorted(ms, ts, side="right") - 1
        works.append(g)
        wcols["rank"].append(np.full(ts.size, r, dtype=np.int32))
        wcols["block"].append(block.astype(_I64))
        wcols["is_head"].append(ts == ms[block])
        wcols["is_tail"].append((block == ms.size - 1) & (end == me[-1]))
        wcols["nb"].append(np.full(ts.size, ms.size, dtype=_I64))
    if not works:
        return pl.DataFrame(schema=RANK_PIECE_SCHEMA)
    cat = {k: np.concatenate(v) for k, v in cols.items()}
    if n_win:
        at = pl.Series(np.minimum(cat["win"], n_win - 1))  # a rank without windows: masked
        step = pl.select(pl.when(pl.Series(cat["in_win"])).then(pl.concat(steps).gather(at)))
    else:
        step = pl.select(pl.repeat(None, cat["win"].size, dtype=pl.Int32))
    a, b = pl.Series(cat["a"], dtype=pl.Int64), pl.Series(cat["b"], dtype=pl.Int64)
    pieces = pl.DataFrame(
        {
            "rank": pl.Series(cat["rank"], dtype=pl.Int32),
            "gap": cat["gap"],
            "step": step.to_series().cast(pl.Int32),
            "in_span": cat["in_span"],
            "start_ns": pl.Series(cat["start"], dtype=pl.Int64),
            "end_ns": pl.Series(cat["end"], dtype=pl.Int64),
            "a_ns": pl.select(pl.when(pl.Series(cat["a_ok"])).then(a)).to_series(),
            "b_ns": pl.select(pl.when(pl.Series(cat["b_ok"])).then(b)).to_series(),
        }
    )
    w = pl.concat(works, how="vertical_relaxed").select(
        "row", pl.col("name").cast(pl.String), "launch_row", "ts_ns", "end_ns"
    )
    w = w.with_columns(*[pl.Series(k, np.concatenate(v)) for k, v in wcols.items()]).with_columns(
        pl.col("rank").cast(pl.Int32)
    )
    pieces = pieces.join(_gap_heads(w, ev), on=["rank", "gap"], how="left")
    kernels = pieces["next_name"].unique().drop_nulls().to_list()
    pieces = pieces.with_columns(pl.col("next_name").replace({n: normalize_kernel(n) for n in kernels}))
    base = ["rank", "gap", "step", "in_span", "start_ns", "end_ns"]
    lt, s, e = pl.col("l_ts_ns"), pl.col("start_ns"), pl.col("end_ns")
    has_next = pl.col("has_next")
    known = has_next & lt.is_not_null()
    # launch latency: [max(s, lt), e) where the next work was launched before the piece ends
    ll = pieces.filter(known & (lt < e)).select(
        *base[:4],
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
        *base[:5],
        pl.when(has_next).then(pl.min_horizontal(e, lt)).otherwise(e).alias("end_ns"),
        "a_ns",
        "pid",
        "tid",
    )
    frames = [ll, lost]
    if cpu.height:
        frames.append(_cpu_pieces(ev, cpu, waits))
    df = pl.concat(
        [f.cast({c: t for c, t in RANK_PIECE_SCHEMA.items() if c in f.columns}) for f in frames], how="vertical_relaxed"
    )
    df = df.filter(pl.col("end_ns") > pl.col("start_ns"))
    # run-specific values out of call sites (step numbers, object addresses), so they group
    site = pl.col("call_site").str.replace(_STEP_RE, "ProfilerStep#*").str.replace_all(_ADDR_RE, "0x…")
    return _merge_touching(df.with_columns(site))


#: Lanes whose stretches would pass this (ns) are attributed in several passes (int64 headroom).
_LANE_LIMIT = 1 << 62


def _cpu_pieces(ev: pl.LazyFrame, cpu: pl.DataFrame, waits: pl.DataFrame) -> pl.DataFrame:
    """The CPU parts ``cpu`` (``rank, gap, step, in_span, start_ns, end_ns, a_ns, pid, tid``)
    attributed on their launching threads (module doc, steps 1–6), every thread in one pass on
    its own lane (see above)."""
    threads = cpu.select("rank", "pid", "tid").unique().sort(["rank", "pid", "tid"]).with_row_index("lane")
    spans = _thread_spans(ev, threads.drop("lane"))
    spans = spans.join(threads, on=["rank", "pid", "tid"], how="left", maintain_order="left")
    parts = cpu.join(threads, on=["rank", "pid", "tid"], how="left").sort(["lane", "start_ns"], maintain_order=True)
    # each rank's times start at its earliest time here; a lane is as long as the longest rank
    ext = pl.concat(
        [
            spans.select("rank", pl.col("ts_ns").alias("lo"), pl.col("end_ns").alias("hi")),
            parts.select("rank", pl.col("start_ns").alias("lo"), pl.max_horizontal("end_ns", "a_ns").alias("hi")),
            parts.select("rank", pl.col("a_ns").alias("lo"), pl.col("a_ns").alias("hi")).drop_nulls(),
            waits.select("rank", pl.col("start_ns").alias("lo"), pl.col("end_ns").alias("hi")),
        ],
        how="vertical_relaxed",
    )
    ext = ext.group_by("rank").agg(pl.col("lo").min(), pl.col("hi").max())
    stride = int((ext["hi"] - ext["lo"]).max()) + 2
    n_lanes = threads.height
    if n_lanes > 1 and n_lanes * stride >= _LANE_LIMIT:  # too long for one pass: one rank at a time
        return pl.concat(
            [
                _cpu_pieces(ev, c, waits.filter(pl.col("rank") == r))
                for (r,), c in cpu.group_by("rank", maintain_order=True)
            ],
            how="vertical_relaxed",
        )
    lanes = threads.join(ext.select("rank", "lo"), on="rank", how="left").select(
        "rank", "lane", "pid", "tid", (pl.col("lane").cast(pl.Int64) * stride - pl.col("lo")).alias("shift")
    )
    spans = spans.join(lanes.select("lane", "shift"), on="lane", how="left", maintain_order="left").with_columns(
        pl.col("ts_ns") + pl.col("shift"), pl.col("end_ns") + pl.col("shift")
    )
    parts = parts.join(lanes.select("lane", "shift"), on="lane", how="left", maintain_order="left").with_columns(
        pl.col("start_ns") + pl.col("shift"),
        pl.col("end_ns") + pl.col("shift"),
        pl.col("a_ns") + pl.col("shift"),
        (pl.col("rank").cast(pl.Int64) * (1 << 32) + pl.col("gap")).alias("gkey"),
    )
    # every lane gets its rank's waits, in its times (in the rank's order, by start)
    lw = (
        waits.with_row_index("__w")
        .join(lanes.select("rank", "lane", "shift"), on="rank", how="inner")
        .sort(["lane", "__w"])
        .with_columns(pl.col("start_ns") + pl.col("shift"), pl.col("end_ns") + pl.col("shift"))
    )
    out = _attribute(spans, parts, lw)
    return _evidence(out, spans, lw)
