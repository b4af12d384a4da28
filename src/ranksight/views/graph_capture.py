"""CUDA/HIP graph captures recorded in one trace: the capture windows, the launches recorded into each
graph (captured, never executed), and what the capture side knows about each launch.

Definitions (``docs/graphs.md``):

- a **capture window** is, on one CPU thread, the time from the end of a ``*StreamBeginCapture`` call
  (``cuda``/``hip``/``cu``) to the start of the next ``*StreamEndCapture`` call on that thread. Windows are
  numbered 0, 1, ... in time (``cgraph``): one captured graph each.
- a **captured launch** is a launch call (``*LaunchKernel*``, ``*Memcpy*``, ``*Memset*``; graph launches
  excluded) made on the capturing thread inside its window that owns no GPU activity: CUPTI / roctracer
  record the call, the kernel goes into the graph (the run-context definition of ``captured_launches``).
- its **matching key** is the kernel's name when the call records it (ROCm writes ``args.kernel``),
  ``<memcpy>`` / ``<memset>`` for copy and set calls, else null (CUDA launch calls name no kernel).
- what the capture knows of each captured launch: ``op`` (the operator that owns the call, as the
  operator tree of ``ops`` defines it: same External id, else the innermost operator open at the call),
  ``op_stack`` (that operator's ancestors, outermost first, `` > ``-joined), ``input_dims`` (the op's
  ``Input Dims``), ``module`` (the innermost ``nn.Module`` frame enclosing the call), ``call_stack`` (the
  Python frames enclosing the call, outermost first, `` > ``-joined).
- the **template** of a window is what operator analyses see of it when its graph is replayed
  (:mod:`ranksight.views.graph_attribution`): the window's CPU operators, user annotations (ProfilerSteps
  excepted), ``nn.Module`` frames and captured launches on the capturing thread, with their boundaries
  renumbered by rank (``t_start``, ``t_end`` in 0..``points``-1): order and nesting kept, lengths not.

Kernel names are read back from the captured calls' JSON (``Trace.raw_events``): one read per captured
launch, once per trace (memoised).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from ranksight.model.derive import STEP_RE
from ranksight.model.kinds import LAUNCH_KINDS
from ranksight.views.enclosing import innermost_enclosing, parent_spans
from ranksight.views.graph_replays import GRAPH_LAUNCH_RE, MEMCPY_KEY, MEMSET_KEY
from ranksight.views.tb_op_tree import build_op_tree, operator_mask

if TYPE_CHECKING:
    from ranksight.model.trace import Trace

__all__ = ["CaptureGraphs", "capture_graphs", "CAPTURE_BEGIN_RE", "CAPTURE_END_RE", "LAUNCH_CALL_RE"]

CAPTURE_BEGIN_RE = re.compile(r"^(?:cuda|hip|cu)StreamBeginCapture")
CAPTURE_END_RE = re.compile(r"^(?:cuda|hip|cu)StreamEndCapture")
#: launch calls (kernels, copies, sets) that a capture records instead of running
LAUNCH_CALL_RE = re.compile(r"^(?:cuda|hip|cu)\w*(?:LaunchKernel|Memcpy|Memset)|^cuLaunchKernel")
_MEMCPY_API = re.compile(r"Memcpy")
_MEMSET_API = re.compile(r"Memset")

WINDOW_SCHEMA = {
    "cgraph": pl.Int64,
    "pid": pl.Int32,
    "tid": pl.Int32,
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "launches": pl.Int64,
    "named": pl.Int64,
}
LAUNCH_SCHEMA = {
    "cgraph": pl.Int64,
    "idx": pl.Int64,
    "row": pl.UInt32,
    "api": pl.String,
    "ts_ns": pl.Int64,
    "key": pl.String,
    "op": pl.String,
    "op_stack": pl.String,
    "input_dims": pl.String,
    "module": pl.String,
    "call_stack": pl.String,
}


@dataclass
class CaptureGraphs:
    """The captures of one trace.

    ``windows``: :data:`WINDOW_SCHEMA` (``launches`` captured, ``named`` of them with a matching key);
    ``launches``: :data:`LAUNCH_SCHEMA`, one row per captured launch in call order (``idx`` 0.. per window);
    ``template``: the events a replay of each window stands for (the trace's event columns plus
    ``cgraph, t_start, t_end``), ``points`` per window in ``windows``-order; ``ops``: the ``op`` side table
    rows of the template's operators.
    """

    windows: pl.DataFrame
    launches: pl.DataFrame
    template: pl.DataFrame
    points: dict[int, int]
    ops: pl.DataFrame

    @property
    def empty(self) -> bool:
        return self.windows.height == 0


def _thread_key() -> pl.Expr:
    return (pl.col("pid").cast(pl.Int64) * (1 << 32) + pl.col("tid").cast(pl.Int64)).alias("thread")


def _windows(trace: Trace) -> pl.DataFrame:
    names = trace.runtime_names
    begin = [n for n in names if CAPTURE_BEGIN_RE.match(n)]
    end = [n for n in names if CAPTURE_END_RE.match(n)]
    if not begin or not end:
        return pl.DataFrame(schema={k: v for k, v in WINDOW_SCHEMA.items() if k not in ("launches", "named")})
    q = trace.scan().filter(pl.col("kind").is_in(list(LAUNCH_KINDS)) & pl.col("name").is_in([*begin, *end]))
    rt = q.select("pid", "tid", "ts_ns", "end_ns", pl.col("name").is_in(begin).alias("is_begin")).collect()
    b = rt.filter("is_begin").select("pid", "tid", pl.col("end_ns").alias("start_ns")).sort("start_ns")
    e = rt.filter(~pl.col("is_begin")).select("pid", "tid", pl.col("ts_ns").alias("end_ns")).sort("end_ns")
    # each begin with the first end after it on its thread
    w = b.join_asof(
        e, left_on="start_ns", right_on="end_ns", by=["pid", "tid"], strategy="forward", check_sortedness=False
    )
    w = w.filter(pl.col("end_ns").is_not_null()).unique(["pid", "tid", "end_ns"], keep="last", maintain_order=True)
    return (
        w.sort("start_ns", "pid", "tid")
        .with_row_index("cgraph")
        .select(pl.col("cgraph").cast(pl.Int64), "pid", "tid", "start_ns", "end_ns")
    )


def _in_windows(df: pl.DataFrame, w: pl.DataFrame) -> pl.DataFrame:
    """Rows of ``df`` (``pid, tid, ts_ns, end_ns``) inside a window of their thread, with its ``cgraph``."""
    j = df.sort("ts_ns").join_asof(
        w.select("pid", "tid", "cgraph", pl.col("start_ns").alias("__ws"), pl.col("end_ns").alias("__we")).sort("__ws"),
        left_on="ts_ns",
        right_on="__ws",
        by=["pid", "tid"],
        strategy="backward",
        check_sortedness=False,
    )
    return j.filter(pl.col("cgraph").is_not_null() & (pl.col("end_ns") <= pl.col("__we"))).drop("__ws", "__we")


def _keys(trace: Trace, launches: pl.DataFrame) -> pl.Series:
    """The matching key of each captured launch (kernel name from ``args.kernel``, copy/set, else null)."""
    raw = trace.raw_events(launches["row"]) if launches.height else []
    out: list[str | None] = []
    for api, e in zip(launches["api"].to_list(), raw, strict=True):
        args = e.get("args") or {}
        k = args.get("kernel") if isinstance(args, dict) else None
        if isinstance(k, str) and k:
            out.append(k)
        elif _MEMCPY_API.search(api):
            out.append(MEMCPY_KEY)
        elif _MEMSET_API.search(api):
            out.append(MEMSET_KEY)
        else:
            out.append(None)
    return pl.Series("key", out, dtype=pl.String)


def _chains(
    names: np.ndarray, parent: np.ndarray, start: np.ndarray, keep: np.ndarray | None = None
) -> list[str | None]:
    """For each start index (−1 = none): the names from the root down to it (only those where ``keep``),
    `` > ``-joined; null when none is kept."""
    out: list[str | None] = []
    for i in start.tolist():  # per captured launch (hundreds), depth-bounded walks
        chain = []
        while i >= 0:
            if keep is None or keep[i]:
                chain.append(str(names[i]))
            i = int(parent[i])
        out.append(" > ".join(reversed(chain)) if chain else None)
    return out


def _frames(trace: Trace, w: pl.DataFrame) -> pl.DataFrame:
    """Python frames on the capturing threads overlapping the windows, sorted, with their parent index and
    whether they are ``nn.Module`` frames."""
    threads = w.select("pid", "tid").unique()
    lo, hi = int(w["start_ns"].min()), int(w["end_ns"].max())  # type: ignore[arg-type]
    py = (
        trace.scan()
        .filter(
            (pl.col("kind") == "python_function")
            & pl.col("dur_ns").is_not_null()
            & (pl.col("ts_ns") < hi)
            & (pl.col("end_ns") > lo)
        )
        .select("row", "pid", "tid", "ts_ns", "end_ns", "name")
        .collect()
        .join(threads, on=["pid", "tid"])
    )
    op = trace.table("op")
    mods = op.filter(pl.col("python_module_id").is_not_null())["row"] if "python_module_id" in op.columns else None
    py = py.with_columns(
        pl.col("row").is_in(mods.implode()).alias("is_module")
        if mods is not None
        else pl.lit(False).alias("is_module"),
        _thread_key(),
    ).sort("thread", "ts_ns", pl.col("end_ns"), descending=[False, False, True])
    return py.with_columns(parent_spans(py, key="thread").cast(pl.Int64).fill_null(-1).alias("parent"))


def _launch_info(trace: Trace, launches: pl.DataFrame, w: pl.DataFrame) -> pl.DataFrame:
    """``op, op_stack, input_dims, module, call_stack`` of each captured launch (module doc)."""
    n = launches.height
    tree = build_op_tree(trace)
    owners = launches.select("row").join(tree.runtimes, on="row", how="left", maintain_order="left")["owner_row"]
    nodes = tree.nodes.with_columns(operator_mask(tree.nodes).alias("is_op"))
    nodes = nodes.select("row", pl.col("name").cast(pl.String), "parent_row", "is_op").with_row_index("k")
    idx_of = dict(zip(nodes["row"].to_list(), nodes["k"].to_list(), strict=True))
    par = nodes.with_columns(pl.col("parent_row").replace_strict(idx_of, default=None).cast(pl.Int64))["parent_row"]
    parent = par.fill_null(-1).to_numpy()
    names = nodes["name"].to_numpy()
    is_op = nodes["is_op"].to_numpy()
    start = np.array([idx_of.get(o, -1) if o is not None else -1 for o in owners.to_list()], dtype=np.int64)
    op_stack = _chains(names, parent, start, is_op)
    # the op is the owner when it is an operator (the ops table's set), else none
    op_names = [str(names[i]) if i >= 0 and is_op[i] else None for i in start.tolist()]
    dims = trace.table("op")
    input_dims: list[str | None] = [None] * n
    if "input_dims" in dims.columns and dims.height:
        d = owners.to_frame("row").join(
            dims.select("row", pl.col("input_dims").cast(pl.String)), on="row", how="left", maintain_order="left"
        )
        input_dims = d["input_dims"].to_list()
    module: list[str | None] = [None] * n
    call_stack: list[str | None] = [None] * n
    fr = _frames(trace, w)
    if fr.height:
        pts = launches.select(_thread_key(), "ts_ns")
        inner = innermost_enclosing(fr.select("thread", "ts_ns", "end_ns"), pts, key="thread")
        inner_np = inner.cast(pl.Int64).fill_null(-1).to_numpy()
        fnames = fr["name"].cast(pl.String).to_numpy()
        fparent = fr["parent"].to_numpy()
        call_stack = _chains(fnames, fparent, inner_np)
        mfr = fr.filter("is_module")
        if mfr.height:
            mi = innermost_enclosing(mfr.select("thread", "ts_ns", "end_ns"), pts, key="thread")
            mnames = mfr["name"].cast(pl.String).str.strip_prefix("nn.Module: ")
            module = [mnames[int(i)] if i is not None else None for i in mi.to_list()]
    return pl.DataFrame(
        {
            "op": op_names,
            "op_stack": op_stack,
            "input_dims": input_dims,
            "module": module,
            "call_stack": call_stack,
        },
        schema={
            "op": pl.String,
            "op_stack": pl.String,
            "input_dims": pl.String,
            "module": pl.String,
            "call_stack": pl.String,
        },
    )


def _template(
    trace: Trace, w: pl.DataFrame, launch_rows: pl.Series
) -> tuple[pl.DataFrame, dict[int, int], pl.DataFrame]:
    threads = w.select("pid", "tid").unique()
    lo, hi = int(w["start_ns"].min()), int(w["end_ns"].max())  # type: ignore[arg-type]
    ev = trace.scan().filter((pl.col("ts_ns") >= lo) & (pl.col("end_ns") <= hi) & pl.col("dur_ns").is_not_null())
    op = trace.table("op")
    mods = (
        op.filter(pl.col("python_module_id").is_not_null())["row"]
        if "python_module_id" in op.columns
        else pl.Series("row", [], dtype=pl.UInt32)
    )
    steps = [n for n in trace.distinct_names() if STEP_RE.match(n)]
    keep = (
        (pl.col("kind") == "cpu_op")
        | ((pl.col("kind") == "user_annotation") & ~pl.col("name").is_in(steps))
        | ((pl.col("kind") == "python_function") & pl.col("row").is_in(mods.implode()))
        | pl.col("row").is_in(launch_rows.implode())
    )
    t = ev.filter(keep).collect().join(threads, on=["pid", "tid"])
    t = _in_windows(t, w).sort("row")
    # boundaries renumbered by rank within each window: nesting and order kept (module doc)
    pts = pl.concat(
        [t.select("cgraph", pl.col("ts_ns").alias("t")), t.select("cgraph", pl.col("end_ns").alias("t"))]
    ).unique()
    pts = pts.sort("cgraph", "t").with_columns(pl.int_range(0, pl.len(), dtype=pl.Int64).over("cgraph").alias("r"))
    t = (
        t.join(pts.rename({"t": "ts_ns", "r": "t_start"}), on=["cgraph", "ts_ns"], how="left")
        .join(pts.rename({"t": "end_ns", "r": "t_end"}), on=["cgraph", "end_ns"], how="left")
        .sort("row")
    )
    points = dict(pts.group_by("cgraph").agg(pl.len()).iter_rows())
    ops = op.join(t.select("row"), on="row", how="semi") if op.height else op
    return t, {int(k): int(v) for k, v in points.items()}, ops


def _compute(trace: Trace) -> CaptureGraphs:
    w = _windows(trace)
    empty_l = pl.DataFrame(schema=LAUNCH_SCHEMA)
    if not w.height:
        return CaptureGraphs(
            pl.DataFrame(schema=WINDOW_SCHEMA), empty_l, trace.scan().head(0).collect(), {}, trace.table("op").head(0)
        )
    names = [n for n in trace.runtime_names if LAUNCH_CALL_RE.search(n) and not GRAPH_LAUNCH_RE.match(n)]
    calls = (
        trace.scan()
        .filter(
            pl.col("kind").is_in(list(LAUNCH_KINDS))
            & pl.col("name").is_in(names)
            & (pl.col("gpu_count").fill_null(0) == 0)
        )
        .select("row", "pid", "tid", "ts_ns", "end_ns", pl.col("name").cast(pl.String).alias("api"))
        .collect()
    )
    launches = _in_windows(calls, w).sort("cgraph", "ts_ns", "row")
    launches = launches.with_columns(pl.int_range(0, pl.len(), dtype=pl.Int64).over("cgraph").alias("idx"))
    launches = launches.with_columns(_keys(trace, launches))
    info = _launch_info(trace, launches, w) if launches.height else None
    if info is not None:
        launches = pl.concat([launches, info], how="horizontal")
    else:
        launches = launches.with_columns(
            *[pl.lit(None, pl.String).alias(c) for c in ("op", "op_stack", "input_dims", "module", "call_stack")]
        )
    counts = launches.group_by("cgraph").agg(
        pl.len().cast(pl.Int64).alias("launches"), pl.col("key").is_not_null().sum().cast(pl.Int64).alias("named")
    )
    w = w.join(counts, on="cgraph", how="left").with_columns(pl.col("launches", "named").fill_null(0))
    template, points, ops = _template(trace, w, launches["row"])
    return CaptureGraphs(
        w.select(list(WINDOW_SCHEMA)).cast(WINDOW_SCHEMA),  # type: ignore[arg-type]
        launches.select(list(LAUNCH_SCHEMA)).cast(LAUNCH_SCHEMA),  # type: ignore[arg-type]
        template,
        points,
        ops,
    )


def capture_graphs(trace: Trace) -> CaptureGraphs:
    """The graph captures recorded in ``trace`` (module doc); memoised per trace."""
    out: CaptureGraphs = trace.memo("graph_capture", lambda: _compute(trace))
    return out
