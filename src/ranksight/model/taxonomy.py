"""The kernel taxonomy: what a GPU kernel is, from the evidence in its name. ONE place.

For every kernel name the taxonomy answers, each with ``unknown`` where the name gives no evidence:

- ``kernel_class``: ``COMPUTE``, ``COMMUNICATION``, ``MEMORY`` or ``OTHER`` (the class every analysis
  reads, stored on the events as ``kernel_class``);
- ``family``: compute ``gemm``, ``attention``, ``convolution``, ``normalization``, ``softmax``,
  ``elementwise``, ``reduction``, ``other``; communication ``collective``, ``all_to_all``, ``p2p``;
  memory ``copy``, ``set``; ``sync`` (device-side waits, class ``OTHER``);
- ``precision``: the lowest precision the name gives an operand (``fp4, fp8, int8, bf16, fp16, tf32,
  fp32, fp64``) or ``unknown``;
- ``tensor_cores``: ``yes``, ``no`` or ``unknown`` — Tensor Cores (NVIDIA) / Matrix Cores (AMD), from
  the rule table of :mod:`ranksight.model.tensor_cores`, from FP8/FP4 matrix arithmetic (which only
  Tensor/Matrix Cores do), and ``no`` for families that do no matrix product;
- ``library``: cuBLAS, CUTLASS, cuDNN, Triton, FlashAttention, Composable Kernel, hipBLASLt/Tensile,
  NCCL/RCCL, DeepEP, aten … or ``unknown``;
- ``arch``: the GPU architecture the name was built for (``sm90``, ``gfx942`` …) or ``unknown``.

The name rules are data: ``ranksight/data/kernel_taxonomy.tsv`` (field, value, scope, pattern, source,
example), documented in ``docs/kernel-taxonomy.md``. A kernel whose launch carries collective
arguments is communication whatever its name (applied where the events are derived,
:mod:`ranksight.model.derive`). Each distinct name is classified once (the number of distinct kernel
names is small); nothing here runs per event.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from importlib import resources

import polars as pl

from ranksight.model.tensor_cores import KERNEL_RULES, RULESETS, tensor_core_rule, uses_tensor_cores

__all__ = [
    "FAMILIES",
    "COMM_FAMILIES",
    "MEMORY_FAMILIES",
    "MATRIX_FAMILIES",
    "PRECISIONS",
    "LOW_PRECISIONS",
    "TaxRule",
    "KernelInfo",
    "rules",
    "rules_fingerprint",
    "normalise",
    "base_name",
    "without_params",
    "classify",
    "kernel_taxonomy",
    "TAXONOMY_SCHEMA",
    "tensor_core_mask",
]

COMPUTE_FAMILIES = (
    "gemm",
    "attention",
    "convolution",
    "normalization",
    "softmax",
    "elementwise",
    "reduction",
    "other",
)
COMM_FAMILIES = ("collective", "all_to_all", "p2p")
MEMORY_FAMILIES = ("copy", "set")
FAMILIES = COMPUTE_FAMILIES + COMM_FAMILIES + MEMORY_FAMILIES + ("sync",)
#: Families whose work is a matrix product (eligible for Tensor Cores / Matrix Cores).
MATRIX_FAMILIES = ("gemm", "attention", "convolution")
#: Families that do no matrix product: their kernels do not use Tensor Cores.
_NO_MMA_FAMILIES = frozenset(
    ("normalization", "softmax", "elementwise", "reduction", "sync") + COMM_FAMILIES + MEMORY_FAMILIES
)
PRECISIONS = ("fp4", "fp8", "int8", "bf16", "fp16", "tf32", "fp32", "fp64", "unknown")
#: Precisions below FP32 / TF32 (what autocast or a low-precision recipe gives).
LOW_PRECISIONS = ("fp4", "fp8", "int8", "bf16", "fp16")
#: Precisions whose arithmetic only Tensor Cores / Matrix Cores do (no FFMA path exists).
_MMA_ONLY_PRECISIONS = ("fp4", "fp8")

_FIELDS = ("comm", "memory", "family", "precision", "library", "arch")


@dataclass(frozen=True)
class TaxRule:
    """One line of the taxonomy's data file."""

    field: str
    value: str
    scope: str
    pattern: str
    source: str
    example: str

    @functools.cached_property
    def regex(self) -> re.Pattern[str]:
        return re.compile(self.pattern, re.IGNORECASE)


@dataclass(frozen=True)
class KernelInfo:
    """What the taxonomy says about one kernel name."""

    kernel_class: str
    family: str
    precision: str
    tensor_cores: str
    library: str
    arch: str


@functools.cache
def rules() -> tuple[TaxRule, ...]:
    """The rules of ``data/kernel_taxonomy.tsv`` in file order (validated once)."""
    text = _rules_text()
    out = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) != 6:
            raise ValueError(f"kernel_taxonomy.tsv line {lineno}: {len(parts)} fields, expected 6")
        rule = TaxRule(*parts)
        if rule.field not in _FIELDS or rule.scope not in ("base", "any"):
            raise ValueError(f"kernel_taxonomy.tsv line {lineno}: bad field or scope {rule.field!r}/{rule.scope!r}")
        rule.regex  # noqa: B018 - compile now: a bad pattern fails at first use, with its line
        out.append(rule)
    return tuple(out)


@functools.cache
def rules_fingerprint() -> str:
    """A hash of every rule that decides a stored column (the taxonomy's data file and the Tensor Core
    table): part of the cache key, so a changed rule never serves an old ``kernel_class``. Hashes the
    text only (no regex is compiled: this runs on every load)."""
    h = hashlib.blake2b(digest_size=8)
    h.update(_rules_text().encode())
    for t in KERNEL_RULES:
        h.update(f"{t.name}\t{t.pattern}\t{t.uses_tc}\n".encode())
    return h.hexdigest()


@functools.cache
def _rules_text() -> str:
    return resources.files("ranksight.data").joinpath("kernel_taxonomy.tsv").read_text(encoding="utf-8")


@functools.cache
def _by_field() -> dict[str, tuple[TaxRule, ...]]:
    return {f: tuple(r for r in rules() if r.field == f) for f in _FIELDS}


_CAMEL1 = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_CAMEL2 = re.compile(r"(?<=[A-Z])(?=[A-Z][a-z])")


def normalise(name: str) -> str:
    """camelCase split with ``_`` and lower-cased: ``ncclDevKernel_AllReduce`` → ``nccl_dev_kernel_all_reduce``."""
    return _CAMEL2.sub("_", _CAMEL1.sub("_", name)).lower()


_INNER_GROUP = re.compile(r"<[^<>]*>|\([^()]*\)")
_MANGLED = re.compile(r"^_Z(N?)(?:[rVKL]*)((?:\d+[A-Za-z_][A-Za-z0-9_]*)+)")


def _demangle_prefix(name: str) -> str | None:
    """The ``ns::name`` of an Itanium-mangled name (nested names only as far as they go), or None."""
    m = _MANGLED.match(name)
    if not m:
        return None
    s, parts, i = m.group(2), [], 0
    while i < len(s) and s[i].isdigit():
        j = i
        while j < len(s) and s[j].isdigit():
            j += 1
        n = int(s[i:j])
        if n <= 0 or j + n > len(s):
            break
        parts.append(s[j : j + n])
        i = j + n
        if not m.group(1):  # not nested: one name only
            break
    return "::".join(parts) if parts else None


def base_name(name: str) -> str:
    """The kernel's own qualified name: template arguments, parameter lists and a leading return type
    removed; an Itanium-mangled name demangled to its ``ns::name``."""
    d = _demangle_prefix(name)
    if d is not None:
        return d
    s = name
    for _ in range(64):  # innermost groups first; bounded for hostile input
        t = _INNER_GROUP.sub("", s)
        if t == s:
            break
        s = t
    s = s.strip()
    # a leading return type ("void ", "__global__ void ", "std::enable_if<...>::type ")
    if " " in s:
        s = s.rsplit(" ", 1)[-1]
    return s


def without_params(name: str) -> str:
    """The name without its trailing parameter list (``f<T>(int, float*)`` → ``f<T>``): parameter types
    name other libraries' types, never the kernel."""
    s = name.rstrip()
    if not s.endswith(")"):
        return s
    depth = 0
    for i in range(len(s) - 1, -1, -1):
        c = s[i]
        if c == ")":
            depth += 1
        elif c == "(":
            depth -= 1
            if depth == 0:
                return s[:i].rstrip() if i > 0 else s
    return s


def _first(field: str, base: str, full: str) -> str | None:
    rs = _by_field()[field]
    for r in rs:
        if r.regex.search(base):
            return r.value
    for r in rs:
        if r.scope == "any" and r.regex.search(full):
            return r.value
    return None


def _first_per_rule(field: str, base: str, full: str) -> str | None:
    """The first rule (file order) that matches the base name or, for scope ``any``, the whole name:
    the file's order is the priority (FlashAttention before the CUTLASS it is built on)."""
    for r in _by_field()[field]:
        if r.regex.search(base) or (r.scope == "any" and r.regex.search(full)):
            return r.value
    return None


@functools.lru_cache(maxsize=65536)
def classify(name: str, kind: str = "kernel") -> KernelInfo:
    """What the taxonomy says about a GPU activity of this ``kind`` (kernel, memcpy, memset) and name."""
    if kind in ("memcpy", "memset"):
        fam = "copy" if kind == "memcpy" else "set"
        return KernelInfo("MEMORY", fam, "unknown", "no", "runtime", "unknown")
    name = name or ""
    if len(name) > 8192:  # hostile or absurd names: judge the head only (regexes stay linear in it)
        name = name[:8192]
    full = normalise(without_params(name))
    base = normalise(base_name(name))
    library = _first_per_rule("library", base, full) or "unknown"
    arch = _first("arch", base, full) or "unknown"
    precision = _first("precision", base, full) or "unknown"
    comm = _first("comm", base, base)
    if comm is not None:
        return KernelInfo("COMMUNICATION", comm, precision, "no", library, arch)
    mem = _first("memory", base, base)
    if mem is not None:
        return KernelInfo("MEMORY", mem, precision, "no", library, arch)
    family = _first("family", base, full) or "other"
    cls = "OTHER" if family == "sync" else "COMPUTE"
    return KernelInfo(cls, family, precision, _tensor_cores(name, family, precision), library, arch)


def _tensor_cores(name: str, family: str, precision: str) -> str:
    rule = tensor_core_rule(name)
    if rule is not None:
        return "no" if rule.startswith("not:") else "yes"
    if family in MATRIX_FAMILIES and precision in _MMA_ONLY_PRECISIONS:
        return "yes"
    if family in _NO_MMA_FAMILIES:
        return "no"
    return "unknown"


TAXONOMY_SCHEMA = {
    "name": pl.String,
    "kernel_class": pl.String,
    "family": pl.String,
    "precision": pl.String,
    "tensor_cores": pl.String,
    "library": pl.String,
    "arch": pl.String,
}


def kernel_taxonomy(names: pl.Series, kind: str = "kernel") -> pl.DataFrame:
    """One row per distinct non-null name of ``names`` with the taxonomy's answers (:data:`TAXONOMY_SCHEMA`)."""
    uniq = names.cast(pl.String).drop_nulls().unique().sort().to_list()
    infos = [classify(n, kind) for n in uniq]
    return pl.DataFrame(
        {
            "name": uniq,
            "kernel_class": [i.kernel_class for i in infos],
            "family": [i.family for i in infos],
            "precision": [i.precision for i in infos],
            "tensor_cores": [i.tensor_cores for i in infos],
            "library": [i.library for i in infos],
            "arch": [i.arch for i in infos],
        },
        schema=TAXONOMY_SCHEMA,
    )


def tensor_core_mask(names: pl.Series, ruleset: str = "current") -> pl.Series:
    """Whether each kernel name runs on Tensor Cores, each distinct name judged once. ``"current"``:
    the taxonomy's answer is ``yes`` (the Tensor Core table, plus FP8/FP4 matrix kernels; ``unknown``
    counts as no); ``"plugin"``: the TensorBoard plugin's list only."""
    if ruleset not in RULESETS:
        raise ValueError(f"unknown tensor-core rule set {ruleset!r}; choose from {RULESETS}")
    s = names.cast(pl.String)
    uniq = s.unique().drop_nulls().to_list()
    if ruleset == "current":
        judged = [classify(n).tensor_cores == "yes" for n in uniq]
    else:
        judged = [uses_tensor_cores(n, ruleset) for n in uniq]
    verdict = dict(zip(uniq, judged, strict=True))
    return s.replace_strict(verdict, default=False, return_dtype=pl.Boolean).alias("tensor_cores")
