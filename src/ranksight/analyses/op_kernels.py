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
activities per launch) are handled instead of raising. HTA's own definition (the HTA facade's
``hta_compat``) is :func:`hta_launch_rows` with :func:`hta_pooled_tables`.

CUDA/HIP graph replays (``--capture``, ``docs/graphs.md``): unless ``hta_apis`` (HTA has no graph
attribution), the ops and launches read are those of
:func:`ranksight.views.graph_attribution.attributed_operators`: a replayed kernel matched to a capture trace
belongs to the capture-side aten op that launched it; those op instances have no launch delays in the
replay (left out of the delay means; null when every instance of a row is replayed).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, Option, register
from ranksight.analyses._replay import CAPTURE_OPTION, replay_notes
from ranksight.analyses._session import Session
from ranksight.model.kinds import GPU_KINDS
from ranksight.views.gpu_work import hta_round, needs_hta_rounding
from ranksight.views.graph_attribution import ReplayShare, attributed_operators, replay_copy_start
from ranksight.views.hta_call_stack import enclosing, nest
from ranksight.views.links import HTA_KERNEL_LAUNCH_RE, launch_children

if TYPE_CHECKING:
    from ranksight.model.run import Run
    from ranksight.model.trace import Trace

__all__ = ["op_launches", "op_kernel_table", "op_kernels", "hta_launch_rows", "hta_pooled_tables"]

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


_HTA_ROWS_SCHEMA = {
    "tid": pl.Int64,
    "aten_op_name": pl.String,
    "aten_op_start_ns": pl.Int64,
    "kernel_name": pl.String,
    "aten_op_delay_us": pl.Float64,
    "runtime_delay_us": pl.Float64,
}


def _hta_times(trace: Trace, df: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """``ts_ns, end_ns`` of ``df`` as HTA's loader has them (rounded to whole µs on ns traces)."""
    ts, dur = df["ts_ns"].to_numpy(), df["dur_ns"].to_numpy()
    if needs_hta_rounding(trace):
        return hta_round(ts, dur, trace.meta.base_time_ns or 0)
    return ts, ts + dur


def _hta_deepest(s_ts: np.ndarray, s_end: np.ndarray, s_row: np.ndarray, lo: int, hi: int) -> int:
    """HTA's ``find_deepest_aten_op`` for one launch ``[lo, hi]``: among the ops with ``ts <= lo``
    and ``end >= hi`` (any thread), the first row of ``sort_values("ts", ascending=False)``. pandas
    sorts descending by reversing, argsorting (numpy quicksort) and reversing back, so among ops
    starting in the same µs the one first in HTA's frame order (file order) wins, usually the outer
    op (``aten::matmul`` over ``aten::mm``). Ops are given sorted by start (``s_*``, ``s_row`` the
    frame position); returns the picked op's frame position, −1 when none wraps the launch."""
    n = int(np.searchsorted(s_ts, lo, side="right"))
    width = 64
    while n > 0:
        a = max(0, n - width)
        hit = np.flatnonzero(s_end[a:n] >= hi)
        if hit.size:
            best = s_ts[a + hit[-1]]  # the latest start that wraps the launch
            b = int(np.searchsorted(s_ts, best, side="left"))
            same = np.arange(b, int(np.searchsorted(s_ts, best, side="right")))
            same = same[s_end[same] >= hi]
            return int(s_row[same].min())
        n, width = a, width * 4
    return -1


def hta_launch_rows(trace: Trace) -> pl.DataFrame:
    """HTA v0.6's ``get_aten_op_kernels_and_delay`` per launch (the ``hta_compat`` facade): one row
    per launch named like HTA's ``(cuda.*LaunchKernel)|(cuLaunchKernel)|(^runFunction)`` that an
    ``aten::`` op of **any** thread wraps (HTA's deepest op: :func:`_hta_deepest`) and that has
    exactly one GPU activity (HTA raises on none or several), in HTA's row order (file order):
    ``tid, aten_op_name, aten_op_start_ns, kernel_name, aten_op_delay_us, runtime_delay_us``, with
    HTA's µs rounding on ns traces."""
    ch = launch_children(trace)
    if ch.height:
        names = [n for n in ch["api"].cast(pl.String).unique().to_list() if HTA_KERNEL_LAUNCH_RE.match(n)]
        ch = ch.filter(pl.col("api").cast(pl.String).is_in(names))
    ops = _aten_ops(trace).sort("row")
    if ch.height == 0 or ops.height == 0:
        return pl.DataFrame(schema=_HTA_ROWS_SCHEMA)
    one = (
        ch.group_by("launch_row")
        .agg(pl.len().alias("__n"), pl.col("name", "ts_ns", "dur_ns", "cpu_ts_ns", "cpu_dur_ns").first())
        .filter(pl.col("__n") == 1)
        .sort("launch_row")
    )
    if one.height == 0:
        return pl.DataFrame(schema=_HTA_ROWS_SCHEMA)
    ops = ops.with_columns((pl.col("end_ns") - pl.col("ts_ns")).alias("dur_ns"))
    o_ts, o_end = _hta_times(trace, ops)
    l_ts, l_end = _hta_times(
        trace, one.select(pl.col("cpu_ts_ns").alias("ts_ns"), pl.col("cpu_dur_ns").alias("dur_ns"))
    )
    k_ts, _ = _hta_times(trace, one.select("ts_ns", "dur_ns"))
    by_start = np.argsort(o_ts, kind="stable")
    s_ts, s_end = o_ts[by_start], o_end[by_start]
    picks = np.array(
        [_hta_deepest(s_ts, s_end, by_start, int(lo), int(hi)) for lo, hi in zip(l_ts, l_end, strict=True)],
        dtype=np.int64,
    )
    keep = picks >= 0
    if not keep.any():
        return pl.DataFrame(schema=_HTA_ROWS_SCHEMA)
    op = ops[picks[keep].tolist()]
    sel = one.filter(pl.Series(keep))
    return pl.DataFrame(
        {
            "tid": op["tid"].cast(pl.Int64),
            "aten_op_name": op["op_name"].cast(pl.String),
            "aten_op_start_ns": pl.Series(o_ts[picks[keep]], dtype=pl.Int64),
            "kernel_name": sel["name"].cast(pl.String),
            "aten_op_delay_us": pl.Series((l_ts[keep] - o_ts[picks[keep]]) / 1e3, dtype=pl.Float64),
            "runtime_delay_us": pl.Series((k_ts[keep] - l_ts[keep]) / 1e3, dtype=pl.Float64),
        },
        schema=_HTA_ROWS_SCHEMA,
    )


def hta_pooled_tables(rows: dict[int, pl.DataFrame], ranks: Sequence[int]) -> dict[int, pl.DataFrame]:
    """HTA's tables from :func:`hta_launch_rows`: HTA collects the launches in one list outside its
    loop over ranks, so rank k's table pools the launches of every rank before it in ``ranks``;
    launches group into op instances by (thread, op name, op start), each instance's kernel sequence
    in launch order and its delays those of its first launch; per (op name, sequence) the count and
    the mean delays (float µs) rounded to 3 d.p. by numpy, as pandas does."""
    out: dict[int, pl.DataFrame] = {}
    seen: list[pl.DataFrame] = []
    for r in ranks:
        seen.append(rows[r])
        inst = (
            pl.concat(seen)
            .group_by("tid", "aten_op_name", "aten_op_start_ns", maintain_order=True)
            .agg(
                pl.col("kernel_name").str.join(" -> ").alias("kernel_sequence"),
                pl.col("aten_op_delay_us").first(),
                pl.col("runtime_delay_us").first(),
            )
        )
        t = (
            inst.group_by("aten_op_name", "kernel_sequence", maintain_order=True)
            .agg(
                pl.len().cast(pl.Int64).alias("occurrence_count"),
                pl.col("aten_op_delay_us").sum().alias("__a"),
                pl.col("runtime_delay_us").sum().alias("__r"),
            )
            .sort("aten_op_name", "kernel_sequence")
        )
        n = t["occurrence_count"].to_numpy().astype(np.float64)
        out[r] = t.select(
            pl.lit(r, pl.Int32).alias("rank"),
            "aten_op_name",
            "kernel_sequence",
            "occurrence_count",
            pl.Series("avg_aten_op_launch_delay", np.round(t["__a"].to_numpy() / n, 3), dtype=pl.Float64),
            pl.Series("avg_runtime_delay", np.round(t["__r"].to_numpy() / n, 3), dtype=pl.Float64),
        )
    return out


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
