"""Achieved FLOP/s, MFU and HFU per step, from op shapes and a peak table.

Definitions (per rank):

- **counted ops**: ``cpu_op`` events whose name has a formula in :mod:`ranksight.views.flops`
  and whose ``Input Dims`` give a FLOP count; when counted ops nest (``aten::linear`` →
  ``aten::addmm``, ``aten::conv2d`` → ``aten::convolution`` → ``aten::cudnn_convolution``) only the
  outermost one on its thread counts, so nothing is counted twice;
- **phase** of a counted op: ``backward`` for gradient ops (``convolution_backward``, attention
  ``*_backward``) and for matmuls inside an autograd backward node
  (``autograd::engine::evaluate_function: MmBackward0``, or the node op ``MmBackward0`` itself in
  older traces); ``recompute`` for forward-only
  composites (``aten::linear``, ``conv*``, ``matmul``, SDPA) found inside a backward node, or any
  counted op inside a ``CheckpointFunctionBackward`` node (activation checkpointing); ``forward``
  otherwise;
- **step window** (as the TB plugin): ``start = max(ProfilerStep start, previous step end)``,
  ``end = max(ProfilerStep end, end of the GPU work the step launched)``; ``step_us = end − start``.
  Without ProfilerSteps the whole trace is one row (``step`` null) spanning the GPU work (the CPU
  ops on CPU-only traces);
- ``model_gflop`` = forward + backward FLOPs of the step's counted ops (or
  ``model_flops_per_step`` when given); ``hardware_gflop`` adds ``recompute``;
- ``achieved_tflop_per_s`` = model FLOPs / step time;
- **MFU** = Σ over data types of model FLOPs_dtype / peak_dtype, divided by the step time: the
  share of the step the GPU would need at its peak for that work (mixed precision is weighted
  correctly). ``peak_tflop_per_s`` is the FLOP-weighted (harmonic) peak that makes
  ``mfu = achieved / peak``. **HFU** is the same with hardware FLOPs, shown when recomputation is
  visible;
- peaks: the GPU table (``data/gpu_specs.tsv`` through :mod:`ranksight.views.peaks`; a
  ``gpu_spec`` file's rows are matched first) by the name of the GPU(s) the rank used
  (``meta.used_devices()``: the definition ``info``'s ``gpu`` reads), ``fp32`` ops against the
  FP32 peak unless ``allow_tf32``; a rank driving several GPUs gets the sum of their peaks;
  ``peak_tflops`` overrides every data type;
- unknown is empty, never 0: a step without a counted op has empty FLOPs, rates and MFU; MFU is
  empty when the GPU or its peak is unknown, or when some of the step's FLOPs are in ops whose
  input type maps to no data type (their peak is unknown; ``peak_tflops`` applies to them); the
  ``note`` column of ``steps`` says why.

CUDA/HIP graph replays (``--capture``, ``docs/graphs.md``): the ops read are those of
:func:`ranksight.views.graph_attribution.attributed_operators`: the capture's operators, with their
``Input Dims``, stand in the replay where their kernels ran (in the step of the graph launch), so a
replayed matmul's FLOPs count in its step; step windows are the replay's own.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, Option, register
from ranksight.analyses._replay import CAPTURE_OPTION, replay_notes
from ranksight.analyses._session import Session
from ranksight.model.kinds import GPU_KINDS, LAUNCH_KINDS
from ranksight.views.enclosing import innermost_enclosing, parent_spans
from ranksight.views.event_source import CannotStack, EventSource, thread_key
from ranksight.views.flops import BACKWARD_OPS, FORMULAS, FORWARD_COMPOSITES, op_flops
from ranksight.views.gpu_work import step_windows as gpu_step_windows
from ranksight.views.graph_attribution import ReplayShare, attributed_operators
from ranksight.views.peaks import dtype_of, peak_for, rank_gpus, specs_with
from ranksight.views.rank_slices import RankSlices, seed_memos

if TYPE_CHECKING:
    from ranksight.model.run import Run
    from ranksight.model.trace import Trace

__all__ = ["mfu", "counted_ops", "step_windows", "rank_peak"]

_EVAL = "autograd::engine::evaluate_function: "
#: Backward nodes whose formulas call matmul ops (those matmuls are backward work).
_MATMUL_BWD = re.compile(
    r"^(Mm|Addmm|Bmm|Baddbmm|Addbmm|Mv|Addmv|Dot|Vdot|Matmul|Linear|ScaledMm|GroupedMm|CompiledFunction)|CppNode", re.I
)
#: Autograd backward nodes recorded as ops (2021 traces have these without evaluate_function).
_NODE = re.compile(r"^[A-Z][A-Za-z0-9]*Backward\d*$|^torch::autograd::CppNode<")
#: Names that suggest matmul-class work we have no formula for (reported, not counted).
_LIKELY_MATMUL = re.compile(r"gemm|matmul|attention|attn|einsum|moe|conv|(^|[:_])mm($|_)", re.I)


def _flops_table(ops: pl.DataFrame) -> pl.DataFrame:
    """FLOPs per distinct (name, dims, types, concrete inputs): one Python call per shape."""
    keys = ops.select("name", "input_dims", "input_type", "concrete_inputs").unique()
    vals = [op_flops(*r) for r in keys.iter_rows()]
    return keys.with_columns(
        pl.Series("flops", [v[0] for v in vals], dtype=pl.Float64),
        pl.Series("itype", [v[1] for v in vals], dtype=pl.String),
        pl.Series("estimated", [v[2] for v in vals], dtype=pl.Boolean),
    )


def _conv_backward_mask(src: EventSource, cand: pl.DataFrame) -> pl.DataFrame:
    """Scale cudnn/miopen conv backward ops without a recorded ``output_mask`` by the gradient
    children they ran (``*_backward_input`` / ``*_backward_weight``)."""
    by = src.by
    bw = cand.filter(pl.col("name").str.contains(r"_convolution_backward$") & pl.col("concrete_inputs").is_null())
    if bw.height == 0:
        return cand
    kids = (
        src.ev.filter(
            (pl.col("kind") == "cpu_op")
            & pl.col("name").cast(pl.String).str.contains(r"convolution_backward_(input|weight)$")
            & pl.col("dur_ns").is_not_null()
        )
        .select(*by, "tid", "ts_ns", "end_ns", pl.col("name").cast(pl.String))
        .collect()
    )
    if kids.height == 0:
        return cand
    key = thread_key(by).alias("__thr")
    par = innermost_enclosing(bw.select(key, "ts_ns", "end_ns"), kids.select(key, "ts_ns"), key="__thr")
    got = (
        kids.with_columns(par.alias("__k"), pl.col("name").str.ends_with("input").alias("__in"))
        .drop_nulls("__k")
        .group_by("__k")
        .agg(pl.col("__in").any().cast(pl.Int64).alias("__a"), (~pl.col("__in")).any().cast(pl.Int64).alias("__b"))
    )
    scale = (
        bw.with_row_index("__k")
        .join(got, on="__k", how="inner")
        .select(*by, "row", ((pl.col("__a") + pl.col("__b")) / 2.0).alias("__s"))
    )
    return (
        cand.join(scale, on=[*by, "row"], how="left", maintain_order="left")
        .with_columns((pl.col("flops") * pl.col("__s").fill_null(1.0)).alias("flops"))
        .drop("__s")
    )


def counted_ops(trace: Trace) -> pl.DataFrame:
    """Counted ops of one trace: ``row, tid, ts_ns, end_ns, step, name, flops, input_type, dtype,
    phase, estimated`` (``input_type``: the Kineto type of the operand the FLOPs are typed by;
    ``dtype``: its peak data type, empty when unknown; see module doc). Memoised per trace."""
    counted: pl.DataFrame = trace.memo("counted_ops", lambda: _counted(EventSource.one(trace)))
    return counted


def seed_counted_ops(traces: list[Trace], stacked: pl.DataFrame) -> None:
    """Give each trace its :func:`counted_ops` from one pass over the stacked events of several
    small ranks (issue 19): each distinct op shape's FLOPs computed once for the run; traces that
    have theirs keep them; ranks whose thread ids or side tables do not stack are left to the
    per-rank computation."""
    traces = [t for t in traces if not t.has_memo("counted_ops")]
    if len(traces) < 2:
        return
    src = EventSource.stacked(traces, stacked)
    try:
        src.check_thread_key()
        parts = RankSlices(_counted(src), drop=True)
    except CannotStack:
        return
    seed_memos(traces, "counted_ops", parts)


def _counted(src: EventSource) -> pl.DataFrame:
    """:func:`counted_ops` of one rank or of stacked ranks (``*by`` first)."""
    by = src.by
    names = src.names()
    wanted = names.filter(names.is_in(list(FORMULAS))).to_list()  # strings per distinct name, not per op
    ops = (
        src.ev.filter((pl.col("kind") == "cpu_op") & pl.col("dur_ns").is_not_null() & pl.col("name").is_in(wanted))
        .select(*by, "row", "tid", "ts_ns", "end_ns", "step", pl.col("name").cast(pl.String))
        .collect()
    )
    if ops.height == 0:
        return _empty_counted(by)
    ops = src.with_args(ops, "op").select(
        *by,
        "row",
        "tid",
        "ts_ns",
        "end_ns",
        "step",
        "name",
        *[pl.col(c).cast(pl.String) for c in ("input_dims", "input_type", "concrete_inputs")],
    )
    cand = ops.join(
        _flops_table(ops), on=["name", "input_dims", "input_type", "concrete_inputs"], how="left", nulls_equal=True
    )
    cand = cand.filter(pl.col("flops").is_not_null()).sort([*by, "tid", "ts_ns"], maintain_order=True)
    cand = _conv_backward_mask(src, cand)
    key = thread_key(by).alias("__thr")
    outer = cand.filter(parent_spans(cand.select(key, "ts_ns", "end_ns"), key="__thr").is_null())
    return _phase(src, outer).select(
        *by,
        "row",
        "tid",
        "ts_ns",
        "end_ns",
        "step",
        "name",
        "flops",
        pl.col("itype").alias("input_type"),
        pl.col("itype").map_elements(dtype_of, return_dtype=pl.String).alias("dtype"),
        "phase",
        "estimated",
    )


def _empty_counted(by: list[str]) -> pl.DataFrame:
    return pl.DataFrame(
        schema={
            **{c: pl.Int32 for c in by},
            "row": pl.UInt32,
            "tid": pl.Int64,
            "ts_ns": pl.Int64,
            "end_ns": pl.Int64,
            "step": pl.Int32,
            "name": pl.String,
            "flops": pl.Float64,
            "input_type": pl.String,
            "dtype": pl.String,
            "phase": pl.String,
            "estimated": pl.Boolean,
        }
    )


def _phase(src: EventSource, outer: pl.DataFrame) -> pl.DataFrame:
    by = src.by
    name = pl.col("name").cast(pl.String)
    nodes = (
        src.ev.filter(
            (pl.col("kind") == "cpu_op")
            & (name.str.starts_with(_EVAL) | name.str.contains(_NODE.pattern))
            & pl.col("dur_ns").is_not_null()
        )
        .select(*by, "tid", "ts_ns", "end_ns", name.str.strip_prefix(_EVAL).alias("node"))
        .collect()
    )
    key = thread_key(by).alias("__thr")
    idx = innermost_enclosing(nodes.select(key, "ts_ns", "end_ns"), outer.select(key, "ts_ns"), key="__thr")
    node = (
        pl.select(pl.when(idx.is_null()).then(None).otherwise(nodes["node"].gather(idx.fill_null(0)))).to_series()
        if nodes.height
        else pl.Series([None] * outer.height, dtype=pl.String)
    )
    o = outer.with_columns(node.alias("__node"))
    n, nd = pl.col("name"), pl.col("__node")
    phase = (
        pl.when(n.is_in(list(BACKWARD_OPS)))
        .then(pl.lit("backward"))
        .when(nd.is_null())
        .then(pl.lit("forward"))
        .when(nd.str.contains("(?i)checkpoint"))
        .then(pl.lit("recompute"))
        .when(n.is_in(list(FORWARD_COMPOSITES)))
        .then(pl.lit("recompute"))
        .when(nd.str.contains(_MATMUL_BWD.pattern))
        .then(pl.lit("backward"))
        .otherwise(pl.lit("recompute"))
    )
    return o.with_columns(phase.alias("phase"))


def step_windows(trace: Trace) -> pl.DataFrame:
    """``step, start_ns, end_ns, incomplete``: the device-extended contiguous ProfilerStep windows
    of :func:`ranksight.views.gpu_work.step_windows`, with the step's ``incomplete`` flag."""
    w = gpu_step_windows(trace)
    inc = trace.steps.select("step", "incomplete")
    return w.join(inc, on="step", how="left").with_columns(
        pl.col("step").cast(pl.Int32), pl.col("incomplete").fill_null(False)
    )


#: Every data type a peak is given for (``--peak-tflops`` applies to each).
_DTYPES = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8", "fp4")


def rank_peak(
    trace: Trace, *, peak_tflops: float | None = None, allow_tf32: bool = False, gpu_spec: str | None = None
) -> tuple[dict[str, float] | None, str, str | None]:
    """Peak TFLOP/s per data type for the GPU(s) this rank used, a label for the ``gpu`` column,
    and why the peak is unknown (None when known).

    The GPUs are those of ``meta.used_devices()``, the definition ``info``'s ``gpu`` reads; their
    rows come from :func:`ranksight.views.peaks.rank_gpus` (the table, ``gpu_spec`` rows first)."""
    if peak_tflops is not None:
        return {d: float(peak_tflops) for d in _DTYPES}, f"--peak-tflops {peak_tflops:g}", None
    peaks, label, why = rank_gpus(trace, specs_with(gpu_spec))
    if why is not None:
        return None, label, why
    out: dict[str, float] = {}
    for dt in _DTYPES:
        key = "tf32" if dt == "fp32" and allow_tf32 else dt
        out[dt] = sum(peak_for(p, key)[0] for p in peaks)
    return out, label, None


def _per_step(trace: Trace, c: pl.DataFrame, win: pl.DataFrame) -> pl.DataFrame:
    model = pl.col("phase").is_in(["forward", "backward"])
    if win.height == 0:
        g = trace.gpu_events.filter(pl.col("dur_ns").is_not_null())
        src = g if g.height else trace.kind("cpu_op").filter(pl.col("dur_ns").is_not_null())
        lo, hi = (int(src["ts_ns"].min()), int(src["end_ns"].max())) if src.height else (None, None)  # type: ignore[arg-type]
        win = pl.DataFrame({"step": [None], "start_ns": [lo], "end_ns": [hi], "incomplete": [False]}, schema=win.schema)
        c = c.with_columns(pl.lit(None, dtype=pl.Int32).alias("step"))
    agg = c.group_by("step", "dtype").agg(
        pl.len().alias("n"),
        pl.col("flops").filter(model).sum().alias("model"),
        pl.col("flops").sum().alias("hw"),
        pl.col("flops").filter(pl.col("phase") == "recompute").sum().alias("re"),
        pl.col("input_type").drop_nulls().unique().sort().alias("itypes"),
    )
    return win.join(agg, on="step", how="left", nulls_equal=True)


def _rank_rows(
    trace: Trace,
    model_flops: float | None,
    peak_tflops: float | None,
    allow_tf32: bool,
    gpu_spec: str | None = None,
    capture: str | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame, list[str], ReplayShare]:
    trace, share = attributed_operators(trace, capture)
    c = counted_ops(trace)
    peaks, label, why = rank_peak(trace, peak_tflops=peak_tflops, allow_tf32=allow_tf32, gpu_spec=gpu_spec)
    win = step_windows(trace)
    per = _per_step(trace, c, win)
    if peak_tflops is not None:  # every data type, known or not
        pk = pl.lit(float(peak_tflops))
    elif peaks:  # a data type the GPU has no peak for falls back to fp32 (peaks has every type); unknown: null
        pk = pl.col("dtype").replace_strict(peaks, default=None, return_dtype=pl.Float64)
    else:
        pk = pl.lit(None, dtype=pl.Float64)
    per = per.with_columns(pk.alias("__peak"))
    counted = pl.col("n").is_not_null()
    unknown_prec = counted & pl.col("dtype").is_null() & pl.col("__peak").is_null()
    st = per.group_by("step", "start_ns", "end_ns", "incomplete", maintain_order=True).agg(
        pl.col("n").sum().alias("n"),
        pl.col("model").sum().alias("model"),
        pl.col("hw").sum().alias("hw"),
        pl.col("re").sum().alias("re"),
        (pl.col("model") / pl.col("__peak")).sum().alias("model_at_peak"),
        (pl.col("hw") / pl.col("__peak")).sum().alias("hw_at_peak"),
        (counted & pl.col("__peak").is_null()).any().alias("__nopeak"),
        pl.col("hw").filter(unknown_prec).sum().alias("__unknown_prec"),
        pl.col("itypes").filter(unknown_prec).explode().drop_nulls().unique().sort().alias("__itypes"),
    )
    no_shapes = trace.table("op")["input_dims"].is_null().all()
    st = _finish(st, trace.rank, model_flops, peak_tflops, label, why, no_shapes)
    notes = _notes(trace, c, st, why, no_shapes)
    return st, _op_table(trace, c, peaks), notes, share


def _finish(
    st: pl.DataFrame,
    rank: int,
    model_flops: float | None,
    peak_tflops: float | None,
    label: str,
    why: str | None,
    no_shapes: bool,
) -> pl.DataFrame:
    """The ``steps`` rows; a value that cannot be computed is empty and ``note`` says why."""
    sec = (pl.col("end_ns") - pl.col("start_ns")) / 1e9
    if model_flops is not None:
        # F weighted by the counted data-type mix (seconds at peak per FLOP of the step's counted
        # ops); one peak for every type with --peak-tflops
        inv = (
            pl.lit(1.0 / peak_tflops)
            if peak_tflops
            else pl.when(pl.col("model") > 0).then(pl.col("model_at_peak") / pl.col("model"))
        )
        st = st.with_columns(
            pl.lit(float(model_flops)).alias("model"),
            (float(model_flops) * inv).alias("model_at_peak"),
            (float(model_flops) * inv + pl.col("re") * inv).alias("hw_at_peak"),
        )
    counted = (pl.col("n") > 0) | pl.lit(model_flops is not None)
    timed = sec > 0
    known_peak = ~pl.col("__nopeak") & pl.col("model_at_peak").is_not_null() & pl.lit(why is None)
    at_peak = pl.col("model_at_peak") / 1e12
    mfu_ok = counted & timed & known_peak & (at_peak > 0)
    unk = pl.col("__unknown_prec")
    types = pl.col("__itypes").list.join(", ")
    no_ops = "no op in this step has a FLOP formula and input shapes" + (
        " (no Input Dims: profile with record_shapes=True)" if no_shapes else ""
    )
    note = (
        pl.when(~timed | pl.col("start_ns").is_null())
        .then(pl.lit("the step has no time span"))
        .when(~counted)
        .then(pl.lit(no_ops))
        .when(pl.lit(why is not None))
        .then(pl.lit(f"no peak for the GPU: {why}; pass --peak-tflops"))
        .when(unk > 0)
        .then(
            pl.format("{} GFLOP in ops of unknown precision (input type ", (unk / 1e9).round(3))
            + pl.when(types != "").then(types).otherwise(pl.lit("not recorded"))
            + pl.lit("); pass --peak-tflops")
        )
        .when(pl.col("n") == 0)  # --model-flops-per-step without a counted op to type it
        .then(pl.lit("no counted op in this step gives the precision of --model-flops-per-step; pass --peak-tflops"))
        .when(~mfu_ok)
        .then(pl.lit("no FLOP counted at a known peak"))
    )
    return st.select(
        pl.lit(rank, dtype=pl.Int32).alias("rank"),
        "step",
        (sec * 1e6).alias("step_us"),
        pl.when(counted).then(pl.col("model") / 1e9).alias("model_gflop"),
        pl.when(counted).then(pl.col("re") / 1e9).alias("recompute_gflop"),
        pl.when(counted & timed).then(pl.col("model") / sec / 1e12).alias("achieved_tflop_per_s"),
        pl.when(mfu_ok).then(pl.col("model") / 1e12 / at_peak).alias("peak_tflop_per_s"),
        pl.when(mfu_ok).then(at_peak / sec).alias("mfu"),
        pl.when(mfu_ok & (pl.col("re") > 0)).then(pl.col("hw_at_peak") / 1e12 / sec).alias("hfu"),
        pl.lit(label).alias("gpu"),
        "incomplete",
        note.alias("note"),
    )


def _op_table(trace: Trace, c: pl.DataFrame, peaks: dict[str, float] | None) -> pl.DataFrame:
    """Per (op, dtype, phase): calls, GFLOP, device time of the GPU work launched inside."""
    if c.height == 0:
        return pl.DataFrame()
    g = trace.kind(*GPU_KINDS, columns=["launch_row", "dur_ns"])  # the columns it reads, not a copy of all
    g = g.filter(pl.col("launch_row").is_not_null() & pl.col("dur_ns").is_not_null())
    dev = g.group_by("launch_row").agg(pl.col("dur_ns").sum().alias("gpu_ns"))
    la = trace.kind(*LAUNCH_KINDS, columns=["row", "tid", "ts_ns"]).join(
        dev, left_on="row", right_on="launch_row", how="inner"
    )
    idx = innermost_enclosing(c.select("tid", "ts_ns", "end_ns"), la.select("tid", "ts_ns"))
    per_op = la.with_columns(idx.alias("__i")).drop_nulls("__i").group_by("__i").agg(pl.col("gpu_ns").sum())
    cc = c.with_row_index("__i").join(per_op, on="__i", how="left")
    has_gpu = g.height > 0
    t = (
        cc.group_by("name", "dtype", "phase", maintain_order=True)  # the share's sum in one order: same bits every run
        .agg(
            pl.len().alias("calls"),
            (pl.col("flops").sum() / 1e9).alias("gflop"),
            (pl.col("gpu_ns").sum() / 1e3).alias("device_us"),
            pl.col("estimated").any(),
        )
        .with_columns(
            pl.when(pl.col("gflop").sum() > 0).then(pl.col("gflop") / pl.col("gflop").sum()).alias("flop_share"),
            pl.when(pl.col("device_us") > 0)
            .then(pl.col("gflop") / pl.col("device_us") * 1e3)
            .otherwise(None)
            .alias("tflop_per_s_on_device"),
        )
        .sort(["gflop", "name", "dtype", "phase"], descending=[True, False, False, False], nulls_last=True)
        .with_columns(pl.lit(trace.rank, dtype=pl.Int32).alias("rank"))
    )
    if not has_gpu:
        t = t.with_columns(
            pl.lit(None, dtype=pl.Float64).alias("device_us"),
            pl.lit(None, dtype=pl.Float64).alias("tflop_per_s_on_device"),
        )
    return t.select(
        "rank",
        "name",
        "dtype",
        "phase",
        "calls",
        "gflop",
        "flop_share",
        "device_us",
        "tflop_per_s_on_device",
        "estimated",
    )


def _notes(trace: Trace, c: pl.DataFrame, st: pl.DataFrame, why: str | None, no_shapes: bool) -> list[str]:
    r = trace.rank
    notes = []
    unknown = st.filter(pl.col("mfu").is_null() & pl.col("note").is_not_null())
    if unknown.height:
        where = "" if st.height == 1 else f" in {unknown.height} of {st.height} steps"
        reasons = unknown["note"].unique(maintain_order=True).to_list()
        notes.append(f"rank {r}: mfu empty{where}: " + "; ".join(str(x) for x in reasons))
    if c.height and c["estimated"].any():
        notes.append(f"rank {r}: some convolution FLOPs are estimated (no stride/padding recorded: stride 1 assumed)")
    counted = set(c["name"].unique().to_list()) if c.height else set()
    # counted per name first (categorical), the string tests then run once per distinct name
    n = pl.col("name")
    vc = (
        trace.scan()
        .filter(pl.col("kind") == "cpu_op")
        .group_by("name")
        .len()
        .collect()
        .with_columns(n.cast(pl.String))
        .filter(
            n.str.contains(_LIKELY_MATMUL.pattern)
            & ~n.is_in(list(FORMULAS))
            & ~n.str.contains("backward_weight$|Backward|^autograd::")
        )
        .sort(["len", "name"], descending=[True, False])
        .head(5)
    )
    if vc.height:
        items = ", ".join(f"{n} ({k})" for n, k in vc.iter_rows())
        notes.append(f"rank {r}: not counted (no shape formula): {items}")
    if not counted and no_shapes:
        notes.append(f"rank {r}: no Input Dims (profile with record_shapes=True)")
    return notes


def mfu(
    run: Run,
    *,
    ranks: Sequence[int] | None = None,
    peak_tflops: float | None = None,
    model_flops_per_step: float | None = None,
    allow_tf32: bool = False,
    gpu_spec: str | None = None,
    capture: str | None = None,
) -> AnalysisResult:
    """MFU / HFU and achieved FLOP/s per rank and step, and FLOPs per op (see module doc)."""
    steps, ops, notes = [], [], []
    if gpu_spec:
        specs_with(gpu_spec)  # a bad file is a usage error here, not in a worker
    sess = Session.of(run, ranks)
    stacked = sess.stacked_events()
    if stacked is not None:  # many small ranks: every rank's counted ops in one pass
        seed_counted_ops([sess.trace(r) for r in sess.ranks], stacked)
    per = sess.map(
        _rank_rows,
        model_flops=model_flops_per_step,
        peak_tflops=peak_tflops,
        allow_tf32=allow_tf32,
        gpu_spec=gpu_spec,
        capture=capture,
    )
    for s, o, n, _ in per.values():
        steps.append(s)
        if o.height:
            ops.append(o)
        notes += n
    notes += replay_notes((sh for *_, sh in per.values()), "; their FLOPs count from the capture's input shapes")
    st = pl.concat(steps, how="vertical_relaxed")
    if st["hfu"].is_null().all():
        notes.append("no recomputation visible: HFU = MFU (column left empty)")
    notes.append(
        "FLOPs from input shapes (2 per multiply-add; bias, softmax, masks not counted; causal attention counted in "
        "full)"
    )
    tables = {"steps": st}
    if ops:
        tables["ops"] = pl.concat(ops, how="vertical_relaxed")
    return AnalysisResult(tables, notes)


register(
    AnalysisSpec(
        name="mfu",
        func=mfu,
        help="achieved FLOP/s, MFU and HFU per step from op shapes and a GPU peak table",
        options=(
            Option("peak_tflops", float, None, "peak TFLOP/s per GPU for every data type (overrides the table)"),
            Option(
                "model_flops_per_step", float, None, "model FLOPs per step per rank (overrides the count from shapes)"
            ),
            Option("allow_tf32", bool, False, "count fp32 matmuls against the TF32 peak", flag=True),
            Option(
                "gpu_spec",
                str,
                None,
                "a GPU table (TSV/CSV/JSON, the columns of data/gpu_specs.tsv) matched before the built-in one",
            ),
            CAPTURE_OPTION,
        ),
    )
)
