"""FLOPs of matmul-class and attention ops from their recorded input shapes.

Conventions follow PyTorch's ``torch.utils.flop_counter`` (what ``FlopCounterMode`` reports): a
multiply-add counts 2 FLOPs; bias additions, softmax, scaling and masking are not counted; causal
attention is counted as full attention. Shapes come from the op's ``Input Dims``, scalar
arguments (stride, padding, ``output_mask``) from ``Concrete Inputs``.

| op | FLOPs |
|---|---|
| ``mm(A[M,K], B[K,N])``, ``_scaled_mm`` | 2·M·K·N |
| ``addmm(C, A[M,K], B[K,N])`` | 2·M·K·N |
| ``bmm(A[b,M,K], B[b,K,N])``, ``baddbmm(C, A, B)``, ``addbmm(C, A, B)`` | 2·b·M·K·N |
| ``matmul(A[..., M, K], B[..., K, N])`` (1-D operands as in torch) | 2·Π(broadcast batch)·M·K·N |
| ``linear(X[..., K], W[N, K])`` | 2·Π(X[:-1])·K·N |
| ``mv(A[M,K], x)``, ``addmv(y, A, x)`` | 2·M·K |
| ``_grouped_mm``, ``_scaled_grouped_mm`` | 3-D × 3-D: 2·G·M·K·N; 2-D[T,K] × 3-D[G,K,N]: 2·T·K·N; 2-D × 2-D: 2·M·K·N |
| convolution forward (``conv1d/2d/3d``, ``convolution``, ``_convolution``, ``cudnn_convolution``, ``miopen_convolution``, ``mkldnn_convolution``, ``conv_transpose*``, ``cudnn_convolution_transpose``) | 2·N·Π(W)·Π(out spatial) (``in`` spatial for transposed), W = [C_out, C_in/groups, k...] |
| convolution backward (``convolution_backward``, ``cudnn_convolution_backward``, ``miopen_convolution_backward``) | forward FLOPs × (number of ``output_mask`` entries set among input- and weight-grad) |
| ``cudnn_convolution_backward_input`` | forward FLOPs |
| SDPA forward (``scaled_dot_product_attention``, ``_scaled_dot_product_{flash,efficient,cudnn}_attention``, ``_scaled_dot_product_flash_attention_for_cpu``; ``_flash_attention_forward``, ``_efficient_attention_forward``, ``flash_attn::_flash_attn_forward`` with [B, S, H, D] layout) | 2·B·H·S_q·S_k·(D + D_v) |
| SDPA backward (the ``*_backward`` of the above) | 2·B·H·S_q·S_k·(3·D + 2·D_v) (= 2.5 × forward when D = D_v) |

Output spatial sizes of a forward convolution need stride, padding and dilation from ``Concrete
Inputs``; traces without them (before PyTorch 1.13) are counted as stride 1, "same" padding and
flagged ``estimated``. ``cudnn_convolution_backward_weight`` is not counted on its own (its
recorded inputs lack the kernel size): its enclosing ``cudnn_convolution_backward`` is.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

__all__ = [
    "FORMULAS",
    "BACKWARD_OPS",
    "FORWARD_COMPOSITES",
    "op_flops",
    "Flops",
    "op_cost",
    "op_category",
    "causal_pairs",
    "CATEGORIES",
    "MATRIX_CATEGORIES",
    "BYTES_PER_ELEMENT",
]

Dims = list[Any]
Flops = tuple[float | None, int, bool]  # (flops, index of the input whose type gives the dtype, estimated)


def _prod(xs: list[int]) -> int:
    return math.prod(int(x) for x in xs)


def _mm(d: Dims, c: list[str]) -> Flops:
    a, b = d[0], d[1]
    return 2.0 * a[0] * a[1] * b[1], 0, False


def _addmm(d: Dims, c: list[str]) -> Flops:
    a, b = d[1], d[2]
    return 2.0 * a[0] * a[1] * b[1], 1, False


def _bmm(d: Dims, c: list[str]) -> Flops:
    a, b = d[0], d[1]
    return 2.0 * a[0] * a[1] * a[2] * b[2], 0, False


def _baddbmm(d: Dims, c: list[str]) -> Flops:
    a, b = d[1], d[2]
    return 2.0 * a[0] * a[1] * a[2] * b[2], 1, False


def _mv(d: Dims, c: list[str]) -> Flops:
    return 2.0 * d[0][0] * d[0][1], 0, False


def _addmv(d: Dims, c: list[str]) -> Flops:
    return 2.0 * d[1][0] * d[1][1], 1, False


def _matmul(d: Dims, c: list[str]) -> Flops:
    a, b = list(d[0]), list(d[1])
    if len(a) == 1:
        a = [1, a[0]]
    if len(b) == 1:
        b = [b[0], 1]
    m, k, n = a[-2], a[-1], b[-1]
    ba, bb = a[:-2], b[:-2]
    width = max(len(ba), len(bb))
    ba, bb = [1] * (width - len(ba)) + ba, [1] * (width - len(bb)) + bb
    batch = _prod([max(x, y) for x, y in zip(ba, bb, strict=True)])
    return 2.0 * batch * m * k * n, 0, False


def _linear(d: Dims, c: list[str]) -> Flops:
    x, w = d[0], d[1]
    return 2.0 * _prod(x[:-1]) * x[-1] * w[0], 0, False


def _grouped_mm(d: Dims, c: list[str]) -> Flops:
    a, b = d[0], d[1]
    if len(a) == 3 and len(b) == 3:
        return 2.0 * a[0] * a[1] * a[2] * b[2], 0, False
    if len(a) == 2 and len(b) == 3:
        return 2.0 * a[0] * a[1] * b[2], 0, False
    if len(a) == 3 and len(b) == 2:
        return 2.0 * a[0] * a[1] * a[2] * b[1] / max(a[0], 1), 0, False
    return 2.0 * a[0] * a[1] * b[1], 0, False


def _ints(text: str | None) -> list[int] | None:
    if text is None or text == "":
        return None
    try:
        v = json.loads(text.replace("True", "true").replace("False", "false"))
    except ValueError:
        return None
    if isinstance(v, int):
        return [v]
    if isinstance(v, list) and all(isinstance(x, (int, bool)) for x in v):
        return [int(x) for x in v]
    return None


def _conv_out(
    x: list[int], w: list[int], stride: list[int] | None, pad: Any, dil: list[int] | None
) -> tuple[list[int], bool]:
    n = len(x) - 2
    k = w[2:]
    if stride is None or pad is None:
        return list(x[2:]), True
    if isinstance(pad, str):
        return (
            list(x[2:]) if pad == "same" else [x[2 + i] - (dil[i] if dil else 1) * (k[i] - 1) for i in range(n)]
        ), False
    s = stride * n if len(stride) == 1 else stride
    p = pad * n if len(pad) == 1 else pad
    dl = (dil or [1]) * n if not dil or len(dil) == 1 else dil
    return [(x[2 + i] + 2 * p[i] - dl[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(n)], False


def _conv_flops(x: list[int], w: list[int], out_spatial: list[int]) -> float:
    return 2.0 * x[0] * _prod(w) * _prod(out_spatial)


def _conv(stride_i: int, pad_i: int, dil_i: int, transposed: bool | int) -> Callable[[Dims, list[str]], Flops]:
    """A forward convolution whose stride / padding / dilation are inputs ``stride_i`` etc.;
    ``transposed`` is a bool or the index of the ``transposed`` input."""

    def f(d: Dims, c: list[str]) -> Flops:
        x, w = d[0], d[1]
        if len(x) < 3 or len(w) < 3:
            return None, 0, False
        tr = (
            (c[transposed] == "True")
            if isinstance(transposed, int) and not isinstance(transposed, bool) and len(c) > transposed
            else bool(transposed)
        )
        if tr:
            return _conv_flops(x, w, x[2:]), 0, False

        def get(i: int) -> str | None:
            return c[i] if len(c) > i else None

        pad_text = get(pad_i)
        pad: Any = pad_text.strip('"') if pad_text in ("same", "valid", '"same"', '"valid"') else _ints(pad_text)
        out, est = _conv_out(x, w, _ints(get(stride_i)), pad, _ints(get(dil_i)))
        return _conv_flops(x, w, out), 0, est

    return f


def _mask(c: list[str], i: int) -> list[bool] | None:
    if len(c) <= i or not c[i]:
        return None
    v = _ints(c[i])
    return [bool(x) for x in v] if v else None


def _conv_bwd(go_i: int, x_i: int, w_i: int, mask_i: int) -> Callable[[Dims, list[str]], Flops]:
    def f(d: Dims, c: list[str]) -> Flops:
        go, x, w = d[go_i], d[x_i], d[w_i]
        if len(go) < 3 or len(w) < 3 or len(x) < 3:
            return None, go_i, False
        mask = _mask(c, mask_i) or [True, True]
        # transposed convs: the grad_output holds the input spatial size; the product is the same
        fwd = _conv_flops(x, w, go[2:]) if go[1] == w[0] else _conv_flops(x, w, x[2:])
        return fwd * (int(mask[0]) + int(mask[1])), go_i, False

    return f


def _conv_bwd_input(d: Dims, c: list[str]) -> Flops:
    go, w = d[1], d[2]
    if len(go) < 3 or len(w) < 3:
        return None, 1, False
    return _conv_flops(go, w, go[2:]), 1, False


def _attn(layout: str, q_i: int, backward: bool) -> Callable[[Dims, list[str]], Flops]:
    """``layout`` ``bhsd`` (SDPA) or ``bshd`` (flash / efficient kernels)."""

    def f(d: Dims, c: list[str]) -> Flops:
        q, k, v = d[q_i], d[q_i + 1], d[q_i + 2]
        if len(q) < 3 or len(k) < 3 or len(v) < 3:
            return None, q_i, False
        if layout == "bhsd":
            bh, sq, dq, sk, dv = _prod(q[:-2]), q[-2], q[-1], k[-2], v[-1]
        else:
            if len(q) != 4:
                return None, q_i, False
            bh, sq, dq, sk, dv = q[0] * q[2], q[1], q[3], k[1], v[3]
        per = (3 * dq + 2 * dv) if backward else (dq + dv)
        return 2.0 * bh * sq * sk * per, q_i, False

    return f


_CONV_FWD = {
    "aten::conv1d": _conv(3, 4, 5, False),
    "aten::conv2d": _conv(3, 4, 5, False),
    "aten::conv3d": _conv(3, 4, 5, False),
    "aten::convolution": _conv(3, 4, 5, 6),
    "aten::_convolution": _conv(3, 4, 5, 6),
    "aten::convolution_overrideable": _conv(3, 4, 5, 6),
    "aten::cudnn_convolution": _conv(3, 2, 4, False),
    "aten::miopen_convolution": _conv(4, 3, 5, False),
    "aten::mkldnn_convolution": _conv(4, 3, 5, False),
    "aten::conv_transpose1d": _conv(3, 4, 7, True),
    "aten::conv_transpose2d": _conv(3, 4, 7, True),
    "aten::conv_transpose3d": _conv(3, 4, 7, True),
    "aten::cudnn_convolution_transpose": _conv(4, 2, 5, True),
    "aten::miopen_convolution_transpose": _conv(5, 3, 6, True),
}

_ATTN_FWD = {
    "aten::scaled_dot_product_attention": _attn("bhsd", 0, False),
    "aten::_scaled_dot_product_flash_attention": _attn("bhsd", 0, False),
    "aten::_scaled_dot_product_efficient_attention": _attn("bhsd", 0, False),
    "aten::_scaled_dot_product_cudnn_attention": _attn("bhsd", 0, False),
    "aten::_scaled_dot_product_flash_attention_for_cpu": _attn("bhsd", 0, False),
    "aten::_scaled_dot_product_fused_attention_overrideable": _attn("bhsd", 0, False),
    "aten::_flash_attention_forward": _attn("bshd", 0, False),
    "aten::_efficient_attention_forward": _attn("bshd", 0, False),
    "flash_attn::_flash_attn_forward": _attn("bshd", 0, False),
}

_ATTN_BWD = {
    "aten::_scaled_dot_product_flash_attention_backward": _attn("bhsd", 1, True),
    "aten::_scaled_dot_product_efficient_attention_backward": _attn("bhsd", 1, True),
    "aten::_scaled_dot_product_cudnn_attention_backward": _attn("bhsd", 1, True),
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": _attn("bhsd", 1, True),
    "aten::_scaled_dot_product_fused_attention_overrideable_backward": _attn("bhsd", 1, True),
    "aten::_flash_attention_backward": _attn("bshd", 1, True),
    "aten::_efficient_attention_backward": _attn("bshd", 1, True),
    "flash_attn::_flash_attn_backward": _attn("bshd", 1, True),
}

_CONV_BWD = {
    "aten::convolution_backward": _conv_bwd(0, 1, 2, 10),
    "aten::convolution_backward_overrideable": _conv_bwd(0, 1, 2, 9),
    "aten::cudnn_convolution_backward": _conv_bwd(1, 0, 2, 10),
    "aten::miopen_convolution_backward": _conv_bwd(1, 0, 2, 9),
    "aten::cudnn_convolution_backward_input": _conv_bwd_input,
}

#: op name → formula ``(input_dims, concrete_inputs) -> (flops, dtype input index, estimated)``.
FORMULAS: dict[str, Callable[[Dims, list[str]], Flops]] = {
    "aten::mm": _mm,
    "aten::_scaled_mm": _mm,
    "aten::addmm": _addmm,
    "aten::addmm_": _addmm,
    "aten::bmm": _bmm,
    "aten::baddbmm": _baddbmm,
    "aten::baddbmm_": _baddbmm,
    "aten::addbmm": _baddbmm,
    "aten::matmul": _matmul,
    "aten::linear": _linear,
    "aten::mv": _mv,
    "aten::addmv": _addmv,
    "aten::_grouped_mm": _grouped_mm,
    "aten::_scaled_grouped_mm": _grouped_mm,
    **_CONV_FWD,
    **_ATTN_FWD,
    **_CONV_BWD,
    **_ATTN_BWD,
}

#: Ops that compute gradients (counted as backward wherever they run).
BACKWARD_OPS = frozenset(_CONV_BWD) | frozenset(_ATTN_BWD)

#: Forward ops that no backward formula calls: inside an autograd backward node they are
#: recomputation (activation checkpointing).
FORWARD_COMPOSITES = frozenset(_CONV_FWD) | frozenset(_ATTN_FWD) | {"aten::linear", "aten::matmul"}


def _loads(text: str | None) -> list[Any]:
    if not text:
        return []
    try:
        v = json.loads(text)
    except ValueError:
        return []
    return v if isinstance(v, list) else []


def op_flops(
    name: str, input_dims: str | None, input_type: str | None, concrete: str | None
) -> tuple[float | None, str | None, bool]:
    """FLOPs, input type (Kineto string) and ``estimated`` for one op; FLOPs None if not countable."""
    f = FORMULAS.get(name)
    dims = _loads(input_dims)
    if f is None or not dims:
        return None, None, False
    types = _loads(input_type)
    conc = [str(x) for x in _loads(concrete)]
    try:
        flops, ti, est = f(dims, conc)
    except (IndexError, TypeError, ValueError, KeyError):
        return None, None, False
    itype = types[ti] if len(types) > ti and isinstance(types[ti], str) else None
    return flops, itype, est


# ---------------------------------------------------------------------------------------------
# The per-operator cost model of ``op-perf``: category, FLOPs *and bytes moved* per call.
#
# Conventions (docs/op-perf.md has the table): FLOPs as above (2 per multiply-add) for matrix ops,
# except that causal attention counts only the query-key pairs the mask keeps (the work a causal
# kernel does); elementwise, reduction, normalization and softmax ops count the arithmetic
# operations per element of the formulas in ``_PER_ELEMENT``. Bytes are the minimum DRAM traffic:
# every tensor input read once, every output written once (``bytes = Σ inputs + Σ outputs``);
# scalars (``Scalar``, empty dims with no tensor type) move nothing. A value that the recorded
# shapes, types and scalars do not give is None with the reason, never a guess.
# ---------------------------------------------------------------------------------------------

#: Bytes per element of the ``Input type`` strings the profiler records (a tensor input).
BYTES_PER_ELEMENT = {
    "double": 8,
    "float": 4,
    "c10::Float": 4,
    "c10::Half": 2,
    "c10::BFloat16": 2,
    "c10::Float8_e4m3fn": 1,
    "c10::Float8_e5m2": 1,
    "c10::Float8_e4m3fnuz": 1,
    "c10::Float8_e5m2fnuz": 1,
    "c10::Float8_e8m0fnu": 1,
    "c10::Float4_e2m1fn_x2": 1,
    "long int": 8,
    "int": 4,
    "short int": 2,
    "signed char": 1,
    "unsigned char": 1,
    "bool": 1,
    "c10::complex<float>": 8,
    "c10::complex<double>": 16,
    "c10::complex<c10::Half>": 4,
    "c10::qint8": 1,
    "c10::quint8": 1,
}

#: PyTorch ``ScalarType`` numbers (as ``Concrete Inputs`` records a ``dtype`` argument) → ``Input type`` name.
_SCALAR_TYPE = {
    "0": "unsigned char",
    "1": "signed char",
    "2": "short int",
    "3": "int",
    "4": "long int",
    "5": "c10::Half",
    "6": "float",
    "7": "double",
    "11": "bool",
    "15": "c10::BFloat16",
    "23": "c10::Float8_e5m2",
    "24": "c10::Float8_e4m3fn",
    "25": "c10::Float8_e5m2fnuz",
    "26": "c10::Float8_e4m3fnuz",
}

#: op-perf categories, in display order.
CATEGORIES = (
    "gemm",
    "attention_fwd",
    "attention_bwd",
    "conv_fwd",
    "conv_bwd",
    "elementwise_unary",
    "elementwise_binary",
    "reduction",
    "normalization",
    "softmax",
    "embedding",
    "copy",
    "communication",
    "other",
)
#: Categories whose work is a matrix product (held to the Tensor/Matrix Core peak of their precision).
MATRIX_CATEGORIES = frozenset({"gemm", "attention_fwd", "attention_bwd", "conv_fwd", "conv_bwd"})


class Cost:
    """One call's category, FLOPs and bytes (None: not given by the recorded inputs; ``why`` says why)."""

    __slots__ = ("category", "flops", "bytes", "dtype", "estimated", "why")

    def __init__(
        self,
        category: str,
        flops: float | None = None,
        nbytes: float | None = None,
        dtype: str | None = None,
        estimated: bool = False,
        why: str | None = None,
    ) -> None:
        self.category, self.flops, self.bytes, self.dtype = category, flops, nbytes, dtype
        self.estimated, self.why = estimated, why

    def as_tuple(self) -> tuple[str, float | None, float | None, str | None, bool, str | None]:
        return self.category, self.flops, self.bytes, self.dtype, self.estimated, self.why


class _Args:
    """The recorded inputs of one call: dims, types, concrete values, with tensor helpers."""

    def __init__(self, dims: list[Any], types: list[Any], conc: list[str]) -> None:
        self.dims, self.types, self.conc = dims, types, conc

    def type(self, i: int) -> str | None:
        t = self.types[i] if i < len(self.types) else None
        return t if isinstance(t, str) else None

    def is_tensor(self, i: int) -> bool:
        return i < len(self.dims) and isinstance(self.dims[i], list) and self.type(i) in BYTES_PER_ELEMENT

    def shape(self, i: int) -> list[int]:
        d = self.dims[i]
        if not all(isinstance(x, int) for x in d):
            raise ValueError("not a tensor shape")
        return d

    def numel(self, i: int) -> int:
        return _prod(self.shape(i))

    def bpe(self, i: int) -> int:
        return BYTES_PER_ELEMENT[self.type(i) or ""]

    def nbytes(self, i: int) -> int:
        return self.numel(i) * self.bpe(i) if self.is_tensor(i) else 0

    def tensors(self) -> list[int]:
        return [i for i in range(len(self.dims)) if self.is_tensor(i)]

    def conc_at(self, i: int) -> str | None:
        return self.conc[i] if i < len(self.conc) else None


def _dtype_name(a: _Args, i: int) -> str | None:
    return a.type(i) if a.is_tensor(i) else None


# --- matrix products -----------------------------------------------------------------------


def _gemm_cost(name: str, a: _Args) -> Cost:
    f = FORMULAS[name]
    flops, ti, est = f(a.dims, a.conc)
    if flops is None:
        return Cost("gemm", why="the input shapes do not fit the formula")
    out_bpe = a.bpe(ti)
    if name in ("aten::_scaled_mm", "aten::_scaled_grouped_mm"):
        out = _SCALAR_TYPE.get((a.conc_at(6) or "").strip())
        if out is None:
            return Cost("gemm", flops, None, a.type(ti), est, "the output dtype of _scaled_mm is not recorded")
        out_bpe = BYTES_PER_ELEMENT[out]
    out_elems = _gemm_out_elems(name, a)
    if out_elems is None:
        return Cost("gemm", flops, None, a.type(ti), est, "the output shape is not given by the input shapes")
    read = sum(a.nbytes(i) for i in a.tensors())  # in-place (addmm_): C is read here and written below
    return Cost("gemm", flops, float(read + out_elems * out_bpe), a.type(ti), est)


def _gemm_out_elems(name: str, a: _Args) -> int | None:
    d = a.dims
    short = name.removeprefix("aten::").rstrip("_")
    if short in ("mm", "_scaled_mm"):
        return d[0][0] * d[1][1]
    if short == "addmm":
        return d[1][0] * d[2][1]
    if short == "bmm":
        return d[0][0] * d[0][1] * d[1][2]
    if short == "baddbmm":
        return d[1][0] * d[1][1] * d[2][2]
    if short == "addbmm":
        return d[1][1] * d[2][2]
    if short == "mv":
        return d[0][0]
    if short == "addmv":
        return d[1][0]
    if short == "linear":
        return _prod(d[0][:-1]) * d[1][0]
    if short == "matmul":
        x, y = list(d[0]), list(d[1])
        if len(x) == 1 and len(y) == 1:
            return 1
        if len(x) == 1:
            return _prod(y[:-2]) * y[-1]
        if len(y) == 1:
            return _prod(x[:-1])
        bx, by = x[:-2], y[:-2]
        w = max(len(bx), len(by))
        bx, by = [1] * (w - len(bx)) + bx, [1] * (w - len(by)) + by
        return _prod([max(p, q) for p, q in zip(bx, by, strict=True)]) * x[-2] * y[-1]
    if short in ("_grouped_mm", "_scaled_grouped_mm"):
        x, y = d[0], d[1]
        if len(x) == 3 and len(y) == 3:
            return x[0] * x[1] * y[2]
        if len(x) == 2 and len(y) == 3:
            return x[0] * y[2]
        if len(x) == 3 and len(y) == 2:
            return x[0] * x[1] * y[1]
        return x[0] * y[1]
    return None


def _conv_cost(name: str, a: _Args, backward: bool) -> Cost:
    cat = "conv_bwd" if backward else "conv_fwd"
    flops, ti, est = FORMULAS[name](a.dims, a.conc)
    if flops is None:
        return Cost(cat, why="the input shapes do not fit the formula")
    dt = a.type(ti)
    if backward:
        # reads grad_output, input, weight; writes the gradients that output_mask asks for
        if name == "aten::cudnn_convolution_backward_input":
            read = a.nbytes(1) + a.nbytes(2)
            write = _prod(a.dims[0]) * a.bpe(1) if a.dims[0] and isinstance(a.dims[0][0], int) else None
            if write is None:
                return Cost(cat, flops, None, dt, est, "the input size is not recorded")
            return Cost(cat, flops, float(read + write), dt, est)
        gi, xi, wi, mi = {
            "aten::convolution_backward": (0, 1, 2, 10),
            "aten::convolution_backward_overrideable": (0, 1, 2, 9),
            "aten::cudnn_convolution_backward": (1, 0, 2, 10),
            "aten::miopen_convolution_backward": (1, 0, 2, 9),
        }[name]
        mask = _mask(a.conc, mi) or [True, True, False]
        read = a.nbytes(gi) + a.nbytes(xi) + a.nbytes(wi)
        write = (a.nbytes(xi) if mask[0] else 0) + (a.nbytes(wi) if len(mask) > 1 and mask[1] else 0)
        if len(mask) > 2 and mask[2]:
            write += a.shape(wi)[0] * a.bpe(wi)
        return Cost(cat, flops, float(read + write), dt, est)
    x, w = a.shape(0), a.shape(1)
    out_sp = _conv_out_spatial(name, a)
    if out_sp is None:
        return Cost(cat, flops, None, dt, est, "the output size is not given by the recorded inputs")
    out_elems = x[0] * w[0] * _prod(out_sp)
    read = sum(a.nbytes(i) for i in a.tensors())
    return Cost(cat, flops, float(read + out_elems * a.bpe(0)), dt, est)


def _conv_out_spatial(name: str, a: _Args) -> list[int] | None:
    x, w = a.shape(0), a.shape(1)
    stride_i, pad_i, dil_i, transposed = _CONV_ARGS[name]
    tr = (
        (a.conc_at(transposed) == "True")
        if isinstance(transposed, int) and not isinstance(transposed, bool)
        else bool(transposed)
    )
    if tr:
        return None  # the output size of a transposed convolution needs output_padding: not modelled
    pad_text = a.conc_at(pad_i)
    pad: Any = pad_text.strip('"') if pad_text in ("same", "valid", '"same"', '"valid"') else _ints(pad_text)
    out, est = _conv_out(x, w, _ints(a.conc_at(stride_i)), pad, _ints(a.conc_at(dil_i)))
    return out if not est else list(x[2:])


_CONV_ARGS: dict[str, tuple[int, int, int, bool | int]] = {
    "aten::conv1d": (3, 4, 5, False),
    "aten::conv2d": (3, 4, 5, False),
    "aten::conv3d": (3, 4, 5, False),
    "aten::convolution": (3, 4, 5, 6),
    "aten::_convolution": (3, 4, 5, 6),
    "aten::convolution_overrideable": (3, 4, 5, 6),
    "aten::cudnn_convolution": (3, 2, 4, False),
    "aten::miopen_convolution": (4, 3, 5, False),
    "aten::mkldnn_convolution": (4, 3, 5, False),
    "aten::conv_transpose1d": (3, 4, 7, True),
    "aten::conv_transpose2d": (3, 4, 7, True),
    "aten::conv_transpose3d": (3, 4, 7, True),
    "aten::cudnn_convolution_transpose": (4, 2, 5, True),
    "aten::miopen_convolution_transpose": (5, 3, 6, True),
}


def causal_pairs(sq: int, sk: int, offset: int) -> int:
    """Query-key pairs a causal mask keeps: row ``i`` (0-based) of ``sq`` keeps
    ``clamp(i + 1 + offset, 0, sk)`` keys. ``offset`` 0 is PyTorch's ``is_causal`` (top-left
    aligned, ``tril`` of the ``[sq, sk]`` matrix); ``sk − sq`` is FlashAttention's (bottom-right)."""
    c = 1 + offset  # keys kept by row 0
    i0 = min(max(0, -c + 1), sq)  # first row that keeps at least one key
    i1 = min(max(sk - c, i0), sq)  # first row that keeps every key
    n = i1 - i0
    return n * c + (i0 + i1 - 1) * n // 2 + (sq - i1) * sk


#: Attention ops: (layout, index of q, backward, index of the causal flag, causal alignment).
#: ``mask`` alignment ``tl`` (PyTorch SDPA), ``br`` (FlashAttention), ``type`` (xformers'
#: ``custom_mask_type``: 0 none, 1 top-left, 2 bottom-right).
_ATTN: dict[str, tuple[str, int, bool, int, str]] = {
    "aten::scaled_dot_product_attention": ("bhsd", 0, False, 5, "tl"),
    "aten::_scaled_dot_product_flash_attention": ("bhsd", 0, False, 4, "tl"),
    "aten::_scaled_dot_product_efficient_attention": ("bhsd", 0, False, 6, "tl"),
    "aten::_scaled_dot_product_cudnn_attention": ("bhsd", 0, False, 6, "tl"),
    "aten::_scaled_dot_product_flash_attention_for_cpu": ("bhsd", 0, False, 4, "tl"),
    "aten::_scaled_dot_product_fused_attention_overrideable": ("bhsd", 0, False, 5, "tl"),
    "aten::_flash_attention_forward": ("bshd", 0, False, 8, "tl"),
    "aten::_efficient_attention_forward": ("bshd", 0, False, 9, "type"),
    "flash_attn::_flash_attn_forward": ("bshd", 0, False, 5, "br"),
    "aten::_scaled_dot_product_flash_attention_backward": ("bhsd", 1, True, 11, "tl"),
    "aten::_scaled_dot_product_efficient_attention_backward": ("bhsd", 1, True, 11, "tl"),
    "aten::_scaled_dot_product_cudnn_attention_backward": ("bhsd", 1, True, 14, "tl"),
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": ("bhsd", 1, True, 5, "tl"),
    "aten::_scaled_dot_product_fused_attention_overrideable_backward": ("bhsd", 1, True, 11, "tl"),
    "aten::_flash_attention_backward": ("bshd", 1, True, 11, "tl"),
    "aten::_efficient_attention_backward": ("bshd", 1, True, 14, "type"),
    "flash_attn::_flash_attn_backward": ("bshd", 1, True, 11, "br"),
}


def _attn_cost(name: str, a: _Args) -> Cost:
    layout, qi, backward, ci, align = _ATTN[name]
    cat = "attention_bwd" if backward else "attention_fwd"
    q, k, v = a.shape(qi), a.shape(qi + 1), a.shape(qi + 2)
    if layout == "bhsd":
        if len(q) < 3 or len(k) < 3 or len(v) < 3:
            return Cost(cat, why="the input shapes do not fit the formula")
        bh, sq, d, sk, dv = _prod(q[:-2]), q[-2], q[-1], k[-2], v[-1]
        o_elems = _prod(q[:-1]) * dv
    else:
        if len(q) != 4 or len(k) != 4 or len(v) != 4:
            return Cost(cat, why="the input shapes do not fit the formula")
        bh, sq, d, sk, dv = q[0] * q[2], q[1], q[3], k[1], v[3]
        o_elems = q[0] * q[1] * q[2] * dv
    flag = (a.conc_at(ci) or "").strip()
    est = False
    if align == "type":
        mask_type = flag
        if mask_type not in ("0", "1", "2"):
            est, pairs = True, sq * sk
        else:
            pairs = sq * sk if mask_type == "0" else causal_pairs(sq, sk, 0 if mask_type == "1" else sk - sq)
    elif flag in ("True", "False"):
        pairs = causal_pairs(sq, sk, 0 if align == "tl" else sk - sq) if flag == "True" else sq * sk
    else:
        est, pairs = True, sq * sk  # causal flag not recorded: counted in full, flagged
    per = (3 * d + 2 * dv) if backward else (d + dv)
    flops = 2.0 * bh * pairs * per
    bpe = a.bpe(qi)
    qkv = a.nbytes(qi) + a.nbytes(qi + 1) + a.nbytes(qi + 2)
    # forward: reads Q, K, V, writes O; backward: reads dO, Q, K, V, O, writes dQ, dK, dV
    nbytes = qkv + 2 * o_elems * bpe + qkv if backward else qkv + o_elems * bpe
    return Cost(cat, flops, float(nbytes), a.type(qi), est)


# --- elementwise, reductions, normalization, softmax, embedding, copy ------------------------

_UNARY = frozenset(
    [
        "relu",
        "gelu",
        "silu",
        "sigmoid",
        "tanh",
        "exp",
        "exp2",
        "expm1",
        "log",
        "log2",
        "log10",
        "log1p",
        "neg",
        "abs",
        "sqrt",
        "rsqrt",
        "reciprocal",
        "sin",
        "cos",
        "erf",
        "erfinv",
        "clamp",
        "clamp_min",
        "clamp_max",
        "hardtanh",
        "leaky_relu",
        "elu",
        "selu",
        "celu",
        "softplus",
        "mish",
        "hardswish",
        "hardsigmoid",
        "square",
        "floor",
        "ceil",
        "round",
        "trunc",
        "frac",
        "sign",
        "sgn",
        "logical_not",
        "bitwise_not",
        "isnan",
        "isinf",
        "nan_to_num",
        "fill",
        "zero",
        "native_dropout",
        "dropout",
        "threshold",
    ]
)
_BINARY = frozenset(
    [
        "add",
        "sub",
        "rsub",
        "mul",
        "div",
        "true_divide",
        "floor_divide",
        "remainder",
        "fmod",
        "maximum",
        "minimum",
        "pow",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "where",
        "masked_fill",
        "addcmul",
        "addcdiv",
        "lerp",
        "logical_and",
        "logical_or",
        "logical_xor",
        "bitwise_and",
        "bitwise_or",
        "bitwise_xor",
        "atan2",
        "hypot",
        "copysign",
        "xlogy",
        "threshold_backward",
        "gelu_backward",
        "silu_backward",
        "sigmoid_backward",
        "tanh_backward",
        "hardtanh_backward",
        "leaky_relu_backward",
        "elu_backward",
        "softplus_backward",
        "hardswish_backward",
        "mish_backward",
        "native_dropout_backward",
    ]
)
_COMPARISONS = frozenset(
    ["eq", "ne", "lt", "le", "gt", "ge", "logical_not", "logical_and", "logical_or", "logical_xor", "isnan", "isinf"]
)
#: Arithmetic operations per output element of the elementwise ops that do more than one.
_EW_FLOPS = {"addcmul": 2, "addcdiv": 2, "lerp": 2}
#: Reductions: index of the ``dim`` and ``keepdim`` arguments, and operations per input element.
_REDUCE = {
    "sum": (1, 2, 1),
    "mean": (1, 2, 1),
    "amax": (1, 2, 1),
    "amin": (1, 2, 1),
    "max": (1, 2, 1),
    "min": (1, 2, 1),
    "prod": (1, 2, 1),
    "all": (1, 2, 1),
    "any": (1, 2, 1),
    "argmax": (1, 2, 1),
    "argmin": (1, 2, 1),
    "count_nonzero": (1, -1, 1),
    "logsumexp": (1, 2, 3),
    "norm": (2, 3, 2),
    "linalg_vector_norm": (2, 3, 2),
    "var": (1, 3, 3),
    "std": (1, 3, 3),
    "var_mean": (1, 3, 3),
    "std_mean": (1, 3, 3),
    "cumsum": (1, -2, 1),
    "cumprod": (1, -2, 1),
}
#: Normalization ops: (backward, kind) — kind ``mean_var`` (layer, batch, group, instance norm) or ``rms``.
_NORM = {
    "native_layer_norm": (False, "mean_var"),
    "layer_norm": (False, "mean_var"),
    "native_batch_norm": (False, "mean_var"),
    "batch_norm": (False, "mean_var"),
    "_native_batch_norm_legit": (False, "mean_var"),
    "_native_batch_norm_legit_no_training": (False, "mean_var_eval"),
    "cudnn_batch_norm": (False, "mean_var"),
    "miopen_batch_norm": (False, "mean_var"),
    "native_group_norm": (False, "mean_var"),
    "group_norm": (False, "mean_var"),
    "instance_norm": (False, "mean_var"),
    "rms_norm": (False, "rms"),
    "_fused_rms_norm": (False, "rms"),
    "native_layer_norm_backward": (True, "mean_var"),
    "native_batch_norm_backward": (True, "mean_var"),
    "cudnn_batch_norm_backward": (True, "mean_var"),
    "miopen_batch_norm_backward": (True, "mean_var"),
    "native_group_norm_backward": (True, "mean_var"),
    "_fused_rms_norm_backward": (True, "rms"),
}
#: Arithmetic operations per element of the normalization formulas (docs/op-perf.md):
#: forward mean/var: mean 1, variance 3, normalize 2, weight 1, bias 1 (8; 6 without affine);
#: eval batch norm: normalize 2, weight 1, bias 1 (4); RMS: square and sum 2, normalize 1, weight 1 (4);
#: backward mean/var: x̂ 2, g = dy·w 1, Σg and Σg·x̂ 3, dx 4, dw 2, db 1 (13); RMS backward: 9.
_NORM_FLOPS = {
    ("mean_var", False): 8,
    ("mean_var_eval", False): 4,
    ("rms", False): 4,
    ("mean_var", True): 13,
    ("rms", True): 9,
}
_SOFTMAX = {
    "softmax": False,
    "_softmax": False,
    "log_softmax": False,
    "_log_softmax": False,
    "_softmax_backward_data": True,
    "_log_softmax_backward_data": True,
}
_COPY = frozenset(
    {"copy_", "_to_copy", "clone", "contiguous", "_copy_from", "_copy_from_and_resize", "to", "cat", "stack"}
)
_EMBEDDING = frozenset({"embedding", "index_select"})


def _short(name: str) -> str:
    s = name.removeprefix("aten::")
    return s[:-1] if s.endswith("_") and s[:-1] in (_UNARY | _BINARY) else s


def _broadcast(shapes: list[list[int]]) -> list[int]:
    width = max((len(s) for s in shapes), default=0)
    out = [1] * width
    for s in shapes:
        for i, x in enumerate([1] * (width - len(s)) + s):
            if x != 1:
                if out[i] not in (1, x):
                    raise ValueError("not broadcastable")
                out[i] = x
    return out


def _elementwise_cost(name: str, a: _Args) -> Cost:
    short = _short(name)
    unary = short in _UNARY
    cat = "elementwise_unary" if unary else "elementwise_binary"
    ts = a.tensors()
    if not ts:
        return Cost(cat, why="no tensor input recorded")
    in_place = name.endswith("_") and a.is_tensor(0)
    out_shape = _broadcast([a.shape(i) for i in ts])
    n_out = _prod(out_shape)
    if short in _COMPARISONS:
        out_bpe = 1
    elif in_place:
        out_bpe = a.bpe(0)
    else:
        shaped = [i for i in ts if a.shape(i)] or ts
        out_bpe = max(a.bpe(i) for i in shaped)
    read = 0 if short in ("fill", "zero") else sum(a.nbytes(i) for i in ts)
    write = n_out * out_bpe
    if short == "native_dropout":
        write += n_out  # the boolean mask
    flops = 0.0 if short in ("fill", "zero") else float(n_out * _EW_FLOPS.get(short, 1))
    return Cost(cat, flops, float(read + write), _dtype_name(a, ts[0]))


def _reduce_cost(name: str, a: _Args) -> Cost:
    short = name.removeprefix("aten::")
    dim_i, keep_i, per = _REDUCE[short]
    if not a.is_tensor(0):
        return Cost("reduction", why="no tensor input recorded")
    x = a.shape(0)
    n_in = _prod(x)
    if keep_i == -2:  # scans: the output has the input's size
        n_out = n_in
    else:
        dims_text = a.conc_at(dim_i)
        if len(a.dims) <= dim_i:
            n_out = 1  # reduce over every element
        elif dims_text is None or dims_text.strip() == "":
            if a.conc:  # the argument was recorded as absent (None): every element
                n_out = 1
            else:
                return Cost("reduction", float(n_in * per), None, a.type(0), why="the reduced dims are not recorded")
        else:
            dims = _ints(dims_text)
            if dims is None:
                return Cost("reduction", float(n_in * per), None, a.type(0), why="the reduced dims are not readable")
            nd = len(x)
            red = {d % nd for d in dims} if nd else set()
            n_out = _prod([s for i, s in enumerate(x) if i not in red]) if red else 1
    out_bpe = {"argmax": 8, "argmin": 8, "all": 1, "any": 1, "count_nonzero": 8}.get(short, a.bpe(0))
    write = n_out * out_bpe
    if short in ("max", "min") and len(a.dims) > 1 and a.conc_at(1) not in (None, ""):
        write += n_out * 8  # the indices
    if short in ("var_mean", "std_mean"):
        write *= 2
    return Cost("reduction", float(n_in * per), float(a.nbytes(0) + write), a.type(0))


def _norm_cost(name: str, a: _Args) -> Cost:
    short = name.removeprefix("aten::")
    backward, kind = _NORM[short]
    ts = a.tensors()
    if not ts:
        return Cost("normalization", why="no tensor input recorded")
    big = max(ts, key=a.numel)  # the activation (the input, or the output gradient)
    n = a.numel(big)
    per = _NORM_FLOPS[(kind, backward)]
    if kind == "mean_var" and not backward:
        affine = [i for i in ts if i != big and a.numel(i) > 1]
        per = 8 if len(affine) >= 2 else 6 + len(affine)
    read = sum(a.nbytes(i) for i in ts)
    write = n * a.bpe(big)
    if backward:
        # the weight and bias gradients: the size of the largest 1-D parameter, twice (weight and bias)
        params = [i for i in ts if len(a.shape(i)) == 1 and a.numel(i) > 1]
        if params:
            p = max(params, key=a.numel)
            write += (1 if kind == "rms" else 2) * a.numel(p) * a.bpe(p)
    return Cost("normalization", float(n * per), float(read + write), a.type(big))


def _softmax_cost(name: str, a: _Args) -> Cost:
    backward = _SOFTMAX[name.removeprefix("aten::")]
    if not a.is_tensor(0):
        return Cost("softmax", why="no tensor input recorded")
    n = a.numel(0)
    if backward:
        read = sum(a.nbytes(i) for i in a.tensors())
        return Cost("softmax", float(4 * n), float(read + n * a.bpe(0)), a.type(0))
    out_bpe = a.bpe(0)
    if a.conc_at(2) == "True":  # _softmax(self, dim, half_to_float)
        out_bpe = 4
    return Cost("softmax", float(5 * n), float(a.nbytes(0) + n * out_bpe), a.type(0))


def _embedding_cost(name: str, a: _Args) -> Cost:
    short = name.removeprefix("aten::")
    if short == "embedding":
        if not (a.is_tensor(0) and a.is_tensor(1)) or len(a.shape(0)) != 2:
            return Cost("embedding", why="the input shapes do not fit the formula")
        n_out = a.numel(1) * a.shape(0)[1]
        bpe, idx = a.bpe(0), a.nbytes(1)
        dt = a.type(0)
    else:  # index_select(self, dim, index)
        if not (a.is_tensor(0) and a.is_tensor(2)):
            return Cost("embedding", why="the input shapes do not fit the formula")
        dims = _ints(a.conc_at(1))
        x = a.shape(0)
        if dims is None or not x:
            return Cost("embedding", why="the selected dim is not recorded")
        d = dims[0] % len(x)
        n_out = (_prod(x) // max(x[d], 1)) * a.numel(2) if x[d] else 0
        bpe, idx = a.bpe(0), a.nbytes(2)
        dt = a.type(0)
    # the selected rows are read once and written once; the indices are read
    return Cost("embedding", 0.0, float(idx + 2 * n_out * bpe), dt)


def _copy_cost(name: str, a: _Args) -> Cost:
    short = name.removeprefix("aten::")
    if short in ("cat", "stack"):
        return Cost("copy", why="the types of a TensorList input are not recorded")
    ts = a.tensors()
    if not ts:
        return Cost("copy", why="no tensor input recorded")
    if short in ("copy_", "_copy_from", "_copy_from_and_resize"):
        if len(ts) < 2:
            return Cost("copy", why="the source and destination are not both recorded")
        return Cost("copy", 0.0, float(a.nbytes(ts[0]) + a.nbytes(ts[1])), a.type(ts[1]))
    src = ts[0]
    out_t = _SCALAR_TYPE.get((a.conc_at(1) or "").strip()) if short in ("_to_copy", "to") else a.type(src)
    if out_t is None:
        return Cost("copy", 0.0, None, a.type(src), why="the destination dtype is not recorded")
    return Cost("copy", 0.0, float(a.nbytes(src) + a.numel(src) * BYTES_PER_ELEMENT[out_t]), a.type(src))


def op_category(name: str) -> str | None:
    """The op-perf category an op's name gives (None: the name gives none; the kernels may)."""
    if name in _ATTN:
        return "attention_bwd" if _ATTN[name][2] else "attention_fwd"
    if name in _CONV_FWD:
        return "conv_fwd"
    if name in _CONV_BWD:
        return "conv_bwd"
    if name in FORMULAS:
        return "gemm"
    if not name.startswith("aten::"):
        return None
    s = name.removeprefix("aten::")
    if s in _NORM:
        return "normalization"
    if s in _SOFTMAX:
        return "softmax"
    if s in _REDUCE:
        return "reduction"
    if s in _EMBEDDING:
        return "embedding"
    if s in _COPY:
        return "copy"
    short = _short(name)
    if short in _UNARY:
        return "elementwise_unary"
    if short in _BINARY:
        return "elementwise_binary"
    return None


def op_cost(
    name: str, input_dims: str | None, input_type: str | None, concrete: str | None
) -> tuple[str | None, float | None, float | None, str | None, bool, str | None]:
    """``(category, flops, bytes, input type, estimated, why)`` of one call of op ``name`` from its
    recorded ``Input Dims`` / ``Input type`` / ``Concrete Inputs`` (JSON text). ``category`` is None
    when the name gives none; ``flops`` / ``bytes`` are None when not given, ``why`` says why
    (``no model`` for an op whose category has no formula here)."""
    cat = op_category(name)
    if cat is None:
        return None, None, None, None, False, "no model"
    dims = _loads(input_dims)
    if not dims:
        return cat, None, None, None, False, "no Input Dims (profile with record_shapes=True)"
    a = _Args(dims, _loads(input_type), [str(x) for x in _loads(concrete)])
    try:
        if cat == "gemm":
            c = _gemm_cost(name, a)
        elif cat in ("attention_fwd", "attention_bwd"):
            c = _attn_cost(name, a)
        elif cat in ("conv_fwd", "conv_bwd"):
            c = _conv_cost(name, a, cat == "conv_bwd")
        elif cat in ("elementwise_unary", "elementwise_binary"):
            c = _elementwise_cost(name, a)
        elif cat == "reduction":
            c = _reduce_cost(name, a)
        elif cat == "normalization":
            c = _norm_cost(name, a)
        elif cat == "softmax":
            c = _softmax_cost(name, a)
        elif cat == "embedding":
            c = _embedding_cost(name, a)
        else:
            c = _copy_cost(name, a)
    except (IndexError, TypeError, ValueError, KeyError, ZeroDivisionError):
        return cat, None, None, None, False, "the recorded inputs do not fit the formula"
    return c.as_tuple()
