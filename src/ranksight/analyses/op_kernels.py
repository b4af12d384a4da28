"""ATen op → GPU kernel sequences, with launch delays (HTA's ``get_aten_op_kernels_and_delay``).

Definitions (per rank; µs):

- aten ops: CPU events whose name starts with ``aten::``;
- each launch (a runtime/driver call with GPU work; with ``hta_apis`` only names matching HTA's
  ``(cuda.*LaunchKernel)|(cuLaunchKernel)|(^runFunction)``) belongs to the **innermost aten op on
  the same CPU thread** that contains it (``op.ts <= launch.ts`` and ``launch.end <= op.end``;
  HTA uses the latest-starting containing op of any thread);
- per op instance: ``kernel_sequence`` = the names of the GPU activities of its launches, in
  launch order, joined with ``" -> "``; ``aten_op_delay`` = start of its first launch − start of
  the op; ``runtime_delay`` = start of the first launch's first GPU activity − start of that launch;
- per (op name, kernel sequence): ``occurrence_count`` (op instances), ``avg_aten_op_launch_delay``
  and ``avg_runtime_delay`` (means over the instances, rounded to 3 decimals as HTA does).

Unlike HTA, a rank's table never includes earlier ranks' rows, and graph launches (several GPU
activities per launch) are handled instead of raising.

CUDA/HIP graph replays (``--capture``, ``docs/graphs.md``): unless ``hta_apis`` (HTA has no graph
attribution), the ops and launches read are those of
:func:`ranksight.views.graph_attribution.attributed_operators`: a replayed kernel matched to a capture trace
belongs to the capture-side aten op that launched it; those op instances have no launch delays in the
replay (left out of the delay means; null when every instance of a row is replayed).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, Option, register
from ranksight.analyses._replay import CAPTURE_OPTION, replay_notes
from ranksight.analyses._session import Session
from ranksight.model.kinds import GPU_KINDS
from ranksight.views.graph_attribution import ReplayShare, attributed_operators, replay_copy_start
from ranksight.views.hta_call_stack import enclosing, nest
from ranksight.views.links import HTA_KERNEL_LAUNCH_RE, launch_children

if TYPE_CHECKING:
    from ranksight.model.run import Run
    from ranksight.model.trace import Trace

__all__ = ["op_launches", "op_kernel_table", "op_kernel_sums", "op_kernels"]

_TABLE_SCHEMA = {
    "rank": pl.Int32,
    "aten_op_name": pl.String,
    "kernel_sequence": pl.String,
    "occurrence_count": pl.Int64,
    "avg_aten_op_launch_delay": pl.Float64,
    "avg_runtime_delay": pl.Float64,
}


def _aten_ops(trace: Trace) -> pl.DataFrame:
    """CPU-side ``aten::`` events; ``op_name`` stays categorical (millions of strings otherwise)."""
    aten = [n for n in trace.distinct_names() if n.startswith("aten::")]
    return (
        trace.scan()
        .filter(
            ~pl.col("kind").is_in([*GPU_KINDS, "sync", "gpu_user_annotation", "metadata", "flow"])
            & pl.col("dur_ns").is_not_null()
            & pl.col("name").is_in(aten)
        )
        .select("row", "pid", "tid", "ts_ns", "end_ns", pl.col("name").alias("op_name"))
        .collect()
    )


def op_launches(trace: Trace, *, hta_apis: bool = False) -> pl.DataFrame:
    """GPU activities with their launch and the innermost aten op (same thread) of the launch.

    Columns ``op_row, op_name, op_ts_ns, op_tid, launch_row, launch_ts_ns, row, name, ts_ns`` (the
    GPU activity); launches outside every aten op are dropped.
    """
    ch = launch_children(trace)
    if hta_apis and ch.height:
        names = [n for n in ch["api"].cast(pl.String).unique().to_list() if HTA_KERNEL_LAUNCH_RE.match(n)]
        ch = ch.filter(pl.col("api").cast(pl.String).is_in(names))
    ops = _aten_ops(trace)
    if ch.height == 0 or ops.height == 0:
        return pl.DataFrame(
            schema={
                "op_row": pl.Int64,
                "op_name": pl.String,
                "op_ts_ns": pl.Int64,
                "op_tid": pl.Int64,
                "launch_row": pl.UInt32,
                "launch_ts_ns": pl.Int64,
                "row": pl.UInt32,
                "name": pl.String,
                "ts_ns": pl.Int64,
            }
        )
    tree = ops.select("row", "pid", "tid", "ts_ns", "end_ns").join(nest(ops), on="row")
    launches = ch.unique("launch_row", keep="first", maintain_order=True).select(
        "launch_row",
        pl.col("cpu_pid").alias("pid"),
        pl.col("cpu_tid").alias("tid"),
        pl.col("cpu_ts_ns").alias("ts_ns"),
        pl.col("cpu_end_ns").alias("end_ns"),
    )
    launches = launches.with_columns(enclosing(tree, launches).alias("op_row")).filter(pl.col("op_row").is_not_null())
    del tree
    opinfo = (
        ops.lazy()
        .filter(pl.col("row").cast(pl.Int64).is_in(launches["op_row"].implode()))
        .select(
            pl.col("row").cast(pl.Int64).alias("op_row"),
            pl.col("op_name").cast(pl.String),
            pl.col("ts_ns").alias("op_ts_ns"),
            pl.col("tid").alias("op_tid"),
        )
        .collect()
    )  # strings only for the ops that launch
    del ops
    return (
        launches.select("launch_row", "op_row", pl.col("ts_ns").alias("launch_ts_ns"))
        .join(opinfo, on="op_row")
        .join(ch.select("launch_row", "row", "name", "ts_ns"), on="launch_row")
        .select("op_row", "op_name", "op_ts_ns", "op_tid", "launch_row", "launch_ts_ns", "row", "name", "ts_ns")
        .sort(["op_row", "launch_row", "ts_ns", "row"])
    )


def op_kernel_table(trace: Trace, *, hta_apis: bool = False, capture: str | None = None) -> pl.DataFrame:
    """The per-(op name, kernel sequence) table of one rank (see the module docstring)."""
    return _rank_table(trace, hta_apis=hta_apis, capture=capture)[0]


def _rank_table(
    trace: Trace, *, hta_apis: bool = False, capture: str | None = None
) -> tuple[pl.DataFrame, ReplayShare | None]:
    """:func:`op_kernel_table` and the share of replayed GPU time the capture attributes (None with
    ``hta_apis``: no attribution)."""
    share = None
    if not hta_apis:
        trace, share = attributed_operators(trace, capture)
    return _table(trace, hta_apis), share


def op_kernel_sums(trace: Trace, *, hta_apis: bool = False) -> pl.DataFrame:
    """Per (op name, kernel sequence) of one rank: ``aten_op_name, kernel_sequence,
    occurrence_count``, and per delay its sum (ns) and count of known values (``aten_sum_ns,
    aten_n, runtime_sum_ns, runtime_n``): what :func:`op_kernel_table` averages, kept additive so
    several ranks' rows can be pooled (the HTA facade's ``hta_compat`` pooling)."""
    per_op = _per_op(trace, hta_apis)
    if per_op is None:
        return pl.DataFrame(
            schema={
                "aten_op_name": pl.String,
                "kernel_sequence": pl.String,
                "occurrence_count": pl.Int64,
                "aten_sum_ns": pl.Int64,
                "aten_n": pl.Int64,
                "runtime_sum_ns": pl.Int64,
                "runtime_n": pl.Int64,
            }
        )
    return (
        per_op.group_by("op_name", "kernel_sequence", maintain_order=True)
        .agg(
            pl.len().cast(pl.Int64).alias("occurrence_count"),
            pl.col("__aten_delay").sum().cast(pl.Int64).alias("aten_sum_ns"),
            pl.col("__aten_delay").count().cast(pl.Int64).alias("aten_n"),
            pl.col("__runtime_delay").sum().cast(pl.Int64).alias("runtime_sum_ns"),
            pl.col("__runtime_delay").count().cast(pl.Int64).alias("runtime_n"),
        )
        .rename({"op_name": "aten_op_name"})
    )


def _table(trace: Trace, hta_apis: bool) -> pl.DataFrame:
    per_op = _per_op(trace, hta_apis)
    if per_op is None:
        return pl.DataFrame(schema=_TABLE_SCHEMA)
    return (
        per_op.group_by("op_name", "kernel_sequence")
        .agg(
            pl.len().cast(pl.Int64).alias("occurrence_count"),
            (pl.col("__aten_delay").mean() / 1e3).round(3).alias("avg_aten_op_launch_delay"),
            (pl.col("__runtime_delay").mean() / 1e3).round(3).alias("avg_runtime_delay"),
        )
        .sort(["occurrence_count", "op_name", "kernel_sequence"], descending=[True, False, False])
        .select(
            pl.lit(trace.rank, pl.Int32).alias("rank"),
            pl.col("op_name").alias("aten_op_name"),
            "kernel_sequence",
            "occurrence_count",
            "avg_aten_op_launch_delay",
            "avg_runtime_delay",
        )
    )


def _per_op(trace: Trace, hta_apis: bool) -> pl.DataFrame | None:
    """One row per op instance that launched GPU work: ``op_name, kernel_sequence, __aten_delay,
    __runtime_delay`` (ns; null when unknown); None when there is none."""
    ol = op_launches(trace, hta_apis=hta_apis)
    if ol.height == 0:
        return None
    copies = replay_copy_start(trace)
    if copies is not None:  # replayed op instances: no launch delays in the replay (module doc)
        ol = ol.with_columns(
            pl.when(pl.col("op_row") >= copies).then(None).otherwise(pl.col("launch_ts_ns")).alias("launch_ts_ns")
        )
    per_op = (
        ol.with_columns(pl.col("name").to_physical().cast(pl.String).alias("__code"))
        .group_by("op_row", maintain_order=True)
        .agg(
            pl.col("op_name").first(),
            pl.col("__code").str.join(",").alias("__key"),
            pl.col("name").first().alias("__first"),
            (pl.col("launch_ts_ns").first() - pl.col("op_ts_ns").first()).alias("__aten_delay"),
            (pl.col("ts_ns").first() - pl.col("launch_ts_ns").first()).alias("__runtime_delay"),
        )
    )
    keys = per_op.select("__key").unique()
    u = ol.select("name").unique()
    cats = dict(
        zip(u["name"].to_physical().cast(pl.String).to_list(), u["name"].cast(pl.String).to_list(), strict=True)
    )
    decoded = [" -> ".join(cats[c] for c in k.split(",")) for k in keys["__key"].to_list()]  # one per distinct sequence
    return per_op.join(keys.with_columns(pl.Series("kernel_sequence", decoded, dtype=pl.String)), on="__key")


def op_kernels(
    run: Run, *, ranks: Sequence[int] | None = None, hta_apis: bool = False, capture: str | None = None
) -> AnalysisResult:
    """ATen op → kernel sequences with counts and delays, per rank."""
    sess = Session.of(run, ranks)
    per = sess.map(_rank_table, hta_apis=hta_apis, capture=capture)
    parts = [p for p, _ in per.values()]
    table = pl.concat(parts) if parts else pl.DataFrame(schema=_TABLE_SCHEMA)
    notes = []
    empty = [r for r, (p, _) in per.items() if p.height == 0]
    if empty:
        notes.append(f"rank(s) {empty}: no launch inside an aten:: op (no aten ops, no GPU work, or no correlation)")
    notes += replay_notes(
        (s for _, s in per.values() if s is not None), "; those op instances have no launch delays in the replay"
    )
    return AnalysisResult({"op_kernels": table}, notes)


register(
    AnalysisSpec(
        name="op-kernels",
        func=op_kernels,
        help="aten op → GPU kernel sequences with occurrence counts, op→launch and launch→kernel delays",
        options=(
            Option("hta_apis", bool, False, "only HTA's kernel-launch names (HTA-compatible)", flag=True),
            CAPTURE_OPTION,
        ),
    )
)
