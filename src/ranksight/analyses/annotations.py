"""Time per user annotation (``record_function`` ranges), on the CPU and on the GPU.

Definitions (per rank and annotation name; µs): ``cpu`` rows come from ``user_annotation``
events (CPU ranges, ProfilerStep#N included, as in HTA), ``gpu`` rows from
``gpu_user_annotation`` events (Kineto's GPU-side copies spanning the GPU work of the range).
Per name: ``count``, ``sum_us``, ``max_us``, ``min_us``, ``std_us`` (ddof 1; 0 for one
event, as HTA fills it) and ``mean_us``. Nested annotations each count their whole duration.
With ``top`` > 0, names beyond the ``top`` largest by ``sum_us`` (per rank and side) are merged
into one ``others`` row whose statistics are computed over the merged events (HTA instead puts
the per-name sums into the stats columns).

:func:`kernel_annotations` attributes each GPU event of a rank to the innermost GPU annotation it
runs under (the HTA facade's ``get_gpu_kernels_with_user_annotations``).
"""

# no ``from __future__ import annotations`` here: this module defines a function named ``annotations``

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, Option, register
from ranksight.analyses._session import Session

if TYPE_CHECKING:
    from ranksight.model.run import Run
    from ranksight.model.trace import Trace

__all__ = ["annotation_events", "annotation_stats", "annotations", "kernel_annotations"]

_SIDE = {"cpu": "user_annotation", "gpu": "gpu_user_annotation"}
_SCHEMA = {
    "rank": pl.Int32,
    "side": pl.String,
    "name": pl.String,
    "count": pl.Int64,
    "sum_us": pl.Float64,
    "max_us": pl.Float64,
    "min_us": pl.Float64,
    "std_us": pl.Float64,
    "mean_us": pl.Float64,
}


def annotation_events(trace: "Trace", side: str) -> pl.DataFrame:
    """``rank, side, name, dur_ns`` of one rank's CPU (``side="cpu"``) or GPU annotations."""
    return (
        trace.kind(_SIDE[side])
        .filter(pl.col("dur_ns").is_not_null())
        .select(
            pl.lit(trace.rank, pl.Int32).alias("rank"),
            pl.lit(side).alias("side"),
            pl.col("name").cast(pl.String),
            "dur_ns",
        )
    )


def _stats(ev: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    d = pl.col("dur_ns") / 1e3
    return ev.group_by(keys).agg(
        pl.len().cast(pl.Int64).alias("count"),
        d.sum().alias("sum_us"),
        d.max().alias("max_us"),
        d.min().alias("min_us"),
        d.std().fill_null(0.0).alias("std_us"),
        d.mean().alias("mean_us"),
    )


def annotation_stats(ev: pl.DataFrame, top: int = 0) -> pl.DataFrame:
    """Per (rank, side, name) statistics; with ``top`` > 0 the rest become ``others``."""
    if ev.height == 0:
        return pl.DataFrame(schema=_SCHEMA)
    keys = ["rank", "side", "name"]
    st = _stats(ev, keys)
    if top > 0:
        ranked = st.with_columns(pl.col("sum_us").rank("ordinal", descending=True).over("rank", "side").alias("__r"))
        keep = ranked.filter(pl.col("__r") <= top).select(keys)
        ev = ev.join(keep.with_columns(pl.lit(True).alias("__keep")), on=keys, how="left").with_columns(
            pl.when(pl.col("__keep")).then(pl.col("name")).otherwise(pl.lit("others")).alias("name")
        )
        st = _stats(ev, keys)
    return (
        st.sort(["rank", "side", "sum_us", "name"], descending=[False, False, True, False])
        .select(list(_SCHEMA))
        .cast(_SCHEMA)  # type: ignore[arg-type]
    )


#: HTA's ``GPUKernelFilter`` also keeps these device-wide sync events (stream -1)
_HTA_DEVICE_SYNCS = ("Event Sync", "Context Sync")


def kernel_annotations(trace: "Trace", *, hta_compat: bool = False) -> pl.DataFrame:
    """Each GPU event of one rank with the GPU annotation it runs under: ``row`` (the GPU event),
    ``ts_ns``, ``end_ns`` (its interval as compared), ``annotation_row`` and ``annotation`` (null
    when it runs under none), in row order.

    Definition: the candidates are the rank's ``gpu_user_annotation`` events on the same ``pid``
    and ``tid`` (Kineto writes them on the stream of the work they span). An event runs under an
    annotation when their half-open intervals overlap (``ann.ts < ev.end`` and ``ev.ts <
    ann.end``); a zero-length event when ``ann.ts <= ev.ts < ann.end``. Of several, the innermost
    wins: the shortest, then the latest start, then the highest row. GPU events are
    :func:`~ranksight.views.gpu_work.gpu_work`'s (kernels, memcpys, memsets), with exact ns times.

    ``hta_compat`` (HTA v0.6's ``get_gpu_kernels_with_user_annotations``): HTA's event set
    (``GPUKernelFilter``: stream ≥ 0 and a correlation, or an ``Event Sync``/``Context Sync``),
    times rounded to µs like HTA's loader on ns traces, and the strict overlap for every event (a
    zero-length event at an annotation's start is outside it). HTA breaks ties between equally long
    annotations by an unstable sort; ranksight by the latest start, then the highest row.
    """
    from ranksight.model.kinds import GPU_KINDS
    from ranksight.views.gpu_work import gpu_work, hta_round, needs_hta_rounding

    timed = pl.col("ts_ns").is_not_null() & pl.col("dur_ns").is_not_null()
    cols = ["row", "pid", "tid", "ts_ns", "dur_ns"]
    if hta_compat:
        gpu_side = pl.col("kind").is_in([*GPU_KINDS, "sync"])
        keep = ((pl.col("stream") >= 0) & (pl.col("correlation") >= 0)) | pl.col("name").cast(pl.String).is_in(
            _HTA_DEVICE_SYNCS
        )
        ev = trace.scan().filter(timed & gpu_side & keep).select(cols).collect()
    else:
        rows = gpu_work(trace)["row"]
        ev = trace.scan().filter(pl.col("row").is_in(rows.implode())).select(cols).collect()
    ann = (
        trace.scan()
        .filter((pl.col("kind") == "gpu_user_annotation") & timed)
        .select(*cols, pl.col("name").cast(pl.String))
        .collect()
    )
    base = trace.meta.base_time_ns or 0

    def interval(df: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        ts, dur = df["ts_ns"].to_numpy(), df["dur_ns"].to_numpy()
        if hta_compat and needs_hta_rounding(trace) and df.height:
            return hta_round(ts, dur, base)
        return ts, ts + dur

    ev_ts, ev_end = interval(ev)
    an_ts, an_end = interval(ann)
    owner = np.full(ev.height, -1, dtype=np.int64)  # position in ``ann``
    ev_pid, ev_tid = ev["pid"].to_numpy(), ev["tid"].to_numpy()
    an_pid, an_tid, an_row = ann["pid"].to_numpy(), ann["tid"].to_numpy(), ann["row"].to_numpy()
    for pid, tid in {(int(p), int(t)) for p, t in zip(an_pid, an_tid, strict=True)}:
        mine = np.flatnonzero((ev_pid == pid) & (ev_tid == tid))
        if mine.size == 0:
            continue
        order = mine[np.argsort(ev_ts[mine], kind="stable")]
        k_ts, k_end = ev_ts[order], ev_end[order]
        reach = max(int((k_end - k_ts).max()), 0)  # no event starts earlier than this before its end
        cand = np.flatnonzero((an_pid == pid) & (an_tid == tid))
        # outermost first, so that inner annotations overwrite: longest, then earliest start, then lowest row
        cand = cand[np.lexsort((an_row[cand], an_ts[cand], -(an_end[cand] - an_ts[cand])))]
        for a in cand:
            lo = int(np.searchsorted(k_ts, an_ts[a] - reach, "left"))
            hi = int(np.searchsorted(k_ts, an_end[a], "left"))  # ev.ts < ann.end
            s_ts, s_end = k_ts[lo:hi], k_end[lo:hi]
            inside = s_end > an_ts[a]
            if not hta_compat:
                inside |= (s_end == s_ts) & (s_ts >= an_ts[a])
            owner[order[lo:hi][inside]] = a
    has = owner >= 0
    pick = np.where(has, owner, 0)
    names = ann["name"].to_numpy() if ann.height else np.array([], dtype=object)
    return pl.DataFrame(
        {
            "row": ev["row"],
            "ts_ns": ev_ts,
            "end_ns": ev_end,
            "annotation_row": pl.Series(np.where(has, an_row[pick] if ann.height else 0, 0), dtype=pl.UInt32),
            "annotation": pl.Series([names[i] if h else None for i, h in zip(pick, has, strict=True)], dtype=pl.String),
        },
        schema={
            "row": pl.UInt32,
            "ts_ns": pl.Int64,
            "end_ns": pl.Int64,
            "annotation_row": pl.UInt32,
            "annotation": pl.String,
        },
    ).with_columns(pl.when(pl.col("annotation").is_not_null()).then(pl.col("annotation_row")).alias("annotation_row"))


def _rank_annotations(trace: "Trace", sides: Sequence[str]) -> pl.DataFrame:
    return pl.concat([annotation_events(trace, s) for s in sides])


def annotations(run: "Run", *, ranks: Sequence[int] | None = None, side: str = "both", top: int = 0) -> AnalysisResult:
    """Time per CPU and GPU user annotation, per rank."""
    sess = Session.of(run, ranks)
    rs = sess.ranks
    sides = ["cpu", "gpu"] if side == "both" else [side]
    if any(s not in _SIDE for s in sides):
        from ranksight.errors import UsageError

        raise UsageError(f"--side must be cpu, gpu or both, not {side!r}")
    per = sess.map(_rank_annotations, sides=sides)
    ev = pl.concat([per[r] for r in rs])
    table = annotation_stats(ev, top)
    notes = []
    for s in sides:
        if ev.filter(pl.col("side") == s).height == 0:
            notes.append(f"no {_SIDE[s]} events in these traces")
    return AnalysisResult({"annotations": table}, notes)


register(
    AnalysisSpec(
        name="annotations",
        func=annotations,
        help="time per CPU and GPU user annotation (count, sum, max, min, std, mean)",
        options=(
            Option("side", str, "both", "cpu, gpu or both"),
            Option("top", int, 0, "keep the N largest names per rank and side, merge the rest into 'others' (0 = all)"),
        ),
    )
)
