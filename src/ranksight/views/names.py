"""Name normalisation: one place that decides when two event names mean the same thing.

Profiler names embed values that change from run to run without the work changing
(trace-format.md trap 20). Comparing two runs (``ranksight diff``) or grouping names needs them
removed first. The raw name is always kept next to the normalised one.

Rules, applied in this order (each one a documented regular expression or bracket walk):

``run-specific values`` (always, :func:`normalize_op` and :func:`normalize_kernel`):

1. memory addresses ``0x7f56b1975900`` → ``0x…`` (``<built-in method view of Tensor object at
   0x7f56…>``);
2. ``ProfilerStep#12`` → ``ProfilerStep#*`` (the step number);
3. the DataLoader iterator class, which depends on ``num_workers``:
   ``enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__`` and
   ``enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__`` →
   ``enumerate(DataLoader)#__next__``;
4. Python source line numbers ``torch/nn/modules/module.py(1501): _call_impl`` →
   ``torch/nn/modules/module.py(*): _call_impl``;
5. the compile-order id of generated Triton kernels ``triton_poi_fused_add_0`` →
   ``triton_poi_fused_add_*``;
6. HIP runtime calls take their CUDA names (``hipLaunchKernel`` → ``cudaLaunchKernel``,
   ``hipMemcpyAsync`` → ``cudaMemcpyAsync``: a ``hip`` prefix followed by a capital letter), so an
   AMD run and an NVIDIA run compare launch by launch.

``template arguments`` (kernels by default, :func:`normalize_kernel`): every balanced ``<…>``
group is removed, nested ones included (``vectorized_elementwise_kernel<4, CUDAFunctor_add<float>,
…>`` → ``vectorized_elementwise_kernel``), so a kernel compiled with another vector width or
dtype matches. CUTLASS wrappers keep their first argument, which is the kernel's real name:
``cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_…>(…)`` →
``cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_…>``.

``parameter list`` (kernels by default): a trailing balanced ``(…)`` that directly follows an
identifier (``ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)``) is removed, and so is a
leading return type ``void``. Parentheses after a space are text, not a parameter list: ``Memcpy HtoD
(Pageable -> Device)`` and ``Memset (Device)`` are kept whole.

``shape suffixes`` (optional, ``shapes=True``): tile or tensor shapes written into a name
(``_256x128_64x3``, ``MT32x64x128``, a trailing ``[1, 512]``) become ``*``, so the same GEMM at
another tile size matches. Off by default because the shape is often the point.

:func:`hta_short_name` is HTA v0.6's ``short_name`` (used only by the HTA facade).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import polars as pl

if TYPE_CHECKING:
    from ranksight.model.trace import Trace

__all__ = [
    "normalize_op",
    "normalize_kernel",
    "strip_brackets",
    "hta_short_name",
    "normalize_series",
]

_ADDR_RE = re.compile(r"0x[0-9a-fA-F]+")
_STEP_RE = re.compile(r"^ProfilerStep\s*#\s*\d+$")
_DATALOADER_RE = re.compile(r"^enumerate\(DataLoader\)#_\w*DataLoaderIter\.__next__$")
_PYLINE_RE = re.compile(r"\.py\(\d+\)")
_TRITON_ID_RE = re.compile(r"^(triton_\w*?)_\d+$")
_SHAPE_RE = re.compile(r"(?<!\d)\d+(?:x\d+)+")
_WRAPPER_RE = re.compile(r"^(?:void )?((?:cutlass::Kernel2?|cutlass::device_kernel|cutlass::Kernel))<([A-Za-z_][\w:]*)")
_HIP_RE = re.compile(r"^hip([A-Z]\w*)$")
_DIMS_SUFFIX_RE = re.compile(r"\s*\[[\d,\s\[\]x]*\]$")


def _run_specific(name: str) -> str:
    """Rules 1–5: values that change between runs of the same program."""
    if _STEP_RE.match(name):
        return "ProfilerStep#*"
    if _DATALOADER_RE.match(name):
        return "enumerate(DataLoader)#__next__"
    out = _ADDR_RE.sub("0x…", name)
    out = _PYLINE_RE.sub(".py(*)", out)
    m = _TRITON_ID_RE.match(out)
    if m:
        out = m.group(1) + "_*"
    m = _HIP_RE.match(out)
    if m:
        out = "cuda" + m.group(1)
    return out


def strip_brackets(name: str, *, templates: bool = True, params: bool = True) -> str:
    """Remove balanced ``<…>`` groups (``templates``) and a trailing parameter list (``params``).

    A ``>`` that closes nothing (``->``) is text. A ``(`` opens a parameter list only when it
    directly follows a non-space character; the list is dropped only when it ends the name.
    """
    out: list[str] = []
    i = 0
    n = len(name)
    while i < n:
        ch = name[i]
        if templates and ch == "<":
            # find the matching '>' counting nested '<' (a '->' inside does not close)
            j, d = i, 0
            while j < n:
                c = name[j]
                if c == "<":
                    d += 1
                elif c == ">" and name[j - 1] != "-":
                    d -= 1
                    if d == 0:
                        break
                j += 1
            if j < n:  # balanced: skip the group
                i = j + 1
                continue
        out.append(ch)
        i += 1
    text = "".join(out)
    if params and text.endswith(")"):
        # walk back to the '(' that opens the trailing group
        d = 0
        for k in range(len(text) - 1, -1, -1):
            c = text[k]
            if c == ")":
                d += 1
            elif c == "(":
                d -= 1
                if d == 0:
                    if k > 0 and not text[k - 1].isspace():
                        text = text[:k]
                    break
        if text.startswith("void "):
            text = text[5:]
    return text.strip() or name


@functools.lru_cache(maxsize=1 << 16)  # names repeat across ranks and calls (issue 19)
def normalize_op(name: str, *, templates: bool = False, shapes: bool = False) -> str:
    """Normalised name of a CPU operator, annotation or runtime call (rules 1–5; templates
    and shape suffixes on request: ``torch::autograd::CppNode<X>`` names differ by ``X``)."""
    out = _run_specific(name)
    if templates:
        out = strip_brackets(out, templates=True, params=False)
    if shapes:
        out = _strip_shapes(out)
    return out


@functools.lru_cache(maxsize=1 << 16)  # names repeat across ranks and calls (issue 19)
def normalize_kernel(name: str, *, templates: bool = True, shapes: bool = False) -> str:
    """Normalised name of a GPU kernel, memcpy or memset (rules 1–5, template arguments and
    the parameter list; shape suffixes on request)."""
    out = _run_specific(name)
    wrapper = _WRAPPER_RE.match(out) if templates else None
    out = strip_brackets(out, templates=templates, params=True)
    if wrapper and out == wrapper.group(1):
        out = f"{wrapper.group(1)}<{wrapper.group(2)}>"
    if shapes:
        out = _strip_shapes(out)
    return out


def _strip_shapes(name: str) -> str:
    out = _DIMS_SUFFIX_RE.sub("", name)
    return _SHAPE_RE.sub("*", out) or name


def hta_short_name(name: str, *, is_memory: bool = False) -> str:
    """HTA v0.6's ``short_name``: balanced ``<…>`` and ``(…)`` groups removed, then the last
    space-separated word when anything was removed. Memcpy/memset names are left whole (measured
    on HTA's ``s_name`` for 180 distinct kernel names and the TraceDiff ``use_short_name`` oracle)."""
    if is_memory or ("<" not in name and "(" not in name):
        return name
    out: list[str] = []
    depth = 0
    for ch in name:
        if ch in "<(":
            depth += 1
            continue
        if ch in ">)" and depth > 0:
            depth -= 1
            continue
        if depth == 0:
            out.append(ch)
    text = "".join(out).strip()
    return text.split(" ")[-1] if text else name


def normalize_series(names: pl.Series, fn: Callable[[str], str]) -> pl.Series:
    """Apply a normaliser once per distinct name (names repeat a lot) and broadcast."""
    s = names.cast(pl.String)
    uniq = s.unique().drop_nulls()
    mapping = dict(zip(uniq.to_list(), _map(fn, uniq.to_list()), strict=True))
    return s.replace_strict(mapping, default=None, return_dtype=pl.String)


def _map(fn: Callable[[str], str], values: Iterable[str]) -> list[str]:
    return [fn(v) for v in values]


def trace_values_matching(trace: Trace, pattern: str, col: str = "name") -> list[str]:
    """:func:`values_matching` over a trace's events column (``name``: the trace's cached
    distinct names; another column: its distinct values, read alone)."""
    if col == "name":
        return values_matching(pl.Series(trace.distinct_names(), dtype=pl.String), pattern)
    return values_matching(trace.scan().select(pl.col(col).unique()).collect().to_series(), pattern)


def values_matching(col: pl.Series, pattern: str) -> list[str]:
    """The distinct values of a (categorical) column that match ``pattern``, tested once per
    value: ``pl.col(name).is_in(values_matching(...))`` filters without a string per event."""
    vals = col.unique().drop_nulls().cast(pl.String)
    return vals.filter(vals.str.contains(pattern)).to_list()
