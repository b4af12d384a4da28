"""The critical-path graph of one rank, as columnar arrays (HTA's model, ``hta-definitions.md`` §3.14).

Nodes are the start and the end of every event the model keeps in a window: CPU ops, CUDA
runtime/driver calls and data-loading events on CPU threads that start in the window with a
positive duration, and the GPU activities (kernels, memcpys, memsets, sync records) whose launch
does. Nodes are numbered in time order (``ts``, then trace row). Edges are arrays ``src, dst,
type, weight_ns, attr_row`` in the order HTA's ``CPGraph`` adds them (the order decides between
paths of equal length):

1. **CUDA runtime lock** (``cudaHostAlloc``, ``cudaLaunchKernel``, ``cudaMemcpyAsync`` on any
   thread, in node order): each end pops every start opened since the previous end — the event's
   own start gives its duration edge, another's start a dependency — and follows the previous end.
2. **Call stacks** (per CPU thread in ``(pid, tid)`` order, HTA's call stack nesting,
   :mod:`ranksight.views.hta_call_stack`): the start and end markers of the kept events in
   depth-first order, each linked to the one before it; the edge is a dependency between two
   top-level ops, otherwise an operator edge weighted by the time between the markers (zero for
   blocking calls: ``cudaDeviceSynchronize``, ``cudaStreamSynchronize``, ``cudaEventQuery``,
   ``cudaEventSynchronize``, ``cudaMemcpy``, ``cudaMemcpyAsync``); pairs of lock calls are left to 1.
   The backward thread is folded into the forward thread.
3. **GPU** (activities by start, sync records by end): a kernel's duration edge; a sync edge from
   the kernel a ``Stream Wait Event`` waits on; a **launch-delay** edge from its launch when the
   stream's queue was empty (queue length 1 at the launch, 0 at the start, previous kernel done
   before the launch) or else a **kernel-kernel** edge from the previous activity on the stream
   when the gap is below 1.5 ms; sync records add zero-weight edges from the GPU work they wait on
   to the end of the waiting CPU call (``Context Sync``: every stream's last activity, ``Stream
   Sync``: the stream's, ``Event Sync``: the activity launched on the recorded stream just before
   the ``cudaEventRecord``).

``hta_compat=True`` reproduces HTA v0.6 (its launch-name list, µs rounding of ns traces, its
forward/backward thread rule, names tested with its comm-kernel pattern, negative weights down to
−1 µs set to 0). ``hta_compat=False`` fixes what ``docs/hta-differences.md`` lists: every launch
API (CUDA graphs, driver, HIP), exact ns, a zero-weight launch edge and a stream-order edge for
every GPU activity (HTA leaves an activity after a ≥ 1.5 ms gap with no incoming edge, so the
path can start there, ignoring what launched it), the backward thread found from autograd engine
events, not from any name containing ``autograd``.

The longest path (:func:`longest_path`) is computed in the Rust core in one pass over a
topological order (networkx's tie-breaking, so equal-length paths come out as HTA's).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from ranksight import _core
from ranksight.model.trace import Trace
from ranksight.views.gpu_work import hta_round, needs_hta_rounding
from ranksight.views.hta_call_stack import nest
from ranksight.views.links import HTA_QUEUE_APIS
from ranksight.views.rank_slices import RankSlices, rank_column

__all__ = [
    "EDGE_TYPES",
    "OPERATOR",
    "DEPENDENCY",
    "LAUNCH_DELAY",
    "KERNEL_KERNEL",
    "SYNC",
    "LOCK_CALLS",
    "BLOCKING_CALLS",
    "KERNEL_KERNEL_DELAY_THRESHOLD_NS",
    "CriticalGraph",
    "critical_graph",
    "critical_graphs",
    "longest_path",
    "hta_window",
]

#: Edge type codes and HTA's names for them (``CPEdgeType``).
OPERATOR, DEPENDENCY, LAUNCH_DELAY, KERNEL_KERNEL, SYNC = 0, 1, 2, 3, 4
EDGE_TYPES = (
    "critical_path_operator",
    "critical_path_dependency",
    "critical_path_kernel_launch_delay",
    "critical_path_kernel_kernel_delay",
    "critical_path_sync_dependency",
)
#: Calls that take the CUDA runtime lock (HTA's ``CUDA_RUNTIME_EVENTS``).
LOCK_CALLS = ("cudaHostAlloc", "cudaLaunchKernel", "cudaMemcpyAsync")
#: Calls whose duration is waiting on the GPU (HTA's ``BLOCKING_SYNC_CALLS``): weight 0.
BLOCKING_CALLS = (
    "cudaDeviceSynchronize",
    "cudaStreamSynchronize",
    "cudaEventQuery",
    "cudaEventSynchronize",
    "cudaMemcpy",
    "cudaMemcpyAsync",
)
#: A gap on a stream above this is not a kernel-kernel delay (HTA's 1500 µs).
KERNEL_KERNEL_DELAY_THRESHOLD_NS = 1_500_000

_GPU = ("kernel", "memcpy", "memset", "sync")
_NODE_CPU = ("cpu_op", "cuda_runtime", "cuda_driver")
_NOT_THREAD = ("kernel", "memcpy", "memset", "sync", "gpu_user_annotation", "flow", "memory", "counter", "metadata")
#: autograd engine events mark the backward thread (ranksight's rule; HTA: any name with "autograd")
_BWD_PREFIX = "autograd::engine::evaluate_function"

_EDGE_SCHEMA: dict[str, Any] = {
    "src": pl.Int64,
    "dst": pl.Int64,
    "type": pl.Int8,
    "weight_ns": pl.Int64,
    "attr_row": pl.Int64,
}


@dataclass
class CriticalGraph:
    """One rank's graph. ``nodes``: ``node, row, ts_ns, is_start``; ``edges``: ``src, dst, type,
    weight_ns, attr_row`` (−1: none) in insertion order, each (src, dst) once; ``events``: the
    events that have nodes (``row, kind, name, pid, tid, stream, ts_ns, end_ns, kernel_class,
    launch_row``, ``stream`` −1 on CPU threads)."""

    rank: int
    lo_ns: int
    hi_ns: int
    nodes: pl.DataFrame
    edges: pl.DataFrame
    events: pl.DataFrame
    hta_compat: bool
    #: CPU events of the window with their call-stack parent (``row, parent_row``; −1 at top level)
    tree: pl.DataFrame = field(default_factory=pl.DataFrame)
    notes: list[str] = field(default_factory=list)


def hta_window(trace: Trace, annotation: str, instance_id: int | tuple[int, int] | None) -> tuple[int, int] | None:
    """HTA's analysis window: ``annotation`` a substring of event names, ``instance_id`` a position
    (or an inclusive range of positions) among the matching events in trace order; ``""`` is the
    whole trace. None when no event name contains ``annotation``."""
    ev = trace.scan().filter(pl.col("dur_ns").is_not_null() & (pl.col("ph") == "X"))
    if annotation == "":
        lo, hi = ev.select(pl.col("ts_ns").min(), pl.col("end_ns").max()).collect().row(0)
        return None if lo is None else (int(lo), int(hi))
    names = [n for n in trace.distinct_names() if annotation in n]
    if not names:
        return None
    a, b = (0, 0) if instance_id is None else (instance_id if isinstance(instance_id, tuple) else (instance_id,) * 2)
    hits = ev.filter(pl.col("name").cast(pl.String).is_in(names)).sort("row").slice(a, b - a + 1).collect()
    if hits.height == 0:
        return None
    return int(hits["ts_ns"].min()), int(hits["end_ns"].max())  # type: ignore[arg-type]


# ---- building -----------------------------------------------------------------------------------


def _events(trace: Trace, hta_compat: bool) -> pl.DataFrame:
    """Every timed X event with the columns the model reads; µs-rounded like HTA's loader in
    compatibility mode when the trace has sub-µs times."""
    ev = _timed(trace.scan()).collect()
    if hta_compat and needs_hta_rounding(trace) and ev.height:
        ts, end = hta_round(
            ev["ts_ns"].to_numpy(), (ev["end_ns"] - ev["ts_ns"]).to_numpy(), trace.meta.base_time_ns or 0
        )
        ev = ev.with_columns(pl.Series("ts_ns", ts), pl.Series("end_ns", end))
    return _with_sync(ev, trace.table("sync"), [])


def _events_of(lf: pl.LazyFrame, traces: Sequence[Trace]) -> pl.DataFrame:
    """:func:`_events` (the fixed model) of stacked events (``lf``, a ``rank`` column) of ``traces``."""
    ev = _timed(lf, ["rank"]).collect()
    frames = []
    for t in traces:
        sync = t.table("sync")
        if sync.height and "wait_on_stream" in sync.columns and "wait_on_event_correlation" in sync.columns:
            frames.append(
                pl.DataFrame(
                    {
                        "rank": rank_column(t.rank, sync.height),
                        "row": sync["row"],
                        "wait_on_stream": sync["wait_on_stream"],
                        "wait_on_event_correlation": sync["wait_on_event_correlation"],
                    }
                )
            )
    sync_all = pl.concat(frames, how="vertical_relaxed") if frames else pl.DataFrame()
    return _with_sync(ev, sync_all, ["rank"])


def _timed(lf: pl.LazyFrame, by: Sequence[str] = ()) -> pl.LazyFrame:
    return lf.filter(
        (pl.col("ph") == "X") & pl.col("dur_ns").is_not_null() & (pl.col("cat").cast(pl.String) != "Trace")
    ).select(
        pl.col("row").cast(pl.Int64),
        "kind",
        pl.col("name").cast(pl.String),
        pl.col("pid").cast(pl.Int64),
        pl.col("tid").cast(pl.Int64),
        "ts_ns",
        "end_ns",
        "correlation",
        pl.col("stream").fill_null(-1).alias("stream"),
        "kernel_class",
        "launch_row",
        *by,
    )


def _with_sync(ev: pl.DataFrame, sync: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """``ev`` with the sync records' ``wait_on_stream`` and ``wait_corr`` (−1: none)."""
    if sync.height:
        ev = ev.join(
            sync.select(
                *by,
                pl.col("row").cast(pl.Int64),
                pl.col("wait_on_stream").fill_null(-1),
                pl.col("wait_on_event_correlation").fill_null(-1).alias("wait_corr"),
            ),
            on=[*by, "row"],
            how="left",
        )
    else:
        ev = ev.with_columns(pl.lit(-1, pl.Int64).alias("wait_on_stream"), pl.lit(-1, pl.Int64).alias("wait_corr"))
    return ev.with_columns(pl.col("wait_on_stream").fill_null(-1), pl.col("wait_corr").fill_null(-1))


def _partners(ev: pl.DataFrame) -> pl.DataFrame:
    """GPU-side rows (activities on a stream, and ``Event Sync``/``Context Sync``) with the row of
    the CPU call that has their correlation (HTA's ``index_correlation``): ``row, rt_row``."""
    gpu = ev.filter(
        pl.col("kind").is_in(_GPU)
        & pl.col("correlation").is_not_null()
        & ((pl.col("stream") != -1) | pl.col("name").is_in(["Event Sync", "Context Sync"]))
    ).select("row", "correlation")
    rt = (
        ev.filter(pl.col("kind").is_in(["cuda_runtime", "cuda_driver"]) & pl.col("correlation").is_not_null())
        .group_by("correlation")
        .agg(pl.col("row").min().alias("rt_row"))
    )
    return gpu.join(rt, on="correlation", how="inner").select("row", pl.col("rt_row").cast(pl.Int64))


def _fwd_bwd_tids(cpu: pl.DataFrame, step_tids: dict[int, list[Any]], hta_compat: bool) -> dict[int, tuple[Any, Any]]:
    """Per rank of ``cpu``: (backward tid, forward tid) to fold, where there is one. ``step_tids``:
    each rank's distinct ProfilerStep threads (the fixed model's forward thread)."""
    ops = cpu.filter(pl.col("kind").is_in(["cpu_op", "user_annotation"]))

    def tids(df: pl.DataFrame) -> dict[int, list[Any]]:
        g = df.group_by("rank").agg(pl.col("tid").unique())
        return {int(r): list(t) for r, t in g.iter_rows()}

    if hta_compat:  # HTA: the one thread with a name containing "forward" / "autograd"
        fwd = tids(ops.filter(pl.col("name").str.contains("forward", literal=True)))
        bwd = tids(ops.filter(pl.col("name").str.contains("autograd", literal=True)))
    else:  # the thread of the ProfilerSteps / the thread of the autograd engine's functions
        fwd = step_tids
        bwd = tids(ops.filter(pl.col("name").str.starts_with(_BWD_PREFIX)))
        # the engine also runs CPU-only functions (AccumulateGrad) on the calling thread
        for r, f in fwd.items():
            if len(f) == 1 and r in bwd:
                bwd[r] = [t for t in bwd[r] if t is not None and f[0] is not None and t != f[0]]
    out = {}
    for r, f in fwd.items():
        b = bwd.get(r, [])
        if len(f) == 1 and len(b) == 1 and f[0] != b[0]:
            out[r] = (b[0], f[0])
    return out


def critical_graph(
    trace: Trace,
    lo_ns: int,
    hi_ns: int,
    *,
    hta_compat: bool = False,
    data_load: Sequence[str] | None = None,
    gloo: bool = False,
) -> CriticalGraph:
    """The critical-path graph of ``trace`` over the window ``[lo_ns, hi_ns]`` (the rank's own clock).

    ``data_load``: regular expressions (``re.search``) of event names that are data loading (HTA's
    ``data_load_events``): they get nodes wherever they are on a CPU thread. ``gloo``: the
    ``gloo:*`` annotations (a gloo collective as its gloo thread runs it) get nodes too, so the
    job-wide path can join them across ranks."""
    ev = _events(trace, hta_compat).with_columns(pl.lit(trace.rank, dtype=pl.Int32).alias("rank"))
    st = trace.steps
    step_tids = {trace.rank: st["tid"].cast(pl.Int64).unique().to_list() if st.height else []}
    return _build(ev, {trace.rank: (lo_ns, hi_ns)}, step_tids, hta_compat, data_load, gloo)[trace.rank]


def critical_graphs(
    traces: Sequence[Trace],
    windows: dict[int, tuple[int, int]],
    stacked: pl.DataFrame,
    *,
    data_load: Sequence[str] | None = None,
    gloo: bool = False,
) -> dict[int, CriticalGraph] | None:
    """:func:`critical_graph` (the fixed model) of several ranks in one pass over their stacked
    events (``stacked``, a ``rank`` column; issue 19): ``{rank: graph}`` for the ranks of
    ``windows`` (``(lo_ns, hi_ns)`` each, the rank's own clock), each equal to the rank's own.

    The ranks are built as one graph whose parts cannot meet: rows, processes, streams and
    correlations renumbered per rank, and each rank's times moved to a stretch of its own
    (``[k × stride, (k + 1) × stride)``), so every time-ordered step sees one rank at a time; then
    the graph is cut back into ranks in their own numbers. None when the run does not fit that
    (int64 times, 32-bit rows): build rank by rank."""
    rs = sorted(t.rank for t in traces if t.rank in windows)  # lanes in rank order
    if not rs:
        return {}
    by_rank = {t.rank: t for t in traces}
    lf = stacked.lazy().filter(pl.col("rank").is_in(rs))
    ev = _events_of(lf, [by_rank[r] for r in rs])
    if ev.height == 0:  # nothing to build (rank by rank says why)
        return None
    dtypes = ev.schema
    # each rank's last row and time span, one pass
    span = ev.group_by("rank").agg(
        pl.col("row").max().alias("__top"), pl.col("ts_ns").min().alias("__lo"), pl.col("end_ns").max().alias("__hi")
    )
    top = dict(span.select("rank", "__top").iter_rows())
    row_base, acc = {}, 0
    for r in rs:  # each rank's rows after the previous rank's
        row_base[r] = acc
        acc += int(top.get(r) or 0) + 1
    if acc >= (1 << 32) - 1:
        return None
    w = pl.DataFrame(
        {
            "rank": rs,
            "__rbase": [row_base[r] for r in rs],
            "__wlo": [windows[r][0] for r in rs],
            "__whi": [windows[r][1] for r in rs],
        },
        schema={"rank": pl.Int32, "__rbase": pl.Int64, "__wlo": pl.Int64, "__whi": pl.Int64},
    )
    # a rank's stretch covers its events and its window
    ext = w.join(span.drop("__top"), on="rank", how="left", maintain_order="left").with_columns(
        pl.min_horizontal(pl.col("__lo").fill_null(0), "__wlo").alias("__lo"),
        pl.max_horizontal(pl.col("__hi").fill_null(0), "__whi").alias("__hi"),
    )
    stride = int((ext["__hi"] - ext["__lo"]).max()) + 2
    if len(rs) * stride >= (1 << 62):
        return None
    ext = ext.with_row_index("__k").with_columns(
        (pl.col("__k").cast(pl.Int64) * stride - pl.col("__lo")).alias("__shift")
    )
    # new numbers: rows by a base per rank; processes, streams and correlations by (rank, value)
    pids = ev.select("rank", "pid").unique().sort(["rank", "pid"]).with_row_index("__pid")
    streams = _codes(ev, "stream", "wait_on_stream", "__stream")
    corrs = _codes(ev, "correlation", "wait_corr", "__corr")
    code = lambda c: pl.col(c).cast(pl.Int64)  # noqa: E731
    enc = ev.join(ext.select("rank", "__rbase", "__shift"), on="rank", how="left", maintain_order="left").join(
        pids, on=["rank", "pid"], how="left", maintain_order="left", nulls_equal=True
    )
    for col, codes, new in (
        ("stream", streams, "__stream"),
        ("wait_on_stream", streams, "__wstream"),
        ("correlation", corrs, "__corr"),
        ("wait_corr", corrs, "__wcorr"),
    ):
        value, code_col = codes.columns[2], codes.columns[0]  # (code, rank, value)
        enc = enc.join(codes.rename({value: col, code_col: new}), on=["rank", col], how="left", maintain_order="left")
    enc = enc.with_columns(
        pl.col("row") + pl.col("__rbase"),
        pl.col("launch_row").cast(pl.Int64) + pl.col("__rbase"),
        code("__pid").alias("pid"),
        pl.when(pl.col("stream") == -1).then(-1).otherwise(code("__stream")).alias("stream"),
        pl.when(pl.col("wait_on_stream") == -1).then(-1).otherwise(code("__wstream")).alias("wait_on_stream"),
        code("__corr").alias("correlation"),
        pl.when(pl.col("wait_corr") == -1).then(-1).otherwise(code("__wcorr")).alias("wait_corr"),
        pl.col("ts_ns") + pl.col("__shift"),
        pl.col("end_ns") + pl.col("__shift"),
    ).select(ev.columns)
    shift = dict(zip(ext["rank"].to_list(), ext["__shift"].to_list(), strict=True))
    win = {r: (windows[r][0] + shift[r], windows[r][1] + shift[r]) for r in rs}
    step_tids = {}
    for r in rs:
        st = by_rank[r].steps
        step_tids[r] = st["tid"].cast(pl.Int64).unique().to_list() if st.height else []
    back = _Back(
        ext.select("rank", "__rbase", "__shift"),
        pids.select(code("__pid").alias("pid"), pl.col("pid").alias("__pid0")),
        streams.select(code("__stream").alias("stream"), pl.col("stream").alias("__stream0")),
        dtypes,
        windows,
    )
    return _build(enc, win, step_tids, False, data_load, gloo, back)


def _codes(ev: pl.DataFrame, col: str, also: str, name: str) -> pl.DataFrame:
    """``name, rank, col``: a new number for each distinct (rank, value) of ``col`` and ``also``
    (−1 and null are no value and keep no number)."""
    return (
        pl.concat([ev.select("rank", col), ev.select("rank", pl.col(also).alias(col))])
        .filter(pl.col(col).is_not_null() & (pl.col(col) != -1))
        .unique()
        .sort(["rank", col])
        .with_row_index(name)
    )


@dataclass
class _Back:
    """How to take a graph of several ranks (:func:`critical_graphs`) back to each rank's numbers."""

    ranks: pl.DataFrame  # rank, __rbase (row base), __shift (time shift)
    pids: pl.DataFrame  # pid (new), __pid0 (the rank's)
    streams: pl.DataFrame  # stream (new), __stream0
    dtypes: pl.Schema  # the events' columns as read
    windows: dict[int, tuple[int, int]]  # in the ranks' clocks

    def arrays(self, rank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Row base and time shift of each element of ``rank``."""
        rs = self.ranks["rank"].cast(pl.Int64).to_numpy()  # sorted (lanes in rank order)
        i = np.searchsorted(rs, rank)
        return self.ranks["__rbase"].to_numpy()[i], self.ranks["__shift"].to_numpy()[i]

    def events(self, ev: pl.DataFrame) -> pl.DataFrame:
        cols = ev.columns
        types: dict[str, Any] = {c: self.dtypes[c] for c in cols if c in self.dtypes}
        return (
            ev.join(self.ranks, on="rank", how="left", maintain_order="left")
            .join(self.pids, on="pid", how="left", maintain_order="left")
            .join(self.streams, on="stream", how="left", maintain_order="left")
            .with_columns(
                pl.col("row") - pl.col("__rbase"),
                pl.col("__pid0").alias("pid"),
                pl.when(pl.col("stream") == -1).then(-1).otherwise(pl.col("__stream0")).alias("stream"),
                pl.col("ts_ns") - pl.col("__shift"),
                pl.col("end_ns") - pl.col("__shift"),
                pl.col("launch_row") - pl.col("__rbase"),
                pl.col("rt_row") - pl.col("__rbase"),
            )
            .select(cols)
            .cast(pl.Schema(types))
        )

    def tree(self, tree: pl.DataFrame) -> pl.DataFrame:
        return (
            tree.join(self.ranks, on="rank", how="left", maintain_order="left")
            .with_columns(
                pl.col("row") - pl.col("__rbase"),
                pl.when(pl.col("parent_row") >= 0).then(pl.col("parent_row") - pl.col("__rbase")).otherwise(-1),
            )
            .select(tree.columns)
        )


def _build(
    ev: pl.DataFrame,
    windows: dict[int, tuple[int, int]],
    step_tids: dict[int, list[Any]],
    hta_compat: bool,
    data_load: Sequence[str] | None,
    gloo: bool,
    back: _Back | None = None,
) -> dict[int, CriticalGraph]:
    """The graphs of the ranks of ``ev`` (:func:`_events` with ``rank``; several ranks only with
    rows, processes, streams and correlations apart and times in stretches of their own, see
    :func:`critical_graphs`), one per rank of ``windows``; in ``ev``'s numbers, or through
    ``back`` in each rank's own."""
    ranks = list(windows)
    notes: dict[int, list[str]] = {r: [] for r in ranks}
    part = _partners(ev)
    ev = ev.join(part, on="row", how="left")
    dl_names: list[str] = []
    if data_load:
        pats = [re.compile(p) for p in data_load]
        dl_names = [n for n in ev["name"].unique().to_list() if n is not None and any(p.search(n) for p in pats)]
    wdf = pl.DataFrame(
        {"rank": ranks, "__wlo": [windows[r][0] for r in ranks], "__whi": [windows[r][1] for r in ranks]},
        schema={"rank": pl.Int32, "__wlo": pl.Int64, "__whi": pl.Int64},
    )
    ev = ev.join(wdf, on="rank", how="left", maintain_order="left")
    in_win = (
        (pl.col("ts_ns") >= pl.col("__wlo"))
        & (pl.col("ts_ns") <= pl.col("__whi"))
        & (pl.col("end_ns") > pl.col("ts_ns"))
    )
    # CPU side: events on threads (HTA: stream == -1), in the window, positive duration
    cpu = ev.filter((pl.col("stream") == -1) & ~pl.col("kind").is_in(_NOT_THREAD) & in_win)
    # GPU side: activities whose launch starts in the window with a positive duration, or Stream Wait Events
    rt_ok = ev.filter(in_win).select(pl.col("row").cast(pl.Int64).alias("rt_row"))
    gpu = ev.filter(pl.col("kind").is_in(_GPU) & (pl.col("stream") != -1) & pl.col("rt_row").is_not_null())
    gpu = pl.concat(
        [
            gpu.join(rt_ok, on="rt_row", how="semi"),
            gpu.filter(pl.col("name") == "Stream Wait Event").join(rt_ok, on="rt_row", how="anti"),
        ]
    )
    # Event Sync / Context Sync records without a stream sit with the CPU rows in HTA's frame
    sync_cpu = ev.filter(
        pl.col("name").is_in(["Event Sync", "Context Sync"])
        & (pl.col("stream") == -1)
        & pl.col("rt_row").is_not_null()
        & in_win
    )
    gloo_ann = (pl.col("kind") == "user_annotation") & pl.col("name").str.starts_with("gloo:") & pl.lit(gloo)
    node_cpu = cpu.filter(pl.col("kind").is_in(_NODE_CPU) | pl.col("name").is_in(dl_names) | gloo_ann)
    node_ev = pl.concat([node_cpu, gpu]).sort("row")
    n_ev = node_ev.height
    rows = node_ev["row"].cast(pl.Int64).to_numpy()
    ts = node_ev["ts_ns"].to_numpy()
    end = node_ev["end_ns"].to_numpy()
    # nodes in (ts, row) order, a start before the end of the same zero-length event
    n_ts = np.concatenate([ts, end])
    n_row = np.concatenate([rows, rows])
    n_start = np.concatenate([np.ones(n_ev, bool), np.zeros(n_ev, bool)])
    order = np.lexsort((~n_start, n_row, n_ts))
    n_ts, n_row, n_start = n_ts[order], n_row[order], n_start[order]
    node_of = np.empty(2 * n_ev, np.int64)
    node_of[order] = np.arange(2 * n_ev)
    size = int(ev["row"].max()) + 1 if ev.height else 1  # type: ignore[arg-type]
    start_node = np.full(size, -1, np.int64)
    end_node = np.full(size, -1, np.int64)
    start_node[rows] = node_of[:n_ev]
    end_node[rows] = node_of[n_ev:]
    names = node_ev["name"]
    is_lock = np.zeros(size, bool)
    is_lock[rows[names.is_in(list(LOCK_CALLS)).to_numpy()]] = True
    is_blocking = np.zeros(size, bool)
    is_blocking[rows[names.is_in(list(BLOCKING_CALLS)).to_numpy()]] = True

    parts: list[pl.DataFrame] = []
    parts.append(_lock_edges(n_row, n_start, is_lock, n_ts))
    stack, tree = _stack_edges(cpu, step_tids, hta_compat, start_node, end_node, n_ts, is_lock, is_blocking, notes)
    parts.append(stack)
    parts.append(_gpu_edges(ev, gpu, sync_cpu, hta_compat, start_node, end_node, n_ts, notes))
    edges = pl.concat([p for p in parts if p.height] or [pl.DataFrame(schema=_EDGE_SCHEMA)])
    # the rank of each node (nodes of a rank are consecutive: its times lie apart from the others')
    n_rank = np.full(2 * n_ev, -1, np.int64)
    node_rank = node_ev["rank"].cast(pl.Int64).to_numpy()
    n_rank[node_of[:n_ev]] = node_rank
    n_rank[node_of[n_ev:]] = node_rank
    # one edge per (src, dst): the first position, the last weight and type (networkx's add_edge)
    if edges.height:
        b = lambda c: np.ascontiguousarray(edges[c].to_numpy(), np.int64).tobytes()  # noqa: E731
        cols = _core.dedup_graph_edges(2 * n_ev, b("src"), b("dst"), b("type"), b("weight_ns"), b("attr_row"))
        edges = _edges(*(np.frombuffer(x, np.int64) for x in cols))
    e_rank = n_rank[edges["src"].to_numpy()] if edges.height else np.empty(0, np.int64)
    if edges.height and (n_rank[edges["dst"].to_numpy()] != e_rank).any():  # cannot happen: ranks apart
        raise AssertionError("critical graph: an edge between two ranks' events")
    out = {}
    ev_cols = ["row", "kind", "name", "pid", "tid", "stream", "ts_ns", "end_ns", "kernel_class", "launch_row", "rt_row"]
    if back is not None:  # each rank's own rows, times, processes and streams, for all at once
        base, shift = back.arrays(n_rank)
        n_row, n_ts = n_row - base, n_ts - shift
        if edges.height:
            e_base, _ = back.arrays(e_rank)
            attr = edges["attr_row"].to_numpy()
            edges = edges.with_columns(pl.Series("attr_row", np.where(attr >= 0, attr - e_base, -1)))
        node_ev = back.events(node_ev.select("rank", *ev_cols))
        tree = back.tree(tree)
        windows = back.windows
    if len(ranks) > 1:  # each rank's part: one stable sort by rank, then slices (no query per rank)
        nodes_of = _bounds(n_rank)
        e_order = np.argsort(e_rank, kind="stable")
        edges = edges[e_order]
        edges_of = _bounds(e_rank[e_order])
        ev_of = RankSlices(node_ev)
        tree_of = RankSlices(tree)
    for r in ranks:
        if len(ranks) == 1:
            lo_n, hi_n = 0, 2 * n_ev
            e_r = edges
            ev_r = node_ev
            tree_r = tree
        else:
            lo_n, hi_n = nodes_of.get(r, (0, 0))
            ea, eb = edges_of.get(r, (0, 0))
            e_r = edges.slice(ea, eb - ea).with_columns(pl.col("src") - lo_n, pl.col("dst") - lo_n)
            ev_r = ev_of[r]
            tree_r = tree_of[r]
        neg = e_r.filter(pl.col("weight_ns") < 0) if e_r.height else e_r
        if neg.height:
            notes[r].append(
                f"{neg.height} edge(s) with a negative weight (an event ending after its parent, down to "
                f"{-int(neg['weight_ns'].min()) / 1e3:g} µs) set to 0"  # type: ignore[arg-type]
            )
        if e_r.height:
            e_r = e_r.with_columns(pl.col("weight_ns").clip(lower_bound=0))
        nodes = pl.DataFrame(
            {
                "node": np.arange(hi_n - lo_n, dtype=np.int64),
                "row": n_row[lo_n:hi_n],
                "ts_ns": n_ts[lo_n:hi_n],
                "is_start": n_start[lo_n:hi_n],
            }
        )
        out[r] = CriticalGraph(
            r,
            windows[r][0],
            windows[r][1],
            nodes,
            e_r.cast(pl.Schema(_EDGE_SCHEMA)),
            ev_r.select(ev_cols),
            hta_compat,
            tree_r.select("row", "parent_row"),
            notes[r],
        )
    return out


def _bounds(sorted_ranks: np.ndarray) -> dict[int, tuple[int, int]]:
    """``{rank: (first, end)}`` positions of each rank in an array sorted by rank."""
    if sorted_ranks.size == 0:
        return {}
    starts = np.flatnonzero(np.r_[True, sorted_ranks[1:] != sorted_ranks[:-1]])
    ends = np.r_[starts[1:], sorted_ranks.size]
    return {int(sorted_ranks[a]): (int(a), int(b)) for a, b in zip(starts, ends, strict=True)}


def _edges(src: np.ndarray, dst: np.ndarray, typ: int | np.ndarray, w: np.ndarray, attr: np.ndarray) -> pl.DataFrame:
    n = len(src)
    return pl.DataFrame(
        {
            "src": np.asarray(src, np.int64),
            "dst": np.asarray(dst, np.int64),
            "type": np.broadcast_to(np.asarray(typ, np.int8), (n,)).copy(),
            "weight_ns": np.asarray(w, np.int64),
            "attr_row": np.asarray(attr, np.int64),
        },
        schema=_EDGE_SCHEMA,
    )


def _lock_edges(n_row: np.ndarray, n_start: np.ndarray, is_lock: np.ndarray, n_ts: np.ndarray) -> pl.DataFrame:
    """Step 1: the CUDA runtime lock over every thread, in node order."""
    pos = np.flatnonzero(is_lock[n_row])
    if pos.size == 0:
        return pl.DataFrame(schema=_EDGE_SCHEMA)
    st = n_start[pos]
    is_end = ~st
    # each start is popped by the next end (if any); the stack pops the latest start first
    end_after = np.full(pos.size, -1, np.int64)
    e_idx = np.flatnonzero(is_end)
    nxt = np.searchsorted(e_idx, np.arange(pos.size), side="left")
    ok = nxt < e_idx.size
    end_after[ok] = e_idx[nxt[ok]]
    s_idx = np.flatnonzero(st & (end_after >= 0))
    s_end = end_after[s_idx]
    same = n_row[pos[s_idx]] == n_row[pos[s_end]]
    src1, dst1 = pos[s_idx], pos[s_end]
    w1 = np.where(same, n_ts[dst1] - n_ts[src1], 0)
    t1 = np.where(same, OPERATOR, DEPENDENCY)
    a1 = np.where(same, n_row[src1], -1)
    k1 = s_end.astype(np.float64) * 1e0  # order: by the end, latest start first
    sub1 = -s_idx.astype(np.float64)
    # an end right after an end: dependency between the two ends
    prev_end = e_idx[(e_idx > 0)]
    prev_end = prev_end[is_end[prev_end - 1]]
    src2, dst2 = pos[prev_end - 1], pos[prev_end]
    k2 = prev_end.astype(np.float64)
    sub2 = np.full(prev_end.size, np.inf)
    key = np.concatenate([k1, k2])
    sub = np.concatenate([sub1, sub2])
    o = np.lexsort((sub, key))
    return _edges(
        np.concatenate([src1, src2])[o],
        np.concatenate([dst1, dst2])[o],
        np.concatenate([t1, np.full(prev_end.size, DEPENDENCY)])[o],
        np.concatenate([w1, np.zeros(prev_end.size, np.int64)])[o],
        np.concatenate([a1, np.full(prev_end.size, -1)])[o],
    )


def _stack_edges(
    cpu: pl.DataFrame,
    step_tids: dict[int, list[Any]],
    hta_compat: bool,
    start_node: np.ndarray,
    end_node: np.ndarray,
    n_ts: np.ndarray,
    is_lock: np.ndarray,
    is_blocking: np.ndarray,
    notes: dict[int, list[str]],
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Step 2: per CPU thread, the kept events' markers in depth-first order of HTA's call stack.
    Returns the edges and the tree (``rank, row, parent_row``)."""
    no_tree = pl.DataFrame(schema={"rank": pl.Int32, "row": pl.Int64, "parent_row": pl.Int64})
    if cpu.height == 0:
        return pl.DataFrame(schema=_EDGE_SCHEMA), no_tree
    folds = _fwd_bwd_tids(cpu, step_tids, hta_compat)
    if folds:
        f = pl.DataFrame(
            {"rank": list(folds), "tid": [b for b, _ in folds.values()], "__to": [t for _, t in folds.values()]},
            schema={"rank": pl.Int32, "tid": pl.Int64, "__to": pl.Int64},
        ).with_columns(pl.lit(True).alias("__fold"))
        cpu = (
            cpu.join(f, on=["rank", "tid"], how="left", maintain_order="left")
            .with_columns(pl.when(pl.col("__fold")).then(pl.col("__to")).otherwise(pl.col("tid")).alias("tid"))
            .drop("__to", "__fold")
        )
        for r, (b, t) in folds.items():
            notes[r].append(f"backward thread {b} folded into forward thread {t}")
    tree = nest(cpu.select("row", "pid", "tid", "ts_ns", "end_ns"))
    # open order: thread, time, longer first, row (HTA's compare_events); pre-order = open order
    c = cpu.select("row", "pid", "tid", "ts_ns", (pl.col("end_ns") - pl.col("ts_ns")).alias("__dur")).sort(
        ["pid", "tid", "ts_ns", "__dur", "row"], descending=[False, False, False, True, False]
    )
    n = c.height
    row = c["row"].cast(pl.Int64).to_numpy()
    # the tree's depth and parent per row, scattered by row (rows are unique)
    size = int(row.max()) + 1
    t_row = tree["row"].cast(pl.Int64).to_numpy()
    by_row = np.zeros(size, np.int64)
    by_row[t_row] = tree["depth"].to_numpy()
    depth = by_row[row]
    by_row[t_row] = tree["parent_row"].fill_null(-1).to_numpy()
    parent_row = by_row[row]
    pos_of = np.full(size, -1, np.int64)
    pos_of[row] = np.arange(n)
    ppos = np.where(parent_row >= 0, pos_of[np.maximum(parent_row, 0)], -1)
    pid_a, tid_a = c["pid"].to_numpy(), c["tid"].to_numpy()
    thread = np.cumsum(np.r_[False, (pid_a[1:] != pid_a[:-1]) | (tid_a[1:] != tid_a[:-1])]).astype(np.int64)
    rank_of = np.zeros(size, np.int64)
    rank_of[cpu["row"].cast(pl.Int64).to_numpy()] = cpu["rank"].cast(pl.Int64).to_numpy()
    tree_out = pl.DataFrame(
        {"rank": pl.Series(rank_of[row], dtype=pl.Int32), "row": row, "parent_row": parent_row.astype(np.int64)}
    )
    if not (start_node[row] >= 0).any():  # no event with nodes
        return pl.DataFrame(schema=_EDGE_SCHEMA), tree_out
    # the markers and their edges in one pass (Rust core): per thread, each kept event's enter at
    # its open position and its exit right after the last open position of its subtree (deeper
    # exits first); each marker linked to the one before it on its thread
    b = lambda a: np.ascontiguousarray(a, np.int64).tobytes()  # noqa: E731
    cols = _core.call_stack_edges(
        b(thread),
        b(depth),
        b(ppos),
        b(row),
        b(parent_row),
        b(start_node[row]),
        b(end_node[row]),
        np.ascontiguousarray(is_lock[row], np.uint8).tobytes(),
        np.ascontiguousarray(is_blocking[row], np.uint8).tobytes(),
        b(n_ts),
    )
    src, dst, typ, w, attr = (np.frombuffer(x, np.int64) for x in cols)
    return _edges(src, dst, typ, w, attr), tree_out


def _gpu_edges(
    ev: pl.DataFrame,
    gpu: pl.DataFrame,
    sync_cpu: pl.DataFrame,
    hta_compat: bool,
    start_node: np.ndarray,
    end_node: np.ndarray,
    n_ts: np.ndarray,
    notes: dict[int, list[str]],
) -> pl.DataFrame:
    """Step 3: GPU activities in start order, sync records at their end."""
    k = pl.concat([gpu, sync_cpu]).with_columns(
        pl.when(pl.col("kind") == "sync").then(pl.col("end_ns")).otherwise(pl.col("ts_ns")).alias("__sort")
    )
    if k.height == 0:
        return pl.DataFrame(schema=_EDGE_SCHEMA)
    with_sync = set(ev.filter(pl.col("kind") == "sync")["rank"].unique().to_list())
    for r in set(k["rank"].unique().to_list()) - with_sync:
        notes[r].append(
            "no CUDA sync events in the trace (enable them in the profiler): "
            + (
                "GPU→CPU waits are not modelled"
                if hta_compat
                else "GPU→CPU and cross-stream waits are inferred from timing (docs/critical-path.md)"
            )
        )
    k = k.sort(["__sort", "row"]).with_row_index("__pos")
    q = _queue(ev, hta_compat)
    k = (
        k.join(q.rename({"row": "rt_row", "q": "q_rt"}), on="rt_row", how="left")
        .join(q.rename({"q": "q_k"}), on="row", how="left")
        .join(
            ev.select(pl.col("row").cast(pl.Int64).alias("rt_row"), pl.col("ts_ns").alias("rt_ts")),
            on="rt_row",
            how="left",
        )
        .sort("__pos")
    )
    act = k.filter(pl.col("kind") != "sync").with_columns(pl.col("row").shift(1).over("stream").alias("__prev"))
    # the activity launched just before each cudaEventRecord on the recorded stream, and the one
    # launched just after each cudaStreamWaitEvent on its thread and stream
    prev_launch = _record_previous_launch(ev, hta_compat)
    next_launch = _wait_next_launch(ev, hta_compat)
    syncs = k.filter(pl.col("kind") == "sync").join(
        prev_launch, left_on="wait_corr", right_on="correlation", how="left"
    )
    # Stream Wait Event: schedule a GPU→GPU sync into the next activity launched on the waiting stream
    swe = (
        syncs.filter((pl.col("name") == "Stream Wait Event") & pl.col("src_kernel").is_not_null())
        .join(next_launch, on="rt_row", how="inner")
        .select(pl.col("__pos").alias("__swe_pos"), "src_kernel", pl.col("dest_kernel").alias("row"))
    )
    act = act.join(
        act.select("row", "__pos")
        .join(swe, on="row", how="inner")
        .filter(pl.col("__swe_pos") < pl.col("__pos"))
        .sort("__swe_pos")
        .group_by("row")
        .agg(pl.col("src_kernel").last())
        .select("row", pl.col("src_kernel").alias("__sync_src")),
        on="row",
        how="left",
    ).sort("__pos")
    rows = act["row"].cast(pl.Int64).to_numpy()
    pos = act["__pos"].to_numpy().astype(np.float64)
    s = start_node[rows]
    e = end_node[rows]
    out: list[tuple[np.ndarray, ...]] = []

    def add(key: np.ndarray, sub: float, src: np.ndarray, dst: np.ndarray, typ: int, w: np.ndarray, attr: np.ndarray):
        out.append((key, np.full(key.size, sub), src, dst, np.full(key.size, typ), w, attr))

    # the activity itself
    add(pos, 0, s, e, OPERATOR, n_ts[e] - n_ts[s], rows)
    # GPU->GPU sync from a Stream Wait Event
    sync_src = act["__sync_src"].fill_null(-1).to_numpy()
    sync_end = np.where(sync_src >= 0, end_node[np.maximum(sync_src, 0)], -1)
    sync_ok = sync_end >= 0
    has_sync = sync_ok  # HTA forgets a sync whose source has no node
    i = np.flatnonzero(sync_ok)
    add(pos[i], 1, sync_end[i], s[i], SYNC, np.zeros(i.size, np.int64), np.full(i.size, -1))
    # launch delay or kernel-kernel
    prev = act["__prev"].fill_null(-1).cast(pl.Int64).to_numpy()
    prev_end = np.where(prev >= 0, end_node[np.maximum(prev, 0)], -1)
    has_prev = prev_end >= 0
    prev_ts = np.where(has_prev, n_ts[np.maximum(prev_end, 0)], 0)
    rt_row = act["rt_row"].fill_null(-1).to_numpy()
    rt_ts = act["rt_ts"].fill_null(0).to_numpy()
    rt_start = np.where(rt_row >= 0, start_node[np.maximum(rt_row, 0)], -1)
    q_rt = act["q_rt"].fill_null(-99).to_numpy()
    q_k = act["q_k"].fill_null(-99).to_numpy()
    sync_ts = np.where(sync_ok, n_ts[np.maximum(sync_end, 0)], 0)
    launch = (
        (q_rt == 1)
        & (q_k == 0)
        & (~has_prev | (prev_ts < rt_ts))
        & (~has_sync | (sync_ok & (sync_ts < rt_ts)))
        & (rt_start >= 0)
    )
    gap = n_ts[s] - prev_ts
    kk_dep = ~has_sync | (sync_ok & (sync_ts < prev_ts))
    kk = ~launch & has_prev & (gap < KERNEL_KERNEL_DELAY_THRESHOLD_NS) & kk_dep
    i = np.flatnonzero(launch)
    add(pos[i], 2, rt_start[i], s[i], LAUNCH_DELAY, n_ts[s[i]] - n_ts[rt_start[i]], np.full(i.size, -1))
    i = np.flatnonzero(kk)
    add(pos[i], 2, prev_end[i], s[i], KERNEL_KERNEL, gap[i], prev[i])
    lost = ~launch & ~kk & ~(has_sync & sync_ok)
    if not hta_compat:
        # every activity waits for its launch and for the previous activity on its stream
        i = np.flatnonzero(~launch & (rt_start >= 0))
        add(pos[i], 3, rt_start[i], s[i], DEPENDENCY, np.zeros(i.size, np.int64), np.full(i.size, -1))
        i = np.flatnonzero(~launch & ~kk & has_prev)
        add(pos[i], 4, prev_end[i], s[i], DEPENDENCY, np.zeros(i.size, np.int64), np.full(i.size, -1))
    elif lost.any():
        lost_rank = act["rank"].to_numpy()[lost]
        for r in np.unique(lost_rank).tolist():
            notes[int(r)].append(
                f"{int((lost_rank == r).sum())} GPU activit(ies) got no incoming edge (HTA: no launch-delay, "
                "kernel-kernel or sync edge), so the path may start there"
            )
    if not hta_compat:
        _inferred_waits(ev, act, with_sync, start_node, end_node, n_ts, add)
    # sync records: GPU -> CPU edges into the end of the waiting call
    sy = syncs.with_columns(pl.col("rt_row").fill_null(-1))
    sy_pos = sy["__pos"].to_numpy().astype(np.float64)
    sy_rt = sy["rt_row"].to_numpy()
    sy_rt_end = np.where(sy_rt >= 0, end_node[np.maximum(sy_rt, 0)], -1)
    name = sy["name"].to_numpy()
    # Event Sync: from the activity launched before the record
    ev_src = sy["src_kernel"].fill_null(-1).to_numpy()
    ev_src_end = np.where(ev_src >= 0, end_node[np.maximum(ev_src, 0)], -1)
    i = np.flatnonzero((name == "Event Sync") & (ev_src_end >= 0) & (sy_rt_end >= 0))
    add(sy_pos[i], 0, ev_src_end[i], sy_rt_end[i], SYNC, np.zeros(i.size, np.int64), np.full(i.size, -1))
    # Stream Sync / Context Sync: from the last activity of the stream / of every stream so far
    last = act.select("row", "stream", "__pos")
    first_seen = act.group_by("rank", "stream").agg(pl.col("__pos").min().alias("__first"))
    ss = sy.filter(pl.col("name").is_in(["Stream Sync", "Context Sync"]))
    if ss.height and last.height:
        per_stream = (
            ss.select("rank", "__pos", "name", "stream", "rt_row")
            .join(first_seen, on="rank", how="inner", suffix="_s")
            .filter((pl.col("name") == "Context Sync") | (pl.col("stream") == pl.col("stream_s")))
            .filter(pl.col("__first") < pl.col("__pos"))
            .sort("__pos")
        )
        lastk = last.sort("__pos").rename({"stream": "stream_s", "row": "__last", "__pos": "__lpos"})
        j = per_stream.join_asof(
            lastk, left_on="__pos", right_on="__lpos", by="stream_s", strategy="backward", check_sortedness=False
        )
        j = j.filter(pl.col("__last").is_not_null()).sort(["__pos", "__first"])
        src = end_node[j["__last"].cast(pl.Int64).to_numpy()]
        rt = j["rt_row"].to_numpy()
        dst = np.where(rt >= 0, end_node[np.maximum(rt, 0)], -1)
        ok2 = (src >= 0) & (dst >= 0)
        kpos = j["__pos"].to_numpy().astype(np.float64)[ok2]
        sub = j["__first"].to_numpy().astype(np.float64)[ok2] * 1e-12
        out.append(
            (
                kpos,
                sub,
                src[ok2],
                dst[ok2],
                np.full(kpos.size, SYNC),
                np.zeros(kpos.size, np.int64),
                np.full(kpos.size, -1),
            )
        )
    cols = [np.concatenate([o[c] for o in out]) for c in range(7)]
    o = np.lexsort((cols[1], cols[0]))
    return _edges(cols[2][o], cols[3][o], cols[4][o].astype(np.int8), cols[5][o], cols[6][o])


#: Calls that return only when GPU work is done (used when the trace has no sync records).
_WAIT_CALLS = (
    "cudaDeviceSynchronize",
    "cudaStreamSynchronize",
    "cudaEventSynchronize",
    "hipDeviceSynchronize",
    "hipStreamSynchronize",
)


#: Calls that make a stream wait for an event recorded on another stream.
_STREAM_WAIT_CALLS = ("cudaStreamWaitEvent", "hipStreamWaitEvent")
#: Without sync records: a GPU activity that starts more than this after both its launch call
#: returned and the previous activity on its stream ended was held by the GPU; an activity of
#: another stream of the device that ended at most this long before its start released it.
INFERRED_STREAM_WAIT_SLACK_NS = 20_000


def _inferred_waits(ev, act, with_sync, start_node, end_node, n_ts, add) -> None:  # noqa: ANN001
    """Fixed model only. A launch call that returns after its own GPU activity ended (a
    synchronous copy) waited for it: an edge from the activity's end to the call's end. Without
    sync records in the trace, a ``*Synchronize`` call that returns while GPU work of its device
    ended during the call waited for the last such activity: an edge from its end too; and a held
    GPU activity waited for another stream (:func:`_inferred_stream_waits`)."""
    a = act.filter(pl.col("rt_row").is_not_null()).select("row", "rt_row", "__pos", "end_ns")
    rt = ev.select(pl.col("row").alias("rt_row"), pl.col("end_ns").alias("rt_end"))
    own = a.join(rt, on="rt_row").filter(pl.col("end_ns") <= pl.col("rt_end"))
    src = end_node[own["row"].to_numpy()]
    dst = end_node[own["rt_row"].to_numpy()]
    ok = (src >= 0) & (dst >= 0)
    key = own["__pos"].to_numpy().astype(np.float64)[ok] + 0.5
    add(key, 5, src[ok], dst[ok], SYNC, np.zeros(int(ok.sum()), np.int64), np.full(int(ok.sum()), -1))
    # the rest only on ranks whose trace has no sync record
    if with_sync:
        keep = ~pl.col("rank").is_in(list(with_sync))
        ev, act = ev.filter(keep), act.filter(keep)
        if ev.height == 0:
            return
    _inferred_stream_waits(ev, act, start_node, end_node, add)
    calls = ev.filter(pl.col("name").is_in(list(_WAIT_CALLS)))
    calls = calls.filter(pl.Series(end_node[calls["row"].to_numpy()] >= 0))
    if calls.height == 0 or act.height == 0:
        return
    done = act.select("rank", "row", "end_ns", "__pos").sort("end_ns")
    j = (
        calls.select("rank", pl.col("row").alias("call"), "ts_ns", pl.col("end_ns").alias("call_end"))
        .sort("call_end")
        .join_asof(done, left_on="call_end", right_on="end_ns", by="rank", strategy="backward", check_sortedness=False)
    )
    j = j.filter(pl.col("row").is_not_null() & (pl.col("end_ns") >= pl.col("ts_ns")))
    src = end_node[j["row"].to_numpy()]
    dst = end_node[j["call"].to_numpy()]
    ok = (src >= 0) & (dst >= 0)
    key = j["__pos"].to_numpy().astype(np.float64)[ok] + 0.75
    add(key, 6, src[ok], dst[ok], SYNC, np.zeros(int(ok.sum()), np.int64), np.full(int(ok.sum()), -1))


def _inferred_stream_waits(ev, act, start_node, end_node, add) -> None:  # noqa: ANN001
    """Without sync records, when the trace has ``cudaStreamWaitEvent`` calls (the evidence that
    streams wait on each other; the calls carry no stream): a GPU activity held on the GPU (it
    starts more than :data:`INFERRED_STREAM_WAIT_SLACK_NS` after its launch call returned — after
    the call started for a copy whose call returned after the copy started (a synchronous copy) —
    and after the previous activity on its stream ended) waited for the activity of another stream of the
    same device that ended last before its start, if that one ended within the slack: a zero-weight
    sync edge from that activity's end to the held activity's start."""
    # only on ranks whose trace has the calls
    waiting = ev.filter(pl.col("name").is_in(list(_STREAM_WAIT_CALLS)))["rank"].unique()
    act = act.filter(pl.col("rank").is_in(waiting.implode()))
    if act.height == 0:
        return
    slack = INFERRED_STREAM_WAIT_SLACK_NS
    ends = ev.select(pl.col("row").cast(pl.Int64), pl.col("end_ns").alias("__e"))
    a = (
        act.select("row", "kind", "pid", "stream", "ts_ns", "__pos", "rt_row", "rt_ts", pl.col("__prev").cast(pl.Int64))
        .join(ends.rename({"row": "rt_row", "__e": "rt_end"}), on="rt_row", how="left")
        .join(ends.rename({"row": "__prev", "__e": "prev_end"}), on="__prev", how="left")
    )
    # a copy's call may block until the copy is done: then only its start bounds the copy's start
    blocking_copy = pl.col("kind").is_in(["memcpy", "memset"]) & (pl.col("rt_end") > pl.col("ts_ns"))
    launched = pl.when(blocking_copy).then(pl.col("rt_ts")).otherwise(pl.col("rt_end"))
    free = pl.max_horizontal(launched.fill_null(pl.col("ts_ns")), pl.col("prev_end").fill_null(0))
    held = a.filter(pl.col("ts_ns") - free > slack).sort("ts_ns")
    if held.height == 0:
        return
    done = act.select(
        pl.col("row").alias("src_row"), "pid", pl.col("stream").alias("src_stream"), pl.col("end_ns").alias("src_end")
    ).sort("src_end")
    j = held.join_asof(done, left_on="ts_ns", right_on="src_end", by="pid", strategy="backward", check_sortedness=False)
    j = j.filter(
        pl.col("src_row").is_not_null()
        & (pl.col("src_stream") != pl.col("stream"))
        & (pl.col("ts_ns") - pl.col("src_end") <= slack)
    )
    src = end_node[j["src_row"].cast(pl.Int64).to_numpy()]
    dst = start_node[j["row"].cast(pl.Int64).to_numpy()]
    ok = (src >= 0) & (dst >= 0)
    key = j["__pos"].to_numpy().astype(np.float64)[ok]
    add(key, 1.5, src[ok], dst[ok], SYNC, np.zeros(int(ok.sum()), np.int64), np.full(int(ok.sum()), -1))


def _queue(ev: pl.DataFrame, hta_compat: bool) -> pl.DataFrame:
    """Queue length at each launch (``row`` the launch) and at each activity's start (``row`` the
    activity): +1 at a launch, −1 at its activity's start, per stream, launches first at equal times."""
    act = ev.filter(pl.col("kind").is_in(["kernel", "memcpy", "memset"]) & pl.col("rt_row").is_not_null())
    rt = ev.select(
        pl.col("row").cast(pl.Int64).alias("rt_row"), pl.col("ts_ns").alias("rt_ts"), pl.col("name").alias("api")
    )
    if hta_compat:
        rt = rt.filter(pl.col("api").is_in(list(HTA_QUEUE_APIS)))
    a = act.join(rt, on="rt_row", how="inner")
    if not hta_compat:  # one queue entry per graph launch and stream
        a = a.sort("ts_ns", "row").unique(["rt_row", "stream"], keep="first", maintain_order=True)
    up = a.select(
        "stream",
        pl.col("rt_ts").alias("t"),
        pl.lit(0, pl.Int8).alias("o"),
        pl.col("rt_row").alias("row"),
        pl.lit(1, pl.Int64).alias("d"),
    )
    down = a.select(
        "stream",
        pl.col("ts_ns").alias("t"),
        pl.lit(1, pl.Int8).alias("o"),
        pl.col("row").cast(pl.Int64),
        pl.lit(-1, pl.Int64).alias("d"),
    )
    s = pl.concat([up, down]).sort(["stream", "t", "o", "row"])
    return s.select("row", pl.col("d").cum_sum().over("stream").alias("q")).unique("row", keep="last")


def _launches(ev: pl.DataFrame, hta_compat: bool) -> pl.DataFrame:
    """Launch calls with their activity: ``rt_row, pid, tid, ts_ns, correlation, launch_id`` and the
    activity's ``k_row, k_stream, k_gpu`` (HTA's ``_get_cuda_runtime_calls_df``)."""
    act = ev.filter((pl.col("stream") != -1) & pl.col("rt_row").is_not_null() & pl.col("kind").is_in(_GPU)).select(
        pl.col("row").cast(pl.Int64).alias("k_row"),
        "rt_row",
        pl.col("stream").alias("k_stream"),
        pl.col("pid").alias("k_gpu"),
    )
    rt = ev.filter(pl.col("kind").is_in(["cuda_runtime", "cuda_driver"]))
    if hta_compat:
        rt = rt.filter(pl.col("name").is_in(list(HTA_QUEUE_APIS)))
    rt = rt.select(pl.col("row").cast(pl.Int64).alias("rt_row"), "pid", "tid", "ts_ns", "correlation")
    return rt.join(act, on="rt_row", how="inner").sort(["ts_ns", "rt_row"]).with_row_index("launch_id")


def _record_previous_launch(ev: pl.DataFrame, hta_compat: bool) -> pl.DataFrame:
    """Per ``cudaEventRecord`` correlation: ``src_kernel``, the activity of the latest launch on the
    recorded (gpu, stream) at or before the record."""
    empty = pl.DataFrame(schema={"correlation": pl.Int64, "src_kernel": pl.Int64})
    streams = (
        ev.filter(pl.col("wait_on_stream") > -1)
        .select(
            pl.col("wait_corr").alias("correlation"),
            pl.col("wait_on_stream").alias("k_stream"),
            pl.col("pid").alias("k_gpu"),
        )
        .unique()
    )
    rec = (
        ev.filter(pl.col("name") == "cudaEventRecord")
        .select("correlation", "ts_ns")
        .join(streams, on="correlation", how="inner")
    )
    if rec.height == 0:
        return empty
    la = _launches(ev, hta_compat).select("k_stream", "k_gpu", "ts_ns", "k_row").sort("ts_ns")
    j = rec.sort("ts_ns").join_asof(
        la, on="ts_ns", by=["k_gpu", "k_stream"], strategy="backward", check_sortedness=False
    )
    return j.select("correlation", pl.col("k_row").alias("src_kernel")).unique("correlation", keep="first")


def _wait_next_launch(ev: pl.DataFrame, hta_compat: bool) -> pl.DataFrame:
    """Per ``cudaStreamWaitEvent`` call (``rt_row``): ``dest_kernel``, the activity of the next
    launch on the same CPU thread and the waiting stream."""
    swe = ev.filter((pl.col("name") == "Stream Wait Event") & pl.col("rt_row").is_not_null()).select(
        "rt_row", pl.col("stream").alias("k_stream")
    )
    calls = ev.filter(pl.col("name") == "cudaStreamWaitEvent").select(
        pl.col("row").cast(pl.Int64).alias("rt_row"), "pid", "tid", "ts_ns"
    )
    w = calls.join(swe, on="rt_row", how="inner")
    if w.height == 0:
        return pl.DataFrame(schema={"rt_row": pl.Int64, "dest_kernel": pl.Int64})
    la = _launches(ev, hta_compat).select("pid", "tid", "k_stream", "ts_ns", "k_row").sort("ts_ns")
    j = w.sort("ts_ns").join_asof(
        la,
        on="ts_ns",
        by=["pid", "tid", "k_stream"],
        strategy="forward",
        allow_exact_matches=False,
        check_sortedness=False,
    )
    return j.select("rt_row", pl.col("k_row").alias("dest_kernel"))


# ---- the path -----------------------------------------------------------------------------------


def longest_path(g: CriticalGraph) -> pl.DataFrame:
    """The edges of the longest path, first to last: ``step, src, dst, type, weight_ns, attr_row,
    src_ts_ns, dst_ts_ns, src_row, dst_row``. Raises ``ValueError`` on a cycle."""
    e = g.edges
    schema = {
        "step": pl.Int64,
        **_EDGE_SCHEMA,
        "src_ts_ns": pl.Int64,
        "dst_ts_ns": pl.Int64,
        "src_row": pl.Int64,
        "dst_row": pl.Int64,
    }
    if e.height == 0:
        return pl.DataFrame(schema=schema)
    b = lambda c: np.ascontiguousarray(e[c].to_numpy(), np.int64).tobytes()  # noqa: E731
    idx = np.frombuffer(_core.longest_path_edges(g.nodes.height, b("src"), b("dst"), b("weight_ns")), np.int64)
    if idx.size == 0:
        return pl.DataFrame(schema=schema)
    p = e[idx]
    src, dst = p["src"].to_numpy(), p["dst"].to_numpy()
    n_ts = g.nodes["ts_ns"].to_numpy()
    n_row = g.nodes["row"].to_numpy()
    return p.with_columns(
        pl.Series("step", np.arange(idx.size, dtype=np.int64)),
        pl.Series("src_ts_ns", n_ts[src]),
        pl.Series("dst_ts_ns", n_ts[dst]),
        pl.Series("src_row", n_row[src]),
        pl.Series("dst_row", n_row[dst]),
    ).select(list(schema))
