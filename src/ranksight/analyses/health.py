"""Trace health: is this trace complete and self-consistent enough to trust the other numbers?

One row per (rank, check) plus run-level rows (rank ``None``). ``status`` is ``ok``, ``info``
(worth knowing, usually harmless) or ``warning`` (numbers computed from this trace may be wrong).
``count`` is the number of events concerned, ``total_us`` / ``max_us`` an amount where one
applies. Exact definitions (all per rank; GPU work = kernels, memcpys, memsets; sync events are
never GPU work):

- ``gpu_without_launch``: GPU work whose ``correlation`` matches no runtime/driver call
  (``launch_row`` null): the CPU-side record was dropped, or the trace lacks the CPU side.
- ``launch_without_gpu``: calls of a known launch API (:data:`~ranksight.model.kinds.LAUNCH_APIS`)
  that carry a correlation and own no GPU work (``gpu_count == 0``). A warning when kernel
  launches (``*Launch*``, MTIA ``runFunction``) are among them: dropped GPU records (trap 12);
  only ``info`` when they are all memcpy/memset calls (zero-byte ones leave no GPU record).
  Kernel launches made while a CUDA/HIP graph is being captured (between ``*StreamBeginCapture``
  and ``*StreamEndCapture`` on the thread; ``run-context``'s count) are not counted there.
- ``captured_launches`` (info): those launches, recorded into the graph and not executed, so they
  own no GPU event (not dropped records).
- ``stream_overlap``: on one (device, stream), GPU work sorted by start; an item overlaps when
  it starts before the running maximum end of the earlier items; the overlap is
  ``min(prev_max_end, end) − start``. Overlaps of at least ``noise_us`` are warnings (trap 5);
  smaller ones are CUPTI boundary noise (trap 2) and reported separately as ``stream_overlap_noise``.
- ``longer_than_trace``: GPU work longer than the CPU span of the trace (first CPU event start to
  last CPU event end).
- ``longer_than_step``: GPU work launched in a step and longer than the longest step's CPU span.
- ``zero_length_kernels``: kernels with ``dur == 0``; ``negative_durations``: any event with
  ``dur < 0``.
- ``cpu_nesting``: CPU ranges (ops, annotations, Python frames, runtime calls) on one
  (pid, tid); each range's parent is the innermost range enclosing its start
  (:func:`~ranksight.views.enclosing.parent_spans`, sorts and as-of joins, no per-event
  Python); a range crosses when it ends after its parent, by ``end − parent end``. Crossings of
  at least ``noise_us`` are warnings (trap 15), smaller ones ``cpu_nesting_noise``; crossings
  where the range or its parent is a Python frame (``record_function`` enter/exit frames cross
  ``ProfilerStep`` spans in with_stack traces) are ``cpu_nesting_python`` (info).
- ``distributed_info``: ``distributedInfo`` absent, or without ``rank`` / ``world_size``.
- ``time_resolution``: ``ns`` when some timestamp is not a whole µs, else ``µs`` (precision lost).
- ``time_base``: ``baseTimeNanoseconds``, absolute epoch µs, or relative without a base
  (a truncated current Kineto trace: it writes the base after the events).
- ``unknown_launch_apis``: runtime/driver calls that own GPU work but are not in ``LAUNCH_APIS``
  (linked through the correlation anyway; named for the record).
- ``incomplete_last_step``: the last ProfilerStep has fewer than 80 % of the previous step's
  kernels (trap 19).
- ``outside_steps``: timed CPU events starting outside every step, and GPU work launched outside
  every step (only when the trace has steps).
- ``kineto_log``: ERROR / WARNING lines Kineto wrote into the trace.
- ``decoder``: what the loader repaired or salvaged (truncation, invalid JSON, bad numbers).
- ``dropped_events``: events the loader dropped because their ``ts`` (any event but metadata) or
  ``dur`` (complete events, ``ph`` X) is missing, not a number (NaN, Infinity, text) or beyond
  ±2**62 ns (``1e308``, ``-5e20``, 23 digits); every analysis computes the rest
  (``stats["dropped_events"]``; docs/robustness.md).
- ``cut_strings``: strings longer than the per-string cap (default 1 MiB) that the loader cut
  to it, ending in ``…[truncated: N bytes]``.
- ``no_gpu_events`` / ``no_cpu_events``: the trace has none.

Run-level rows: ``world_size`` (ranks disagree), ``time_bases`` (some ranks relative, some
absolute), ``rank_span`` (a rank's span is under half or over twice the median), ``rank_clock``
(a rank's span does not overlap the common window of the others: clock skew or runs mixed).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, Option, register
from ranksight.analyses._session import Session
from ranksight.model.kinds import GPU_KINDS, LAUNCH_APIS, LAUNCH_KINDS
from ranksight.views.enclosing import parent_spans
from ranksight.views.event_source import EventSource
from ranksight.views.rank_slices import RankSlices
from ranksight.views.run_context import run_context

if TYPE_CHECKING:
    from ranksight.model.run import Run
    from ranksight.model.trace import Trace

__all__ = ["trace_health", "run_health", "health", "hint", "crossings", "CHECKS", "NESTING_KINDS"]

#: CPU ranges that should nest on their thread.
NESTING_KINDS = ("cpu_op", "user_annotation", "python_function", "cuda_runtime", "cuda_driver")
#: Kineto's relative timestamps stay below ~7.9e15 ns; epoch ns are ~1.7e18.
_RELATIVE_LIMIT_NS = 10**17

CHECKS = (
    "decoder",
    "dropped_events",
    "cut_strings",
    "no_gpu_events",
    "no_cpu_events",
    "gpu_without_launch",
    "launch_without_gpu",
    "stream_overlap",
    "stream_overlap_noise",
    "longer_than_trace",
    "longer_than_step",
    "zero_length_kernels",
    "negative_durations",
    "cpu_nesting",
    "cpu_nesting_python",
    "cpu_nesting_noise",
    "distributed_info",
    "time_resolution",
    "time_base",
    "unknown_launch_apis",
    "incomplete_last_step",
    "outside_steps",
    "kineto_log",
)

SCHEMA = {
    "rank": pl.Int64,
    "check": pl.String,
    "status": pl.String,
    "count": pl.Int64,
    "total_us": pl.Float64,
    "max_us": pl.Float64,
    "detail": pl.String,
}


def _row(
    rank: int | None,
    check: str,
    status: str,
    count: int = 0,
    total_ns: int | None = None,
    max_ns: int | None = None,
    detail: str = "",
) -> dict[str, Any]:
    return {
        "rank": rank,
        "check": check,
        "status": status,
        "count": int(count),
        "total_us": None if total_ns is None else round(total_ns / 1e3, 3),
        "max_us": None if max_ns is None else round(max_ns / 1e3, 3),
        "detail": detail,
    }


def _names(df: pl.DataFrame, n: int = 3) -> str:
    """The most frequent names in ``df``, for details."""
    if df.height == 0:
        return ""
    top = df.group_by(pl.col("name").cast(pl.String)).len().sort(["len", "name"], descending=[True, False]).head(n)
    return ", ".join(f"{name} ×{k}" for name, k in top.iter_rows())


def _timed(ev: pl.DataFrame) -> pl.DataFrame:
    return ev.filter(pl.col("ts_ns").is_not_null() & pl.col("dur_ns").is_not_null())


def _bounds(t: Trace, kinds: Sequence[str]) -> tuple[int, int] | None:
    """First start and last end over the timed events of some kinds (no events copied)."""
    lo, hi = (
        t.scan()
        .filter(pl.col("kind").is_in(list(kinds)) & pl.col("ts_ns").is_not_null() & pl.col("dur_ns").is_not_null())
        .select(pl.col("ts_ns").min(), pl.col("end_ns").max())
        .collect()
        .row(0)
    )
    return None if lo is None else (int(lo), int(hi))


# ---- per-check functions (each vectorised over one trace's events) ----------------------------


def _links(t: Trace, rank: int) -> list[dict[str, Any]]:
    ev = t.scan()  # each check copies only the columns it reads of the rows it keeps
    gpu = t.kind(*GPU_KINDS, columns=["name", "launch_row"])
    out = []
    orphan = gpu.filter(pl.col("launch_row").is_null())
    out.append(
        _row(
            rank,
            "gpu_without_launch",
            "warning" if orphan.height else "ok",
            orphan.height,
            detail=(f"{orphan.height} of {gpu.height} GPU events have no launching call: " + _names(orphan))
            if orphan.height
            else f"all {gpu.height} GPU events linked",
        )
    )
    launches = (
        ev.filter(
            pl.col("kind").is_in(list(LAUNCH_KINDS))
            & pl.col("correlation").is_not_null()
            & pl.col("name").cast(pl.String).is_in(list(LAUNCH_APIS))
        )
        .select("name", "gpu_count")
        .collect()
    )
    lost = launches.filter(pl.col("gpu_count") == 0)
    # copies and sets of zero bytes legitimately leave no GPU record; lost kernels do not, unless
    # they were captured into a CUDA/HIP graph (recorded, not executed: run-context's count)
    is_kernel_launch = pl.col("name").cast(pl.String).str.contains("(?i)launch|runFunction")
    lost_k = lost.filter(is_kernel_launch)
    captured = min(run_context(t).captured_launches, lost_k.height) if lost_k.height else 0
    dropped_k = lost_k.height - captured
    outside = " outside graph capture" if captured else ""
    if gpu.height == 0 and launches.height == 0:
        out.append(_row(rank, "launch_without_gpu", "ok", detail="no launches"))
    elif lost.height - captured == 0:
        out.append(
            _row(
                rank,
                "launch_without_gpu",
                "ok",
                detail=f"all {launches.height - captured} launches{outside} own GPU work",
            )
        )
    else:
        out.append(
            _row(
                rank,
                "launch_without_gpu",
                "warning" if dropped_k else "info",
                lost.height - captured,
                detail=f"{lost.height - captured} of {launches.height - captured} launches{outside} own no GPU event "
                + ("(dropped GPU records): " if dropped_k else "(copies/sets only; zero-byte ones leave none): ")
                + _names(lost),
            )
        )
    if captured:
        out.append(
            _row(
                rank,
                "captured_launches",
                "info",
                captured,
                detail=f"{captured} kernel launches were captured into CUDA/HIP graphs (between BeginCapture and "
                "EndCapture): recorded, not executed, so they own no GPU event; not dropped records",
            )
        )
    owners = (
        ev.filter(
            pl.col("kind").is_in(list(LAUNCH_KINDS))
            & (pl.col("gpu_count") > 0)
            & ~pl.col("name").cast(pl.String).is_in(list(LAUNCH_APIS))
        )
        .select("name")
        .collect()
    )
    out.append(
        _row(
            rank,
            "unknown_launch_apis",
            "info" if owners.height else "ok",
            owners.height,
            detail=("launch APIs not in the known list (linked by correlation anyway): " + _names(owners, 5))
            if owners.height
            else "every launch API is known",
        )
    )
    return out


def _overlap_amounts(df: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Ranges sorted by ``keys`` then (start, −end), with ``over_prev_max``: the overlap with the
    earlier range of the group that ends last, ``min(prev_max_end, end) − start`` when positive
    (a running maximum of ends, no per-event Python)."""
    s = df.sort([*keys, "ts_ns", "end_ns"], descending=[False] * len(keys) + [False, True])
    pmax = pl.col("end_ns").cum_max().shift(1).over(keys)
    return s.with_columns(pmax.alias("__pmax")).with_columns(
        pl.when(pl.col("__pmax") > pl.col("ts_ns"))
        .then(pl.min_horizontal("__pmax", "end_ns") - pl.col("ts_ns"))
        .otherwise(0)
        .alias("over_prev_max"),
    )


def crossings(df: pl.DataFrame, by: Sequence[str] = ()) -> pl.DataFrame:
    """CPU ranges (``pid, tid, ts_ns, end_ns, kind``; ``by``'s columns first over stacked ranks)
    with ``cross``: how far each range ends past its parent (the innermost range on its thread
    enclosing its start, found by :func:`~ranksight.views.enclosing.parent_spans`), 0 when it
    nests; and ``cross_python``: the range or its parent is a Python frame."""
    c = df.with_columns(pl.struct(*by, "pid", "tid").rank("dense").alias("__thread"))
    c = c.with_columns(parent_spans(c, key="__thread").alias("__par"))
    # the parent's end and kind by position (a gather, not a join over every range)
    c = c.with_columns(
        pl.col("end_ns").gather(pl.col("__par")).alias("__pend"),
        (pl.col("kind") == "python_function").gather(pl.col("__par")).alias("__ppy"),
    )
    return c.with_columns(
        pl.when(pl.col("__pend").is_not_null() & (pl.col("end_ns") > pl.col("__pend")))
        .then(pl.col("end_ns") - pl.col("__pend"))
        .otherwise(0)
        .alias("cross"),
        ((pl.col("kind") == "python_function") | pl.col("__ppy").fill_null(False)).alias("cross_python"),
    )


def _split_noise(rank: int, check: str, amounts: pl.Series, noise_ns: int, what: str) -> list[dict[str, Any]]:
    a = amounts.filter(amounts > 0)
    big = a.filter(a >= noise_ns)
    small = a.filter(a < noise_ns)
    rows = []
    if big.len():
        rows.append(
            _row(
                rank,
                check,
                "warning",
                big.len(),
                int(big.sum()),
                int(big.max()),
                f"{big.len()} {what} by ≥ {noise_ns / 1e3:g} µs",
            )
        )
    else:
        rows.append(_row(rank, check, "ok", 0, 0, 0, f"no {what} by ≥ {noise_ns / 1e3:g} µs"))
    rows.append(
        _row(
            rank,
            f"{check}_noise",
            "info" if small.len() else "ok",
            small.len(),
            int(small.sum()) if small.len() else 0,
            int(small.max()) if small.len() else 0,
            f"{small.len()} {what} by < {noise_ns / 1e3:g} µs (timestamp noise, tolerated)",
        )
    )
    return rows


def _ranges(src: EventSource, kinds: Sequence[str], cols: Sequence[str]) -> pl.DataFrame:
    """The timed events of ``kinds`` with a non-negative duration (``*by, *cols``) of one rank or
    stacked ranks."""
    timed = pl.col("ts_ns").is_not_null() & pl.col("dur_ns").is_not_null() & (pl.col("dur_ns") >= 0)
    return src.ev.filter(pl.col("kind").is_in(list(kinds)) & timed).select(*src.by, *cols).collect()


#: What the stream-overlap and CPU-nesting checks read of the GPU work and of the CPU ranges.
_GPU_COLS = ("device", "stream", "ts_ns", "end_ns")
_CPU_COLS = ("pid", "tid", "ts_ns", "end_ns", "kind", "name")


def _stream_overlap(t: Trace, rank: int, noise_ns: int, over: pl.DataFrame | None = None) -> list[dict[str, Any]]:
    """``over``: this rank's GPU ranges with their overlaps (:func:`_overlap_amounts`), when one
    pass over stacked ranks made them."""
    if over is None:
        g = _ranges(EventSource.one(t), GPU_KINDS, _GPU_COLS)
        over = _overlap_amounts(g, ["device", "stream"]) if g.height else g
    if over.height == 0:
        return [
            _row(rank, "stream_overlap", "ok", detail="no GPU work"),
            _row(rank, "stream_overlap_noise", "ok", detail="no GPU work"),
        ]
    o = over
    return _split_noise(
        rank, "stream_overlap", o["over_prev_max"], noise_ns, "GPU events overlap an earlier one on their stream"
    )


def _cpu_nesting(t: Trace, rank: int, noise_ns: int, crossed: pl.DataFrame | None = None) -> list[dict[str, Any]]:
    """``crossed``: this rank's CPU ranges with their crossings (:func:`crossings`), when one pass
    over stacked ranks made them."""
    if crossed is None:
        c = _ranges(EventSource.one(t), NESTING_KINDS, _CPU_COLS)
        crossed = crossings(c) if c.height else c
    if crossed.height == 0:
        return [
            _row(rank, check, "ok", detail="no CPU ranges")
            for check in ("cpu_nesting", "cpu_nesting_python", "cpu_nesting_noise")
        ]
    o = crossed.filter(pl.col("cross") > 0)
    big = o.filter(pl.col("cross") >= noise_ns)
    hard = big.filter(~pl.col("cross_python"))
    py = big.filter(pl.col("cross_python"))
    small = o.filter(pl.col("cross") < noise_ns)
    lim = f"{noise_ns / 1e3:g} µs"

    def amount(df: pl.DataFrame) -> tuple[int | None, int | None]:
        return (int(df["cross"].sum()), int(df["cross"].max())) if df.height else (0, 0)  # type: ignore[arg-type]

    return [
        _row(
            rank,
            "cpu_nesting",
            "warning" if hard.height else "ok",
            hard.height,
            *amount(hard),
            (f"{hard.height} CPU ranges cross an enclosing range by ≥ {lim}: " + _names(hard))
            if hard.height
            else f"no crossings by ≥ {lim} (Python frames aside)",
        ),
        _row(
            rank,
            "cpu_nesting_python",
            "info" if py.height else "ok",
            py.height,
            *amount(py),
            (
                f"{py.height} ranges cross a Python frame (or are one) by ≥ {lim}, a known with_stack artefact: "
                + _names(py)
            )
            if py.height
            else "none",
        ),
        _row(
            rank,
            "cpu_nesting_noise",
            "info" if small.height else "ok",
            small.height,
            *amount(small),
            f"{small.height} crossings by < {lim} (timestamp noise, tolerated)",
        ),
    ]


def _durations(t: Trace, rank: int) -> list[dict[str, Any]]:
    ev = t.scan()
    out = []
    neg, zero = pl.collect_all(
        [
            ev.filter(pl.col("dur_ns") < 0).select("name", "dur_ns"),
            ev.filter((pl.col("kind") == "kernel") & (pl.col("dur_ns") == 0)).select("name", "dur_ns"),
        ]
    )
    out.append(
        _row(
            rank,
            "negative_durations",
            "warning" if neg.height else "ok",
            neg.height,
            int(-neg["dur_ns"].sum()) if neg.height else None,
            int(-neg["dur_ns"].min()) if neg.height else None,  # type: ignore[operator,arg-type]
            ("events with dur < 0: " + _names(neg)) if neg.height else "none",
        )
    )
    out.append(
        _row(
            rank,
            "zero_length_kernels",
            "info" if zero.height else "ok",
            zero.height,
            detail=("kernels with dur = 0: " + _names(zero)) if zero.height else "none",
        )
    )
    gpu = _timed(t.kind(*GPU_KINDS, columns=["name", "ts_ns", "dur_ns", "step"]))
    cpu = _bounds(t, NESTING_KINDS)
    if cpu is not None and gpu.height:
        span = cpu[1] - cpu[0]
        long = gpu.filter(pl.col("dur_ns") > span)
        out.append(
            _row(
                rank,
                "longer_than_trace",
                "warning" if long.height else "ok",
                long.height,
                int(long["dur_ns"].sum()) if long.height else None,
                int(long["dur_ns"].max()) if long.height else None,  # type: ignore[arg-type]
                (f"GPU events longer than the trace's CPU span ({span / 1e3:.3f} µs): " + _names(long))
                if long.height
                else f"none longer than the CPU span ({span / 1e3:.3f} µs)",
            )
        )
    else:
        out.append(_row(rank, "longer_than_trace", "ok", detail="needs CPU and GPU events"))
    steps = t.steps.filter(pl.col("start_ns").is_not_null() & pl.col("end_ns").is_not_null())
    if steps.height and gpu.height:
        longest = int((steps["end_ns"] - steps["start_ns"]).max())
        long = gpu.filter(pl.col("step").is_not_null() & (pl.col("dur_ns") > longest))
        out.append(
            _row(
                rank,
                "longer_than_step",
                "warning" if long.height else "ok",
                long.height,
                int(long["dur_ns"].sum()) if long.height else None,
                int(long["dur_ns"].max()) if long.height else None,  # type: ignore[arg-type]
                (f"GPU events longer than the longest step ({longest / 1e3:.3f} µs): " + _names(long))
                if long.height
                else f"none longer than the longest step ({longest / 1e3:.3f} µs)",
            )
        )
    else:
        out.append(_row(rank, "longer_than_step", "ok", detail="no steps" if not steps.height else "no GPU work"))
    return out


def _meta_checks(t: Trace, rank: int) -> list[dict[str, Any]]:
    m = t.meta
    out = []
    info = m.distributed_info
    if not info:
        out.append(
            _row(
                rank,
                "distributed_info",
                "info",
                detail="no distributedInfo: rank taken from the "
                + {"file name": "file name", "order": "file order", "user": "user mapping"}.get(
                    m.rank_source, m.rank_source
                ),
            )
        )
    else:
        missing = [k for k in ("rank", "world_size") if k not in info]
        out.append(
            _row(
                rank,
                "distributed_info",
                "info" if missing else "ok",
                detail=("distributedInfo lacks " + ", ".join(missing))
                if missing
                else f"rank {info.get('rank')} of {info.get('world_size')}, backend {info.get('backend', '?')}",
            )
        )
    n_ts, frac, tmax = (
        t.scan()
        .select(
            pl.col("ts_ns").count().alias("n"),
            (pl.col("ts_ns") % 1000 != 0).sum().alias("frac"),
            pl.col("ts_ns").max().alias("max"),
        )
        .collect()
        .row(0)
    )
    if n_ts:
        frac = int(frac)
        out.append(
            _row(
                rank,
                "time_resolution",
                "ok" if frac else "info",
                frac,
                detail="ns (µs with decimals)" if frac else "whole µs: sub-µs precision lost (older Kineto)",
            )
        )
        tmax = int(tmax)
        if m.base_time_ns is not None:
            out.append(_row(rank, "time_base", "ok", detail=f"relative to baseTimeNanoseconds {m.base_time_ns}"))
        elif tmax >= _RELATIVE_LIMIT_NS:
            out.append(_row(rank, "time_base", "ok", detail="absolute epoch µs"))
        else:
            out.append(
                _row(
                    rank,
                    "time_base",
                    "warning",
                    detail="relative times without baseTimeNanoseconds "
                    "(truncated trace?): cannot be aligned with other ranks",
                )
            )
    log = m.raw
    errs = [x for x in log.get("ERROR", []) or [] if isinstance(x, str)] if isinstance(log.get("ERROR"), list) else []
    warns = (
        [x for x in log.get("WARNING", []) or [] if isinstance(x, str)] if isinstance(log.get("WARNING"), list) else []
    )
    if errs or warns:
        first = (errs or warns)[0]
        out.append(
            _row(
                rank,
                "kineto_log",
                "warning" if errs else "info",
                len(errs) + len(warns),
                detail=f"{len(errs)} ERROR, {len(warns)} WARNING lines; first: {first[:160]}",
            )
        )
    else:
        out.append(_row(rank, "kineto_log", "ok", detail="no ERROR or WARNING lines"))
    out.append(
        _row(
            rank,
            "decoder",
            "warning" if t.warnings else "ok",
            len(t.warnings),
            detail="; ".join(t.warnings) if t.warnings else "complete, nothing repaired",
        )
    )
    out += _loader_drops(t, rank)
    return out


def _loader_drops(t: Trace, rank: int) -> list[dict[str, Any]]:
    """The ``dropped_events`` and ``cut_strings`` rows, from the decoder's counts."""
    stats = t.stats or {}
    n, n_ts, n_dur, n_range = (
        int(stats.get(k, 0) or 0) for k in ("dropped_events", "dropped_ts", "dropped_dur", "dropped_range")
    )
    if n:
        parts = [
            f"{k} {what}"
            for k, what in ((n_ts, "ts unusable"), (n_dur, "dur unusable"), (n_range, "out of range"))
            if k
        ]
        detail = f"{n} events dropped at load ({', '.join(parts)}): missing, not a number or beyond ±2**62 ns"
    else:
        detail = "every event has a usable ts (and dur where it needs one)"
    rows = [_row(rank, "dropped_events", "warning" if n else "ok", n, detail=detail)]
    cuts, cap = int(stats.get("cut_strings", 0) or 0), stats.get("max_string_bytes")
    cap_text = f"{cap:,} bytes" if cap else "no cap"
    rows.append(
        _row(
            rank,
            "cut_strings",
            "warning" if cuts else "ok",
            cuts,
            detail=f"{cuts} strings longer than the cap ({cap_text}) cut, ending in '\u2026[truncated: N bytes]'"
            if cuts
            else f"no string longer than the cap ({cap_text})",
        )
    )
    return rows


def _steps(t: Trace, rank: int) -> list[dict[str, Any]]:
    st = t.steps
    out = []
    if st.height == 0:
        return [
            _row(rank, "incomplete_last_step", "ok", detail="no ProfilerStep"),
            _row(rank, "outside_steps", "ok", detail="no ProfilerStep"),
        ]
    last = st.row(st.height - 1, named=True)
    if last["incomplete"]:
        prev = st["kernel_count"][st.height - 2]
        out.append(
            _row(
                rank,
                "incomplete_last_step",
                "warning",
                1,
                detail=f"step #{last['step']} has {last['kernel_count']} kernels, the one before {prev}: "
                "leave it out of per-step averages",
            )
        )
    else:
        out.append(_row(rank, "incomplete_last_step", "ok", detail=f"step #{last['step']} looks complete"))
    cpu_out, cpu_n = (
        t.scan()
        .filter(pl.col("kind").is_in(list(NESTING_KINDS)) & pl.col("ts_ns").is_not_null())
        .select(pl.col("step").is_null().sum(), pl.len())
        .collect()
        .row(0)
    )
    gpu_out, gpu_n = (
        t.scan()
        .filter(pl.col("kind").is_in(list(GPU_KINDS)))
        .select(pl.col("step").is_null().sum(), pl.len())
        .collect()
        .row(0)
    )
    n = cpu_out + gpu_out
    out.append(
        _row(
            rank,
            "outside_steps",
            "info" if n else "ok",
            n,
            detail=f"{cpu_out} of {cpu_n} CPU events and {gpu_out} of {gpu_n} GPU events outside every step",
        )
    )
    return out


class _OnePass(NamedTuple):
    """What one pass over stacked ranks read for every rank's checks (issue 19)."""

    counts: dict[int, tuple[int, int]]  # rank: (GPU events, CPU ranges)
    crossed: RankSlices  # :func:`crossings` of each rank's CPU ranges
    over: RankSlices  # :func:`_overlap_amounts` of each rank's GPU ranges


def _one_pass(src: EventSource) -> _OnePass:
    by = src.by
    n = (
        src.ev.group_by("rank")
        .agg(
            pl.col("kind").is_in(list(GPU_KINDS)).sum().alias("gpu"),
            pl.col("kind").is_in(list(NESTING_KINDS)).sum().alias("cpu"),
        )
        .collect()
    )
    counts = {int(r): (int(g), int(c)) for r, g, c in n.iter_rows()}
    c = _ranges(src, NESTING_KINDS, _CPU_COLS)
    g = _ranges(src, GPU_KINDS, _GPU_COLS)
    return _OnePass(
        counts,
        RankSlices(crossings(c, by) if c.height else c, drop=True),
        RankSlices(_overlap_amounts(g, [*by, "device", "stream"]) if g.height else g, drop=True),
    )


def trace_health(trace: Trace, *, noise_us: float = 5.0, one_pass: _OnePass | None = None) -> pl.DataFrame:
    """Every per-rank check on one trace (see the module docstring); ``one_pass``: what one pass
    over stacked ranks read for it."""
    rank = trace.rank
    noise_ns = int(round(noise_us * 1000))
    rows: list[dict[str, Any]] = []
    rows += _meta_checks(trace, rank)
    if one_pass is None:
        n_gpu = trace.kind(*GPU_KINDS, columns=["row"]).height
        n_cpu = trace.kind(*NESTING_KINDS, columns=["row"]).height
    else:
        n_gpu, n_cpu = one_pass.counts.get(rank, (0, 0))
    rows.append(
        _row(
            rank,
            "no_gpu_events",
            "info" if not n_gpu else "ok",
            n_gpu,
            detail="no kernels, memcpys or memsets (CPU-only trace?)" if not n_gpu else f"{n_gpu} GPU events",
        )
    )
    rows.append(
        _row(
            rank,
            "no_cpu_events",
            "warning" if not n_cpu else "ok",
            n_cpu,
            detail="no CPU ops, annotations or runtime calls" if not n_cpu else f"{n_cpu} CPU ranges",
        )
    )
    rows += _links(trace, rank)
    rows += _stream_overlap(trace, rank, noise_ns, one_pass.over[rank] if one_pass else None)
    rows += _durations(trace, rank)
    rows += _cpu_nesting(trace, rank, noise_ns, one_pass.crossed[rank] if one_pass else None)
    rows += _steps(trace, rank)
    order = {c: i for i, c in enumerate(CHECKS)}
    rows.sort(key=lambda r: order.get(r["check"], len(order)))
    return pl.DataFrame(rows, schema=SCHEMA)


def _span(t: Trace) -> tuple[int, int] | None:
    return _bounds(t, [*NESTING_KINDS, *GPU_KINDS])


def rank_facts(trace: Trace) -> dict[str, Any]:
    """What :func:`run_health_facts` needs of one rank: world size, span, whether it has a base time."""
    return {
        "rank": trace.rank,
        "world_size": trace.meta.world_size,
        "span": _span(trace),
        "has_base_time": trace.meta.base_time_ns is not None,
    }


def _rank_health(
    trace: Trace, noise_us: float, one_pass: _OnePass | None = None
) -> tuple[pl.DataFrame, dict[str, Any]]:
    return trace_health(trace, noise_us=noise_us, one_pass=one_pass), rank_facts(trace)


def run_health(traces: Sequence[Trace]) -> pl.DataFrame:
    """Checks across ranks (rank ``None``): world sizes, time bases, spans and clocks."""
    return run_health_facts([rank_facts(t) for t in traces])


def run_health_facts(facts: Sequence[dict[str, Any]]) -> pl.DataFrame:
    """:func:`run_health` from each rank's :func:`rank_facts`."""
    rows: list[dict[str, Any]] = []
    ws = sorted({f["world_size"] for f in facts if f["world_size"]})
    rows.append(
        _row(
            None,
            "world_size",
            "warning" if len(ws) > 1 else "ok",
            len(ws),
            detail=f"ranks disagree on the world size: {ws} (runs mixed?)"
            if len(ws) > 1
            else (f"world size {ws[0]}, {len(facts)} rank(s) loaded" if ws else "unknown"),
        )
    )
    kinds = {}
    spans = {}
    for f in facts:
        sp = f["span"]
        if sp is None:
            continue
        spans[f["rank"]] = sp
        kinds[f["rank"]] = "base" if f["has_base_time"] else ("epoch" if sp[1] >= _RELATIVE_LIMIT_NS else "relative")
    rel = sorted(r for r, k in kinds.items() if k == "relative")
    mixed = rel and len(rel) < len(kinds)
    rows.append(
        _row(
            None,
            "time_bases",
            "warning" if mixed else "ok",
            len(rel),
            detail=f"ranks {rel} have relative times while others are absolute: cannot align"
            if mixed
            else "one kind of time base",
        )
    )
    if len(spans) < 2:
        rows.append(_row(None, "rank_span", "ok", detail="fewer than two ranks"))
        rows.append(_row(None, "rank_clock", "ok", detail="fewer than two ranks"))
        return pl.DataFrame(rows, schema=SCHEMA)
    rk = np.array(sorted(spans))
    s = np.array([spans[r][0] for r in rk], dtype=np.int64)
    e = np.array([spans[r][1] for r in rk], dtype=np.int64)
    length = e - s
    med = float(np.median(length))
    odd = rk[(length < 0.5 * med) | (length > 2.0 * med)] if med > 0 else rk[:0]
    rows.append(
        _row(
            None,
            "rank_span",
            "warning" if odd.size else "ok",
            int(odd.size),
            None,
            int(med),
            detail=(f"ranks {odd.tolist()} span under half or over twice the median span ({med / 1e6:.3f} ms)")
            if odd.size
            else f"spans within 0.5–2× of the median ({med / 1e6:.3f} ms)",
        )
    )
    # a rank is off when its span does not overlap the median window of the ranks
    ms, me = float(np.median(s)), float(np.median(e))
    off = rk[(e < ms) | (s > me)]
    shift = np.abs(s - ms)
    rows.append(
        _row(
            None,
            "rank_clock",
            "warning" if off.size else "ok",
            int(off.size),
            None,
            int(shift.max()),
            detail=(
                f"ranks {off.tolist()} do not overlap the other ranks' time window "
                "(clock skew, different time bases or runs mixed)"
            )
            if off.size
            else f"all ranks overlap; starts differ by up to {shift.max() / 1e3:.3f} µs from the median",
        )
    )
    return pl.DataFrame(rows, schema=SCHEMA)


def health(run: Run, *, ranks: Sequence[int] | None = None, noise_us: float = 5.0) -> AnalysisResult:
    """Per-rank and run-level health checks; tables ``checks`` (every row) and ``problems``
    (rows whose status is not ``ok``)."""
    sess = Session.of(run, ranks)
    rs = sess.ranks
    stacked = sess.stacked_events()
    pre = _one_pass(EventSource.stacked([sess.trace(r) for r in rs], stacked)) if stacked is not None else None
    per = sess.map(_rank_health, noise_us=noise_us, one_pass=pre)
    frames = [per[r][0] for r in rs]
    frames.append(run_health_facts([per[r][1] for r in rs]))
    checks = pl.concat(frames, how="vertical")
    problems = checks.filter(pl.col("status") != "ok")
    n_warn = int((checks["status"] == "warning").sum())
    notes = [hint(checks)]
    if n_warn:
        notes.append("warnings mean numbers from the affected ranks may be wrong; see the detail column")
    return AnalysisResult({"problems": problems, "checks": checks}, notes)


def hint(checks: pl.DataFrame) -> str:
    """One line: how many warnings, on which checks."""
    w = checks.filter(pl.col("status") == "warning")
    if w.height == 0:
        return "health: no warnings"
    names = w.group_by("check", maintain_order=True).len()
    parts = ", ".join(f"{c}" + (f" ({k} ranks)" if k > 1 else "") for c, k in names.iter_rows())
    return f"health: {w.height} warning(s): {parts}"


register(
    AnalysisSpec(
        "health",
        health,
        "trace health: dropped records, stream overlaps, nesting, time base, steps, ranks",
        options=(Option("noise_us", float, 5.0, "overlaps and crossings below this many µs count as timestamp noise"),),
    )
)
