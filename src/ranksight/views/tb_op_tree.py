"""The host operator tree of one rank (the TensorBoard plugin's definition), vectorised.

Nodes (``type``):

- ``op``: ``cpu_op`` events (``Operator`` in 2021 traces) that are not ProfilerSteps;
- ``step``: ``ProfilerStep#N`` (``cpu_op`` or ``user_annotation``; never the ``gpu_user_annotation``
  copy newer Kineto writes);
- ``annotation``: ``user_annotation`` events named like a collective (``nccl:all_reduce`` ...);
  other user annotations are not nodes, as in the plugin;
- ``python``: events of category ``python`` (old profiler);
- ``module``: ``python_function`` events with a ``Python module id``.

Nesting, per thread: nodes sorted by (start, −end) form a stack; a node's parent is the innermost
earlier node still open at its start (``start < parent end``). A node that starts inside its
would-be parent but ends after it is **dropped** (the plugin's "ranges on the same thread should
not intersect"), together with nothing else. Computed exactly as the plugin's stack, in one pass
in the Rust core (``_core.nest``).

Duplicate removal (autograd's ``_remove_dup_nodes``): an ``op`` whose only child is an ``op`` of
the same name absorbs it: the child's children become its children and the child's runtimes
replace its own (its own runtimes and those of intermediate absorbed nodes are lost, as in the
plugin).

Runtimes (``cuda_runtime`` and ``cuda_driver`` events) belong to the node whose ``External id``
equals theirs (first such node by event order; External id 0 = no node); without a match, to the
innermost node of their thread open at their start (``node start <= t < node end``). GPU work
(kernels, memcpys, memsets) belongs to the runtime that launched it (``launch_row``).

Per node: ``host_total_ns = end − start``; ``host_self_ns = host_total − Σ children's host total −
Σ own runtimes' durations``; ``device_self_ns = Σ durations of the GPU work of its own runtimes``
(plain sums, concurrent kernels count twice); ``device_total_ns = device_self + Σ children's
device total``; ``tc_self_ns`` / ``tc_total_ns`` the same over kernels using Tensor Cores;
``tc_eligible`` = name eligible, or (``op`` nodes only) a child eligible or a Tensor-Core kernel
launched by the node itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from ranksight import _core
from ranksight.model.derive import STEP_RE
from ranksight.model.kinds import GPU_KINDS, LAUNCH_KINDS
from ranksight.model.taxonomy import tensor_core_mask
from ranksight.model.tensor_cores import tc_eligible_mask
from ranksight.model.trace import Trace
from ranksight.views.enclosing import innermost_enclosing
from ranksight.views.names import values_matching

__all__ = [
    "OpTree",
    "build_op_tree",
    "kernel_owner_names",
    "COLLECTIVE_OP_NAMES",
    "operator_mask",
]

#: The plugin's ten collective names (torch_tb_profiler/profiler/trace.py).
COLLECTIVE_OP_NAMES = tuple(
    f"{lib}:{c}"
    for lib in ("nccl", "gloo")
    for c in ("broadcast", "reduce", "all_reduce", "all_gather", "reduce_scatter")
)
_DATALOADER_RE = r"^enumerate\(DataLoader\)#.*\.__next__$|^enumerate\(DataPipe\)#"
_EXCLUDED_OPS = ("DataParallel.forward", "DistributedDataParallel.forward")


def operator_mask(nodes: pl.DataFrame) -> pl.Expr:
    """The plugin's operator set (``is_operator_node``): ``op`` nodes that are not DataLoader or
    Optimizer nodes and not ``DataParallel.forward`` / ``DistributedDataParallel.forward``. Names
    are tested once per distinct value (``name`` may be categorical or a string)."""
    names = nodes["name"]
    excluded = values_matching(names, _DATALOADER_RE) + values_matching(names, r"^Optimizer\.") + list(_EXCLUDED_OPS)
    return (pl.col("type") == "op") & ~pl.col("name").is_in(excluded)


@dataclass
class OpTree:
    """The tree of one rank.

    ``nodes``: one row per kept, non-absorbed node: ``row, tid, name`` (categorical), ``type, start_ns, end_ns,
    external_id, parent_row`` (null = thread root), ``depth``, ``host_total_ns, host_self_ns,
    device_self_ns, device_total_ns, tc_self_ns, tc_total_ns, tc_eligible``.
    ``runtimes``: ``row`` of each runtime/driver event and ``owner_row`` (null = no node).
    ``dropped``: rows of nodes dropped because they cross a sibling range; ``absorbed``: rows of
    nodes merged into a same-named parent.
    """

    nodes: pl.DataFrame
    runtimes: pl.DataFrame
    dropped: list[int]
    absorbed: list[int]

    def operators(self) -> pl.DataFrame:
        """The plugin's operator set (see :func:`operator_mask`)."""
        return self.nodes.filter(operator_mask(self.nodes))

    def pop_operators(self) -> pl.DataFrame:
        """:meth:`operators`, taking the nodes from the tree (``nodes`` is empty afterwards): the
        copy is made column by column while the tree's columns are let go, so a multi-million-node
        tree is never held twice."""
        nodes, self.nodes = self.nodes, self.nodes.clear()
        keep = nodes.select(operator_mask(nodes)).to_series()
        cols = []
        for c in nodes.columns:
            cols.append(nodes[c].filter(keep))
            nodes = nodes.drop(c)  # the last reference to the full column goes with it
        return pl.DataFrame(cols)


# ---- node selection ------------------------------------------------------------------------------


NODE_TYPES = pl.Enum(["step", "op", "annotation", "python", "module"])


def _select_nodes(trace: Trace) -> pl.DataFrame:
    """Candidate nodes, sorted in the plugin's order; ``name`` stays categorical (strings are made
    only for the final tree) and ``type`` is a small enum."""
    # one lazy query from the events table: only the nodes' columns of the nodes' rows are copied
    ev = trace.scan().filter(
        pl.col("kind").is_in(["cpu_op", "user_annotation", "python_function"]) & pl.col("dur_ns").is_not_null()
    )
    # string tests once per distinct name / category, then by code
    distinct = pl.collect_all([ev.select(pl.col("name").unique()), ev.select(pl.col("cat").unique())])
    step_names = values_matching(distinct[0]["name"], STEP_RE.pattern)
    python_cats = values_matching(distinct[1]["cat"], "(?i)^python$")
    name, kind = pl.col("name"), pl.col("kind")
    is_step = name.is_in(step_names)
    module_rows = pl.Series("row", [], dtype=pl.UInt32)
    opt = trace.table("op")
    if "python_module_id" in opt.columns and opt.height:
        module_rows = opt.filter(pl.col("python_module_id").is_not_null())["row"]

    def lit(v: str) -> pl.Expr:
        return pl.lit(v, dtype=NODE_TYPES)

    typ = (
        pl.when(kind.is_in(["cpu_op", "user_annotation"]) & is_step)
        .then(lit("step"))
        .when(kind == "cpu_op")
        .then(lit("op"))
        .when((kind == "user_annotation") & name.is_in(list(COLLECTIVE_OP_NAMES)))
        .then(lit("annotation"))
        .when((kind == "python_function") & pl.col("cat").is_in(python_cats))
        .then(lit("python"))
        .when((kind == "python_function") & pl.col("row").is_in(module_rows.implode()))
        .then(lit("module"))
        .otherwise(None)
    )
    return (
        ev.select("row", "tid", "name", typ.alias("type"), pl.col("ts_ns").alias("start_ns"), "end_ns", "external_id")
        .filter(pl.col("type").is_not_null())
        .with_columns(pl.max_horizontal("end_ns", "start_ns").alias("end_ns"))
        .sort(["tid", "start_ns", "end_ns", "row"], descending=[False, False, True, False])
        .collect()
    )


# ---- nesting -----------------------------------------------------------------------------------


def _nest(nodes: pl.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Parent index (−1 = root), depth (1 = top level, 0 = dropped) and kept mask: the plugin's
    stack, in one O(n) pass in the Rust core. ``nodes`` are sorted by (tid, start, −end, row), the
    plugin's processing order, so each thread is contiguous."""
    cols = [np.ascontiguousarray(nodes[c].to_numpy(), dtype=np.int64) for c in ("tid", "start_ns", "end_ns")]
    p, d, k = _core.nest(*(c.tobytes() for c in cols))
    return np.frombuffer(p, np.int64), np.frombuffer(d, np.int64), np.frombuffer(k, np.uint8).astype(bool)


def _point_owner(nodes: pl.DataFrame, q: pl.DataFrame) -> np.ndarray:
    """For each query (``tid``, ``t``): the innermost node with ``start <= t < end`` on that thread
    (its index in ``nodes``), or −1. Zero-length nodes contain nothing."""
    if q.height == 0 or nodes.height == 0:
        return np.full(q.height, -1, np.int64)
    idx = innermost_enclosing(
        nodes.select("tid", pl.col("start_ns").alias("ts_ns"), "end_ns"), q.select("tid", pl.col("t").alias("ts_ns"))
    )
    return idx.cast(pl.Int64).fill_null(-1).to_numpy()


# ---- the tree --------------------------------------------------------------------------------


def _absorb(
    parent: np.ndarray, kept: np.ndarray, names: np.ndarray, is_op: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Duplicate removal. Returns ``absorbed`` (merged into the parent), ``top`` (the node a chain
    of absorbed nodes merges into), ``has_absorbed_child`` and the effective parent (−1 = root)."""
    n = parent.size
    k = np.arange(n)
    has_par = (parent >= 0) & kept
    pp = np.where(has_par, parent, 0)
    child_count = np.bincount(pp[has_par], minlength=n)
    absorbed = has_par & (child_count[pp] == 1) & is_op & is_op[pp] & (names == names[pp])
    top = np.where(absorbed, pp, k)
    while absorbed[top].any():  # one level per round; chains are short
        top = np.where(absorbed[top], pp[top], top)
    has_absorbed_child = np.zeros(n, dtype=bool)
    has_absorbed_child[pp[absorbed]] = True
    eff_parent = np.where(has_par, np.where(absorbed[pp], top[pp], pp), -1)
    return absorbed, top, has_absorbed_child, eff_parent


def _runtime_owners(trace: Trace, nodes: pl.DataFrame) -> pl.DataFrame:
    """Runtime/driver calls with the index of their node (−1 = none) before duplicate removal:
    by ``External id`` (0 = none), else by time nesting on their thread."""
    rts = (
        trace.kind(*LAUNCH_KINDS, columns=["row", "tid", "ts_ns", "dur_ns", "external_id"])
        .filter(pl.col("dur_ns").is_not_null())
        .select("row", "tid", pl.col("ts_ns").alias("t"), "dur_ns", "external_id")
    )
    # external id -> node (the first kept node by row carrying it), sorted by id for a binary
    # search (a hash join of millions of runtimes against millions of nodes is far larger)
    ext_map = (
        nodes.lazy()
        .with_row_index("k")
        .filter(pl.col("kept") & pl.col("external_id").is_not_null() & (pl.col("external_id") != 0))
        .select("external_id", "row", "k")
        .sort("row")
        .unique("external_id", keep="first", maintain_order=True)
        .sort("external_id")
        .collect()
    )
    ids = ext_map["external_id"]
    q = rts["external_id"]
    if ids.len():
        pos = ids.search_sorted(q.fill_null(0)).clip(0, ids.len() - 1)
        hit = (ids.gather(pos) == q).fill_null(False).to_numpy()
        owner = np.where(hit, ext_map["k"].gather(pos).to_numpy().astype(np.int64), -1)
        del pos
    else:
        hit = np.zeros(rts.height, dtype=bool)
        owner = np.full(rts.height, -1, np.int64)
    del ext_map, ids
    need = np.flatnonzero(~hit & (q.is_null() | (q != 0)).to_numpy())
    del hit, q
    if need.size:
        indexed = (
            nodes.lazy().with_row_index("k").filter(pl.col("kept")).select("k", "tid", "start_ns", "end_ns").collect()
        )
        kept_idx = indexed["k"].to_numpy().astype(np.int64)
        local = _point_owner(indexed.drop("k"), rts.select("tid", "t")[need])
        del indexed
        owner[need] = np.where(local >= 0, kept_idx[np.maximum(local, 0)], -1)
    return rts.select("row", "dur_ns", pl.Series("owner", owner))


def _device_per_runtime(trace: Trace, tensor_core_rules: str) -> pl.DataFrame:
    """Per launching call (``row``): Σ duration of its GPU work (``dev``) and of its Tensor Core
    kernels (``tcd``)."""
    gpu = trace.kind(*GPU_KINDS, columns=["launch_row", "dur_ns", "name", "kind"]).filter(
        pl.col("launch_row").is_not_null() & pl.col("dur_ns").is_not_null()
    )
    tc = tensor_core_mask(gpu["name"], tensor_core_rules) & (gpu["kind"] == "kernel")
    return (
        gpu.select(pl.col("launch_row").alias("row"), "dur_ns", tc.alias("tc"))
        .group_by("row")
        .agg(pl.col("dur_ns").sum().alias("dev"), pl.col("dur_ns").filter(pl.col("tc")).sum().alias("tcd"))
    )


def build_op_tree(trace: Trace, *, tensor_core_rules: str = "current") -> OpTree:
    """The operator tree of one trace with the plugin's per-node statistics (module doc)."""
    nodes = _select_nodes(trace)
    if nodes.height == 0:
        return _empty_tree(trace)
    parent, depth, kept = _nest(nodes)
    nodes = nodes.with_columns(pl.Series("kept", kept))
    n = nodes.height
    rows = nodes["row"].to_numpy()
    is_op = (nodes["type"] == "op").to_numpy()
    # names compared by code (no Python string per node)
    name_codes = nodes["name"].cast(pl.Categorical).to_physical().to_numpy()
    absorbed, top, has_absorbed_child, eff_parent = _absorb(parent, kept, name_codes, is_op)
    del name_codes, parent
    live = kept & ~absorbed
    # runtimes: the owner of an absorbed chain's deepest node's runtimes is the chain's top; the
    # runtimes of the other chain members are lost (as in the plugin)
    rts = _runtime_owners(trace, nodes)
    owner = rts["owner"].to_numpy()
    o = np.maximum(owner, 0)
    owner = np.where((owner >= 0) & ~has_absorbed_child[o], top[o], -1)
    rts = rts.with_columns(pl.Series("owner", owner)).join(
        _device_per_runtime(trace, tensor_core_rules), on="row", how="left"
    )
    owned = rts.filter(pl.col("owner") >= 0).with_columns(pl.col("dev").fill_null(0), pl.col("tcd").fill_null(0))
    oi = owned["owner"].to_numpy()
    rt_dur = np.bincount(oi, weights=owned["dur_ns"].to_numpy(), minlength=n).astype(np.int64)
    dev_self = np.bincount(oi, weights=owned["dev"].to_numpy(), minlength=n).astype(np.int64)
    tc_self = np.bincount(oi, weights=owned["tcd"].to_numpy(), minlength=n).astype(np.int64)
    # host times
    total = nodes["end_ns"].to_numpy() - nodes["start_ns"].to_numpy()
    child = live & (eff_parent >= 0)
    ep = np.where(child, eff_parent, 0)
    host_self = total - np.bincount(ep[child], weights=total[child], minlength=n).astype(np.int64) - rt_dur
    del rt_dur, owned, oi, o
    # bottom-up sums and eligibility, one depth level at a time (children are always deeper)
    dev_total, tc_total = dev_self.copy(), tc_self.copy()
    eligible = tc_eligible_mask(nodes["name"], tensor_core_rules).to_numpy().copy() | (is_op & (tc_self > 0))
    for lvl in np.unique(depth[child])[::-1]:
        at = np.flatnonzero(child & (depth == lvl))
        tgt = ep[at]
        np.add.at(dev_total, tgt, dev_total[at])
        np.add.at(tc_total, tgt, tc_total[at])
        eligible[tgt[eligible[at] & is_op[tgt]]] = True
    # the output holds live nodes only: each array is cut to them before it becomes a column, and
    # the full-length arrays are freed first (a multi-million-node tree is built once)
    keep = np.flatnonzero(live)
    parent_row = np.where(eff_parent >= 0, rows[np.maximum(eff_parent, 0)], -1)[keep]
    cols = {
        "depth": depth,
        "host_total_ns": total,
        "host_self_ns": host_self,
        "device_self_ns": dev_self,
        "device_total_ns": dev_total,
        "tc_self_ns": tc_self,
        "tc_total_ns": tc_total,
        "tc_eligible": eligible,
    }
    cols = {k: v[keep] for k, v in cols.items()}
    del (
        depth,
        total,
        host_self,
        dev_self,
        dev_total,
        tc_self,
        tc_total,
        eligible,
        ep,
        child,
        eff_parent,
        top,
        has_absorbed_child,
    )
    out = nodes.select("row", "tid", "name", "type", "start_ns", "end_ns", "external_id").filter(pl.Series(live))
    out = out.with_columns(
        pl.Series("parent_row", parent_row),
        *[pl.Series(k, v) for k, v in cols.items()],
    )
    del cols, parent_row
    out = out.with_columns(
        pl.when(pl.col("parent_row") >= 0)
        .then(pl.col("parent_row"))
        .otherwise(None)
        .cast(pl.UInt32)
        .alias("parent_row"),
        pl.col("type").cast(pl.String),
    ).select(
        "row",
        "tid",
        "name",
        "type",
        "start_ns",
        "end_ns",
        "external_id",
        "parent_row",
        "depth",
        "host_total_ns",
        "host_self_ns",
        "device_self_ns",
        "device_total_ns",
        "tc_self_ns",
        "tc_total_ns",
        "tc_eligible",
    )
    owner_row = np.where(owner >= 0, rows[np.maximum(owner, 0)], -1)
    runtimes = rts.select("row", pl.Series("owner_row", owner_row)).with_columns(
        pl.when(pl.col("owner_row") >= 0).then(pl.col("owner_row")).otherwise(None).cast(pl.UInt32).alias("owner_row")
    )
    return OpTree(out, runtimes, rows[~kept].tolist(), rows[absorbed].tolist())


def _empty_tree(trace: Trace) -> OpTree:
    nodes = pl.DataFrame(
        schema={
            "row": pl.UInt32,
            "tid": pl.Int64,
            "name": pl.Categorical,
            "type": pl.String,
            "start_ns": pl.Int64,
            "end_ns": pl.Int64,
            "external_id": pl.Int64,
            "parent_row": pl.UInt32,
            "depth": pl.Int64,
            "host_total_ns": pl.Int64,
            "host_self_ns": pl.Int64,
            "device_self_ns": pl.Int64,
            "device_total_ns": pl.Int64,
            "tc_self_ns": pl.Int64,
            "tc_total_ns": pl.Int64,
            "tc_eligible": pl.Boolean,
        }
    )
    rts = trace.kind(*LAUNCH_KINDS, columns=["row"]).with_columns(pl.lit(None, pl.UInt32).alias("owner_row"))
    return OpTree(nodes, rts, [], [])


def kernel_owner_names(trace: Trace, tree: OpTree) -> pl.DataFrame:
    """``row`` of each GPU activity and ``op`` = name of the node that owns its launching runtime
    (null when the launch has no node)."""
    names = tree.nodes.select(pl.col("row").alias("owner_row"), pl.col("name").alias("op"))
    rt = tree.runtimes.join(names, on="owner_row", how="left").select(pl.col("row").alias("launch_row"), "op")
    return (
        trace.kind(*GPU_KINDS, columns=["row", "launch_row"])
        .join(rt, on="launch_row", how="left", maintain_order="left")
        .select("row", pl.col("op").cast(pl.String))
    )
