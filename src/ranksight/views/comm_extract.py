"""Per-rank extraction of collectives: a pure function of one :class:`Trace` that returns a compact
table (one row per collective occurrence on that rank). Cross-rank analyses reduce these tables;
they never hold the events of several ranks at once.

Sources
-------
- **GPU**: every kernel whose ``kernel_class`` is ``COMMUNICATION`` (NCCL/RCCL/HCCL kernels,
  custom all-reduce and multimem kernels, kernels carrying collective args). Start/end are the
  kernel's; ``launch_ns`` is the start of the runtime call that launched it.
- **CPU (gloo)**: every ``gloo:*`` annotation (the collective as executed on a gloo thread); its
  ``launch_ns`` is the start of the k-th ``c10d::*`` op of the same type on the rank that did not
  launch a GPU collective (the k-th gloo collective of a type is the k-th enqueued one).

Metadata, first match wins (``type_rule`` / ``size_rule`` record which fired):
``kernel_args`` (collective args on the kernel row) > ``record_param_comms`` (its collective args)
> ``nccl_annotation`` / ``c10d_op`` (the op names and their ``Input Dims`` / ``Input type``, found
by time containment of the launch on the launching thread) > ``custom_op`` (``symm_mem::*``,
``vllm::*``, ``_C_custom_ar::*`` collective ops around custom kernels) > ``kernel_name``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import polars as pl

from ranksight.views.comm_types import canonical_type, dtype_bytes, kernel_name_details, numel_args
from ranksight.views.event_source import CannotStack, EventSource
from ranksight.views.rank_slices import RankSlices, seed_memos

if TYPE_CHECKING:
    from ranksight.model.meta import TraceMeta
    from ranksight.model.trace import Trace

__all__ = ["rank_collectives", "seed_rank_collectives", "SCHEMA", "empty_table"]

SCHEMA: dict[str, Any] = {
    "rank": pl.Int32,
    "host": pl.String,
    "idx": pl.Int64,
    "source": pl.String,
    "row": pl.Int64,
    "name": pl.String,
    "coll_type": pl.String,
    "type_rule": pl.String,
    "pg_name": pl.String,
    "pg_desc": pl.String,
    "group_size": pl.Int64,
    "group_rule": pl.String,
    "group_ranks": pl.String,
    "seq": pl.Int64,
    "in_nelems": pl.Int64,
    "out_nelems": pl.Int64,
    "dtype": pl.String,
    "elem_bytes": pl.Int64,
    "bytes": pl.Int64,
    "size_rule": pl.String,
    "algorithm": pl.String,
    "protocol": pl.String,
    "src_rank": pl.Int64,
    "dst_rank": pl.Int64,
    "in_split": pl.String,
    "out_split": pl.String,
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "dur_ns": pl.Int64,
    "launch_ns": pl.Int64,
    "launch_tid": pl.Int64,
    "stream": pl.Int64,
    "step": pl.Int32,
}

#: Host-side collective calls: the CPU ops read as collective ops (also what idle-causes and
#: diagnose call a collective on the host).
COLLECTIVE_OP_RE = r"^(record_param_comms$|nccl:|c10d::|gloo:|symm_mem::|vllm::|_C_custom_ar::)"
_COMM_OP_RE = re.compile(COLLECTIVE_OP_RE)
_CUSTOM_PREFIXES = ("symm_mem::", "vllm::", "_C_custom_ar::")
_P2P_NAME_RE = re.compile(r"(\d+)\s*(->|<-)\s*(\d+)")


def empty_table() -> pl.DataFrame:
    return pl.DataFrame(schema=SCHEMA)


def rank_collectives(trace: Trace) -> pl.DataFrame:
    """Every collective of one rank, in start order (schema :data:`SCHEMA`). Cached per trace."""
    return trace.memo("collectives", lambda: _collectives(EventSource.one(trace)))


def seed_rank_collectives(traces: list[Trace], stacked: pl.DataFrame) -> None:
    """Give each trace its :func:`rank_collectives` table from one pass over their stacked events
    (``stacked``: a ``rank`` column, :meth:`Session.stacked_events
    <ranksight.analyses.Session.stacked_events>`; issue 19): the same queries as for one rank,
    keyed by rank, each distinct op shape parsed once for the run; the tables are those of the
    per-rank computation. Traces that already have theirs keep it; ranks whose side tables cannot
    be stacked are left to the per-rank computation."""
    traces = [t for t in traces if not t.has_memo("collectives")]
    if len(traces) < 2:
        return
    try:
        df = _collectives(EventSource.stacked(traces, stacked))
    except CannotStack:
        return
    parts = RankSlices(df)
    seed_memos(traces, "collectives", parts)


def _collectives(src: EventSource) -> pl.DataFrame:
    ops: list[pl.DataFrame] = []  # the comm ops, read once when first needed

    def comm_ops() -> pl.DataFrame:
        if not ops:
            ops.append(_dims_cols(_comm_ops(src)))
        return ops[0]

    gpu = _gpu_collectives(src, comm_ops)
    cpu = _gloo_collectives(src, gpu, comm_ops)
    df = pl.concat([gpu[0], cpu], how="vertical_relaxed") if cpu.height else gpu[0]
    return _finish(src, df)


# ---- helpers ------------------------------------------------------------------------------


#: Up to this many values, :func:`_map_distinct` maps in Python (a dict of the distinct values)
#: instead of two polars queries (~0.2 ms each: most of a small rank's collectives' time).
_MAP_IN_PYTHON_MAX = 4096


def _map_distinct(s: pl.Series, fn: Callable[[Any], Any], dtype: Any) -> pl.Series:
    """``fn`` applied once per distinct value of ``s`` (a few distinct op shapes), broadcast back."""
    s = s.cast(pl.String)
    if s.len() <= _MAP_IN_PYTHON_MAX:
        seen: dict[str, Any] = {}
        out = [None if v is None else seen[v] if v in seen else seen.setdefault(v, fn(v)) for v in s.to_list()]
        return pl.Series(s.name, out, dtype=dtype)
    keys = s.unique().drop_nulls().to_list()
    if not keys:
        return pl.Series(s.name, [None] * s.len(), dtype=dtype)
    table = pl.DataFrame({"k": keys, "v": pl.Series([fn(k) for k in keys], dtype=dtype)})
    return pl.DataFrame({"k": s}).join(table, on="k", how="left", maintain_order="left")["v"].alias(s.name)


@lru_cache(maxsize=4096)
def _first_dtype(input_type: str | None) -> str | None:
    """The first tensor dtype of an ``Input type`` list (skips ``Scalar``, ``TensorList``, "")."""
    if not input_type:
        return None
    try:
        v = json.loads(input_type)
    except ValueError:
        return None
    if not isinstance(v, list):
        return None
    for t in v:
        if isinstance(t, str) and t and t not in ("Scalar", "TensorList", "ScalarList", "GenericList", "None"):
            return t
    return None


def _ctype(col: str) -> pl.Expr:
    """Canonical type of a name column, null when unknown."""
    return pl.col(col).map_batches(
        lambda s: _map_distinct(s, lambda n: (lambda t: None if t == "unknown" else t)(canonical_type(n)), pl.String),
        return_dtype=pl.String,
    )


def _comm_ops(src: EventSource) -> pl.DataFrame:
    """CPU-side comm ops (record_param_comms, nccl:*, c10d::*, gloo:*) with their args; categorical
    columns as strings."""
    names = src.names_matching(_COMM_OP_RE.pattern)
    q = src.ev.filter(pl.col("kind").is_in(["cpu_op", "user_annotation"]) & pl.col("name").is_in(names))
    ops = src.with_args(
        q.select(*src.by, "row", "name", "kind", pl.col("tid").cast(pl.Int64), "ts_ns", "end_ns", "step").collect(),
        "collective",
        "op",
    )
    schema = ops.schema
    return ops.with_columns(
        pl.col(c).cast(pl.String) for c, t in schema.items() if isinstance(t, (pl.Categorical, pl.Enum))
    )


def _dims_cols(ops: pl.DataFrame) -> pl.DataFrame:
    """``arg0_nelems``, ``arg1_nelems`` and ``arg_dtype`` from Input Dims / Input type."""
    dims = ops["input_dims"] if "input_dims" in ops.columns else pl.Series([None] * ops.height, dtype=pl.String)
    types = ops["input_type"] if "input_type" in ops.columns else pl.Series([None] * ops.height, dtype=pl.String)
    a0 = _map_distinct(dims, lambda d: numel_args(d)[0], pl.Int64)
    a1 = _map_distinct(dims, lambda d: numel_args(d)[1], pl.Int64)
    dt = _map_distinct(types, _first_dtype, pl.String)
    return ops.with_columns(a0.alias("arg0_nelems"), a1.alias("arg1_nelems"), dt.alias("arg_dtype"))


def _enclosing(launches: pl.DataFrame, ops: pl.DataFrame, prefix: str, cols: list[str], by: list[str]) -> pl.DataFrame:
    """For each launch, the latest-starting op of ``ops`` on the same thread (of the same rank:
    ``by``) that contains it."""
    if ops.height == 0 or launches.height == 0:
        schema = ops.schema
        return launches.with_columns(
            [pl.lit(None, dtype=schema.get(c, pl.String)).alias(f"{prefix}{c}") for c in cols]
            + [pl.lit(None, dtype=pl.Int64).alias(f"{prefix}row")]
        )
    right = ops.select(
        *by,
        pl.col("tid").alias("launch_tid"),
        pl.col("ts_ns").alias("__ts"),
        pl.col("end_ns").alias("__end"),
        pl.col("row").cast(pl.Int64).alias(f"{prefix}row"),
        *[pl.col(c).alias(f"{prefix}{c}") for c in cols],
    ).sort("__ts")
    j = launches.sort("launch_ns").join_asof(
        right, left_on="launch_ns", right_on="__ts", by=[*by, "launch_tid"], strategy="backward", check_sortedness=False
    )
    inside = pl.col("__end") >= pl.col("launch_ns")
    return j.with_columns(
        [pl.when(inside).then(pl.col(f"{prefix}{c}")).otherwise(None).alias(f"{prefix}{c}") for c in cols + ["row"]]
    ).drop("__ts", "__end")


_ARG_COLS = [
    "collective_name",
    "in_msg_nelems",
    "out_msg_nelems",
    "dtype",
    "group_size",
    "pg_name",
    "pg_desc",
    "pg_ranks",
    "seq",
    "in_split_size",
    "out_split_size",
    "src_rank",
    "dst_rank",
]


def _gpu_collectives(src: EventSource, comm_ops: Callable[[], pl.DataFrame]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The GPU collectives (before :func:`_finish`) and the ``(*by, row)`` of the ``c10d::`` ops
    that gave a kernel its metadata (the gloo pass leaves those out)."""
    by = src.by
    k = (
        src.ev.filter(
            (pl.col("kind") == "kernel") & (pl.col("kernel_class") == "COMMUNICATION") & pl.col("dur_ns").is_not_null()
        )
        .select(*by, "row", pl.col("name").cast(pl.String), "ts_ns", "end_ns", "dur_ns", "stream", "step", "launch_row")
        .collect()
    )
    used = pl.DataFrame(schema={**{c: pl.Int32 for c in by}, "row": pl.Int64})
    if k.height == 0:
        return _empty_raw(by), used
    k = src.with_args(k, "collective").with_columns(
        pl.col(c).cast(pl.String)
        for c in ("collective_name", "dtype", "pg_name", "pg_desc", "pg_ranks", "in_split_size", "out_split_size")
    )
    wanted = k.select(*by, "launch_row").drop_nulls().unique()
    launch = (
        src.ev.select(
            *by,
            pl.col("row").alias("launch_row"),
            pl.col("ts_ns").alias("launch_ns"),
            pl.col("tid").cast(pl.Int64).alias("launch_tid"),
        )
        .join(wanted.lazy(), on=[*by, "launch_row"], how="semi")
        .collect()
    )
    k = k.join(launch, on=[*by, "launch_row"], how="left", maintain_order="left")
    ops = comm_ops()
    rpc = ops.filter((pl.col("name") == "record_param_comms") & pl.col("collective_name").is_not_null())
    ann = ops.filter(pl.col("name").str.starts_with("nccl:"))
    c10 = ops.filter(pl.col("name").str.starts_with("c10d::"))
    cus = ops.filter(
        pl.col("name").str.starts_with(_CUSTOM_PREFIXES[0])
        | pl.col("name").str.starts_with(_CUSTOM_PREFIXES[1])
        | pl.col("name").str.starts_with(_CUSTOM_PREFIXES[2])
    )
    cus = cus.filter(_ctype("name").is_in(["all_reduce", "all_gather", "reduce_scatter", "all_to_all"]))
    linked = k.filter(pl.col("launch_ns").is_not_null())
    linked = _enclosing(linked, rpc, "rpc_", _ARG_COLS, by)
    linked = _enclosing(linked, ann, "ann_", ["name", "arg0_nelems", "arg_dtype"], by)
    linked = _enclosing(linked, c10, "c10_", ["name", "arg0_nelems", "arg1_nelems", "arg_dtype"], by)
    linked = _enclosing(linked, cus, "cus_", ["name", "arg0_nelems", "arg_dtype"], by)
    unlinked = k.filter(pl.col("launch_ns").is_null())
    k = pl.concat([linked, unlinked], how="diagonal_relaxed")
    if "c10_row" in k.columns:
        used = k.select(*by, pl.col("c10_row").cast(pl.Int64).alias("row")).drop_nulls()
    return _resolve_gpu(k, by), used


def _resolve_gpu(k: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """Apply the precedence rules to the candidate metadata columns."""
    ints = {
        "rpc_in_msg_nelems",
        "rpc_out_msg_nelems",
        "rpc_group_size",
        "rpc_seq",
        "rpc_src_rank",
        "rpc_dst_rank",
        "ann_arg0_nelems",
        "c10_arg0_nelems",
        "c10_arg1_nelems",
        "cus_arg0_nelems",
    }
    extra = [
        "ann_name",
        "ann_arg0_nelems",
        "ann_arg_dtype",
        "c10_name",
        "c10_arg0_nelems",
        "c10_arg1_nelems",
        "c10_arg_dtype",
        "cus_name",
        "cus_arg0_nelems",
        "cus_arg_dtype",
    ]
    schema = k.schema
    fix = []
    for c in ["rpc_" + a for a in _ARG_COLS] + extra:
        want = pl.Int64 if c in ints else pl.String
        if c not in schema:
            fix.append(pl.lit(None, dtype=want).alias(c))
        elif schema[c] != want:
            fix.append(pl.col(c).cast(want))
    k = k.with_columns(fix)
    k = k.with_columns(
        _ctype("collective_name").alias("__t_kernel"),
        _ctype("rpc_collective_name").alias("__t_rpc"),
        _ctype("ann_name").alias("__t_ann"),
        _ctype("c10_name").alias("__t_c10"),
        _ctype("cus_name").alias("__t_cus"),
        _ctype("name").alias("__t_name"),
    )
    type_rules = [
        ("__t_kernel", "kernel_args"),
        ("__t_rpc", "record_param_comms"),
        ("__t_ann", "nccl_annotation"),
        ("__t_c10", "c10d_op"),
        ("__t_cus", "custom_op"),
        ("__t_name", "kernel_name"),
    ]
    k = k.with_columns(
        pl.coalesce([pl.col(c) for c, _ in type_rules]).fill_null("unknown").alias("coll_type"),
        pl.coalesce([pl.when(pl.col(c).is_not_null()).then(pl.lit(r)) for c, r in type_rules])
        .fill_null("kernel_name")
        .alias("type_rule"),
    )
    # c10d ops: gather/scatter/all_to_all take (output, input); others (tensors)
    c10_out_first = pl.col("c10_name").str.contains("gather|scatter|alltoall")
    c10_in = pl.when(c10_out_first).then(pl.col("c10_arg1_nelems")).otherwise(pl.col("c10_arg0_nelems"))
    c10_out = pl.col("c10_arg0_nelems")
    size_rules = [
        (pl.col("in_msg_nelems"), pl.col("out_msg_nelems"), "kernel_args"),
        (pl.col("rpc_in_msg_nelems"), pl.col("rpc_out_msg_nelems"), "record_param_comms"),
        (c10_in, c10_out, "c10d_op"),
        (pl.col("ann_arg0_nelems"), pl.lit(None, dtype=pl.Int64), "nccl_annotation"),
        (pl.col("cus_arg0_nelems"), pl.lit(None, dtype=pl.Int64), "custom_op"),
    ]
    has = [(i.is_not_null() | o.is_not_null()) for i, o, _ in size_rules]
    k = k.with_columns(
        pl.coalesce([pl.when(h).then(i) for h, (i, _, _) in zip(has, size_rules, strict=True)])
        .cast(pl.Int64)
        .alias("in_nelems"),
        pl.coalesce([pl.when(h).then(o) for h, (_, o, _) in zip(has, size_rules, strict=True)])
        .cast(pl.Int64)
        .alias("out_nelems"),
        pl.coalesce([pl.when(h).then(pl.lit(r)) for h, (_, _, r) in zip(has, size_rules, strict=True)]).alias(
            "size_rule"
        ),
    )
    algo = _map_distinct(k["name"], lambda n: kernel_name_details(n)[0], pl.String)
    proto = _map_distinct(k["name"], lambda n: kernel_name_details(n)[1], pl.String)
    kdt = _map_distinct(k["name"], lambda n: kernel_name_details(n)[2], pl.String)
    ann_peers = _map_distinct(k["ann_name"], _p2p_peers_text, pl.String)
    k = k.with_columns(algo.alias("algorithm"), proto.alias("protocol"), kdt.alias("__kdt"), ann_peers.alias("__peers"))
    return k.select(
        *by,
        pl.lit("kernel").alias("source"),
        pl.col("row").cast(pl.Int64),
        "name",
        "coll_type",
        "type_rule",
        pl.coalesce("pg_name", "rpc_pg_name").alias("pg_name"),
        pl.coalesce("pg_desc", "rpc_pg_desc").alias("pg_desc"),
        pl.coalesce("group_size", "rpc_group_size").cast(pl.Int64).alias("group_size"),
        pl.when(pl.col("group_size").is_not_null())
        .then(pl.lit("kernel_args"))
        .when(pl.col("rpc_group_size").is_not_null())
        .then(pl.lit("record_param_comms"))
        .otherwise(None)
        .alias("group_rule"),
        pl.coalesce("pg_ranks", "rpc_pg_ranks").alias("group_ranks"),
        pl.coalesce("seq", "rpc_seq").cast(pl.Int64).alias("seq"),
        "in_nelems",
        "out_nelems",
        pl.coalesce("dtype", "rpc_dtype", "c10_arg_dtype", "ann_arg_dtype", "cus_arg_dtype", "__kdt").alias("dtype"),
        "size_rule",
        "algorithm",
        "protocol",
        pl.coalesce(
            "src_rank", "rpc_src_rank", pl.col("__peers").str.split(",").list.get(0, null_on_oob=True).cast(pl.Int64)
        )
        .cast(pl.Int64)
        .alias("src_rank"),
        pl.coalesce(
            "dst_rank", "rpc_dst_rank", pl.col("__peers").str.split(",").list.get(1, null_on_oob=True).cast(pl.Int64)
        )
        .cast(pl.Int64)
        .alias("dst_rank"),
        pl.coalesce("in_split_size", "rpc_in_split_size").alias("in_split"),
        pl.coalesce("out_split_size", "rpc_out_split_size").alias("out_split"),
        pl.col("ts_ns").alias("start_ns"),
        "end_ns",
        "dur_ns",
        "launch_ns",
        "launch_tid",
        pl.col("stream").cast(pl.Int64),
        pl.col("step").cast(pl.Int32),
    )


@lru_cache(maxsize=1024)
def _p2p_peers_text(name: str | None) -> str | None:
    """``nccl:send 0->1`` → "0,1"; ``nccl:recv 0<-1`` → "1,0" (src,dst)."""
    if not name:
        return None
    m = _P2P_NAME_RE.search(name)
    if not m:
        return None
    a, arrow, b = m.groups()
    return f"{a},{b}" if arrow == "->" else f"{b},{a}"


def _empty_raw(by: list[str]) -> pl.DataFrame:
    cols = {c: t for c, t in SCHEMA.items() if c in by or c not in ("rank", "host", "idx", "elem_bytes", "bytes")}
    return pl.DataFrame(schema=cols)


def _gloo_collectives(
    src: EventSource, gpu: tuple[pl.DataFrame, pl.DataFrame], comm_ops: Callable[[], pl.DataFrame]
) -> pl.DataFrame:
    by = src.by
    if not src.names_matching(r"^gloo:"):
        return _empty_raw(by)
    ops = comm_ops()
    gl = ops.filter(pl.col("name").str.starts_with("gloo:")).with_columns(
        _ctype("name").fill_null("unknown").alias("coll_type")
    )
    c10 = ops.filter(pl.col("name").str.starts_with("c10d::")).with_columns(pl.col("row").cast(pl.Int64))
    c10 = c10.join(gpu[1], on=[*by, "row"], how="anti", maintain_order="left")
    c10 = c10.with_columns(_ctype("name").fill_null("unknown").alias("coll_type"))
    gl = gl.sort([*by, "ts_ns"], maintain_order=True).with_columns(
        pl.int_range(pl.len()).over([*by, "coll_type"]).alias("__k")
    )
    c10 = (
        c10.sort([*by, "ts_ns"], maintain_order=True)
        .with_columns(pl.int_range(pl.len()).over([*by, "coll_type"]).alias("__k"))
        .select(
            *by,
            "coll_type",
            "__k",
            pl.col("ts_ns").alias("launch_ns"),
            pl.col("tid").alias("launch_tid"),
            pl.col("name").alias("c10_name"),
            pl.col("arg0_nelems").alias("c10_a0"),
            pl.col("arg1_nelems").alias("c10_a1"),
        )
    )
    gl = gl.join(c10, on=[*by, "coll_type", "__k"], how="left", maintain_order="left")
    out_first = pl.col("c10_name").str.contains("gather|scatter|alltoall").fill_null(False)
    return gl.select(
        *by,
        pl.lit("cpu").alias("source"),
        pl.col("row").cast(pl.Int64),
        "name",
        "coll_type",
        pl.lit("gloo_annotation").alias("type_rule"),
        pl.lit(None, dtype=pl.String).alias("pg_name"),
        pl.lit(None, dtype=pl.String).alias("pg_desc"),
        pl.lit(None, dtype=pl.Int64).alias("group_size"),
        pl.lit(None, dtype=pl.String).alias("group_rule"),
        pl.lit(None, dtype=pl.String).alias("group_ranks"),
        pl.lit(None, dtype=pl.Int64).alias("seq"),
        pl.coalesce(pl.col("arg0_nelems"), pl.when(out_first).then(pl.col("c10_a1")).otherwise(pl.col("c10_a0"))).alias(
            "in_nelems"
        ),
        pl.when(out_first).then(pl.col("c10_a0")).otherwise(None).cast(pl.Int64).alias("out_nelems"),
        pl.col("arg_dtype").alias("dtype"),
        pl.when(pl.col("arg0_nelems").is_not_null())
        .then(pl.lit("gloo_annotation"))
        .when(pl.col("c10_a0").is_not_null())
        .then(pl.lit("c10d_op"))
        .otherwise(None)
        .alias("size_rule"),
        pl.lit(None, dtype=pl.String).alias("algorithm"),
        pl.lit(None, dtype=pl.String).alias("protocol"),
        pl.lit(None, dtype=pl.Int64).alias("src_rank"),
        pl.lit(None, dtype=pl.Int64).alias("dst_rank"),
        pl.lit(None, dtype=pl.String).alias("in_split"),
        pl.lit(None, dtype=pl.String).alias("out_split"),
        pl.col("ts_ns").alias("start_ns"),
        "end_ns",
        (pl.col("end_ns") - pl.col("ts_ns")).alias("dur_ns"),
        pl.coalesce("launch_ns", "ts_ns").alias("launch_ns"),
        pl.coalesce("launch_tid", "tid").alias("launch_tid"),
        pl.lit(None, dtype=pl.Int64).alias("stream"),
        pl.col("step").cast(pl.Int32),
    )


def _default_pg(meta: TraceMeta) -> tuple[str, str, int | None, str | None]:
    """(name, desc, size, ranks text) of the default process group, from ``pg_config`` or assumed."""
    for pg in meta.process_groups:
        if pg.desc == "default_pg" or pg.name == "0":
            return pg.name, pg.desc, pg.size, json.dumps(list(pg.ranks)) if pg.ranks else None
    return "0", "default_pg (assumed)", meta.world_size, None


def _finish(src: EventSource, df: pl.DataFrame) -> pl.DataFrame:
    """Fill process-group defaults (from each rank's ``pg_config`` and world size), element sizes
    and bytes; add rank, host and order."""
    if df.height == 0:
        return empty_table()
    if not src.by:
        df = _with_groups(df, src.traces[0].meta)
        df = df.with_columns(
            pl.lit(src.traces[0].rank, dtype=pl.Int32).alias("rank"),
            pl.lit(src.traces[0].meta.host_name, dtype=pl.String).alias("host"),
        )
    else:  # the ranks that declare the same process groups and world size filled together
        same: dict[tuple[Any, ...], list[int]] = {}
        for t in src.traces:
            same.setdefault((tuple(t.meta.process_groups), t.meta.world_size), []).append(t.rank)
        metas = {t.rank: t.meta for t in src.traces}
        parts = [
            _with_groups(df if len(same) == 1 else df.filter(pl.col("rank").is_in(rs)), metas[rs[0]])
            for rs in same.values()
        ]
        hosts = {t.rank: t.meta.host_name for t in src.traces}
        df = pl.concat(parts) if len(parts) > 1 else parts[0]
        df = df.with_columns(pl.col("rank").replace_strict(hosts, return_dtype=pl.String).alias("host"))
    eb = _map_distinct(df["dtype"], dtype_bytes, pl.Int64).alias("elem_bytes")
    df = df.with_columns(eb)
    df = df.with_columns(_bytes_expr().alias("bytes"))
    df = df.sort([*src.by, "start_ns", "row"])
    idx = pl.int_range(pl.len(), dtype=pl.Int64)
    df = df.with_columns((idx.over(src.by) if src.by else idx).alias("idx"))
    return df.select([pl.col(c).cast(t) for c, t in SCHEMA.items()])


def _with_groups(df: pl.DataFrame, meta: TraceMeta) -> pl.DataFrame:
    """``pg_name``/``pg_desc`` defaulted and ``group_size``/``group_rule``/``group_ranks`` filled
    from one rank's metadata (``pg_config``, world size)."""
    pg_name, pg_desc, pg_size, pg_ranks = _default_pg(meta)
    sizes = {pg.name: pg.size for pg in meta.process_groups if pg.size}
    ranks = {pg.name: json.dumps(list(pg.ranks)) for pg in meta.process_groups if pg.ranks}
    assumed = pl.col("pg_name").is_null()
    df = df.with_columns(
        pl.col("pg_name").fill_null(pg_name),
        pl.when(assumed).then(pl.lit(pg_desc)).otherwise(pl.col("pg_desc")).alias("pg_desc"),
    )
    cfg_size = (
        pl.col("pg_name").replace_strict(sizes, default=None, return_dtype=pl.Int64)
        if sizes
        else pl.lit(None, dtype=pl.Int64)
    )
    cfg_ranks = (
        pl.col("pg_name").replace_strict(ranks, default=None, return_dtype=pl.String)
        if ranks
        else pl.lit(None, dtype=pl.String)
    )
    ratio = _size_ratio()
    world = pl.lit(meta.world_size if pg_desc.endswith("(assumed)") else pg_size, dtype=pl.Int64)
    return df.with_columns(
        pl.coalesce("group_size", cfg_size, ratio, world).alias("group_size"),
        pl.coalesce(
            "group_rule",
            pl.when(cfg_size.is_not_null()).then(pl.lit("pg_config")),
            pl.when(ratio.is_not_null()).then(pl.lit("out/in ratio")),
            pl.when(world.is_not_null()).then(pl.lit("world_size")),
        ).alias("group_rule"),
        pl.coalesce(
            "group_ranks", cfg_ranks, pl.lit(pg_ranks, dtype=pl.String) if pg_ranks else pl.lit(None, dtype=pl.String)
        ).alias("group_ranks"),
    )


def _size_ratio() -> pl.Expr:
    """Group size implied by all_gather (out/in) or reduce_scatter (in/out) element counts."""
    ag = pl.col("out_nelems") // pl.col("in_nelems")
    rs = pl.col("in_nelems") // pl.col("out_nelems")
    exact_ag = (pl.col("in_nelems") > 0) & (pl.col("out_nelems") % pl.col("in_nelems").clip(1) == 0) & (ag > 1)
    exact_rs = (pl.col("out_nelems") > 0) & (pl.col("in_nelems") % pl.col("out_nelems").clip(1) == 0) & (rs > 1)
    return (
        pl.when((pl.col("coll_type") == "all_gather") & exact_ag)
        .then(ag)
        .when((pl.col("coll_type") == "reduce_scatter") & exact_rs)
        .then(rs)
        .otherwise(None)
        .cast(pl.Int64)
    )


def _bytes_expr() -> pl.Expr:
    """Message size in bytes, nccl-tests' convention: all_gather/gather = output (n × input);
    reduce_scatter/scatter = input (n × output); others = input."""
    eb = pl.col("elem_bytes")
    inb = pl.col("in_nelems") * eb
    outb = pl.col("out_nelems") * eb
    n = pl.col("group_size")
    t = pl.col("coll_type")
    return (
        pl.when(t.is_in(["all_gather", "gather"]))
        .then(pl.coalesce(outb, inb * n))
        .when(t.is_in(["reduce_scatter", "scatter"]))
        .then(pl.coalesce(inb, outb * n))
        .otherwise(pl.coalesce(inb, outb))
        .cast(pl.Int64)
    )
