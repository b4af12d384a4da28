"""GPU work intervals shared by the breakdown analyses (temporal, idle, kernels, overlap).

Two definitions of "GPU work" exist; every breakdown analysis takes ``hta_compat`` to choose:

ranksight (default)
    kernels, memcpys and memsets (``kind`` in :data:`~ranksight.model.kinds.GPU_KINDS`) on every
    stream (AMD stream 0 included), with exact int64 ns times. Sync events (``cuda_sync``) are the
    CPU waiting, never GPU work. Kernel type from ``kernel_class`` (``COMPUTE`` is reported as
    ``COMPUTATION``, HTA's word).

HTA v0.6 (``hta_compat=True``)
    HTA's ``stream != -1`` row set, i.e. GPU work plus sync events that carry a stream (``Context
    Sync``, ``Stream Sync``, ``Stream Wait Event``; ``Event Sync`` has stream −1) and host ops that
    carry a ``stream`` arg (Inductor's Triton launch ``cpu_op``, counted as a kernel). When any event of
    the trace has a fractional µs timestamp, times are rounded like HTA's loader
    (``ts = ceil(ts)``, ``end = floor(ts + dur)`` in float64 µs, so durations can become 0 or −1).
    Kernel type from HTA's name regexes (``get_kernel_type``; sync events are ``OTHER``).
    Interval merging keeps HTA's semantics for negative durations (see :func:`merge`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from ranksight.model.kinds import GPU_KINDS
from ranksight.views.intervals import union
from ranksight.views.rank_slices import RankSlices, seed_memos

if TYPE_CHECKING:
    from ranksight.model.trace import Trace

__all__ = [
    "KERNEL_TYPES",
    "TYPE_BITS",
    "gpu_work",
    "gpu_work_of",
    "seed_gpu_work",
    "gpu_work_categorical",
    "hta_kernel_type",
    "needs_hta_rounding",
    "merge",
    "segments",
    "hta_segments",
    "covered_in_windows",
    "step_windows",
    "pct",
    "parse_bool",
]

#: Kernel types in HTA's order and words.
KERNEL_TYPES = ("COMPUTATION", "COMMUNICATION", "MEMORY", "OTHER")
#: Bits of the overlap labels (HTA's order: COMPUTATION, COMMUNICATION, MEMORY).
TYPE_BITS = {"COMPUTATION": 1, "COMMUNICATION": 2, "MEMORY": 4}
_CLASS_TO_TYPE = {"COMPUTE": "COMPUTATION", "COMMUNICATION": "COMMUNICATION", "MEMORY": "MEMORY", "OTHER": "OTHER"}

# HTA v0.6 hta/common/types.py get_kernel_type (re.match: anchored at the start of the name)
_HTA_COMM = re.compile(r"(^nccl.*)|(^hip)|(^hccl)|(.*ncclKernel.*)")
_HTA_MEM = re.compile(r"(^(hip)?Memcpy)|(^(hip)?Memset)|(^dma)")
_HTA_NOT_COMP = re.compile(
    r"(^nccl)|(.*Memcpy)|(.*Memset)|(.*dma)|(^.*Sync)|(^Stream Wait Event)|(cuda.*LaunchKernel)|"
    r"(^runFunction)|(^hip)|(^job_exe)|(^packet)|(^pe_exe)|(^cpum_exe_subgraph)|(^hccl)|"
    r"(^collective_subgraph_execution)"
)

_SCHEMA = {
    "row": pl.UInt32,
    "name": pl.String,
    "kind": pl.String,
    "stream": pl.Int64,
    "ts_ns": pl.Int64,
    "end_ns": pl.Int64,
    "dur_ns": pl.Int64,
    "launch_row": pl.UInt32,
    "step": pl.Int32,
    "kernel_type": pl.String,
}


def hta_kernel_type(name: str) -> str:
    """HTA v0.6's kernel type of a GPU event name (first rule that matches wins)."""
    if _HTA_COMM.match(name):
        return "COMMUNICATION"
    if _HTA_MEM.match(name):
        return "MEMORY"
    if not _HTA_NOT_COMP.match(name):
        return "COMPUTATION"
    return "OTHER"


def needs_hta_rounding(trace: Trace) -> bool:
    """True when HTA's loader would round this trace to µs (any event has a fractional µs ``ts``)."""
    base = trace.meta.base_time_ns or 0
    return bool(
        trace.memo(
            "hta_rounding", lambda: trace.scan().select(((pl.col("ts_ns") - base) % 1000 != 0).any()).collect().item()
        )
    )


def hta_round(ts_ns: np.ndarray, dur_ns: np.ndarray, base_ns: int) -> tuple[np.ndarray, np.ndarray]:
    """HTA's ns rounding in float64 µs: ``ts = ceil(ts)``, ``end = floor(ts + dur)``; returned in ns
    (multiples of 1000, ``base_ns`` added back)."""
    raw = ts_ns - base_ns
    ts_f = (raw // 1000).astype(np.float64) + (raw % 1000).astype(np.float64) / 1000.0
    end_f = ts_f + dur_ns.astype(np.float64) / 1000.0
    ts_r = np.ceil(ts_f).astype(np.int64)
    end_r = np.floor(end_f).astype(np.int64)
    return ts_r * 1000 + base_ns, end_r * 1000 + base_ns


def gpu_work(trace: Trace, *, hta_compat: bool = False) -> pl.DataFrame:
    """GPU intervals of one rank: ``row, name, kind, stream, ts_ns, end_ns, dur_ns, launch_row, step,
    kernel_type`` (see the module docstring for the two definitions)."""
    g = trace.memo("gpu_work:hta" if hta_compat else "gpu_work", lambda: _gpu_work(trace, hta_compat))
    return _with_string_names(g)


def gpu_work_categorical(trace: Trace) -> pl.DataFrame:
    """:func:`gpu_work` (ranksight's definition) as cached: ``name`` categorical (no query; what a
    pass over many ranks concatenates before it casts the names once)."""
    g: pl.DataFrame = trace.memo("gpu_work", lambda: _gpu_work(trace, False))
    return g


def _work_columns() -> list[pl.Expr]:
    """The columns of the GPU work read from the events (``name`` stays categorical while cached:
    the strings of long kernel names are the bulk of the frame)."""
    return [
        pl.col(c) if c != "kind" else pl.col("kind").cast(pl.String)
        for c in ("row", "name", "kind", "stream", "ts_ns", "end_ns", "dur_ns", "launch_row", "step")
    ]


def gpu_work_of(ev: pl.LazyFrame, *, by: list[str]) -> pl.DataFrame:
    """ranksight's GPU work (the default definition) of events that may hold several traces: the
    columns of :func:`gpu_work` after ``by`` (``["rank"]`` over a run's stacked events), ``name``
    categorical; the same rows and values as :func:`gpu_work` of each trace."""
    g = (
        ev.filter(
            pl.col("kind").is_in(list(GPU_KINDS)) & pl.col("dur_ns").is_not_null() & pl.col("ts_ns").is_not_null()
        )
        .select(*by, *_work_columns(), pl.col("kernel_class").cast(pl.String))
        .collect()
    )
    g = g.with_columns(
        pl.col("kernel_class")
        .replace_strict(_CLASS_TO_TYPE, default="OTHER", return_dtype=pl.String)
        .alias("kernel_type")
    )
    return g.drop("kernel_class").cast({c: t for c, t in _SCHEMA.items() if c != "name"})


def seed_gpu_work(traces: list[Trace], work: pl.DataFrame) -> None:
    """Give each trace its :func:`gpu_work` (ranksight's definition) from :func:`gpu_work_of` of
    their stacked events (``work`` has a ``rank`` column): one query for every rank, and the
    analyses that read the view per rank then find it made."""
    # one stable sort by rank and zero-copy slices: partition_by runs a query per part (0.3 s on
    # 256 ranks)
    parts = RankSlices(work, drop=True)
    seed_memos(traces, "gpu_work", parts)


_EMPTY_I64 = np.empty(0, dtype=np.int64)


def intervals_by_type(work: pl.DataFrame, by: list[str]) -> dict[tuple[Any, ...], tuple[np.ndarray, np.ndarray]]:
    """``{(*values of by, kernel_type): (ts_ns, end_ns)}`` of GPU work (``by=[]`` for one rank's,
    ``["rank"]`` for stacked work), each in the work's row order: one partition, no query per key.
    A missing key has no intervals (:func:`intervals_of`)."""
    if work.height == 0:
        return {}
    keys = [*by, "kernel_type"]
    # one stable sort and numpy slices (partition_by runs a query per part: 0.3 s on 256 ranks)
    w = work.select(*keys, "ts_ns", "end_ns").sort(keys, maintain_order=True)
    gid = w.select(pl.struct(keys).rle_id()).to_series().to_numpy()
    starts = np.flatnonzero(np.r_[True, gid[1:] != gid[:-1]])
    ends = np.r_[starts[1:], gid.size]
    heads = w.select(keys)[starts].rows()
    ts, end = w["ts_ns"].to_numpy(), w["end_ns"].to_numpy()
    return {k: (ts[a:b], end[a:b]) for k, a, b in zip(heads, starts, ends, strict=True)}


def intervals_of(
    iv: dict[tuple[Any, ...], tuple[np.ndarray, np.ndarray]], key: tuple[Any, ...]
) -> tuple[np.ndarray, np.ndarray]:
    """The intervals of ``key`` in :func:`intervals_by_type`'s mapping (empty arrays when none)."""
    return iv.get(key, (_EMPTY_I64, _EMPTY_I64))


def _gpu_work(trace: Trace, hta_compat: bool) -> pl.DataFrame:
    if not hta_compat:
        return gpu_work_of(trace.scan(), by=[])
    # HTA's row set: GPU work and sync events on a stream; a host event carrying a ``stream`` arg
    # (Inductor's Triton launch ``cpu_op``) is a GPU event there too (``stream != -1``)
    timed = pl.col("dur_ns").is_not_null() & pl.col("ts_ns").is_not_null()
    cond = (
        pl.col("kind").is_in([*GPU_KINDS, "sync"])
        & timed
        & ~((pl.col("kind") == "sync") & (pl.col("stream").is_null() | (pl.col("stream") == -1)))
    )
    host_with_stream = (pl.col("kind") == "cpu_op") & pl.col("stream").is_not_null() & (pl.col("stream") != -1) & timed
    g = trace.scan().filter(cond | host_with_stream).select(*_work_columns()).collect()
    names = g["name"].unique().to_list()
    mapping = {n: hta_kernel_type(n or "") for n in names}
    g = g.with_columns(
        pl.col("name").cast(pl.String).replace_strict(mapping, return_dtype=pl.String).alias("kernel_type")
    )
    if needs_hta_rounding(trace) and g.height:
        ts, end = hta_round(g["ts_ns"].to_numpy(), g["dur_ns"].to_numpy(), trace.meta.base_time_ns or 0)
        g = g.with_columns(pl.Series("ts_ns", ts), pl.Series("end_ns", end)).with_columns(
            (pl.col("end_ns") - pl.col("ts_ns")).alias("dur_ns")
        )
    return g.cast({c: t for c, t in _SCHEMA.items() if c != "name"})


def _with_string_names(g: pl.DataFrame) -> pl.DataFrame:
    """The cached GPU work with ``name`` as strings (made per call, freed with the caller's frame)."""
    return g.with_columns(pl.col("name").cast(pl.String))


def launch_ts(trace: Trace, launch_row: pl.Series, *, hta_compat: bool = False) -> pl.Series:
    """Start (ns) of the launching runtime call of each GPU row (null when unlinked); rounded up to
    a whole µs like HTA in ``hta_compat`` mode on ns-resolution traces."""
    rows = trace.column("row")
    lr = launch_row.cast(pl.UInt32)
    if rows.len() and rows[-1] == rows.len() - 1:  # full trace: row == position
        del rows
        ts = trace.column("ts_ns").gather(lr)
    else:  # a filtered trace (e.g. the HTA facade's): rows are sorted but sparse
        pos = rows.search_sorted(lr.fill_null(0)).clip(0, max(rows.len() - 1, 0))
        found = lr.is_not_null() & (rows.gather(pos) == lr)
        ts = pl.select(pl.when(found).then(trace.column("ts_ns").gather(pos))).to_series()
    if hta_compat and needs_hta_rounding(trace):
        base = trace.meta.base_time_ns or 0
        arr = ts.to_numpy()  # float64 when nulls are present
        ok = ~np.isnan(arr) if arr.dtype.kind == "f" else np.ones(arr.size, dtype=bool)
        vals = ts.fill_null(base).to_numpy().astype(np.int64)
        r, _ = hta_round(vals, np.zeros(vals.size, dtype=np.int64), base)
        ts = pl.Series("launch_ts_ns", r).set(pl.Series(~ok), None) if not ok.all() else pl.Series("launch_ts_ns", r)
    return ts.alias("launch_ts_ns")


def merge(start: np.ndarray, end: np.ndarray, *, hta_compat: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Merge intervals into sorted disjoint groups (touching intervals merge).

    ranksight: :func:`~ranksight.views.intervals.union` (negative lengths clamped to 0).
    HTA (``merge_kernel_intervals``): sort by start; a new group starts where the start is strictly
    beyond the running maximum of the earlier ends; a group is ``[min start, max end]``, which can
    be shorter than zero after HTA's ns rounding (a lone ``dur = −1`` event).
    """
    if not hta_compat:
        return union(start, end)
    start = np.asarray(start, dtype=np.int64)
    end = np.asarray(end, dtype=np.int64)
    if start.size == 0:
        return start.copy(), end.copy()
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    prev_max = np.maximum.accumulate(e)
    new = np.zeros(s.size, dtype=bool)
    new[1:] = s[1:] > prev_max[:-1]
    idx = np.concatenate([[0], np.flatnonzero(new)])
    return s[idx], np.maximum.reduceat(e, idx)


def segments(groups: dict[int, tuple[np.ndarray, np.ndarray]]) -> dict[int, int]:
    """Time per overlap label.

    ``groups`` maps a bit (1, 2, 4, ...) to merged intervals of that type. Each merged start adds its
    bit, each end subtracts it; edges are sorted by time with ends before starts at equal times
    (so no zero-length segments appear); each segment between consecutive edges whose running
    value is > 0 is attributed to that value (the set of types running). Returns ``{value: ns}``.
    """
    pts, deltas = [], []
    for bit, (s, e) in groups.items():
        pts += [s, e]
        deltas += [np.full(s.size, bit, dtype=np.int64), np.full(e.size, -bit, dtype=np.int64)]
    if not pts:
        return {}
    p = np.concatenate(pts)
    d = np.concatenate(deltas)
    if p.size == 0:
        return {}
    order = np.lexsort((d, p))  # at equal times: negative deltas (ends) first
    p, d = p[order], d[order]
    run = np.cumsum(d)[:-1]
    length = np.diff(p)
    keep = (run > 0) & (length != 0)
    if not keep.any():
        return {}
    vals, inv = np.unique(run[keep], return_inverse=True)
    sums = np.bincount(inv, weights=length[keep].astype(np.float64)).astype(np.int64)
    return {int(v): int(s) for v, s in zip(vals, sums, strict=True)}


def hta_segments(groups: list[tuple[int, tuple[np.ndarray, np.ndarray]]]) -> dict[int, int]:
    """:func:`segments` as HTA v0.6 computes them (``_get_gpu_kernel_type_time``), for ``hta_compat``.

    ``groups`` lists every analysed type in HTA's order (bit, merged intervals), empty ones included.
    HTA appends each type's merged starts, then its ends, to the edges found so far and sorts them
    all again by time with numpy's default (unstable) quicksort, once per type; a piece between
    consecutive edges whose running value is > 0 is counted for that value, zero-length pieces
    included (a label can appear with 0 µs: a start sorted before an end at the same time).
    """
    p = np.empty(0, dtype=np.int64)
    d = np.empty(0, dtype=np.int64)
    for bit, (s, e) in groups:
        p = np.concatenate([p, np.asarray(s, dtype=np.int64), np.asarray(e, dtype=np.int64)])
        d = np.concatenate([d, np.full(len(s), bit, dtype=np.int64), np.full(len(e), -bit, dtype=np.int64)])
        order = np.argsort(p, kind="quicksort")  # pandas sort_values' default, as HTA calls it
        p, d = p[order], d[order]
    if p.size == 0:
        return {}
    run = np.cumsum(d)[:-1]
    length = np.diff(p)
    keep = run > 0
    if not keep.any():
        return {}
    vals, inv = np.unique(run[keep], return_inverse=True)
    sums = np.bincount(inv, weights=length[keep].astype(np.float64), minlength=vals.size).astype(np.int64)
    return {int(v): int(x) for v, x in zip(vals, sums, strict=True)}


def covered_in_windows(ms: np.ndarray, me: np.ndarray, ws: np.ndarray, we: np.ndarray) -> np.ndarray:
    """Length of sorted disjoint intervals ``[ms, me)`` inside each window ``[ws, we)`` (vectorised)."""
    ws = np.asarray(ws, dtype=np.int64)
    we = np.asarray(we, dtype=np.int64)
    if ms.size == 0:
        return np.zeros(ws.size, dtype=np.int64)
    cum = np.concatenate([[0], np.cumsum(me - ms)])

    def before(x: np.ndarray) -> np.ndarray:
        k = np.searchsorted(ms, x, side="right")  # intervals starting at or before x
        full = cum[np.maximum(k - 1, 0)]
        last = np.where(k > 0, np.clip(x - ms[np.maximum(k - 1, 0)], 0, (me - ms)[np.maximum(k - 1, 0)]), 0)
        return np.where(k > 0, full + last, 0)

    return before(we) - before(ws)


def step_windows(trace: Trace) -> pl.DataFrame:
    """Device-extended, contiguous ProfilerStep windows: ``step, start_ns, end_ns``.

    Step i starts at ``max(previous window end, CPU start of step i)`` and ends at
    ``max(CPU end of step i, end of the last GPU activity launched in step i, its start)``; so
    windows never overlap and cover each step's GPU work (the TensorBoard plugin's definition).
    """
    st = trace.steps.sort("start_ns")
    if st.height == 0:
        return pl.DataFrame(schema={"step": pl.Int32, "start_ns": pl.Int64, "end_ns": pl.Int64})
    cpu_s = st["start_ns"].to_numpy()
    cpu_e = st["end_ns"].to_numpy()
    gpu_e = st["gpu_end_ns"].fill_null(np.iinfo(np.int64).min).to_numpy()
    ends = np.maximum(cpu_e, gpu_e)
    # contiguous extension: start_i = max(end_{i-1}, cpu_s_i); end_i = max(ends_i, start_i)
    starts = np.empty_like(cpu_s)
    out_e = np.empty_like(cpu_s)
    prev = np.iinfo(np.int64).min
    for i in range(cpu_s.size):  # one iteration per step
        starts[i] = max(prev, cpu_s[i])
        out_e[i] = max(ends[i], starts[i])
        prev = out_e[i]
    return pl.DataFrame({"step": st["step"], "start_ns": starts, "end_ns": out_e})


def pct(part: np.ndarray | float, whole: np.ndarray | float, decimals: int = 2) -> np.ndarray:
    """``round(100 × part / whole, decimals)`` with numpy's rounding (HTA's); NaN where whole is 0."""
    part = np.asarray(part, dtype=np.float64)
    whole = np.asarray(whole, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(whole != 0, 100.0 * part / np.where(whole != 0, whole, 1.0), np.nan)
    return np.round(r, decimals)


def parse_bool(text: str | bool) -> bool:
    """``true/false``, ``yes/no``, ``1/0``, ``on/off`` (for CLI options)."""
    if isinstance(text, bool):
        return text
    t = str(text).strip().lower()
    if t in ("1", "true", "yes", "y", "on"):
        return True
    if t in ("0", "false", "no", "n", "off"):
        return False
    raise ValueError(f"not a boolean: {text!r}")
