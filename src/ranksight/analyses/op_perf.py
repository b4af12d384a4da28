"""Per-operator performance model: FLOPs, bytes, achieved rates and the roofline, per GPU operator.

Definitions (per rank; docs/op-perf.md has every formula):

- **operator**: the CPU op that launched GPU work — for each GPU activity (kernel, memcpy, memset)
  with a launch, the innermost ``cpu_op`` on the launch's thread (same ``pid``, ``tid``) whose span
  holds the launch's start (:func:`ranksight.views.enclosing.innermost_enclosing`). GPU work with no
  launch, or launched outside every ``cpu_op``, is **unattributed** (``attribution`` table);
- **group**: operators with the same (name, category, ``Input Dims``, ``Input type``, and with
  ``strides`` ``Input Strides``); per group: ``count`` (calls), ``kernels_per_call``, ``kernels``
  (the launched activities' short names, longest total first), kernel time = the sum of the
  durations of the GPU activities a call launched (``kernel_us_{sum,mean,median,min,max,std}``,
  std with ddof 1);
- **category and cost**: :func:`ranksight.views.flops.op_cost` (from the op name and its recorded
  inputs: FLOPs and the minimum bytes moved per call); an op whose name gives no category takes one
  from its kernels' taxonomy family, with ``model`` = ``no model`` and time only. A value the
  recorded inputs do not give is empty and ``model`` says why, never a guess;
- **rates**: ``achieved_tflop_per_s`` = FLOPs / kernel time, ``achieved_tb_per_s`` = bytes / kernel
  time (over all calls of the group), ``flop_per_byte`` = FLOPs / bytes;
- **peak**: the GPU row of the table (:mod:`ranksight.views.peaks`, ``gpu_spec`` rows first) of the
  device the rank used. Matrix categories (GEMM, attention, convolution) are held to the peak of
  their precision (``peak_dtype``) unless the kernel taxonomy says their kernels use no Tensor/Matrix
  Cores; every other op to the ``fp32`` (vector) peak (``fp64`` for double). The precision is the
  kernel taxonomy's (the name of the group's longest matrix kernel) and the op's first floating input
  type otherwise. ``mem_bw_tb_per_s``: the row's memory bandwidth;
- **roofline**: attainable = min(peak, ``flop_per_byte`` × bandwidth) (``roofline_tflop_per_s``);
  ``pct_of_roofline`` = achieved / attainable × 100 = 100 × max(achieved TFLOP/s ÷ peak, achieved
  TB/s ÷ bandwidth) (so an op with no FLOPs is held to the bandwidth); ``bound`` ``compute`` when
  ``flop_per_byte`` × bandwidth ≥ peak, else ``memory``; ``lost_us`` (time lost to the roofline) =
  kernel time × (1 − pct/100), 0 above the roofline.

Tables: ``ops`` (one row per rank and group, longest total kernel time first), ``categories`` (per
rank and category), ``attribution`` (per rank: GPU time, attributed to ops, unattributed, with and
without a model) and ``gpus`` (the table row each rank was held to, with its source).

CUDA/HIP graph replays (``--capture``, ``docs/graphs.md``): the operators read are those of
:func:`ranksight.views.graph_attribution.attributed_operators`: a replayed kernel matched to a capture trace
is launched by the capture-side operator (with its recorded inputs) that launched it at capture time;
replayed GPU work that did not match stays unattributed (``outside_ops_us``). TraceLens's sheets
(``tracelens_csv``) read the trace as recorded.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, Option, register
from ranksight.analyses._replay import CAPTURE_OPTION, replay_notes
from ranksight.analyses._session import Session
from ranksight.errors import MissingDataError
from ranksight.model.kinds import GPU_KINDS, LAUNCH_KINDS
from ranksight.model.taxonomy import base_name
from ranksight.views.enclosing import innermost_enclosing
from ranksight.views.flops import CATEGORIES, MATRIX_CATEGORIES, op_cost
from ranksight.views.graph_attribution import ReplayShare, attributed_operators
from ranksight.views.kernel_taxonomy import kernel_taxonomy_table
from ranksight.views.peaks import DTYPES, GpuPeak, dtype_of, rank_gpus, specs_with
from ranksight.views.tracelens_perf import tracelens_sheets

if TYPE_CHECKING:
    from ranksight.model.run import Run
    from ranksight.model.trace import Trace

__all__ = ["op_perf", "launched_by_op", "op_calls", "op_groups", "ALL_CATEGORIES"]

#: Categories of op-perf: those of the cost model, plus ``elementwise`` (kernels say elementwise, the
#: op name gives no arity).
ALL_CATEGORIES = (*CATEGORIES[:7], "elementwise", *CATEGORIES[7:])

#: Kernel taxonomy family → category of an op whose name gives none.
_FAMILY_CATEGORY = {
    "gemm": "gemm",
    "attention": "attention_fwd",
    "convolution": "conv_fwd",
    "normalization": "normalization",
    "softmax": "softmax",
    "elementwise": "elementwise",
    "reduction": "reduction",
    "copy": "copy",
    "set": "copy",
    "collective": "communication",
    "all_to_all": "communication",
    "p2p": "communication",
}

_KEY = "__thread"


def _thread_key(df: pl.DataFrame) -> pl.DataFrame:
    return df.with_columns(
        (pl.col("pid").cast(pl.Int64).fill_null(-1) * (1 << 32) + pl.col("tid").cast(pl.Int64).fill_null(-1)).alias(
            _KEY
        )
    )


def launched_by_op(trace: Trace) -> pl.DataFrame:
    """Every GPU activity with a duration and the operator that launched it.

    Columns ``row, kind, name`` (string), ``dur_ns, device, launch_row, op_row`` (null: unattributed).
    """

    def compute() -> pl.DataFrame:
        g = (
            trace.scan()
            .filter(pl.col("kind").is_in(list(GPU_KINDS)) & pl.col("dur_ns").is_not_null())
            .select("row", pl.col("kind").cast(pl.String), "name", "dur_ns", "device", "launch_row")
            .collect()
        )
        la = (
            trace.scan()
            .filter(pl.col("kind").is_in(list(LAUNCH_KINDS)) & (pl.col("gpu_count") > 0))
            .select(pl.col("row").alias("launch_row"), "pid", "tid", "ts_ns")
            .collect()
        )
        ops = trace.kind("cpu_op", columns=["row", "pid", "tid", "ts_ns", "end_ns", "dur_ns"]).filter(
            pl.col("dur_ns") > 0
        )
        if la.height and ops.height:
            idx = innermost_enclosing(_thread_key(ops), _thread_key(la), key=_KEY)
            op_row = ops["row"].gather(idx.fill_null(0))
            la = la.select("launch_row", pl.when(idx.is_not_null()).then(op_row).alias("op_row"))
        else:
            la = la.select("launch_row", pl.lit(None, dtype=pl.UInt32).alias("op_row"))
        out = g.join(la, on="launch_row", how="left")
        names = out["name"].cast(pl.String) if out.height else pl.Series("name", [], dtype=pl.String)
        return out.with_columns(names.alias("name"))

    return trace.memo("op_perf:launched", compute)


def _strides(trace: Trace, rows: pl.Series) -> pl.Series:
    """``Input Strides`` (JSON text) of the given op rows, read from the trace file (the decoder
    does not keep them)."""
    if rows.len() == 0:
        return pl.Series("input_strides", [], dtype=pl.String)
    raw = trace.raw_events(rows)
    vals = []
    for ev in raw:
        s = (ev.get("args") or {}).get("Input Strides")
        vals.append(None if s is None else json.dumps(s, separators=(",", ":")))
    return pl.Series("input_strides", vals, dtype=pl.String)


def op_calls(trace: Trace, *, strides: bool = False) -> pl.DataFrame:
    """One row per operator call that launched GPU work: ``op_row, name, input_dims, input_type,
    concrete_inputs`` (JSON text; ``input_strides`` with ``strides``), ``kernel_ns`` (sum of its
    activities' durations), ``n_kernels``."""
    la = launched_by_op(trace).filter(pl.col("op_row").is_not_null())
    per = la.group_by("op_row").agg(pl.col("dur_ns").sum().alias("kernel_ns"), pl.len().alias("n_kernels"))
    names = (
        trace.scan()
        .filter(pl.col("row").is_in(per["op_row"].implode()))
        .select(pl.col("row").alias("op_row"), pl.col("name").cast(pl.String))
        .collect()
    )
    per = per.join(names, on="op_row", how="left")
    args = trace.table("op").select(
        pl.col("row").alias("op_row"),
        *(pl.col(c).cast(pl.String) for c in ("input_dims", "input_type", "concrete_inputs")),
    )
    per = per.join(args, on="op_row", how="left").sort("op_row")
    if strides:
        per = per.with_columns(_strides(trace, per["op_row"]))
    return per


def _costs(calls: pl.DataFrame) -> pl.DataFrame:
    """Cost of each distinct (name, dims, types, concrete): one Python call per distinct call shape."""
    keys = calls.select("name", "input_dims", "input_type", "concrete_inputs").unique()
    vals = [op_cost(*r) for r in keys.iter_rows()]
    return keys.with_columns(
        pl.Series("category", [v[0] for v in vals], dtype=pl.String),
        pl.Series("flops", [v[1] for v in vals], dtype=pl.Float64),
        pl.Series("bytes", [v[2] for v in vals], dtype=pl.Float64),
        pl.Series("itype", [v[3] for v in vals], dtype=pl.String),
        pl.Series("estimated", [v[4] for v in vals], dtype=pl.Boolean),
        pl.Series("why", [v[5] for v in vals], dtype=pl.String),
    )


def _kernel_info(trace: Trace) -> pl.DataFrame:
    """Per op call: the dominant kernel's taxonomy (family, precision, Tensor Cores) and the
    dominant matrix kernel's, plus the call's kernel names."""
    la = launched_by_op(trace).filter(pl.col("op_row").is_not_null())
    tx = kernel_taxonomy_table(trace).select(
        pl.col("name"), "kind", "family", "precision", "tensor_cores", "kernel_class"
    )
    return la.join(tx, on=["kind", "name"], how="left")


def op_groups(
    trace: Trace, *, strides: bool = False, gpu_spec: str | None = None
) -> tuple[pl.DataFrame, dict[str, Any], list[str]]:
    """The ``ops`` rows of one rank, its ``attribution`` row (with the GPU), and notes."""
    r = trace.rank
    notes: list[str] = []
    la = launched_by_op(trace)
    gpu_ns = int(la["dur_ns"].sum()) if la.height else 0
    calls = op_calls(trace, strides=strides)
    peaks, label, why_gpu = rank_gpus(trace, specs_with(gpu_spec))
    gpu = _one_gpu(peaks)
    if why_gpu is None and gpu is None:
        why_gpu = f"several GPU models on one rank ({label})"
    no_launch_ns = int(la.filter(pl.col("launch_row").is_null())["dur_ns"].sum()) if la.height else 0
    attributed_ns = int(calls["kernel_ns"].sum()) if calls.height else 0
    attribution: dict[str, Any] = {
        "rank": r,
        "gpu": label,
        "gpu_us": gpu_ns / 1e3,
        "attributed_us": attributed_ns / 1e3,
        "unattributed_us": (gpu_ns - attributed_ns) / 1e3,
        "no_launch_us": no_launch_ns / 1e3,
        "outside_ops_us": (gpu_ns - attributed_ns - no_launch_ns) / 1e3,
    }
    if calls.height == 0:
        attribution.update(modelled_us=0.0, no_model_us=0.0)
        return pl.DataFrame(), attribution, notes
    costs = _costs(calls)
    c = calls.join(costs, on=["name", "input_dims", "input_type", "concrete_inputs"], how="left", nulls_equal=True)
    # kernels: names and the taxonomy of each call's activities
    ki = _kernel_info(trace)
    dom = (
        ki.group_by("op_row", "family")
        .agg(pl.col("dur_ns").sum())
        .sort(["op_row", "dur_ns", "family"], descending=[False, True, False], nulls_last=True)
        .group_by("op_row", maintain_order=True)
        .agg(pl.col("family").first().alias("__family"))
    )
    c = c.join(dom, on="op_row", how="left").with_columns(
        pl.coalesce(
            "category",
            pl.when(
                pl.col("__family").is_in(["attention", "convolution"])
                & pl.col("name").str.contains(r"(_backward|Backward\d*)$")
            ).then(pl.col("__family").replace_strict({"attention": "attention_bwd", "convolution": "conv_bwd"})),
            pl.col("__family").replace_strict(_FAMILY_CATEGORY, default="other"),
            pl.lit("other"),
        ).alias("category"),
        pl.when(pl.col("category").is_null()).then(pl.lit("no model")).otherwise(pl.col("why")).alias("why"),
    )
    keys = ["name", "category", "input_dims", "input_type", *(["input_strides"] if strides else [])]
    gid = c.select(keys).unique(maintain_order=True).with_row_index("__g")
    c = c.join(gid, on=keys, how="left", nulls_equal=True)
    groups = _aggregate(c, ki, keys)
    groups = _roofline(groups, gpu, why_gpu)
    groups = groups.with_columns(pl.lit(r, dtype=pl.Int32).alias("rank"), pl.lit(label).alias("gpu"))
    modelled_ns = int(c.join(groups.filter(pl.col("model") == "yes").select("__g"), on="__g")["kernel_ns"].sum())
    attribution.update(modelled_us=modelled_ns / 1e3, no_model_us=(attributed_ns - modelled_ns) / 1e3)
    if gpu is not None:
        attribution.update(
            {f"peak_{d}_tflop_per_s": gpu.tflops.get(d) for d in ("fp32", "tf32", "bf16", "fp16", "fp8")},
            mem_bw_tb_per_s=gpu.mem_bw_tbps,
        )
    if why_gpu is not None:
        notes.append(f"rank {r}: no roofline: {why_gpu}; pass --gpu-spec FILE")
    est = groups.filter(pl.col("estimated"))
    if est.height:
        notes.append(
            f"rank {r}: {est.height} op group(s) counted with an assumption (flag `estimated`: no stride/padding "
            "recorded for a convolution, or no causal flag for attention)"
        )
    if attribution["unattributed_us"] > 0:
        notes.append(
            f"rank {r}: {attribution['unattributed_us']:.1f} us of GPU work unattributed: "
            f"{attribution['no_launch_us']:.1f} us whose launch is not in the trace, "
            f"{attribution['outside_ops_us']:.1f} us launched outside every CPU op (the attribution table)"
        )
    return groups.select([c for c in _COLUMNS if strides or c != "input_strides"]), attribution, notes


_COLUMNS = [
    "rank",
    "name",
    "category",
    "count",
    "kernel_us_sum",
    "gflop_per_call",
    "bytes_per_call",
    "flop_per_byte",
    "achieved_tflop_per_s",
    "achieved_tb_per_s",
    "pct_of_roofline",
    "bound",
    "lost_us",
    "precision",
    "tensor_cores",
    "peak_dtype",
    "peak_tflop_per_s",
    "mem_bw_tb_per_s",
    "roofline_tflop_per_s",
    "model",
    "input_dims",
    "input_type",
    "input_strides",
    "kernels_per_call",
    "kernel_us_mean",
    "kernel_us_median",
    "kernel_us_min",
    "kernel_us_max",
    "kernel_us_std",
    "estimated",
    "kernels",
    "gpu",
]


def _one_gpu(peaks: list[GpuPeak]) -> GpuPeak | None:
    labels = {p.label for p in peaks}
    return peaks[0] if len(labels) == 1 else None


def _aggregate(c: pl.DataFrame, ki: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    us = pl.col("kernel_ns") / 1e3
    g = c.group_by("__g").agg(
        *(pl.col(k).first() for k in keys),
        pl.len().alias("count"),
        pl.col("n_kernels").mean().alias("kernels_per_call"),
        us.sum().alias("kernel_us_sum"),
        us.mean().alias("kernel_us_mean"),
        us.median().alias("kernel_us_median"),
        us.min().alias("kernel_us_min"),
        us.max().alias("kernel_us_max"),
        us.std().alias("kernel_us_std"),
        # a total is known when every call's value is
        pl.when(pl.col("flops").null_count() == 0).then(pl.col("flops").sum()).alias("__flops"),
        pl.when(pl.col("bytes").null_count() == 0).then(pl.col("bytes").sum()).alias("__bytes"),
        pl.col("itype").drop_nulls().first().alias("__itype"),
        pl.col("estimated").fill_null(False).any().alias("estimated"),
        pl.col("why").drop_nulls().first().alias("__why"),
        pl.col("op_row").min().alias("__first_row"),
    )
    # kernels of each group: short names by total time; the dominant matrix kernel's taxonomy
    kk = ki.join(c.select("op_row", "__g"), on="op_row")
    by_name = kk.group_by("__g", "name").agg(
        pl.col("dur_ns").sum(),
        pl.col("kind").first(),
        pl.col("family").first(),
        pl.col("precision").first(),
        pl.col("tensor_cores").first(),
    )
    # a kernel's short name (templates and parameters removed); memcpy / memset names as they are
    short = {n: base_name(n) for n in by_name.filter(pl.col("kind") == "kernel")["name"].unique().to_list()}
    by_name = by_name.with_columns(
        pl.col("name").replace_strict(short, default=pl.col("name"), return_dtype=pl.String).alias("__short")
    )
    kernels = (
        by_name.sort(["__g", "dur_ns", "__short"], descending=[False, True, False])
        .group_by("__g", maintain_order=True)
        .agg(pl.col("__short").unique(maintain_order=True).alias("__names"))
        .select(
            "__g",
            (
                pl.col("__names").list.head(3).list.join(" | ")
                + pl.when(pl.col("__names").list.len() > 3)
                .then(pl.format(" | … (+{})", pl.col("__names").list.len() - 3))
                .otherwise(pl.lit(""))
            ).alias("kernels"),
        )
    )
    matrix = (
        by_name.filter(pl.col("family").is_in(["gemm", "attention", "convolution"]))
        .sort(["__g", "dur_ns", "name"], descending=[False, True, False])
        .group_by("__g", maintain_order=True)
        .agg(pl.col("precision").first().alias("__kprec"), pl.col("tensor_cores").first().alias("__tc"))
    )
    return g.join(kernels, on="__g", how="left").join(matrix, on="__g", how="left")


def _roofline(g: pl.DataFrame, gpu: GpuPeak | None, why_gpu: str | None) -> pl.DataFrame:
    itypes = g["__itype"].unique().drop_nulls().to_list()
    dt_map = {t: dtype_of(t) for t in itypes}
    g = g.with_columns(pl.col("__itype").replace_strict(dt_map, default=None, return_dtype=pl.String).alias("__dt"))
    matrix = pl.col("category").is_in(list(MATRIX_CATEGORIES))
    kprec = pl.when(pl.col("__kprec").is_in(list(DTYPES))).then(pl.col("__kprec"))
    precision = pl.when(matrix).then(pl.coalesce(kprec, pl.col("__dt"))).otherwise(pl.coalesce("__dt", "__itype"))
    tc = pl.when(matrix).then(pl.col("__tc").fill_null("unknown")).otherwise(pl.lit("no"))
    g = g.with_columns(precision.alias("precision"), tc.alias("tensor_cores"))
    have = set(gpu.tflops) if gpu is not None else set()
    on_tc = matrix & (pl.col("tensor_cores") != "no")
    peak_dtype = (
        pl.when(matrix & pl.col("precision").is_null())
        .then(None)
        .when(on_tc & pl.col("precision").is_in(list(have)))
        .then(pl.col("precision"))
        .when(pl.col("precision") == "fp64")
        .then(pl.lit("fp64" if "fp64" in have else "fp32"))
        .otherwise(pl.lit("fp32"))
    )
    g = g.with_columns(peak_dtype.alias("peak_dtype"))
    peak_map = dict(gpu.tflops) if gpu is not None else {}
    bw = gpu.mem_bw_tbps if gpu is not None else None
    s = pl.col("kernel_us_sum") / 1e6
    flops, nbytes = pl.col("__flops"), pl.col("__bytes")
    g = g.with_columns(
        (flops / pl.col("count") / 1e9).alias("gflop_per_call"),
        (nbytes / pl.col("count")).alias("bytes_per_call"),
        pl.when(nbytes > 0).then(flops / nbytes).alias("flop_per_byte"),
        pl.when(s > 0).then(flops / s / 1e12).alias("achieved_tflop_per_s"),
        pl.when(s > 0).then(nbytes / s / 1e12).alias("achieved_tb_per_s"),
        pl.col("peak_dtype").replace_strict(peak_map, default=None, return_dtype=pl.Float64).alias("peak_tflop_per_s"),
        pl.lit(bw, dtype=pl.Float64).alias("mem_bw_tb_per_s"),
    )
    peak, bwc = pl.col("peak_tflop_per_s"), pl.col("mem_bw_tb_per_s")
    frac = pl.max_horizontal(pl.col("achieved_tflop_per_s") / peak, pl.col("achieved_tb_per_s") / bwc)
    known = flops.is_not_null() & nbytes.is_not_null() & peak.is_not_null() & bwc.is_not_null() & (s > 0)
    g = g.with_columns(
        pl.when(known).then(pl.min_horizontal(peak, pl.col("flop_per_byte") * bwc)).alias("roofline_tflop_per_s"),
        pl.when(known).then(frac * 100).alias("pct_of_roofline"),
        pl.when(known)
        .then(
            pl.when(pl.col("flop_per_byte").fill_null(0) * bwc >= peak)
            .then(pl.lit("compute"))
            .otherwise(pl.lit("memory"))
        )
        .alias("bound"),
        pl.when(known).then(pl.col("kernel_us_sum") * (1 - frac).clip(lower_bound=0)).alias("lost_us"),
    )
    why_row = (
        pl.when(pl.col("__why").is_not_null())
        .then(pl.format("no model: {}", pl.col("__why")).str.replace("no model: no model", "no model", literal=True))
        .when(~known & pl.lit(why_gpu is not None))
        .then(pl.lit(f"no roofline: {why_gpu}"))
        .when(~known & pl.col("peak_dtype").is_null())
        .then(pl.lit("no roofline: the op's precision is not known"))
        .when(~known & bwc.is_null())
        .then(pl.lit("no roofline: the GPU table has no memory bandwidth for this GPU"))
        .when(~known & (s <= 0))
        .then(pl.lit("no roofline: the kernels' recorded durations are 0"))
        .otherwise(pl.lit("yes"))
    )
    return g.with_columns(why_row.alias("model")).sort(["kernel_us_sum", "__first_row"], descending=[True, False])


def _categories(ops: pl.DataFrame, attribution: pl.DataFrame) -> pl.DataFrame:
    if ops.height == 0:
        return pl.DataFrame()
    modelled = pl.col("model") == "yes"
    t = ops.group_by("rank", "category").agg(
        pl.len().alias("groups"),
        pl.col("count").sum().alias("calls"),
        pl.col("kernel_us_sum").sum().alias("kernel_us"),
        pl.col("kernel_us_sum").filter(modelled).sum().alias("modelled_us"),
        (pl.col("gflop_per_call") * pl.col("count")).filter(modelled).sum().alias("gflop"),
        pl.col("lost_us").filter(modelled).sum().alias("lost_us"),
    )
    t = t.join(attribution.select("rank", "attributed_us"), on="rank", how="left").with_columns(
        pl.when(pl.col("attributed_us") > 0)
        .then(pl.col("kernel_us") / pl.col("attributed_us") * 100)
        .alias("share_pct"),
        pl.when(pl.col("modelled_us") > 0)
        .then(pl.col("gflop") / pl.col("modelled_us") * 1e3)
        .alias("achieved_tflop_per_s"),
        # the time-weighted share of the roofline over the category's modelled ops
        pl.when(pl.col("modelled_us") > 0)
        .then((1 - pl.col("lost_us") / pl.col("modelled_us")) * 100)
        .alias("pct_of_roofline"),
    )
    order = {c: i for i, c in enumerate(ALL_CATEGORIES)}
    return (
        t.with_columns(pl.col("category").replace_strict(order, default=len(order)).alias("__o"))
        .sort(["rank", "kernel_us", "__o"], descending=[False, True, False])
        .select(
            "rank",
            "category",
            "groups",
            "calls",
            "kernel_us",
            "share_pct",
            "modelled_us",
            "gflop",
            "achieved_tflop_per_s",
            "pct_of_roofline",
            "lost_us",
        )
    )


def _gpu_row(trace: Trace, gpu_spec: str | None) -> dict[str, Any]:
    peaks, label, why = rank_gpus(trace, specs_with(gpu_spec))
    gpu = _one_gpu(peaks)
    row: dict[str, Any] = {"rank": trace.rank, "gpu": label}
    for d in DTYPES:
        row[f"{d}_tflop_per_s"] = gpu.tflops.get(d) if gpu else None
    row["mem_bw_tb_per_s"] = gpu.mem_bw_tbps if gpu else None
    row["source"] = gpu.source if gpu else None
    row["note"] = why
    return row


def _rank(
    trace: Trace, *, strides: bool, gpu_spec: str | None, tracelens: bool = False, capture: str | None = None
) -> tuple[pl.DataFrame, dict, dict, list[str], dict[str, pl.DataFrame], ReplayShare]:
    t, share = attributed_operators(trace, capture)
    ops, attribution, notes = op_groups(t, strides=strides, gpu_spec=gpu_spec)
    sheets = tracelens_sheets(trace) if tracelens else {}
    return ops, attribution, _gpu_row(trace, gpu_spec), notes, sheets, share


def op_perf(
    run: Run,
    *,
    ranks: Sequence[int] | None = None,
    strides: bool = False,
    gpu_spec: str | None = None,
    top: int | None = None,
    tracelens_csv: str | None = None,
    capture: str | None = None,
) -> AnalysisResult:
    """Per-operator FLOPs, bytes, achieved rates and roofline per rank (see the module doc).

    With ``tracelens_csv`` (the folder the CLI writes them to), TraceLens's perf report sheets of
    each rank are added as tables ``tracelens/<rank>/<sheet>`` (:mod:`ranksight.views.tracelens_perf`)."""
    if gpu_spec:
        specs_with(gpu_spec)  # a bad file is a usage error here, not in a worker
    sess = Session.of(run, ranks)
    per = sess.map(_rank, strides=strides, gpu_spec=gpu_spec, tracelens=tracelens_csv is not None, capture=capture)
    parts, attr, gpus, notes = [], [], [], []
    sheets: dict[str, pl.DataFrame] = {}
    for rank, (ops, a, g, n, tl, _) in per.items():
        if ops.height:
            parts.append(ops)
        attr.append(a)
        gpus.append(g)
        notes += n
        sheets.update({f"tracelens/{rank}/{name}": df for name, df in tl.items()})
    notes += replay_notes((p[-1] for p in per.values()), "; they are launched by those operators here")
    if not parts:
        raise MissingDataError("no GPU work launched by a CPU op in the trace(s) (op-perf needs GPU kernels)")
    ops = pl.concat(parts, how="vertical_relaxed")
    attribution = pl.DataFrame(attr).with_columns(pl.col("rank").cast(pl.Int32))
    cats = _categories(ops, attribution)
    if top is not None:
        ops = ops.group_by("rank", maintain_order=True).head(top)
    no_model = ops.filter(pl.col("model").str.starts_with("no model"))
    if no_model.height:
        notes.append(
            f"{no_model.height} op group(s) have no FLOP/byte model (time only; `model` says why): "
            + ", ".join(sorted(set(no_model["name"].to_list()))[:8])
        )
    notes.append(
        "kernel time = the sum of the durations of the GPU activities an op launched; FLOPs 2 per multiply-add "
        "(causal attention: the kept query-key pairs); bytes = each input read and each output written once"
    )
    return AnalysisResult(
        {
            "ops": ops,
            "categories": cats,
            "attribution": attribution,
            "gpus": pl.DataFrame(gpus).with_columns(pl.col("rank").cast(pl.Int32)),
            **sheets,
        },
        notes,
    )


register(
    AnalysisSpec(
        name="op-perf",
        func=op_perf,
        help="per-operator FLOPs, bytes, achieved TFLOP/s and TB/s against the GPU's roofline",
        options=(
            Option(
                "strides",
                bool,
                False,
                "also group by Input Strides (read from the trace file: the decoder does not keep them)",
                flag=True,
            ),
            Option(
                "gpu_spec",
                str,
                None,
                "a GPU table (TSV/CSV/JSON, the columns of data/gpu_specs.tsv) matched before the built-in one",
            ),
            Option("top", int, None, "keep the N op groups with the most kernel time per rank"),
            Option(
                "tracelens_csv",
                str,
                None,
                "also write TraceLens's perf report sheets (GEMM.csv, ops_summary.csv, ...) into DIR "
                "(docs/tracelens-differences.md)",
            ),
            CAPTURE_OPTION,
        ),
    )
)
