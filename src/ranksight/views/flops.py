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

__all__ = ["FORMULAS", "BACKWARD_OPS", "FORWARD_COMPOSITES", "op_flops", "Flops"]

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
