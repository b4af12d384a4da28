"""Collective vocabulary shared by the distributed analyses: canonical types, element sizes,
nccl-tests' bus-bandwidth factors and ring cost-model coefficients.

Canonical collective types: ``all_reduce, all_gather, reduce_scatter, all_to_all, broadcast,
reduce, gather, scatter, send, recv, send_recv, barrier, unknown``.
"""

from __future__ import annotations

import json
import math
import re
from functools import lru_cache

__all__ = [
    "TYPES",
    "P2P_TYPES",
    "SIZE_CONSISTENT_TYPES",
    "canonical_type",
    "dtype_bytes",
    "numel_args",
    "kernel_name_details",
    "busbw_factor",
    "ring_coefficients",
    "size_bucket",
    "SIZE_BUCKETS",
    "parse_int_list",
]

TYPES = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "broadcast",
    "reduce",
    "gather",
    "scatter",
    "send",
    "recv",
    "send_recv",
    "barrier",
    "unknown",
)
#: point-to-point operations: matched across ranks only when the peer is known
P2P_TYPES = ("send", "recv")
#: collectives whose message size is the same on every participant (size joins the match key)
SIZE_CONSISTENT_TYPES = ("all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter")

# Ordered: the first pattern found in the squeezed name (letters only, lower case) wins.
_TYPE_PATTERNS = (
    ("crossdevicereduce", "all_reduce"),  # vLLM custom all-reduce
    ("customar", "all_reduce"),
    ("oneshotall", "all_reduce"),
    ("twoshotall", "all_reduce"),
    ("allreduce", "all_reduce"),
    ("reducescatter", "reduce_scatter"),
    ("allgather", "all_gather"),
    ("alltoall", "all_to_all"),
    ("broadcast", "broadcast"),
    ("sendrecv", "send_recv"),
    ("barrier", "barrier"),
    ("recv", "recv"),
    ("send", "send"),
    ("reduce", "reduce"),
    ("gather", "gather"),
    ("scatter", "scatter"),
)
_PREFIX_RE = re.compile(r"^(nccl(dev)?kernel|rccl|nccl|c10d|gloo|hccl)")


def _base_name(name: str) -> str:
    """A kernel/op name without ``(anonymous namespace)`` and its argument list."""
    return name.replace("(anonymous namespace)", "").split("(", 1)[0]


@lru_cache(maxsize=4096)
def canonical_type(name: str | None) -> str:
    """The canonical collective type named by an op, annotation, kernel or ``Collective name``.

    ``nccl:all_to_all`` → ``all_to_all``; ``c10d::_allgather_base_`` → ``all_gather``;
    ``ncclKernel_AllReduce_RING_LL_Sum_float`` → ``all_reduce``; ``ncclDevKernel_Generic`` →
    ``unknown`` (RCCL names every kernel so).
    """
    if not name:
        return "unknown"
    base = _base_name(name)
    squeezed = _PREFIX_RE.sub("", re.sub(r"[^a-z]", "", base.lower()))
    for pat, typ in _TYPE_PATTERNS:
        if pat in squeezed:
            return typ
    return "unknown"


_DTYPE_BYTES = {
    "float": 4,
    "float32": 4,
    "single": 4,
    "int": 4,
    "int32": 4,
    "uint32": 4,
    "unsignedint": 4,
    "double": 8,
    "float64": 8,
    "long": 8,
    "longint": 8,
    "int64": 8,
    "uint64": 8,
    "longlong": 8,
    "unsignedlong": 8,
    "complexfloat": 8,
    "complex64": 8,
    "complexdouble": 16,
    "complex128": 16,
    "half": 2,
    "float16": 2,
    "bfloat16": 2,
    "bf16": 2,
    "fp16": 2,
    "short": 2,
    "shortint": 2,
    "int16": 2,
    "uint16": 2,
    "complexhalf": 4,
    "char": 1,
    "signedchar": 1,
    "unsignedchar": 1,
    "byte": 1,
    "int8": 1,
    "int8t": 1,
    "uint8": 1,
    "uint8t": 1,
    "bool": 1,
    "qint8": 1,
    "quint8": 1,
}


@lru_cache(maxsize=1024)
def dtype_bytes(dtype: str | None) -> int | None:
    """Element size in bytes of a dtype as written in traces (``Float``, ``c10::BFloat16``,
    ``long int``, ``unsigned char``, ``Float8_e4m3fn``); None when unknown."""
    if not dtype:
        return None
    d = re.sub(r"[^a-z0-9]", "", dtype.lower().replace("c10::", "").replace("at::", ""))
    if d.startswith("float8") or d.startswith("fp8"):
        return 1
    return _DTYPE_BYTES.get(d)


def _numel(dims: object) -> int | None:
    """Elements of one argument of ``Input Dims``: a shape, or a list of shapes (TensorList)."""
    if not isinstance(dims, list):
        return None
    if all(isinstance(x, int) for x in dims):
        return math.prod(dims) if dims else None  # [] is a scalar or None: no tensor
    total = 0
    for sub in dims:
        n = _numel(sub)
        if n is None:
            return None
        total += n
    return total


@lru_cache(maxsize=8192)
def numel_args(input_dims: str | None) -> tuple[int | None, int | None]:
    """Element counts of the first two arguments of an ``Input Dims`` JSON text."""
    if not input_dims:
        return None, None
    try:
        dims = json.loads(input_dims)
    except ValueError:
        return None, None
    if not isinstance(dims, list) or not dims:
        return None, None
    first = _numel(dims[0])
    second = _numel(dims[1]) if len(dims) > 1 else None
    return first, second


_ALGOS = ("RING", "TREE", "COLLNETDIRECT", "COLLNETCHAIN", "COLLNET", "NVLSTREE", "NVLS", "PAT")
_PROTOS = ("LL128", "LL", "SIMPLE")


@lru_cache(maxsize=4096)
def kernel_name_details(name: str) -> tuple[str | None, str | None, str | None]:
    """``(algorithm, protocol, dtype)`` from an NCCL kernel name such as
    ``ncclKernel_AllReduce_RING_LL_Sum_float``; None where the name does not say."""
    base = _base_name(name)
    parts = base.split("_")
    algo = next((p for p in parts if p.upper() in _ALGOS), None)
    proto = next((p for p in parts if p.upper() in _PROTOS), None)
    dtype = None
    for i, p in enumerate(parts):
        if p in ("Sum", "Prod", "Min", "Max", "PreMulSum", "SumPostDiv", "Avg") and i + 1 < len(parts):
            dtype = "_".join(parts[i + 1 :])
            break
    return (algo.upper() if algo else None), (proto.upper() if proto else None), dtype


def busbw_factor(coll_type: str, n: int | None) -> float | None:
    """nccl-tests' bus-bandwidth factor (busbw = algbw × factor) for ``n`` ranks.

    all_reduce 2(n−1)/n; all_gather, reduce_scatter, all_to_all (n−1)/n; broadcast, reduce,
    send/recv 1 (NVIDIA/nccl-tests doc/PERFORMANCE.md). They assume flat rings; NVLS, CollNet and
    tree algorithms can report busbw above the link rate. None for other types.
    """
    if n is None or n < 1:
        return None
    if coll_type == "all_reduce":
        return 2.0 * (n - 1) / n
    if coll_type in ("all_gather", "reduce_scatter", "all_to_all", "gather", "scatter"):
        return (n - 1) / n
    if coll_type in ("broadcast", "reduce", "send", "recv", "send_recv"):
        return 1.0
    return None


def ring_coefficients(coll_type: str, n: int) -> tuple[float, float] | None:
    """``(latency steps, bandwidth factor)`` of the flat-ring cost model
    ``T = steps·α + factor·S/B`` (S message bytes, α per-step latency, B link bandwidth).

    all_reduce 2(n−1), 2(n−1)/n; all_gather / reduce_scatter / all_to_all (n−1), (n−1)/n;
    broadcast / reduce (pipelined ring) (n−1), 1; send / recv 1, 1.
    """
    if n < 1:
        return None
    if coll_type == "all_reduce":
        return 2.0 * (n - 1), 2.0 * (n - 1) / n
    if coll_type in ("all_gather", "reduce_scatter", "all_to_all", "gather", "scatter"):
        return float(n - 1), (n - 1) / n
    if coll_type in ("broadcast", "reduce"):
        return float(n - 1), 1.0
    if coll_type in ("send", "recv", "send_recv"):
        return 1.0, 1.0
    return None


SIZE_BUCKETS = (
    (4 << 10, "<4KiB"),
    (64 << 10, "4KiB-64KiB"),
    (1 << 20, "64KiB-1MiB"),
    (16 << 20, "1MiB-16MiB"),
    (256 << 20, "16MiB-256MiB"),
)


def size_bucket(nbytes: int | None) -> str:
    """Message-size bucket label (powers of 16 from 4 KiB)."""
    if nbytes is None:
        return "unknown"
    for limit, label in SIZE_BUCKETS:
        if nbytes < limit:
            return label
    return ">=256MiB"


@lru_cache(maxsize=4096)
def parse_int_list(text: str | None) -> tuple[int, ...] | None:
    """``"[0, 1]"`` → (0, 1); ``"[]"``, None or junk → None."""
    if not text:
        return None
    try:
        v = json.loads(text)
    except ValueError:
        return None
    if not isinstance(v, list) or not v or not all(isinstance(x, int) for x in v):
        return None
    return tuple(v)
