"""The sheets of TraceLens's PyTorch perf report, with TraceLens's column names and definitions.

TraceLens (AMD-AGI/TraceLens, MIT) writes ``generate_perf_report_pytorch`` sheets; ``op-perf
--tracelens-csv DIR`` writes the same sheets so its users keep their spreadsheets and scripts. What
follows is TraceLens's definition, reproduced (not ranksight's: ``op-perf``'s own model is
``ranksight.views.flops.op_cost``); every departure is listed in ``docs/tracelens-differences.md``.

- **tree**: CPU events (``cpu_op``, runtime and driver calls; not annotations) nest by time on
  their thread (:func:`ranksight.views.hta_call_stack.nest`, the stack TraceLens builds); a GPU
  activity (kernel, memcpy, memset) hangs under the runtime call with its correlation id. GPU
  activities without one are *unlinked*;
- **times** are TraceLens's: float microseconds as the trace writes them (``ts``, ``dur``, ``t_end =
  ts + dur``), and the **busy time** of a set of activities is the length of the union of their
  intervals (sorted by start, merged when one starts at or before the running end);
- **kernel launchers** (``ops_summary``, ``ops_summary_by_category``): a ``cpu_op`` with a child
  runtime call that launched GPU work other than NCCL (``total_direct_kernel_time``: the busy time
  of that work; ``total_subtree_kernel_time``: of all GPU work under the op), and a runtime call
  with GPU work whose parent is not a ``cpu_op`` (a one-kernel NCCL launch excluded);
- **categories**: TraceLens's ``categorize_torch_op`` (the op-name lists below, else the first
  kernel's name when it starts with ``void at::native``: ``elementwise`` / ``reduce`` /
  ``multi_tensor_apply``, else ``other``);
- **perf sheets** (``GEMM``, ``SDPA_fwd``, ``SDPA_bwd``, ``UnaryElementwise``, ``BinaryElementwise``,
  ``Reduce_fwd``): every ``cpu_op`` with a name of the sheet's list, its parameters, GFLOPs and bytes
  from TraceLens's perf models, its kernel time = the busy time of the GPU work in its subtree;
  grouped by name and parameters (means, medians, std with ddof 1, min, max of the per-call rates);
- ``kernel_summary``: per (parent op category, parent ``cpu_op``, kernel name, stream) over kernels;
- ``gpu_timeline``: computation / communication (``nccl`` in the name) / memcpy time of the linked
  GPU activities, exposed parts, busy, idle and total (first start to last end).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from ranksight.model.kinds import GPU_KINDS
from ranksight.views.hta_call_stack import nest

if TYPE_CHECKING:
    from ranksight.model.trace import Trace

__all__ = [
    "SHEETS",
    "tracelens_sheets",
    "name2bpe",
    "categorize",
    "GEMM_OPS",
    "SDPA_FWD_OPS",
    "SDPA_BWD_OPS",
    "UNARY_OPS",
    "BINARY_OPS",
    "REDUCE_OPS",
]

#: The sheets written, in TraceLens's order.
SHEETS = (
    "gpu_timeline",
    "ops_summary_by_category",
    "ops_summary",
    "GEMM",
    "SDPA_fwd",
    "SDPA_bwd",
    "UnaryElementwise",
    "BinaryElementwise",
    "Reduce_fwd",
    "kernel_summary",
)

_TREE_KINDS = ("cpu_op", "cuda_runtime", "cuda_driver")

# --- TraceLens's op lists and categories -----------------------------------------------------

GEMM_OPS = (
    "aten::mm",
    "aten::addmm",
    "aten::_scaled_mm",
    "trtllm::cublas_scaled_mm",
    "bitsandbytes::int8_linear_matmul",
    "aten::bmm",
    "tex_ts::te_gemm_ts",
    "aten::baddbmm",
    "vllm::gemm_with_dynamic_quant",
)
SDPA_FWD_OPS = (
    "aten::_scaled_dot_product_cudnn_attention",
    "aten::_scaled_dot_product_efficient_attention",
    "aten::_scaled_dot_product_flash_attention",
    "flash_attn::_flash_attn_forward",
)
SDPA_BWD_OPS = (
    "aten::_scaled_dot_product_cudnn_attention_backward",
    "aten::_scaled_dot_product_efficient_attention_backward",
    "aten::_scaled_dot_product_flash_attention_backward",
    "flash_attn::_flash_attn_backward",
)
_SDPA_NAMES = (
    "FlashAttnFunc",
    "flash_attn::_flash_attn_varlen_forward",
    "flash_attn::_flash_attn_varlen_backward",
    "aiter::_flash_attn_forward",
    "aiter::_flash_attn_backward",
    "aiter::wrapper_fmha_v3_fwd",
    "aiter::wrapper_fmha_v3_bwd",
    "aiter::mha_fwd",
    "aiter::fmha_v3_fwd",
    "aiter::mha_bwd",
    "flash_attn_3::fwd",
    "EvoformerAttention",
    *SDPA_FWD_OPS,
    *SDPA_BWD_OPS,
)
_SDPA_BWD_NAMES = frozenset(
    (
        "FlashAttnFuncBackward",
        "FusedAttnFuncBackward",
        "aiter::_flash_attn_backward",
        "aiter::wrapper_fmha_v3_bwd",
        "aiter::mha_bwd",
        *SDPA_BWD_OPS,
        "flash_attn::_flash_attn_varlen_backward",
    )
)
UNARY_OPS = (
    "aten::copy",
    "aten::copy_",
    "aten::clamp_min",
    "aten::clamp_min_",
    "aten::clamp_max",
    "aten::clamp_max_",
    "aten::sigmoid",
    "aten::rsqrt",
    "aten::silu",
    "aten::neg",
    "aten::pow",
    "aten::upsample_nearest1d",
)
BINARY_OPS = (
    "aten::div",
    "aten::div_",
    "aten::mul",
    "aten::mul_",
    "aten::add",
    "aten::add_",
    "aten::sigmoid_backward",
    "aten::threshold_backward",
)
REDUCE_OPS = (
    "aten::sum",
    "aten::mean",
    "aten::max",
    "aten::min",
    "aten::norm",
    "aten::linalg_norm",
    "aten::std",
    "aten::var",
    "aten::logsumexp",
    "aten::cumsum",
    "aten::cumprod",
    "aten::amin",
    "aten::amax",
)
_NORM_OPS = frozenset(
    f"aten::{p}{k}_norm{s}"
    for p in ("", "native_", "miopen_", "cudnn_")
    for k in ("batch", "layer", "group", "instance")
    for s in ("", "_backward")
) | frozenset(
    {
        "aten::_fused_rms_norm",
        "aten::rms_norm_backward",
        "aten::native_rms_norm_backward",
        "aten::miopen_rms_norm_backward",
        "aten::cudnn_rms_norm_backward",
        "aten::_fused_rms_norm_backward",
    }
)
_CONV_FWD = frozenset(
    {"aten::convolution", "aten::miopen_convolution", "aten::cudnn_convolution", "ConvBias_", "ConvBiasReLU_"}
)
_CONV_BWD = frozenset({"aten::convolution_backward", "ConvBias_Backward", "ConvBiasReLU_Backward"})
_MOE_AUX = frozenset(
    {
        "aiter::moe_sorting_fwd",
        "aiter::moe_sorting_opus_fwd",
        "aiter::moe_align_block_size",
        "_moe_C::moe_align_block_size",
        "aiter::moe_sum",
        "aiter::topk_softmax",
        "aiter::topk_softmax_asm",
        "aiter::topk_sigmoid",
        "aiter::biased_grouped_topk_hip",
        "aiter::grouped_topk",
        "aiter::moe_fused_gate",
    }
)
_INFERENCE_ATTENTION = frozenset(
    {
        "_C_cache_ops::reshape_and_cache_flash",
        "_C_cache_ops::concat_and_cache_mla",
        "vllm::unified_attention_with_output",
    }
)


def categorize(name: str, first_kernel: str | None) -> str:
    """TraceLens's ``categorize_torch_op`` of an op (or runtime launcher) and its first kernel's name."""
    if name in GEMM_OPS:
        return "GEMM"
    if name in _CONV_FWD:
        return "CONV_fwd"
    if name in _CONV_BWD:
        return "CONV_bwd"
    if name in _NORM_OPS:
        return "NORM_bwd" if name.endswith(("_backward", "Backward")) else "NORM_fwd"
    if name in _SDPA_NAMES:
        return "SDPA_bwd" if name.endswith("_backward") or name in _SDPA_BWD_NAMES else "SDPA_fwd"
    if name in BINARY_OPS or name in UNARY_OPS:
        return "elementwise"
    if name in REDUCE_OPS:
        return "reduce"
    if name.startswith("triton"):
        return "triton"
    if name in _MOE_AUX:
        return "MoE_aux"
    if name in _INFERENCE_ATTENTION:
        return "InferenceAttention"
    if name.startswith("record_param_comms"):
        return "record_param_comms"
    if first_kernel and first_kernel.startswith("void at::native"):
        for needle, cat in (
            ("elementwise", "elementwise"),
            ("reduce", "reduce"),
            ("multi_tensor_apply", "multi_tensor_apply"),
        ):
            if needle in first_kernel:
                return cat
    return "other"


# --- TraceLens's perf models --------------------------------------------------------------------

_BPE = {
    "double": 8,
    "long int": 8,
    "float": 4,
    "scalar": 4,
    "int": 4,
    "c10::half": 2,
    "c10::bfloat16": 2,
    "c10::float8_e4m3fnuz": 1,
    "c10::float8_e4m3fn": 1,
    "c10::float8_e5m2": 1,
    "unsigned char": 1,
    "signed char": 1,
    "fp8": 1,
}
_TORCH_DTYPE = {
    "float": "fp32",
    "double": "fp64",
    "c10::half": "fp16",
    "c10::bfloat16": "bf16",
    "c10::float8_e4m3fnuz": "fp8",
    "unsigned char": "fp8",
    "fp8": "fp8",
}


def name2bpe(name: str | None) -> int | None:
    """TraceLens's bytes per element of an ``Input type`` name (None: unknown, e.g. ``bool``)."""
    return _BPE.get((name or "").lower()) if name is not None else None


def _spec(kind: str, dtype: str | None) -> str | None:
    p = _TORCH_DTYPE.get(dtype.lower()) if isinstance(dtype, str) else None
    return f"{kind}_{p}" if p else None


class _Fail(Exception):
    """The event does not fit the perf model (TraceLens skips it)."""


def _t(x: Any) -> tuple:
    if not isinstance(x, list):
        raise _Fail
    return tuple(_t(v) if isinstance(v, list) else v for v in x)


def _gemm(name: str, d: list, ty: list, st: list | None, c: list) -> tuple[dict, float, float | None, str | None]:
    ai, bi = (1, 2) if name in ("aten::addmm", "aten::baddbmm") else (0, 1)
    a, b = d[ai], d[bi]
    batched = name in ("aten::bmm", "aten::baddbmm")
    if batched:
        bb, m, k = a
        n = b[2]
    else:
        bb, m, k, n = 1, a[0], a[1], b[1]
    bias = name in ("aten::addmm", "aten::baddbmm") or (name == "aten::_scaled_mm" and len(d) == 3)
    dtypes = tuple(ty[ai : bi + 1])
    strides = (_t(st[ai]), _t(st[bi])) if st is not None else (None, None)
    params = {"B": bb, "M": m, "N": n, "K": k, "bias": bias, "stride_A": strides[0], "stride_B": strides[1]}
    params["dtype_A_B"] = dtypes
    flops = 2 * m * n * k + (m * n if bias else 0)
    bpe = name2bpe(dtypes[0])
    if name == "aten::_scaled_mm":
        if bpe is None or name2bpe(dtypes[1]) is None:
            raise _Fail
        out = 2 if bpe == 1 else bpe if bpe in (2, 4) else None
    else:
        out = bpe
    nbytes = (
        None if bpe is None or out is None else (m * k * bpe + k * n * bpe + m * n * out + (n * bpe if bias else 0))
    )
    if batched:
        flops *= bb
        nbytes = None if nbytes is None else nbytes * bb
    return params, float(flops), None if nbytes is None else float(nbytes), _spec("matrix", dtypes[0])


def _sdpa_cfg(q: list, k: list, v: list, idx: tuple[int, int, int, int]) -> dict:
    bq, hq, nq, dq = (q[i] for i in idx)
    bk, hk, nk, dk = (k[i] for i in idx)
    bv, hv, nv, dv = (v[i] for i in idx)
    if bq != bk or bq != bv or hk != hv or nk != nv or dq != dk:
        raise _Fail
    return {"B": bq, "N_Q": nq, "H_Q": hq, "N_KV": nk, "H_KV": hk, "d_h_qk": dq, "d_h_v": dv}


def _opt_float(s: str) -> float | None:
    return None if s in ("", "None") else float(s)


def _flag(s: str) -> bool:
    return s.lower() == "true" if s not in ("", "None") else False


#: SDPA ops: (index of q, layout indices (B, H, N, d), dropout index, causal index, flash_impl).
_SDPA_ARGS: dict[str, tuple[int, tuple[int, int, int, int], int, int, bool]] = {
    "aten::_scaled_dot_product_flash_attention": (0, (0, 1, 2, 3), 3, 4, True),
    "aten::_scaled_dot_product_efficient_attention": (0, (0, 1, 2, 3), 5, 6, False),
    "aten::_scaled_dot_product_cudnn_attention": (0, (0, 1, 2, 3), 5, 6, False),
    "flash_attn::_flash_attn_forward": (0, (0, 2, 1, 3), 3, 5, True),
    "aten::_scaled_dot_product_flash_attention_backward": (1, (0, 1, 2, 3), 10, 11, True),
    "aten::_scaled_dot_product_efficient_attention_backward": (1, (0, 1, 2, 3), 9, 11, False),
    "aten::_scaled_dot_product_cudnn_attention_backward": (1, (0, 1, 2, 3), 13, 14, False),
    "flash_attn::_flash_attn_backward": (1, (0, 2, 1, 3), 9, 11, True),
}


def _sdpa(name: str, d: list, ty: list, st: list | None, c: list) -> tuple[dict, float, float | None, str | None]:
    qi, idx, di, ci, flash = _SDPA_ARGS[name]
    p = _sdpa_cfg(d[qi], d[qi + 1], d[qi + 2], idx)
    get = lambda i: c[i] if i < len(c) else ""  # noqa: E731
    p.update(dropout=_opt_float(get(di)), causal=_flag(get(ci)), flash_impl=flash, dtype_A_B=tuple(ty[qi : qi + 2]))
    b, nq, hq, nk, hk, dq, dv, causal = (p[x] for x in ("B", "N_Q", "H_Q", "N_KV", "H_KV", "d_h_qk", "d_h_v", "causal"))
    if causal and nq != nk:
        raise _Fail
    q_e, k_e, v_e, o_e = b * nq * hq * dq, b * nk * hk * dq, b * nk * hk * dv, b * nq * hq * dv
    if name in SDPA_BWD_OPS:
        f = 2 * b * hq * nq * nk * dq if flash else 0
        f += b * hq * (2 * nk * nq * dv) + b * nk * dv * (hq // hk - 1)
        f += b * hq * (2 * nq * nk * dv)
        f += b * hq * (2 * nq * nk * dq)
        f += b * hq * (2 * nk * nq * dq) + b * nk * dq * (hq // hk - 1)
        flops = f / 2 if causal else float(f)
        nbytes = (q_e + k_e + v_e + o_e + q_e + k_e + v_e) * 2
    else:
        f = b * hq * (2 * nq * nk * dq) + b * hq * (2 * nq * dv * nk)
        flops = f / 2 if causal else float(f)
        nbytes = (q_e + k_e + v_e + o_e) * 2  # TraceLens's bytes(): 2 bytes per element
    return p, float(flops), float(nbytes), _spec("matrix", p["dtype_A_B"][0])


def _unary(name: str, d: list, ty: list, st: list | None, c: list) -> tuple[dict, float, float | None, str | None]:
    if st is None:
        raise _Fail
    if name == "aten::upsample_nearest1d":
        return _upsample(d, ty, st, c)
    shape = _t(d[0])
    din = ty[0]
    if len(d) > 1 and d[1]:
        dout, sout = ty[1], _t(st[1])
    else:
        dout, sout = None, None
    p = {"op_shape": shape, "dtype_in_out": (din, dout), "stride_input": _t(st[0]), "stride_output": sout}
    n = math.prod(shape)
    bi = name2bpe(din)
    bo = name2bpe(dout) if dout is not None else bi
    nbytes = None if bi is None or bo is None else n * bi + n * bo
    return p, float(n), None if nbytes is None else float(nbytes), _spec("vector", din)


def _upsample(d: list, ty: list, st: list, c: list) -> tuple[dict, float, float | None, str | None]:
    """``upsample_nearest1d(self, output_size, scales)``: the output size from ``output_size``."""
    shape = _t(d[0])
    size = json.loads(c[1]) if len(c) > 1 and c[1] else None
    if not isinstance(size, list) or len(shape) < 2:
        raise _Fail
    out = shape[:2] + tuple(int(x) for x in size)
    p = {
        "op_shape": out,
        "dtype_in_out": (ty[0], ty[0]),
        "stride_input": _t(st[0]),
        "stride_output": None,
        "input_shape": shape,
        "output_shape": out,
    }
    b = name2bpe(ty[0])
    n_in, n_out = math.prod(shape), math.prod(out)
    return p, float(n_out), None if b is None else float(n_in * b + n_out * b), _spec("vector", ty[0])


def _broadcast(s1: tuple, s2: tuple) -> tuple:
    nd = max(len(s1), len(s2))
    a, b = (1,) * (nd - len(s1)) + s1, (1,) * (nd - len(s2)) + s2
    out = []
    for x, y in zip(a, b, strict=True):
        if x != y and x != 1 and y != 1:
            raise _Fail
        out.append(max(x, y))
    return tuple(out)


def _binary(name: str, d: list, ty: list, st: list | None, c: list) -> tuple[dict, float, float | None, str | None]:
    if st is None:
        raise _Fail
    s1, s2 = _t(d[0]), _t(d[1])
    d1, d2 = ty[0], ty[1]
    if len(d) > 2 and d[2]:
        dout, sout = ty[2], _t(st[2])
    else:
        dout, sout = None, None
    p = {
        "shape_in1": s1,
        "shape_in2": s2,
        "dtype_in1_in2_out": (d1, d2, dout),
        "stride_input1": _t(st[0]),
        "stride_input2": _t(st[1]),
        "stride_output": sout,
    }
    so = _broadcast(s1, s2)
    b1, b2 = name2bpe(d1), name2bpe(d2)
    if dout is not None:
        bo = name2bpe(dout)
    elif b1 and b2:
        # the output takes the wider type only when both operands are tensors with dimensions
        bo = max(b1, b2) if s1 and s2 and d1 != "Scalar" and d2 != "Scalar" else b1
    else:
        bo = None
    n1, n2, no = math.prod(s1), math.prod(s2), math.prod(so)
    nbytes = None if b1 is None or b2 is None or bo is None else n1 * b1 + n2 * b2 + no * bo
    return p, float(no), None if nbytes is None else float(nbytes), _spec("vector", d1)


def _reduce(name: str, d: list, ty: list, st: list | None, c: list) -> tuple[dict, float, float | None, str | None]:
    n_in = math.prod(_t(d[0]))
    n_out = 1  # TraceLens counts one output element for every reduction
    kind = name.removeprefix("aten::").removeprefix("linalg_")
    p = {"num_input_elems": n_in, "num_output_elems": n_out, "dtype_in_out": (ty[0], None), "reduce_type": kind}
    b = name2bpe(ty[0])
    nbytes = None if b is None else (n_in + n_out) * b
    return p, float(n_in), None if nbytes is None else float(nbytes), _spec("vector", ty[0])


Model = Callable[[str, list, list, "list | None", list], "tuple[dict, float, float | None, str | None]"]

#: sheet → (op names, perf model, parameter columns in order).
_SHEETS: dict[str, tuple[tuple[str, ...], Model, tuple[str, ...]]] = {
    "GEMM": (
        ("aten::mm", "aten::addmm", "aten::_scaled_mm", "aten::bmm", "aten::baddbmm"),
        _gemm,
        ("B", "M", "N", "K", "bias", "stride_A", "stride_B", "dtype_A_B"),
    ),
    "SDPA_fwd": (
        SDPA_FWD_OPS,
        _sdpa,
        ("B", "N_Q", "H_Q", "N_KV", "H_KV", "d_h_qk", "d_h_v", "dropout", "causal", "flash_impl", "dtype_A_B"),
    ),
    "SDPA_bwd": (
        SDPA_BWD_OPS,
        _sdpa,
        ("B", "N_Q", "H_Q", "N_KV", "H_KV", "d_h_qk", "d_h_v", "dropout", "causal", "flash_impl", "dtype_A_B"),
    ),
    "UnaryElementwise": (
        UNARY_OPS,
        _unary,
        ("op_shape", "dtype_in_out", "stride_input", "stride_output", "input_shape", "output_shape"),
    ),
    "BinaryElementwise": (
        BINARY_OPS,
        _binary,
        ("shape_in1", "shape_in2", "dtype_in1_in2_out", "stride_input1", "stride_input2", "stride_output"),
    ),
    "Reduce_fwd": (REDUCE_OPS, _reduce, ("num_input_elems", "num_output_elems", "dtype_in_out", "reduce_type")),
}


def _py(v: Any) -> str | None:
    """A parameter as pandas writes it (``str`` of the Python value; None stays empty)."""
    if v is None:
        return None
    return str(v)


# --- the tree, float times and busy time -----------------------------------------------------


def _us(trace: Trace, ns: pl.Expr) -> pl.Expr:
    """Float microseconds as the trace wrote them (relative to ``baseTimeNanoseconds``)."""
    base = int(trace.meta.base_time_ns or 0)
    return (ns - base).cast(pl.Float64) / 1e3


def _gpu(trace: Trace) -> pl.DataFrame:
    """GPU activities with float times; ``launch_row`` kept only where TraceLens links the activity:
    when the trace has ``ac2g`` flow events, through a flow *start* with the activity's correlation id
    (ROCm traces record some memsets with two flow ends and no start: TraceLens leaves them unlinked)."""
    ev = trace.scan()
    g = (
        ev.filter(pl.col("kind").is_in(list(GPU_KINDS)) & pl.col("dur_ns").is_not_null())
        .select(
            "row",
            pl.col("kind").cast(pl.String),
            pl.col("name").cast(pl.String),
            "stream",
            "launch_row",
            "correlation",
            _us(trace, pl.col("ts_ns")).alias("ts"),
            (pl.col("dur_ns").cast(pl.Float64) / 1e3).alias("dur"),
        )
        .with_columns((pl.col("ts") + pl.col("dur")).alias("t_end"))
        .collect()
    )
    flows = trace.table("flow").filter(pl.col("cat").cast(pl.String) == "ac2g")
    if flows.height:
        starts = flows.filter(pl.col("ph").cast(pl.String) == "s")["flow_id"].unique()
        g = g.with_columns(
            pl.when(pl.col("correlation").is_in(starts.implode())).then(pl.col("launch_row")).alias("launch_row")
        )
    return g.drop("correlation")


def _busy(df: pl.DataFrame, by: str) -> pl.DataFrame:
    """Per ``by``: the busy time (union length of ``ts``..``t_end``), TraceLens's merge."""
    if df.height == 0:
        return pl.DataFrame(schema={by: df.schema[by], "busy": pl.Float64})
    d = df.select(by, "ts", "t_end").sort([by, "ts"], maintain_order=True)
    d = d.with_columns(pl.col("t_end").cum_max().over(by).alias("__cm"))
    d = d.with_columns(pl.col("__cm").shift(1).over(by).alias("__prev"))
    d = d.with_columns((pl.col("__prev").is_null() | (pl.col("ts") > pl.col("__prev"))).cum_sum().over(by).alias("__b"))
    blocks = d.group_by(by, "__b", maintain_order=True).agg(pl.col("ts").first(), pl.col("t_end").max())
    return blocks.group_by(by, maintain_order=True).agg((pl.col("t_end") - pl.col("ts")).sum().alias("busy"))


def _busy1(ts: np.ndarray, te: np.ndarray) -> tuple[float, float, float]:
    """Busy time, first start and last end of one set of intervals (TraceLens's merge)."""
    if ts.size == 0:
        return 0.0, math.nan, math.nan
    o = np.argsort(ts, kind="stable")
    s, e = ts[o], te[o]
    cm = np.maximum.accumulate(e)
    new = np.ones(s.size, dtype=bool)
    new[1:] = s[1:] > cm[:-1]
    starts = s[new]
    idx = np.flatnonzero(new)
    ends = np.maximum.reduceat(e, idx)
    busy = 0.0
    for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
        busy += b - a
    return busy, float(starts[0]), float(ends[-1])


def _tree(trace: Trace) -> tuple[pl.DataFrame, np.ndarray, np.ndarray, np.ndarray]:
    """CPU tree events (``row, kind, name, pid, tid, ts_ns``: ``cpu_op`` and runtime/driver calls, as
    TraceLens's host tree) and dense arrays by row: parent, kind code (0 cpu_op, 2 runtime/driver)."""
    t = (
        trace.scan()
        .filter(pl.col("kind").is_in(list(_TREE_KINDS)) & pl.col("dur_ns").is_not_null())
        .select("row", pl.col("kind").cast(pl.String), "name", "pid", "tid", "ts_ns", "end_ns")
        .collect()
    )
    n = nest(t.select("row", "pid", "tid", "ts_ns", "end_ns"))
    size = int(trace.scan().select(pl.col("row").max()).collect().item() or 0) + 1
    parent = np.full(size, -1, np.int64)
    code = np.full(size, -1, np.int8)
    parent[n["row"].to_numpy()] = n["parent_row"].fill_null(-1).to_numpy()
    kcode = t["kind"].replace_strict({"cpu_op": 0, "cuda_runtime": 2, "cuda_driver": 2}).to_numpy()
    code[t["row"].to_numpy()] = kcode
    depth = np.full(size, -1, np.int64)
    depth[n["row"].to_numpy()] = n["depth"].to_numpy()
    return t, parent, code, depth


def _ancestor_pairs(rows: np.ndarray, parent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(descendant row, ancestor row) for every ancestor of each of ``rows``."""
    ds, anc = [], []
    cur = parent[rows]
    keep = cur >= 0
    src, cur = rows[keep], cur[keep]
    while cur.size:
        ds.append(src)
        anc.append(cur)
        nxt = parent[cur]
        keep = nxt >= 0
        src, cur = src[keep], nxt[keep]
    if not ds:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return np.concatenate(ds), np.concatenate(anc)


def _nearest_cpu_op(rows: np.ndarray, parent: np.ndarray, code: np.ndarray) -> np.ndarray:
    """For each row, its nearest ``cpu_op`` ancestor (-1 none)."""
    out = np.full(rows.size, -1, np.int64)
    cur = parent[rows].copy()
    todo = np.flatnonzero(cur >= 0)
    while todo.size:
        c = cur[todo]
        hit = code[c] == 0
        out[todo[hit]] = c[hit]
        todo = todo[~hit]
        cur[todo] = parent[cur[todo]]
        todo = todo[cur[todo] >= 0]
    return out


# --- the sheets ---------------------------------------------------------------------------------


def _meta_names(trace: Trace) -> tuple[dict[int, str], dict[int, str], dict[tuple[int, int], str]]:
    m = trace.kind("metadata", columns=["row", "name", "pid", "tid"])
    if m.height == 0:
        return {}, {}, {}
    m = trace.with_args(m.with_columns(pl.col("name").cast(pl.String)), "meta")
    pname, plabel, tname = {}, {}, {}
    for name, pid, tid, label, labels in m.select(
        "name", "pid", "tid", pl.col("label").cast(pl.String), pl.col("labels").cast(pl.String)
    ).iter_rows():
        if name == "process_name" and label is not None:
            pname[int(pid)] = label
        elif name == "process_labels" and labels is not None:
            plabel[int(pid)] = labels
        elif name == "thread_name" and label is not None:
            tname[(int(pid), int(tid))] = label
    return pname, plabel, tname


def _gpu_timeline(g: pl.DataFrame) -> pl.DataFrame:
    linked = g.filter(pl.col("launch_row").is_not_null())
    nccl = pl.col("name").str.contains("nccl", literal=True)
    comp = linked.filter((pl.col("kind") != "memcpy") & ~nccl)
    comm = linked.filter((pl.col("kind") != "memcpy") & nccl)
    mem = linked.filter(pl.col("kind") == "memcpy")

    def arr(*dfs: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        d = pl.concat([x.select("ts", "t_end") for x in dfs]) if dfs else linked.select("ts", "t_end").head(0)
        return d["ts"].to_numpy(), d["t_end"].to_numpy()

    comp_t = _busy1(*arr(comp))[0]
    comm_t = _busy1(*arr(comm))[0]
    mem_t = _busy1(*arr(mem))[0]
    cc = _busy1(*arr(comp, comm))[0]
    busy, first, last = _busy1(*arr(comp, comm, mem))
    total = last - first if linked.height else math.nan
    m = {
        "computation_time": comp_t,
        "exposed_comm_time": cc - comp_t,
        "exposed_memcpy_time": busy - cc,
        "busy_time": busy,
        "idle_time": total - busy,
        "total_time": total,
        "total_comm_time": comm_t,
        "total_memcpy_time": mem_t,
    }
    return pl.DataFrame(
        {
            "type": list(m),
            "time ms": [v / 1e3 for v in m.values()],
            "percent": [v / total * 100 if total else math.nan for v in m.values()],
        }
    )


def tracelens_sheets(trace: Trace, strides: pl.DataFrame | None = None) -> dict[str, pl.DataFrame]:
    """TraceLens's perf report sheets of one trace (module doc). ``strides``: ``row, input_strides``
    (JSON text) of the perf-sheet ops, read from the file by the caller when not given."""
    g = _gpu(trace)
    tree, parent, code, _depth = _tree(trace)
    names = tree.select(pl.col("row").cast(pl.Int64), pl.col("name").cast(pl.String))
    total_ms = None
    sheets: dict[str, pl.DataFrame] = {}
    tl = _gpu_timeline(g)
    sheets["gpu_timeline"] = tl
    total_ms = tl.filter(pl.col("type") == "total_time")["time ms"][0]

    # GPU work under each runtime call, in launch order
    launch_ts = tree.select(pl.col("row").alias("launch_row"), pl.col("ts_ns").alias("launch_ts"))
    linked = (
        g.filter(pl.col("launch_row").is_not_null())
        .join(launch_ts, on="launch_row", how="left")
        .sort(["launch_ts", "launch_row", "ts", "row"])
    )
    lrow = linked["launch_row"].cast(pl.Int64).to_numpy()
    rt_parent = parent[lrow] if lrow.size else np.empty(0, np.int64)
    linked = linked.with_columns(
        pl.Series("rt_parent", rt_parent, dtype=pl.Int64),
        pl.Series("parent_is_op", (code[rt_parent] == 0) & (rt_parent >= 0) if lrow.size else np.empty(0, bool)),
    )
    nccl = pl.col("name").str.contains("nccl", literal=True)
    # launchers: cpu_ops with non-NCCL work under a child runtime call
    op_direct = linked.filter(pl.col("parent_is_op") & ~nccl).with_columns(pl.col("rt_parent").alias("launcher"))
    covered = op_direct["launch_row"].unique()
    rt = linked.filter(~pl.col("launch_row").is_in(covered.implode()))
    per_rt = rt.group_by("launch_row").agg(pl.len().alias("__n"), nccl.all().alias("__nccl"))
    rt_keep = per_rt.filter(~((pl.col("__n") == 1) & pl.col("__nccl")))["launch_row"]
    rt_direct = rt.filter(pl.col("launch_row").is_in(rt_keep.implode())).with_columns(
        pl.col("launch_row").cast(pl.Int64).alias("launcher")
    )
    direct = pl.concat([op_direct, rt_direct], how="vertical_relaxed")
    # subtree work of every cpu_op: the GPU work of the runtime calls beneath it
    d_rows, a_rows = _ancestor_pairs(lrow, parent) if lrow.size else (np.empty(0, np.int64),) * 2
    pairs = pl.DataFrame({"launch_row": d_rows, "op": a_rows}).unique()
    sub = linked.with_columns(pl.col("launch_row").cast(pl.Int64)).join(pairs, on="launch_row")
    cats = _launcher_category(direct, names)
    sheets["ops_summary_by_category"], sheets["ops_summary"] = _launchers(direct, sub, names, cats)
    if strides is None:
        strides = _read_strides(trace, tree)
    for sheet, (ops, model, pcols) in _SHEETS.items():
        df = _perf_sheet(trace, tree, sub, ops, model, pcols, strides, transpose=sheet == "GEMM")
        if df.height:
            sheets[sheet] = df
    sheets["kernel_summary"] = _kernel_summary(g, parent, code, names, cats, total_ms)
    return {k: sheets[k] for k in SHEETS if k in sheets}


def _pd_desc(df: pl.DataFrame, col: str) -> pl.DataFrame:
    """``df`` ordered as pandas' ``sort_values(col, ascending=False)`` orders it (its default
    quicksort through ``nargsort``: ties come out in the order numpy's quicksort leaves them)."""
    v = df[col].to_numpy()
    idx = np.arange(v.size)
    order = idx[::-1][np.argsort(v[::-1], kind="quicksort")][::-1]
    return df[order]


def _launcher_category(direct: pl.DataFrame, names: pl.DataFrame) -> pl.DataFrame:
    """``launcher, op category`` of every launcher (its name and first direct kernel): one Python call
    per distinct (name, first kernel)."""
    first = (
        direct.sort(["launcher", "launch_ts", "launch_row", "ts", "row"])
        .group_by("launcher", maintain_order=True)
        .agg(pl.col("name").first().alias("__k"))
        .join(names.rename({"row": "launcher", "name": "__n"}), on="launcher", how="left")
    )
    pairs = first.select("__n", "__k").unique()
    cat = [categorize(n or "", k) for n, k in pairs.iter_rows()]
    pairs = pairs.with_columns(pl.Series("op category", cat, dtype=pl.String))
    return first.join(pairs, on=["__n", "__k"], how="left", nulls_equal=True).select("launcher", "op category")


def _launchers(
    direct: pl.DataFrame, sub: pl.DataFrame, names: pl.DataFrame, cats: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame]:
    busy = _busy(direct.select("launcher", "ts", "t_end"), "launcher").rename({"busy": "direct"})
    sb = _busy(sub.select(pl.col("op").alias("launcher"), "ts", "t_end"), "launcher").rename({"busy": "subtree"})
    lst = (
        busy.join(sb, on="launcher", how="left")
        .with_columns(pl.col("subtree").fill_null(pl.col("direct")))
        .join(names.rename({"row": "launcher"}), on="launcher", how="left")
        .join(cats, on="launcher", how="left")
        .with_columns(pl.col("name").fill_null(""), pl.col("op category").fill_null("other"))
        .sort("launcher")
    )
    # pandas: groupby sorts the keys, then sort_values orders by time
    by_cat = _pd_desc(
        lst.group_by("op category")
        .agg(pl.len().alias("Count"), (pl.col("direct").sum() / 1000).alias("total_direct_kernel_time_ms"))
        .sort("op category"),
        "total_direct_kernel_time_ms",
    )
    tot = by_cat["total_direct_kernel_time_ms"].sum()
    by_cat = by_cat.with_columns(
        (pl.col("total_direct_kernel_time_ms") / tot * 100).alias("Percentage (%)")
    ).with_columns(pl.col("Percentage (%)").cum_sum().alias("Cumulative Percentage (%)"))
    by_name = _pd_desc(
        lst.group_by("name")
        .agg(
            pl.col("direct").sum().alias("total_direct_kernel_time_sum"),
            pl.col("subtree").sum().alias("total_subtree_kernel_time_sum"),
            pl.len().alias("Count"),
            pl.col("op category").unique(maintain_order=True).alias("__cats"),
        )
        .sort("name"),
        "total_direct_kernel_time_sum",
    )
    tot_ms = by_name["total_direct_kernel_time_sum"].sum() / 1000
    by_name = by_name.with_columns(
        (pl.col("total_direct_kernel_time_sum") / 1000).alias("total_direct_kernel_time_ms"),
        (pl.col("total_subtree_kernel_time_sum") / 1000).alias("total_subtree_kernel_time_ms"),
        pl.col("__cats").map_elements(lambda c: str(list(c)), return_dtype=pl.String).alias("Categories"),
    ).with_columns((pl.col("total_direct_kernel_time_ms") / tot_ms * 100).alias("Percentage (%)"))
    by_name = by_name.with_columns(pl.col("Percentage (%)").cum_sum().alias("Cumulative Percentage (%)")).select(
        "name",
        "total_direct_kernel_time_sum",
        "total_subtree_kernel_time_sum",
        "total_direct_kernel_time_ms",
        "total_subtree_kernel_time_ms",
        "Count",
        "Categories",
        "Percentage (%)",
        "Cumulative Percentage (%)",
    )
    return by_cat.select(
        "op category", "Count", "total_direct_kernel_time_ms", "Percentage (%)", "Cumulative Percentage (%)"
    ), by_name


def _read_strides(trace: Trace, tree: pl.DataFrame) -> pl.DataFrame:
    names = [n for sheet in _SHEETS.values() for n in sheet[0]]
    rows = tree.filter((pl.col("kind") == "cpu_op") & pl.col("name").cast(pl.String).is_in(names))["row"]
    if rows.len() == 0:
        return pl.DataFrame(schema={"row": pl.UInt32, "input_strides": pl.String})
    raw = trace.raw_events(rows)
    vals = []
    for ev in raw:
        s = (ev.get("args") or {}).get("Input Strides")
        vals.append(None if s is None else json.dumps(s))
    return pl.DataFrame({"row": rows, "input_strides": pl.Series(vals, dtype=pl.String)})


def _loads(text: str | None) -> list:
    if not text:
        return []
    try:
        v = json.loads(text)
    except ValueError:
        return []
    return v if isinstance(v, list) else []


def _perf_sheet(
    trace: Trace,
    tree: pl.DataFrame,
    sub: pl.DataFrame,
    ops: tuple[str, ...],
    model: Model,
    pcols: tuple[str, ...],
    strides: pl.DataFrame,
    *,
    transpose: bool = False,
) -> pl.DataFrame:
    ev = tree.filter((pl.col("kind") == "cpu_op") & pl.col("name").cast(pl.String).is_in(list(ops))).select(
        "row", pl.col("name").cast(pl.String), "pid", "tid"
    )
    if ev.height == 0:
        return pl.DataFrame()
    args = trace.table("op").select(
        "row", *(pl.col(c).cast(pl.String) for c in ("input_dims", "input_type", "concrete_inputs"))
    )
    ev = ev.join(args, on="row", how="left").join(strides, on="row", how="left").sort("row")
    # per event: the perf model (one Python call per distinct call signature)
    keys = ev.select("name", "input_dims", "input_type", "input_strides", "concrete_inputs").unique()
    out: list[tuple[Any, ...]] = []
    for name, dims, types, st, conc in keys.iter_rows():
        d, ty, c = _loads(dims), _loads(types), [str(x) for x in _loads(conc)]
        s = json.loads(st) if st else None
        try:
            params, flops, nbytes, spec = model(name, d, ty, s, c)
        except (_Fail, IndexError, TypeError, ValueError, KeyError, ZeroDivisionError):
            out.append((name, dims, types, st, conc, None, None, None, None))
            continue
        out.append((name, dims, types, st, conc, json.dumps([_py(params.get(k)) for k in pcols]), flops, nbytes, spec))
    model_df = pl.DataFrame(
        out,
        schema={
            "name": pl.String,
            "input_dims": pl.String,
            "input_type": pl.String,
            "input_strides": pl.String,
            "concrete_inputs": pl.String,
            "__params": pl.String,
            "__flops": pl.Float64,
            "__bytes": pl.Float64,
            "Compute Spec": pl.String,
        },
        orient="row",
    )
    ev = ev.join(
        model_df,
        on=["name", "input_dims", "input_type", "input_strides", "concrete_inputs"],
        how="left",
        nulls_equal=True,
    ).filter(pl.col("__params").is_not_null())
    if ev.height == 0:
        return pl.DataFrame()
    # kernel time: busy time of the GPU work in the event's subtree
    kern = sub.filter(pl.col("op").is_in(ev["row"].cast(pl.Int64).implode()))
    busy = _busy(kern.select("op", "ts", "t_end"), "op")
    ev = ev.join(busy.rename({"op": "__row"}), left_on=pl.col("row").cast(pl.Int64), right_on="__row", how="left")
    ev = ev.with_columns(pl.col("busy").fill_null(0.0).alias("kt"))
    gfl = pl.col("__flops") / 1e9
    ev = ev.with_columns(
        gfl.alias("GFLOPS"),
        (pl.col("__bytes") / (1024 * 1024)).alias("Data Moved (MB)"),
        pl.when(pl.col("__bytes") > 0).then(gfl * 1e9 / pl.col("__bytes")).otherwise(float("nan")).alias("FLOPS/Byte"),
        pl.when(pl.col("kt") > 0).then((pl.col("__bytes") / 1e12) / (pl.col("kt") / 1e6)).alias("TB/s"),
        pl.when(pl.col("kt") > 0).then((gfl / 1e3) / (pl.col("kt") / 1e6)).alias("TFLOPS/s"),
    )
    pname, plabel, tname = _meta_names(trace)
    threads = ev.select("pid", "tid").unique()
    threads = threads.with_columns(
        pl.Series(
            "thread_name",
            [tname.get((int(a), int(b)), "Unknown") for a, b in threads.iter_rows()],
            dtype=pl.String,
        )
    )
    ev = ev.join(threads, on=["pid", "tid"], how="left").with_columns(
        pl.col("pid").replace_strict(pname, default="Unknown", return_dtype=pl.String).alias("process_name"),
        pl.col("pid").replace_strict(plabel, default="Unknown", return_dtype=pl.String).alias("process_label"),
    )
    # kernel details per event (name, stream, dur), in order
    kd = (
        kern.join(ev.select(pl.col("row").cast(pl.Int64).alias("op")), on="op")
        .sort(["op", "row"])  # TraceLens's gpu_events: in the order of the GPU events in the file
        .with_columns(pl.int_range(pl.len()).over("op").alias("__i"), pl.len().over("op").alias("__n"))
    )
    if transpose:  # GEMM: TraceLens's transpose flags, from the first kernel name it can parse
        flags = {n: _transpose(n) for n in kd["name"].unique().to_list()}
        flag_text = {n: str(f) for n, f in flags.items() if f is not None}
        tr = (
            kd.with_columns(pl.col("name").replace_strict(flag_text, default=None, return_dtype=pl.String).alias("__t"))
            .group_by("op", maintain_order=True)
            .agg(pl.col("__t").drop_nulls().first().alias("__tr"))
        )
        ev = ev.join(tr, left_on=pl.col("row").cast(pl.Int64), right_on="op", how="left")
    else:
        ev = ev.with_columns(pl.lit(None, dtype=pl.String).alias("__tr"))
    stats = ["mean", "median", "std", "min", "max"]
    agg = [
        pl.col("GFLOPS").first().alias("GFLOPS_first"),
        pl.col("Data Moved (MB)").first().alias("Data Moved (MB)_first"),
        pl.col("FLOPS/Byte").first().alias("FLOPS/Byte_first"),
        *(_stat(pl.col("TB/s"), s).alias(f"TB/s_{s}") for s in stats),
        *(_stat(pl.col("TFLOPS/s"), s).alias(f"TFLOPS/s_{s}") for s in stats),
        pl.col("process_name").first().alias("process_name_first"),
        pl.col("process_label").first().alias("process_label_first"),
        pl.col("thread_name").first().alias("thread_name_first"),
        pl.col("Compute Spec").first(),
        pl.col("input_dims").first().alias("__dims"),
        pl.col("input_type").first().alias("__types"),
        pl.col("input_strides").first().alias("__strides"),
        pl.col("concrete_inputs").first().alias("__conc"),
        *(_stat(pl.col("kt"), s).alias(f"Kernel Time (µs)_{s}") for s in stats),
        pl.col("kt").sum().alias("Kernel Time (µs)_sum"),
        pl.len().alias("name_count"),
        pl.col("row").first().alias("UID_first"),
        pl.col("row").alias("__rows"),
    ]
    grp = ev.group_by("name", "__params", "__tr", maintain_order=True).agg(agg)
    grp = grp.sort(["Kernel Time (µs)_sum", "UID_first"], descending=[True, False], maintain_order=True)
    details = _kernel_details(grp, kd)
    grp = grp.join(details, on="UID_first", how="left").with_columns(
        pl.col("kernel_details__summarize_kernel_stats").fill_null("[]")
    )
    # parameter columns, and the args as Python reprs
    prm = [json.loads(p) for p in grp["__params"].to_list()]
    cols: dict[str, Any] = {"name": grp["name"]}
    for i, col in enumerate(pcols):
        vals = [p[i] for p in prm]
        cols[f"param: {col}"] = pl.Series(vals, dtype=pl.String)
    if transpose:
        cols["param: transpose"] = grp["__tr"]
        pcols = (*pcols, "transpose")
    # optional parameters (TraceLens's columns exist only when some call has them)
    for col in ("input_shape", "output_shape", "transpose"):
        if f"param: {col}" in cols and cols[f"param: {col}"].null_count() == len(prm):
            del cols[f"param: {col}"]
    pcols = tuple(col for col in pcols if f"param: {col}" in cols)
    out_df = pl.DataFrame(cols).with_columns(
        *(grp[c] for c in grp.columns if not c.startswith("__") and c not in ("name", "__params"))
    )
    out_df = out_df.with_columns(
        pl.Series("Input Dims_first", [_repr_json(x) for x in grp["__dims"].to_list()], dtype=pl.String),
        pl.Series("Input type_first", [_repr_json(x) for x in grp["__types"].to_list()], dtype=pl.String),
        pl.Series("Input Strides_first", [_repr_json(x) for x in grp["__strides"].to_list()], dtype=pl.String),
        pl.Series("Concrete Inputs_first", [_repr_json(x) for x in grp["__conc"].to_list()], dtype=pl.String),
    )
    order = (
        ["name", *(f"param: {c}" for c in pcols), "GFLOPS_first", "Data Moved (MB)_first", "FLOPS/Byte_first"]
        + [f"TB/s_{s}" for s in stats]
        + [f"TFLOPS/s_{s}" for s in stats]
        + ["process_name_first", "process_label_first", "thread_name_first", "Compute Spec"]
        + ["kernel_details__summarize_kernel_stats", "trunc_kernel_details"]
        + ["Input Dims_first", "Input type_first", "Input Strides_first", "Concrete Inputs_first"]
        + [f"Kernel Time (µs)_{s}" for s in stats]
        + ["Kernel Time (µs)_sum", "name_count", "UID_first"]
    )
    return out_df.select(order)


def _transpose(name: str) -> tuple[bool | None, bool | None] | None:
    """TraceLens's ``gemm_name_parser`` transpose flags (Tensile and nvjet GEMM names), None otherwise."""
    if re.match(r"^.*C[a-z]{3}_A[a-z]{3}_B[a-z]{3}.*$", name):
        a = False if "_Ailk_" in name else True if "_Alik_" in name else None
        b = False if "_Bljk_" in name else True if "_Bjlk_" in name else None
        return a, b
    if name.startswith("nvjet"):
        chars = name.split("_")[-1]
        return chars[:1] == "T", chars[1:2] == "T"
    return None


def _stat(e: pl.Expr, s: str) -> pl.Expr:
    if s == "std":
        return e.std(ddof=1)
    return getattr(e, s)()


def _repr_json(text: str | None) -> str | None:
    """A recorded arg (JSON text) as Python writes the list (``[[16, 559], []]``, ``['', '1']``)."""
    if text is None:
        return None
    try:
        return str(json.loads(text))
    except ValueError:
        return text


def _np(v: float) -> str:
    return f"np.float64({float(v)!r})"


def _kernel_details(grp: pl.DataFrame, kd: pl.DataFrame) -> pl.DataFrame:
    """TraceLens's ``_summarize_kernel_stats``: per kernel position of the group's first call with
    kernels, statistics over the calls with as many kernels."""
    rows_of = grp.select("UID_first", "__rows").explode("__rows").rename({"__rows": "op"})
    k = kd.join(rows_of.with_columns(pl.col("op").cast(pl.Int64)), on="op")
    if k.height == 0:
        return pl.DataFrame(
            schema={
                "UID_first": grp.schema["UID_first"],
                "kernel_details__summarize_kernel_stats": pl.String,
                "trunc_kernel_details": pl.String,
            }
        )
    # the template: the first call (lowest row) of the group that launched work
    tmpl = k.group_by("UID_first").agg(pl.col("op").min().alias("__t"))
    k = k.join(tmpl, on="UID_first")
    tn = k.filter(pl.col("op") == pl.col("__t")).select("UID_first", pl.col("__n").alias("__tn")).unique()
    k = k.join(tn, on="UID_first").filter(pl.col("__n") == pl.col("__tn"))
    heads = (
        k.filter(pl.col("op") == pl.col("__t"))
        .select("UID_first", "__i", "name", "stream")
        .rename({"name": "__kname", "stream": "__kstream"})
    )
    st = (
        k.group_by("UID_first", "__i")
        .agg(
            pl.len().alias("count"),
            pl.col("dur").sum().alias("total"),
            pl.col("dur").mean().alias("mean"),
            pl.col("dur").median().alias("median"),
            pl.col("dur").std(ddof=0).alias("std"),
            pl.col("dur").min().alias("min"),
            pl.col("dur").max().alias("max"),
        )
        .join(heads, on=["UID_first", "__i"])
        .sort(["UID_first", "total", "__i"])  # TraceLens lists a call's kernels by total time, shortest first
    )
    full: dict[Any, list[str]] = {}
    trunc: dict[Any, list[str]] = {}
    for r in st.iter_rows(named=True):
        name, stream = r["__kname"], r["__kstream"]
        full.setdefault(r["UID_first"], []).append(
            "{"
            + f"'name': {name!r}, 'stream': {stream!r}, 'count': {r['count']}, 'total_duration_us': {_np(r['total'])}, "
            f"'mean_duration_us': {_np(r['mean'])}, 'median_duration_us': {_np(r['median'])}, "
            f"'std_dev_duration_us': {_np(r['std'])}, 'min_duration_us': {_np(r['min'])}, "
            f"'max_duration_us': {_np(r['max'])}" + "}"
        )
        short = name[:64] + "..." if len(name) > 64 else name
        trunc.setdefault(r["UID_first"], []).append(
            "{" + f"'name': {short!r}, 'stream': {stream!r}, 'mean_duration_us': {_np(round(r['mean'], 2))}" + "}"
        )
    uids = list(full)
    return pl.DataFrame(
        {
            "UID_first": pl.Series(uids, dtype=grp.schema["UID_first"]),
            "kernel_details__summarize_kernel_stats": ["[" + ", ".join(full[u]) + "]" for u in uids],
            "trunc_kernel_details": ["[" + ", ".join(trunc[u]) + "]" for u in uids],
        }
    )


def _kernel_summary(
    g: pl.DataFrame,
    parent: np.ndarray,
    code: np.ndarray,
    names: pl.DataFrame,
    cats: pl.DataFrame,
    total_ms: float,
) -> pl.DataFrame:
    k = g.filter(pl.col("kind") == "kernel")
    lr = k["launch_row"].cast(pl.Int64).fill_null(-1).to_numpy()
    has = lr >= 0
    op = np.full(lr.size, -1, np.int64)
    if has.any():
        op[has] = _nearest_cpu_op(lr[has], parent, code)
    k = k.with_columns(
        pl.Series("__op", op, dtype=pl.Int64).replace(-1, None),
        pl.col("launch_row").cast(pl.Int64).alias("__lr"),
    )
    k = (
        k.join(names.rename({"row": "__op", "name": "__opname"}), on="__op", how="left")
        .join(names.rename({"row": "__lr", "name": "__launcher"}), on="__lr", how="left")
        .join(cats.rename({"launcher": "__op"}), on="__op", how="left")
    )
    # an op that launched nothing itself has no kernels to fall back on: its name decides
    unnamed = k.filter(pl.col("op category").is_null())["__opname"].drop_nulls().unique().to_list()
    opcat = {n: categorize(n, None) for n in unnamed}
    low = pl.col("__launcher").str.to_lowercase()
    by_name = pl.col("__opname").replace_strict(opcat, default=None, return_dtype=pl.String)
    k = k.with_columns(
        pl.when(pl.col("__op").is_not_null())
        .then(pl.coalesce("op category", by_name))
        .when(pl.col("__launcher").is_not_null())
        .then(
            pl.when(low.str.contains("cudagraph", literal=True) | low.str.contains("graphlaunch", literal=True))
            .then(pl.lit("graph"))
            .otherwise(pl.lit("runtime"))
        )
        .alias("Parent op category"),
        pl.coalesce("__opname", "__launcher").alias("Parent cpu_op"),
    )
    total_k = float(k["dur"].sum()) if k.height else 0.0
    keys = ["Parent op category", "Parent cpu_op", "name", "stream"]
    s = (
        k.group_by(keys)
        .agg(
            pl.col("dur").sum().alias("Kernel duration (µs)_sum"),
            pl.len().alias("Kernel duration (µs)_count"),
            pl.col("dur").mean().alias("Kernel duration (µs)_mean"),
            pl.col("dur").min().alias("Kernel duration (µs)_min"),
            pl.col("dur").max().alias("Kernel duration (µs)_max"),
        )
        .rename({"name": "Kernel name", "stream": "Kernel stream"})
        .with_columns(
            (pl.col("Kernel duration (µs)_sum") / total_k * 100).alias("Percent of kernels time (%)"),
            (pl.col("Kernel duration (µs)_sum") / (total_ms * 1e3) * 100).alias("Percent of total time (%)"),
        )
        .sort(["Parent op category", "Parent cpu_op", "Kernel name", "Kernel stream"], nulls_last=True)
    )
    return _pd_desc(s, "Kernel duration (µs)_sum")
