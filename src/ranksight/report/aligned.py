"""The job on one clock: what the report's timeline and the merged Perfetto trace share.

- **Offsets** (:func:`clock_offsets`): each rank's clock offset from the ``alignment`` analysis
  (``collectives.comm_data``: the median over matched collectives of ``end − median end``, applied
  when above the noise floor). Aligned time = the rank's own time − its offset. With one rank, or
  no matched collective, every offset is 0 and a note says why.
- **Steps** (:func:`step_table`): per rank and ProfilerStep, the step's window on the aligned
  clock: from the earlier of the step's CPU start and its first GPU work to the later of its CPU
  end and its last GPU work (``Trace.steps``).
- **Window** (:func:`choose_window`): one step's window over the ranks: the union of its ranks'
  windows; by default the slowest complete step (the longest such union among steps no rank
  marks ``incomplete``); a trace without ProfilerSteps gives the whole span of every rank.
- **Tracks** (:func:`window_events`, :func:`assign_tracks`): host events (``cpu_op``,
  ``user_annotation``, ``python_function``, ``cuda_runtime``, ``cuda_driver``) on their CPU
  thread ``(pid, tid)``; device events (``kernel``, ``memcpy``, ``memset``,
  ``gpu_user_annotation``, ``sync``) on their GPU stream ``(device, stream)``. Per rank: the
  thread that holds the ProfilerSteps first, then the other threads by tid, then the streams by
  (device, stream). ``depth`` is the event's nesting level on its track (HTA's call stack,
  :func:`ranksight.views.hta_call_stack.nest`).
- **Collectives** (:func:`collective_links`): each matched instance's kernels (rank, row,
  aligned start and end) and the rank that arrived last (``late_rank``).
- **Critical path** (:func:`critical_path`): the segments of the job-wide critical path of a step
  (``critical-path``), when that analysis is available.

Per-rank work runs through :meth:`Session.map` (module-level functions, small results back).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from ranksight.analyses import Missing, Session
from ranksight.errors import UsageError
from ranksight.views.hta_call_stack import nest

if TYPE_CHECKING:
    from ranksight.model.trace import Trace

__all__ = [
    "HOST_KINDS",
    "DEVICE_KINDS",
    "TRACK_KINDS",
    "Window",
    "clock_offsets",
    "step_table",
    "choose_window",
    "window_events",
    "assign_tracks",
    "collective_links",
    "critical_path",
    "select_ranks",
    "overlaps",
]

#: Kinds drawn on a CPU thread.
HOST_KINDS = ("cpu_op", "user_annotation", "python_function", "cuda_runtime", "cuda_driver")
#: Kinds drawn on a GPU stream.
DEVICE_KINDS = ("kernel", "memcpy", "memset", "gpu_user_annotation", "sync")
TRACK_KINDS = HOST_KINDS + DEVICE_KINDS

EVENT_SCHEMA: dict[str, Any] = {
    "rank": pl.Int32,
    "row": pl.UInt32,
    "kind": pl.String,
    "name": pl.String,
    "side": pl.String,
    "pid": pl.Int64,
    "tid": pl.Int64,
    "ts_ns": pl.Int64,
    "end_ns": pl.Int64,
    "kernel_class": pl.String,
    "step": pl.Int32,
}


@dataclass
class Offsets:
    """Per-rank clock offsets (ns; aligned = own time − offset) and how they were had."""

    offset_ns: dict[int, int]
    clock: dict[int, str]
    notes: list[str] = field(default_factory=list)
    #: ``collectives`` when estimated from matched collectives, ``none`` when every offset is 0 by default
    source: str = "collectives"


@dataclass
class Window:
    """One step's window on the aligned clock (``step`` None: the whole trace)."""

    step: int | None
    lo_ns: int
    hi_ns: int
    how: str
    steps: list[int] = field(default_factory=list)

    @property
    def span_ns(self) -> int:
        return self.hi_ns - self.lo_ns


def clock_offsets(sess: Session) -> Offsets:
    """Each rank's clock offset from the matched collectives (0 with a note when they cannot be had)."""
    return sess.memo(("report", "clock_offsets"), lambda: _clock_offsets(sess))


def _clock_offsets(sess: Session) -> Offsets:
    zeros = {r: 0 for r in sess.ranks}
    clocks = {r: f"rank {r}" for r in sess.ranks}
    if len(sess.ranks) < 2:
        return Offsets(zeros, clocks, [], "none")
    from ranksight.analyses.collectives import comm_data

    cd = sess.try_memo(("report", "comm_data"), lambda: comm_data(sess), "collectives")
    if isinstance(cd, Missing):
        return Offsets(zeros, clocks, [f"clocks not aligned (offsets 0): {cd.reason}"], "none")
    if cd.instances.height == 0 or not (cd.instances["ranks_present"] >= 2).any():
        return Offsets(zeros, clocks, ["clocks not aligned (offsets 0): no collective matched across ranks"], "none")
    off = cd.offsets
    return Offsets(
        {int(r): int(o) for r, o in zip(off["rank"].to_list(), off["offset_ns"].to_list(), strict=True)},
        {int(r): str(c) for r, c in zip(off["rank"].to_list(), off["clock"].to_list(), strict=True)},
        [],
        "collectives",
    )


# ---- steps and the window ---------------------------------------------------------------------


def rank_steps(trace: Trace) -> tuple[pl.DataFrame, tuple[int, int] | None]:
    """One rank's steps (``step, start_ns, end_ns, incomplete``: CPU span united with its GPU
    work, the rank's own clock) and its whole span."""
    st = trace.steps
    if st.height:
        st = st.select(
            "step",
            pl.min_horizontal("start_ns", "gpu_start_ns").alias("start_ns"),
            pl.max_horizontal("end_ns", "gpu_end_ns").alias("end_ns"),
            pl.col("incomplete").fill_null(False),
        )
    else:
        st = pl.DataFrame(schema={"step": pl.Int32, "start_ns": pl.Int64, "end_ns": pl.Int64, "incomplete": pl.Boolean})
    return st, trace.span_ns


def step_table(sess: Session, offsets: Offsets) -> tuple[pl.DataFrame, dict[int, tuple[int, int]]]:
    """Per rank and step the aligned window (``rank, step, start_ns, end_ns, incomplete``) and
    each rank's aligned span."""

    def compute() -> tuple[pl.DataFrame, dict[int, tuple[int, int]]]:
        per = sess.map(rank_steps)
        frames, spans = [], {}
        for r, (st, span) in per.items():
            off = offsets.offset_ns.get(r, 0)
            frames.append(
                st.select(
                    pl.lit(r, dtype=pl.Int32).alias("rank"),
                    pl.col("step").cast(pl.Int32),
                    (pl.col("start_ns") - off).alias("start_ns"),
                    (pl.col("end_ns") - off).alias("end_ns"),
                    "incomplete",
                )
            )
            if span is not None:
                spans[r] = (span[0] - off, span[1] - off)
        steps = pl.concat(frames) if frames else pl.DataFrame()
        return steps, spans

    return sess.memo(("report", "step_table"), compute)


def choose_window(steps: pl.DataFrame, spans: dict[int, tuple[int, int]], step: int | None = None) -> Window:
    """The window of ``step`` (default: the slowest complete step; the whole span without steps)."""
    if steps.height == 0:
        if step is not None:
            raise UsageError(f"step {step} not found: these traces have no ProfilerStep")
        if not spans:
            raise UsageError("no timed event in these traces")
        lo = min(s[0] for s in spans.values())
        hi = max(s[1] for s in spans.values())
        return Window(None, lo, hi, "the whole trace (no ProfilerStep)")
    per = (
        steps.group_by("step")
        .agg(
            pl.col("start_ns").min().alias("lo"),
            pl.col("end_ns").max().alias("hi"),
            pl.col("incomplete").any().alias("incomplete"),
        )
        .with_columns((pl.col("hi") - pl.col("lo")).alias("span"))
        .sort("step")
    )
    available = [int(s) for s in per["step"].to_list()]
    if step is not None:
        row = per.filter(pl.col("step") == step)
        if row.height == 0:
            raise UsageError(f"step {step} not found; steps in these traces: {_ranges(available)}")
        how = f"step {step} (asked)"
    else:
        complete = per.filter(~pl.col("incomplete"))
        pool = complete if complete.height else per
        row = pool.sort(["span", "step"], descending=[True, False]).head(1)
        how = (
            f"step {int(row['step'][0])}: the slowest {'complete ' if complete.height else ''}step "
            f"of {per.height} (its longest span over the ranks)"
        )
    return Window(int(row["step"][0]), int(row["lo"][0]), int(row["hi"][0]), how, available)


def _ranges(values: Sequence[int]) -> str:
    out: list[str] = []
    for v in sorted(values):
        if out and out[-1].split("-")[-1] == str(v - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{v}"
        else:
            out.append(str(v))
    return ", ".join(out)


# ---- events on tracks -------------------------------------------------------------------------


def overlaps(lo_ns: int | None, hi_ns: int | None, start: str = "ts_ns", end: str = "end_ns") -> pl.Expr:
    """Whether an event overlaps the half-open window ``[lo_ns, hi_ns)`` (None: unbounded): it
    starts before ``hi_ns`` and ends after ``lo_ns``, or, with no duration, starts in the window
    (so an event that ends where the window starts, e.g. the previous ProfilerStep, is not in it)."""
    s, e = pl.col(start), pl.max_horizontal(end, start)
    cond = pl.lit(True)
    if hi_ns is not None:
        cond = cond & (s < hi_ns)
    if lo_ns is not None:
        cond = cond & ((e > lo_ns) | ((e == s) & (s >= lo_ns)))
    return cond


def window_events(trace: Trace, lo_ns: int | None = None, hi_ns: int | None = None) -> pl.DataFrame:
    """The track events of one rank that overlap ``[lo_ns, hi_ns]`` (the rank's own clock; None:
    unbounded), with their side (``cpu``/``gpu``) and track keys (:data:`EVENT_SCHEMA`)."""
    kind = pl.col("kind").cast(pl.String)
    on_gpu = kind.is_in(list(DEVICE_KINDS))
    lf = trace.scan().filter(pl.col("kind").is_in(list(TRACK_KINDS)) & pl.col("ts_ns").is_not_null())
    lf = lf.filter(overlaps(lo_ns, hi_ns))
    df = lf.select(
        pl.lit(trace.rank, dtype=pl.Int32).alias("rank"),
        pl.col("row").cast(pl.UInt32),
        kind.alias("kind"),
        pl.col("name").cast(pl.String).fill_null(""),
        pl.when(on_gpu).then(pl.lit("gpu")).otherwise(pl.lit("cpu")).alias("side"),
        pl.when(on_gpu)
        .then(pl.coalesce(pl.col("device").cast(pl.Int64), pl.col("pid").cast(pl.Int64)))
        .otherwise(pl.col("pid").cast(pl.Int64))
        .fill_null(-1)
        .alias("pid"),
        pl.when(on_gpu)
        .then(pl.coalesce(pl.col("stream"), pl.col("tid").cast(pl.Int64)))
        .otherwise(pl.col("tid").cast(pl.Int64))
        .fill_null(-1)
        .alias("tid"),
        "ts_ns",
        pl.max_horizontal("end_ns", "ts_ns").alias("end_ns"),
        pl.col("kernel_class").cast(pl.String),
        pl.col("step").cast(pl.Int32),
    ).collect()
    return df.cast(EVENT_SCHEMA)  # type: ignore[arg-type]


def assign_tracks(ev: pl.DataFrame, main_tids: dict[int, int] | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``ev`` (:func:`window_events` of one or more ranks) with ``track`` (an index into the
    returned track table, in display order) and ``depth`` (nesting level on the track); the
    track table has ``track, rank, side, pid, tid, events, depth`` (lanes) and ``label``.

    Order per rank: the thread in ``main_tids`` (the one holding the ProfilerSteps) first, then
    CPU threads by (pid, tid), then GPU streams by (device, stream)."""
    main_tids = main_tids or {}
    if ev.height == 0:
        tracks = pl.DataFrame(
            schema={
                "track": pl.UInt32,
                "rank": pl.Int32,
                "side": pl.String,
                "pid": pl.Int64,
                "tid": pl.Int64,
                "events": pl.UInt32,
                "depth": pl.Int32,
                "label": pl.String,
            }
        )
        return ev.with_columns(pl.lit(0, pl.UInt32).alias("track"), pl.lit(0, pl.Int32).alias("depth")), tracks
    main = pl.DataFrame(
        {"rank": list(main_tids), "__main": list(main_tids.values())}, schema={"rank": pl.Int32, "__main": pl.Int64}
    )
    keys = (
        ev.group_by("rank", "side", "pid", "tid")
        .agg(pl.len().cast(pl.UInt32).alias("events"))
        .join(main, on="rank", how="left")
        .with_columns(
            ((pl.col("side") == "cpu") & (pl.col("tid") == pl.col("__main"))).alias("__is_main"),
        )
        .sort(["rank", "__is_main", "side", "pid", "tid"], descending=[False, True, False, False, False])
        .with_columns(pl.int_range(pl.len(), dtype=pl.UInt32).alias("track"))
        .drop("__main", "__is_main")
    )
    ev = ev.join(keys.select("rank", "side", "pid", "tid", "track"), on=["rank", "side", "pid", "tid"], how="left")
    n = nest(
        ev.select(
            pl.int_range(pl.len(), dtype=pl.UInt32).alias("row"),
            pl.lit(0, pl.Int32).alias("pid"),
            pl.col("track").cast(pl.Int32).alias("tid"),
            "ts_ns",
            "end_ns",
        )
    )
    depth = np.zeros(ev.height, dtype=np.int32)
    depth[n["row"].to_numpy()] = n["depth"].to_numpy()
    ev = ev.with_columns(pl.Series("depth", depth, dtype=pl.Int32))
    lanes = ev.group_by("track").agg((pl.col("depth").max() + 1).alias("depth"))
    tracks = (
        keys.join(lanes, on="track", how="left")
        .with_columns(
            pl.when(pl.col("side") == "gpu")
            .then(
                pl.concat_str(
                    pl.lit("GPU "), pl.col("pid").cast(pl.String), pl.lit(" stream "), pl.col("tid").cast(pl.String)
                )
            )
            .otherwise(pl.concat_str(pl.lit("thread "), pl.col("tid").cast(pl.String)))
            .alias("label")
        )
        .sort("track")
        .select("track", "rank", "side", "pid", "tid", "events", "depth", "label")
    )
    return ev, tracks


def rank_main_tid(trace: Trace) -> int | None:
    """The thread holding the rank's ProfilerSteps (the most of them), None without steps."""
    st = trace.steps
    if st.height == 0:
        return None
    return int(st.group_by("tid").len().sort(["len", "tid"], descending=[True, False])["tid"][0])


# ---- collectives, critical path, ranks --------------------------------------------------------


def collective_links(sess: Session, lo_ns: int | None = None, hi_ns: int | None = None) -> pl.DataFrame:
    """Every matched collective's kernels (``instance, rank, row, start_ns, end_ns`` aligned,
    ``coll_type``, ``late_rank``, ``wait_ns``) of instances with at least two ranks that overlap
    ``[lo_ns, hi_ns]`` (aligned); empty with one rank or no collective."""
    schema = {
        "instance": pl.Int64,
        "rank": pl.Int32,
        "row": pl.UInt32,
        "start_ns": pl.Int64,
        "end_ns": pl.Int64,
        "coll_type": pl.String,
        "late_rank": pl.Int64,
        "wait_ns": pl.Int64,
    }
    if len(sess.ranks) < 2:
        return pl.DataFrame(schema=schema)
    from ranksight.analyses.collectives import comm_data

    cd = sess.try_memo(("report", "comm_data"), lambda: comm_data(sess), "collectives")
    if isinstance(cd, Missing) or cd.per_rank.height == 0:
        return pl.DataFrame(schema=schema)
    p = cd.per_rank.filter(pl.col("instance").is_not_null())
    if lo_ns is not None and hi_ns is not None:
        p = p.filter(overlaps(lo_ns, hi_ns, "start_ns"))
    p = p.join(cd.instances.select("instance", "late_rank", "ranks_present"), on="instance", how="left")
    p = p.join(cd.participants.select("rank", "idx", "wait_ns"), on=["rank", "idx"], how="left")
    p = p.filter(pl.col("instance").count().over("instance") >= 2)
    return p.select(list(schema)).cast(schema).sort(["instance", "rank", "start_ns"])


def critical_path(sess: Session, step: int | None) -> tuple[pl.DataFrame | None, str | None]:
    """The job-wide critical path of ``step`` as segments (``rank, stream, tid, row, name,
    start_ns, end_ns, type``, aligned), or None and the reason it cannot be had."""
    try:
        mod = importlib.import_module("ranksight.analyses.critical_path")
    except ImportError:
        return None, "the critical-path analysis is not available in this ranksight version"
    fn = getattr(mod, "critical_path_segments", None)
    if fn is None:
        return None, "the critical-path analysis does not provide path segments in this ranksight version"
    res = sess.try_memo(("report", "critical_path", step), lambda: fn(sess, step=step), "critical-path")
    if isinstance(res, Missing):
        return None, f"no critical path: {res.reason}"
    if res is None or res.height == 0:
        return None, "no critical path found for this step"
    return res, None


def rank_lateness(sess: Session, lo_ns: int, hi_ns: int) -> dict[int, int]:
    """Per rank, the time its peers waited for it in the window's collectives (the sum over the
    instances where it arrived last of the other participants' waits, ns)."""
    links = collective_links(sess, lo_ns, hi_ns)
    out = {r: 0 for r in sess.ranks}
    if links.height == 0:
        return out
    w = (
        links.filter(pl.col("late_rank").is_not_null())
        .group_by("late_rank")
        .agg(pl.col("wait_ns").fill_null(0).sum().alias("w"))
    )
    for r, v in zip(w["late_rank"].to_list(), w["w"].to_list(), strict=True):
        out[int(r)] = int(v)
    return out


def select_ranks(
    sess: Session, window: Window, max_ranks: int, must: Sequence[int] = ()
) -> tuple[list[int], str | None]:
    """All ranks when there are at most ``max_ranks``; else the ``max_ranks // 2`` latest ranks
    (the most waited for in the window's collectives, :func:`rank_lateness`) and as many of the
    least waited for, plus ``must`` (e.g. the ranks on the critical path). The note says which."""
    rs = list(sess.ranks)
    if len(rs) <= max_ranks:
        return rs, None
    late = rank_lateness(sess, window.lo_ns, window.hi_ns)
    order = sorted(rs, key=lambda r: (-late.get(r, 0), r))
    half = max(1, max_ranks // 2)
    worst, best = order[:half], order[-half:]
    chosen = sorted(set(worst) | set(best) | {r for r in must if r in rs})
    if not any(late.values()):
        note = (
            f"{len(chosen)} of {len(rs)} ranks shown: no rank waited for another in this step's collectives, so the "
            f"first {half} and the last {half}"
        )
    else:
        note = (
            f"{len(chosen)} of {len(rs)} ranks shown: the {half} most waited for in this step's collectives "
            f"({', '.join(map(str, worst))}) and the {half} least ({', '.join(map(str, best))})"
        )
    return chosen, note + (", and the ranks on the critical path" if must else "")
