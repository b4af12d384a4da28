"""Steps: the interactive timeline of one step for all ranks (or the latest and least late ones).

The block (``type: "timeline"``, drawn on a canvas by ``assets/timeline.js``) packs the events
compactly: per-event columns are little-endian typed arrays in base64 (``{"dtype", "data"}``),
names are indices into a local name table whose entries are indices into the report's string
table. Events are sorted by (track, depth, start) so the browser culls each lane with a binary
search. Times are integers in ``unit_ns`` from the window's start ``t0_ns`` (aligned clock; the
unit is 1 ns unless the window is longer than 2**32 ns). Definitions: docs/timeline.md.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from ranksight.analyses import Missing, Session
from ranksight.report.aligned import (
    assign_tracks,
    choose_window,
    clock_offsets,
    collective_links,
    critical_path,
    overlaps,
    rank_main_tid,
    select_ranks,
    step_table,
    window_events,
)
from ranksight.report.html.payload import StringTable
from ranksight.report.html.sections import Ctx, Skip, section

__all__ = ["timeline_block", "MAX_EVENTS", "MAX_RANKS", "CATEGORIES", "CAUSES", "FLAG_BITS"]

#: Events embedded at most (the window is cut short beyond, with a note).
MAX_EVENTS = 500_000
#: Ranks drawn at most (beyond: the most and the least waited-for ones).
MAX_RANKS = 8
#: Colour categories: the event kind, with communication and memory kernels apart.
CATEGORIES = (
    "cpu_op",
    "user_annotation",
    "python_function",
    "cuda_runtime",
    "cuda_driver",
    "kernel",
    "communication kernel",
    "memory kernel",
    "memcpy",
    "memset",
    "gpu_user_annotation",
    "sync",
)
#: Idle causes (docs/idle-causes.md), in the legend's order.
CAUSES = ("dataloader", "collective_wait", "sync", "cpu_op", "launch_latency", "unexplained")
#: Bits of the per-event ``flags``.
FLAG_BITS = {"critical": 1, "collective": 2, "late": 4, "clipped": 8}

_U32_MAX = (1 << 32) - 2


def _b64(values: Any, dtype: str) -> dict[str, Any]:
    """A typed array as ``{"dtype", "data"}``: little-endian bytes in base64."""
    np_type = {"uint8": "<u1", "uint16": "<u2", "uint32": "<u4", "int32": "<i4"}[dtype]
    a = np.ascontiguousarray(np.asarray(values), dtype=np_type)
    return {"dtype": dtype, "data": base64.b64encode(a.tobytes()).decode("ascii")}


def _unit_ns(span_ns: int) -> int:
    unit = 1
    while span_ns // unit > _U32_MAX:
        unit *= 10
    return unit


def _quant(ns: pl.Expr, lo: int, unit: int) -> pl.Expr:
    return ((ns - lo + unit // 2) // unit).cast(pl.Int64)


def _q(ns: pl.Series, lo: int, unit: int) -> np.ndarray:
    """Times as integers in ``unit`` from ``lo`` (rounded to the nearest unit)."""
    return ((ns.cast(pl.Int64) - lo + unit // 2) // unit).to_numpy()


def _category() -> pl.Expr:
    k = pl.col("kind")
    return (
        pl.when((k == "kernel") & (pl.col("kernel_class") == "COMMUNICATION"))
        .then(pl.lit("communication kernel"))
        .when((k == "kernel") & (pl.col("kernel_class") == "MEMORY"))
        .then(pl.lit("memory kernel"))
        .otherwise(k)
    )


class _Names:
    """The block's local name table (each entry an index into the report's string table)."""

    def __init__(self, strings: StringTable) -> None:
        self.strings = strings
        self.index: dict[str, int] = {}
        self.refs: list[int] = []
        self.pending: list[tuple[dict[str, Any], np.ndarray]] = []

    def col(self, col: pl.Series) -> dict[str, Any]:
        """A name column of the block, encoded by :meth:`finish` (uint16 when the table allows)."""
        out: dict[str, Any] = {}
        self.pending.append((out, self.codes(col)))
        return out

    def finish(self) -> None:
        dtype = "uint16" if len(self.refs) <= 0xFFFF else "uint32"
        for out, codes in self.pending:
            out.update(_b64(codes, dtype))
        self.pending.clear()

    def codes(self, col: pl.Series) -> np.ndarray:
        """Local indices of a string column (one dictionary lookup per distinct value)."""
        uniq = col.fill_null("").unique(maintain_order=True).to_list()
        for u in uniq:
            if u not in self.index:
                self.index[u] = len(self.refs)
                ref = self.strings(u)
                assert ref is not None
                self.refs.append(ref)
        lut = pl.DataFrame(
            {"__k": uniq, "__v": [self.index[u] for u in uniq]}, schema={"__k": pl.String, "__v": pl.UInt32}
        )
        return (
            pl.DataFrame({"__k": col.fill_null("")})
            .join(lut, on="__k", how="left", maintain_order="left")["__v"]
            .to_numpy()
        )


def timeline_block(
    session: Session,
    strings: StringTable,
    *,
    step: int | None = None,
    max_ranks: int = MAX_RANKS,
    max_events: int = MAX_EVENTS,
    block_id: str = "timeline",
) -> tuple[dict[str, Any], list[str]]:
    """The timeline block of ``step`` (default: the slowest complete step) and its notes."""
    notes: list[str] = []
    offsets = clock_offsets(session)
    notes += offsets.notes
    steps, spans = step_table(session, offsets)
    if not spans:
        raise Skip("no timed event in these traces")
    win = choose_window(steps, spans, step)
    path, why_no_path = critical_path(session, win.step)
    must = sorted({int(r) for r in path["rank"].to_list()}) if path is not None else []
    ranks, rank_note = select_ranks(session, win, max_ranks, must)
    if rank_note:
        notes.append(rank_note)
    # per-rank extraction on the run's engine, in each rank's own clock
    lo, hi = win.lo_ns, win.hi_ns
    frames = []
    per_lo = {r: lo + offsets.offset_ns.get(r, 0) for r in ranks}
    per = session.map(
        _rank_events, ranks=ranks, window={r: (per_lo[r], hi + offsets.offset_ns.get(r, 0)) for r in ranks}
    )
    for r in ranks:
        df, main_tid = per[r]
        off = offsets.offset_ns.get(r, 0)
        frames.append((df.with_columns(pl.col("ts_ns") - off, pl.col("end_ns") - off), main_tid))
    ev = pl.concat([f for f, _ in frames]) if frames else pl.DataFrame()
    if ev.height == 0:
        raise Skip(f"no event in {win.how}")
    if ev.height > max_events:
        cut = int(ev["ts_ns"].sort()[max_events - 1])
        ev = ev.filter(pl.col("ts_ns") <= cut)
        notes.append(
            f"{win.how} holds more than {max_events:,} events: the timeline shows its first "
            f"{(cut - lo) / 1e6:.3f} ms ({ev.height:,} events)"
        )
        hi = max(cut, lo + 1)
    main_tids = {r: t for r, (_, t) in zip(ranks, frames, strict=True) if t is not None}
    ev, tracks = assign_tracks(ev, main_tids)
    unit = _unit_ns(hi - lo)
    ev = ev.with_columns(
        pl.col("ts_ns").clip(lower_bound=lo).alias("__s"),
        pl.col("end_ns").clip(upper_bound=hi).alias("__e"),
        ((pl.col("ts_ns") < lo) | (pl.col("end_ns") > hi)).alias("__clipped"),
        _category().alias("__cat"),
    ).with_columns(
        _quant(pl.col("__s"), lo, unit).alias("__qs"),
        (_quant(pl.col("__e"), lo, unit) - _quant(pl.col("__s"), lo, unit)).clip(lower_bound=0).alias("__qd"),
    )

    # display tracks: [critical path], then per rank its threads, streams and GPU idle
    causes_tab, idle_note = _idle_gaps(session, ranks, offsets.offset_ns, lo, hi)
    if idle_note:
        notes.append(idle_note)
    disp_rank: list[int] = []
    disp_kind: list[str] = []
    disp_label: list[str] = []
    disp_lanes: list[int] = []
    remap = np.zeros(tracks.height, dtype=np.int64)
    idle_track: dict[int, int] = {}
    if path is not None:
        disp_rank.append(-1)
        disp_kind.append("path")
        disp_label.append("critical path")
        disp_lanes.append(1)
    tr = tracks.to_dict(as_series=False)
    for r in ranks:
        for i in range(tracks.height):
            if tr["rank"][i] != r:
                continue
            remap[tr["track"][i]] = len(disp_rank)
            disp_rank.append(r)
            disp_kind.append(tr["side"][i])
            disp_label.append(tr["label"][i])
            disp_lanes.append(int(tr["depth"][i]))
        if causes_tab is not None and causes_tab.filter(pl.col("rank") == r).height:
            idle_track[r] = len(disp_rank)
            disp_rank.append(r)
            disp_kind.append("idle")
            disp_label.append("GPU idle by cause")
            disp_lanes.append(1)
    ev = ev.with_columns(pl.Series("__dtrack", remap[ev["track"].to_numpy()], dtype=pl.Int64)).sort(
        ["__dtrack", "depth", "__qs", "row"]
    )
    ev = ev.with_row_index("__i")
    names = _Names(strings)
    cats = list(CATEGORIES) + sorted(set(ev["__cat"].unique().to_list()) - set(CATEGORIES))
    cat_code = {c: i for i, c in enumerate(cats)}

    # flags: on the critical path, collective, late participant, clipped
    flags = np.where(ev["__clipped"].to_numpy(), FLAG_BITS["clipped"], 0).astype(np.uint8)
    key = ev.select("__i", "rank", "row")
    coll_block: dict[str, Any] | None = None
    links = collective_links(session, lo, hi)
    if links.height:
        lk = links.filter(pl.col("rank").is_in(ranks)).join(key, on=["rank", "row"], how="inner")
        lk = lk.filter(pl.col("__i").count().over("instance") >= 2).sort(["instance", "rank"])
        if lk.height:
            idx = lk["__i"].to_numpy()
            flags[idx] |= FLAG_BITS["collective"]
            late = lk.filter(pl.col("rank") == pl.col("late_rank"))
            flags[late["__i"].to_numpy()] |= FLAG_BITS["late"]
            inst = lk.group_by("instance", maintain_order=True).agg(
                pl.len().alias("n"), pl.col("coll_type").first(), pl.col("late_rank").first()
            )
            late_ev = inst.join(
                late.select("instance", pl.col("__i").alias("__late")), on="instance", how="left", maintain_order="left"
            )["__late"]
            offs = np.concatenate([[0], np.cumsum(inst["n"].to_numpy())])
            coll_block = {
                "n": inst.height,
                "instance": _b64(inst["instance"].to_numpy(), "uint32"),
                "offsets": _b64(offs, "uint32"),
                "events": _b64(idx, "uint32"),
                "late": _b64(late_ev.fill_null(-1).to_numpy(), "int32"),
                "type": names.col(inst["coll_type"]),
                "wait": _b64(_q(lk["wait_ns"].fill_null(0), 0, unit), "uint32"),
            }
    path_block: dict[str, Any] | None = None
    if path is not None:
        seg = path.filter(overlaps(lo, hi, "start_ns")).sort("start_ns")
        seg = seg.with_columns(pl.col("rank").cast(pl.Int32), pl.col("row").cast(pl.UInt32)).join(
            key, on=["rank", "row"], how="left", maintain_order="left"
        )
        hit = seg["__i"].drop_nulls().to_numpy()
        flags[hit] |= FLAG_BITS["critical"]
        s = seg["start_ns"].clip(lower_bound=lo)
        e = seg["end_ns"].clip(upper_bound=hi)
        types = sorted(set(seg["type"].cast(pl.String).to_list()))
        tcode = {t: i for i, t in enumerate(types)}
        path_block = {
            "n": seg.height,
            "types": types,
            "start": _b64(_q(s, lo, unit), "uint32"),
            "dur": _b64((_q(e, lo, unit) - _q(s, lo, unit)).clip(0), "uint32"),
            "rank": _b64(seg["rank"].to_numpy(), "int32"),
            "event": _b64(seg["__i"].fill_null(-1).cast(pl.Int64).to_numpy(), "int32"),
            "type": _b64([tcode[t] for t in seg["type"].cast(pl.String).to_list()], "uint8"),
            "name": names.col(seg["name"].cast(pl.String)),
        }
        if "category" in seg.columns:  # the job path's categories (compute, communication, host, ...)
            cats_p = sorted(set(seg["category"].cast(pl.String).fill_null("").to_list()))
            ccode = {c: i for i, c in enumerate(cats_p)}
            path_block["categories"] = cats_p
            path_block["category"] = _b64(
                [ccode[c] for c in seg["category"].cast(pl.String).fill_null("").to_list()], "uint8"
            )
        per_rank = seg.group_by("rank").agg(((pl.col("end_ns") - pl.col("start_ns")).sum() / 1e6).alias("ms"))
        on = ", ".join(f"rank {r} {ms:.3f} ms" for r, ms in per_rank.sort("ms", descending=True).iter_rows())
        notes.append(
            f"critical path ({seg.height:,} segments; {on}): the job-wide critical path of this step "
            "(`critical-path`, docs/critical-path.md)"
        )
    elif why_no_path:
        notes.append(why_no_path)

    gap_block: dict[str, Any] | None = None
    if causes_tab is not None and causes_tab.height:
        g = causes_tab.filter(pl.col("rank").is_in(list(idle_track))).sort(["rank", "start_ns"])
        g = g.with_columns(
            pl.col("start_ns").clip(lower_bound=lo).alias("__s"), pl.col("end_ns").clip(upper_bound=hi).alias("__e")
        )
        cause_code = {c: i for i, c in enumerate(CAUSES)}
        extra = sorted(set(g["cause"].to_list()) - set(CAUSES))
        for c in extra:
            cause_code[c] = len(cause_code)
        gap_block = {
            "n": g.height,
            "causes": list(cause_code),
            "start": _b64(_q(g["__s"], lo, unit), "uint32"),
            "dur": _b64((_q(g["__e"], lo, unit) - _q(g["__s"], lo, unit)).clip(0), "uint32"),
            "lanes": _lanes(np.array([idle_track[r] for r in g["rank"].to_list()], dtype=np.int64), None),
            "cause": _b64([cause_code[c] for c in g["cause"].to_list()], "uint8"),
            "site": names.col(g["call_site"]),
            "detail": names.col(g["detail"]),
        }

    n = ev.height
    block: dict[str, Any] = {
        "type": "timeline",
        "id": block_id,
        "title": f"Timeline of {'step ' + str(win.step) if win.step is not None else 'the trace'} (aligned clocks)",
        "step": win.step,
        "steps": win.steps,
        "window": win.how,
        "t0_ns": lo,
        "span_ns": hi - lo,
        "unit_ns": unit,
        "ranks": ranks,
        "all_ranks": len(session.ranks),
        "offsets_ns": [offsets.offset_ns.get(r, 0) for r in ranks],
        "aligned": offsets.source == "collectives",
        "tracks": {
            "rank": disp_rank,
            "kind": disp_kind,
            "label": strings.many(disp_label),
            "lanes": disp_lanes,
        },
        "names": names.refs,
        "categories": cats,
        "events": {
            "n": n,
            "start": _b64(ev["__qs"].to_numpy(), "uint32"),
            "dur": _b64(ev["__qd"].to_numpy(), "uint32"),
            "lanes": _lanes(ev["__dtrack"].to_numpy(), ev["depth"].to_numpy()),
            "name": names.col(ev["name"]),
            "cat": _b64(_codes(ev["__cat"], cat_code), "uint8"),
            "row": _b64(ev["row"].to_numpy(), "uint32"),
            "flags": _b64(flags, "uint8"),
        },
        "collectives": coll_block,
        "path": path_block,
        "gaps": gap_block,
    }
    names.finish()
    return block, notes


def _lanes(track: np.ndarray, depth: np.ndarray | None) -> dict[str, list[int]]:
    """Runs of equal (track, depth) in rows sorted by them: ``track, depth, first, count``."""
    n = len(track)
    if n == 0:
        return {"track": [], "depth": [], "first": [], "count": []}
    d = np.zeros(n, dtype=np.int64) if depth is None else depth.astype(np.int64)
    t = track.astype(np.int64)
    brk = np.flatnonzero(np.concatenate([[True], (t[1:] != t[:-1]) | (d[1:] != d[:-1])]))
    count = np.diff(np.append(brk, n))
    return {"track": t[brk].tolist(), "depth": d[brk].tolist(), "first": brk.tolist(), "count": count.tolist()}


def _codes(col: pl.Series, code: dict[str, int]) -> np.ndarray:
    lut = pl.DataFrame({"__k": list(code), "__v": list(code.values())}, schema={"__k": pl.String, "__v": pl.UInt8})
    return pl.DataFrame({"__k": col}).join(lut, on="__k", how="left", maintain_order="left")["__v"].to_numpy()


def _rank_events(trace: Any, window: dict[int, tuple[int, int]]) -> tuple[pl.DataFrame, int | None]:
    """One rank's track events in its window (own clock) and its main thread."""
    lo, hi = window[trace.rank]
    return window_events(trace, lo, hi), rank_main_tid(trace)


def _idle_gaps(
    session: Session, ranks: Sequence[int], offsets: dict[int, int], lo: int, hi: int
) -> tuple[pl.DataFrame | None, str | None]:
    """``idle-causes``' pieces of the shown ranks in the window, on the aligned clock."""
    res = session.try_result("idle-causes")
    if isinstance(res, Missing):
        return None, f"idle gaps not coloured by cause: {res.reason}"
    g = res.tables.get("gaps")
    if g is None or g.height == 0:
        return None, None
    off = pl.DataFrame(
        {"rank": list(offsets), "__off": list(offsets.values())}, schema={"rank": pl.Int32, "__off": pl.Int64}
    )
    g = (
        g.filter(pl.col("rank").is_in(list(ranks)))
        .join(off, on="rank", how="left")
        .with_columns(
            (pl.col("start_ns") - pl.col("__off").fill_null(0)).alias("start_ns"),
            (pl.col("end_ns") - pl.col("__off").fill_null(0)).alias("end_ns"),
        )
        .filter((pl.col("end_ns") > lo) & (pl.col("start_ns") < hi))
        .select("rank", "start_ns", "end_ns", "cause", "call_site", "detail")
    )
    return g, None


@section(
    "timeline",
    "Timeline of one step",
    group="Steps",
    order=5,
    help="The slowest complete step (the longest span over the ranks among steps no rank marks incomplete; the "
    "whole trace without ProfilerSteps) for every rank, or the most and the least waited-for ranks when there "
    "are more than 8: CPU threads and GPU streams on clocks aligned by the matched collectives (offsets of the "
    "`alignment` section), each collective's kernels linked across ranks (the rank that arrived last marked), "
    "GPU idle coloured by cause (`idle-causes`), the critical path on top when available. Wheel or +/− to "
    "zoom, drag to pan, click an event for its details, double-click to reset. Definitions: docs/timeline.md.",
)
def timeline(ctx: Ctx) -> list[dict[str, Any]]:
    block, notes = timeline_block(ctx.session, ctx.strings)
    for n in notes:
        if n not in ctx.notes:
            ctx.notes.append(n)
    return [block]
