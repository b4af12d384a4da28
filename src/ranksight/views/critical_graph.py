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
    ev = (
        trace.scan()
        .filter((pl.col("ph") == "X") & pl.col("dur_ns").is_not_null() & (pl.col("cat").cast(pl.String) != "Trace"))
        .select(
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
        )
        .collect()
    )
    if hta_compat and needs_hta_rounding(trace) and ev.height:
        ts, end = hta_round(
            ev["ts_ns"].to_numpy(), (ev["end_ns"] - ev["ts_ns"]).to_numpy(), trace.meta.base_time_ns or 0
        )
        ev = ev.with_columns(pl.Series("ts_ns", ts), pl.Series("end_ns", end))
    sync = trace.table("sync")
    if sync.height:
        ev = ev.join(
            sync.select(
                pl.col("row").cast(pl.Int64),
                pl.col("wait_on_stream").fill_null(-1),
                pl.col("wait_on_event_correlation").fill_null(-1).alias("wait_corr"),
            ),
            on="row",
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


def _fwd_bwd_tids(cpu: pl.DataFrame, trace: Trace, hta_compat: bool) -> tuple[int, int] | None:
    """(backward tid, forward tid) to fold, or None."""
    ops = cpu.filter(pl.col("kind").is_in(["cpu_op", "user_annotation"]))
    if hta_compat:  # HTA: the one thread with a name containing "forward" / "autograd"
        fwd = ops.filter(pl.col("name").str.contains("forward", literal=True))["tid"].unique()
        bwd = ops.filter(pl.col("name").str.contains("autograd", literal=True))["tid"].unique()
    else:  # the thread of the ProfilerSteps / the thread of the autograd engine's functions
        st = trace.steps
        fwd = st["tid"].cast(pl.Int64).unique() if st.height else pl.Series([], dtype=pl.Int64)
        bwd = ops.filter(pl.col("name").str.starts_with(_BWD_PREFIX))["tid"].unique()
        # the engine also runs CPU-only functions (AccumulateGrad) on the calling thread
        if fwd.len() == 1:
            bwd = bwd.filter(bwd != fwd[0])
    if fwd.len() == 1 and bwd.len() == 1 and fwd[0] != bwd[0]:
        return int(bwd[0]), int(fwd[0])
    return None


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
    notes: list[str] = []
    ev = _events(trace, hta_compat)
    part = _partners(ev)
    ev = ev.join(part, on="row", how="left")
    dl_names: list[str] = []
    if data_load:
        pats = [re.compile(p) for p in data_load]
        dl_names = [n for n in ev["name"].unique().to_list() if n is not None and any(p.search(n) for p in pats)]
    in_win = (pl.col("ts_ns") >= lo_ns) & (pl.col("ts_ns") <= hi_ns) & (pl.col("end_ns") > pl.col("ts_ns"))
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
    stack, tree = _stack_edges(cpu, trace, hta_compat, start_node, end_node, n_ts, is_lock, is_blocking, notes)
    parts.append(stack)
    parts.append(_gpu_edges(ev, gpu, sync_cpu, trace, hta_compat, start_node, end_node, n_ts, notes))
    edges = pl.concat([p for p in parts if p.height] or [pl.DataFrame(schema=_EDGE_SCHEMA)])
    # one edge per (src, dst): the first position, the last weight and type (networkx's add_edge)
    if edges.height:
        b = lambda c: np.ascontiguousarray(edges[c].to_numpy(), np.int64).tobytes()  # noqa: E731
        cols = _core.dedup_graph_edges(2 * n_ev, b("src"), b("dst"), b("type"), b("weight_ns"), b("attr_row"))
        edges = _edges(*(np.frombuffer(x, np.int64) for x in cols))
        neg = edges.filter(pl.col("weight_ns") < 0)
        if neg.height:
            notes.append(
                f"{neg.height} edge(s) with a negative weight (an event ending after its parent, down to "
                f"{-int(neg['weight_ns'].min()) / 1e3:g} µs) set to 0"  # type: ignore[arg-type]
            )
        edges = edges.with_columns(pl.col("weight_ns").clip(lower_bound=0))
    nodes = pl.DataFrame(
        {"node": np.arange(2 * n_ev, dtype=np.int64), "row": n_row, "ts_ns": n_ts, "is_start": n_start}
    )
    events = node_ev.select(
        "row", "kind", "name", "pid", "tid", "stream", "ts_ns", "end_ns", "kernel_class", "launch_row", "rt_row"
    )
    return CriticalGraph(
        trace.rank, lo_ns, hi_ns, nodes, edges.cast(pl.Schema(_EDGE_SCHEMA)), events, hta_compat, tree, notes
    )


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
    trace: Trace,
    hta_compat: bool,
    start_node: np.ndarray,
    end_node: np.ndarray,
    n_ts: np.ndarray,
    is_lock: np.ndarray,
    is_blocking: np.ndarray,
    notes: list[str],
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Step 2: per CPU thread, the kept events' markers in depth-first order of HTA's call stack."""
    no_tree = pl.DataFrame(schema={"row": pl.Int64, "parent_row": pl.Int64})
    if cpu.height == 0:
        return pl.DataFrame(schema=_EDGE_SCHEMA), no_tree
    fold = _fwd_bwd_tids(cpu, trace, hta_compat)
    if fold is not None:
        cpu = cpu.with_columns(pl.col("tid").replace(fold[0], fold[1]))
        notes.append(f"backward thread {fold[0]} folded into forward thread {fold[1]}")
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
    tree_out = pl.DataFrame({"row": row, "parent_row": parent_row.astype(np.int64)})
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
    trace: Trace,
    hta_compat: bool,
    start_node: np.ndarray,
    end_node: np.ndarray,
    n_ts: np.ndarray,
    notes: list[str],
) -> pl.DataFrame:
    """Step 3: GPU activities in start order, sync records at their end."""
    k = pl.concat([gpu, sync_cpu]).with_columns(
        pl.when(pl.col("kind") == "sync").then(pl.col("end_ns")).otherwise(pl.col("ts_ns")).alias("__sort")
    )
    if k.height == 0:
        return pl.DataFrame(schema=_EDGE_SCHEMA)
    if not (ev["kind"] == "sync").any():
        notes.append(
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
        notes.append(
            f"{int(lost.sum())} GPU activit(ies) got no incoming edge (HTA: no launch-delay, kernel-kernel or "
            "sync edge), so the path may start there"
        )
    if not hta_compat:
        _inferred_waits(ev, act, trace, start_node, end_node, n_ts, add)
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
    first_seen = last.group_by("stream").agg(pl.col("__pos").min().alias("__first"))
    ss = sy.filter(pl.col("name").is_in(["Stream Sync", "Context Sync"]))
    if ss.height and last.height:
        per_stream = (
            ss.select("__pos", "name", "stream", "rt_row")
            .join(first_seen, how="cross", suffix="_s")
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


def _inferred_waits(ev, act, trace, start_node, end_node, n_ts, add) -> None:  # noqa: ANN001
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
    if (ev["kind"] == "sync").any():
        return
    _inferred_stream_waits(ev, act, start_node, end_node, add)
    calls = ev.filter(pl.col("name").is_in(list(_WAIT_CALLS)))
    calls = calls.filter(pl.Series(end_node[calls["row"].to_numpy()] >= 0))
    if calls.height == 0 or act.height == 0:
        return
    done = act.select("row", "end_ns", "__pos").sort("end_ns")
    j = (
        calls.select(pl.col("row").alias("call"), "ts_ns", pl.col("end_ns").alias("call_end"))
        .sort("call_end")
        .join_asof(done, left_on="call_end", right_on="end_ns", strategy="backward")
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
    if act.height == 0 or not ev["name"].is_in(list(_STREAM_WAIT_CALLS)).any():
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
