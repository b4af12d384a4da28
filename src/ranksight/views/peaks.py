"""GPU peaks per data type (TFLOP/s) and memory bandwidth (TB/s), keyed by ``deviceProperties``.

The table is data, not code: ``ranksight/data/gpu_specs.tsv`` (one GPU per line, each with its
public source and what was checked against stored pages), read once. It is the one definition that
``mfu``, ``op-perf`` and ``diagnose`` read; ``--gpu-spec FILE`` (a TSV, CSV or JSON file with the
same columns) adds rows that are matched before the built-in ones (see :func:`load_specs`).

Values are the vendors' published **dense** (no structured sparsity) peaks at boost clock, per
device **as PyTorch sees it**: one MI250/MI250X *GCD* (half of the OAM package the datasheet
describes), one GPU otherwise. Memory bandwidth is the peak DRAM (HBM/GDDR) bandwidth in TB/s
(10^12 bytes/s) of that device.

Data types: ``fp64`` (tensor/matrix FP64 where the GPU has it), ``fp32`` (FP32 without TF32:
PyTorch's default for matmuls), ``tf32``, ``fp16``, ``bf16`` (tensor cores / matrix cores with FP32
accumulation: GeForce cards run these at half their FP16-accumulate rate), ``fp8``, ``int8``,
``fp4``. An empty cell means the GPU has no such unit; :func:`peak_for` then falls back to ``fp32``
and says so. The ``approximate`` column names figures derived rather than read from a datasheet.

Lookup: the first row whose ``pattern`` (case-insensitive regex searched in
``deviceProperties.name``) matches wins, so specific variants come first. AMD traces sometimes
carry an empty or generic name (``""``, ``"AMD Radeon Graphics"``): they are matched by the
``amd_arch`` column, ``computeMajor.computeMinor.numSms``. A user row with an empty ``pattern``
and ``amd_arch`` matches every device.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Any

from ranksight.errors import UsageError

if TYPE_CHECKING:
    from ranksight.model.trace import Trace

__all__ = [
    "GpuPeak",
    "PEAKS",
    "AMD_BY_ARCH",
    "APPROXIMATE",
    "SPEC_COLUMNS",
    "lookup",
    "peak_for",
    "DTYPES",
    "dtype_of",
    "DTYPE_PRECISION",
    "builtin_specs",
    "load_specs",
    "specs_with",
    "rank_gpus",
]

DTYPES = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8", "fp4")

#: The columns of the table (and of a ``--gpu-spec`` file; ``pattern`` or ``amd_arch`` and ``label`` required).
SPEC_COLUMNS = (
    "pattern",
    "amd_arch",
    "label",
    *DTYPES,
    "mem_bw_tbps",
    "approximate",
    "source",
    "checked",
)


@dataclass(frozen=True)
class GpuPeak:
    """Peaks of one GPU model in TFLOP/s (TOP/s for int8) and its memory bandwidth in TB/s."""

    label: str
    tflops: dict[str, float]
    mem_bw_tbps: float | None = None
    source: str = ""
    approximate: str = ""
    pattern: str = ""
    amd_arch: str = ""
    checked: str = field(default="", compare=False)


def _num(text: str | None, where: str, col: str) -> float | None:
    t = (text or "").strip()
    if t == "" or t.lower() in ("none", "null", "nan", "-"):
        return None
    try:
        v = float(t)
    except ValueError:
        raise UsageError(f"{where}: column {col!r} is not a number: {t!r}") from None
    if not v > 0:
        raise UsageError(f"{where}: column {col!r} must be positive, not {t!r}")
    return v


def _row(rec: dict[str, Any], where: str) -> GpuPeak:
    def text(col: str) -> str:
        v = rec.get(col)
        return "" if v is None else str(v).strip()

    label, pattern, arch = text("label"), text("pattern"), text("amd_arch")
    if not label:
        raise UsageError(f"{where}: a GPU needs a label")
    if pattern:
        try:
            re.compile(pattern)
        except re.error as err:
            raise UsageError(f"{where}: pattern {pattern!r} is not a regular expression: {err}") from None
    if arch and not re.fullmatch(r"\d+\.\d+\.\d+", arch):
        raise UsageError(f"{where}: amd_arch must read computeMajor.computeMinor.numSms (9.4.304), not {arch!r}")
    tflops = {}
    for d in DTYPES:
        v = _num(None if rec.get(d) is None else str(rec.get(d)), where, d)
        if v is not None:
            tflops[d] = v
    if "fp32" not in tflops:
        raise UsageError(f"{where}: {label}: the fp32 peak is required (other data types fall back to it)")
    bw = _num(None if rec.get("mem_bw_tbps") is None else str(rec.get("mem_bw_tbps")), where, "mem_bw_tbps")
    return GpuPeak(
        label=label,
        tflops=tflops,
        mem_bw_tbps=bw,
        source=text("source"),
        approximate=text("approximate"),
        pattern=pattern,
        amd_arch=arch,
        checked=text("checked"),
    )


def _parse(text: str, where: str, *, fmt: str) -> list[GpuPeak]:
    if fmt == "json":
        try:
            doc = json.loads(text)
        except ValueError as err:
            raise UsageError(f"{where}: not JSON: {err}") from None
        recs = doc.get("gpus") if isinstance(doc, dict) else doc
        if isinstance(doc, dict) and recs is None:
            recs = [doc]
        if not isinstance(recs, list) or not all(isinstance(r, dict) for r in recs):
            raise UsageError(f"{where}: expected a list of GPU objects (or {{'gpus': [...]}})")
        return [_row(r, f"{where}: GPU {i + 1}") for i, r in enumerate(recs)]
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    if not lines:
        raise UsageError(f"{where}: no rows")
    reader = csv.DictReader(io.StringIO("\n".join(lines)), delimiter="\t" if fmt == "tsv" else ",")
    cols = set(reader.fieldnames or [])
    unknown = cols - set(SPEC_COLUMNS)
    if unknown:
        raise UsageError(f"{where}: unknown column(s) {sorted(unknown)}; the columns are {', '.join(SPEC_COLUMNS)}")
    if "label" not in cols or "fp32" not in cols:
        raise UsageError(f"{where}: the columns label and fp32 are required")
    return [_row(r, f"{where}: row {i + 2}") for i, r in enumerate(reader)]


@functools.lru_cache(maxsize=1)
def builtin_specs() -> tuple[GpuPeak, ...]:
    """The built-in table (``ranksight/data/gpu_specs.tsv``), in match order."""
    text = resources.files("ranksight.data").joinpath("gpu_specs.tsv").read_text(encoding="utf-8")
    return tuple(_parse(text, "gpu_specs.tsv", fmt="tsv"))


def load_specs(path: str) -> tuple[GpuPeak, ...]:
    """A user's GPU table (``--gpu-spec FILE``: ``.json``, ``.csv``, else tab-separated), in match order."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as err:
        raise UsageError(f"--gpu-spec {path}: {err.strerror or err}") from None
    ext = os.path.splitext(path)[1].lower()
    fmt = "json" if ext == ".json" else "csv" if ext == ".csv" else "tsv"
    rows = _parse(text, f"--gpu-spec {path}", fmt=fmt)
    if not rows:
        raise UsageError(f"--gpu-spec {path}: no GPU in the file")
    return tuple(rows)


def specs_with(gpu_spec: str | None) -> tuple[GpuPeak, ...]:
    """The table to match against: a user's rows (``gpu_spec`` path) first, then the built-in ones."""
    return (load_specs(gpu_spec) if gpu_spec else ()) + builtin_specs()


#: (pattern, peaks) of the built-in table, in match order (the rows with a name pattern).
PEAKS: list[tuple[str, GpuPeak]] = [(p.pattern, p) for p in builtin_specs() if p.pattern]

#: AMD devices with an empty or generic name: (computeMajor, computeMinor, numSms) → pattern of the row.
AMD_BY_ARCH: dict[tuple[int, int, int], str] = {
    tuple(int(x) for x in p.amd_arch.split(".")): p.pattern  # type: ignore[misc]
    for p in builtin_specs()
    if p.amd_arch
}

#: Labels whose figures were derived rather than read from a datasheet table → which figures.
APPROXIMATE = {p.label: p.approximate for p in builtin_specs() if p.approximate}


def lookup(props: dict[str, Any] | None, specs: Sequence[GpuPeak] | None = None) -> GpuPeak | None:
    """The row for one ``deviceProperties`` entry, or None when the GPU is not in the table.

    ``specs`` is the table to search (default: the built-in one; :func:`specs_with` adds a user's)."""
    table = builtin_specs() if specs is None else specs
    for p in table:  # a user's catch-all row (no pattern, no arch) applies to every device
        if not p.pattern and not p.amd_arch:
            return p
        if props and p.pattern and re.search(p.pattern, str(props.get("name") or ""), re.IGNORECASE):
            return p
    if not props:
        return None
    name = str(props.get("name") or "")
    if "nvidia" in name.lower():
        return None
    try:
        key = f"{int(props.get('computeMajor'))}.{int(props.get('computeMinor'))}.{int(props.get('numSms'))}"  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return next((p for p in table if p.amd_arch == key), None)


def rank_gpus(trace: Trace, specs: Sequence[GpuPeak] | None = None) -> tuple[list[GpuPeak], str, str | None]:
    """The table rows of the GPU(s) one rank used, a label for them, and why they are unknown
    (None when known; the rows are then empty and the label says ``none``, ``unknown`` or the name).

    The GPUs are those of ``meta.used_devices()`` (the definition ``info``'s ``gpu`` reads); the
    label is the row's label, ``N × label`` for a rank driving several GPUs."""
    devs = trace.meta.devices_used or []
    if not devs:
        return [], "none", "no GPU work in the trace"
    used = trace.meta.used_devices()
    missing = [d for d in devs if d not in used]
    if missing:
        ids = ", ".join(str(d) for d in missing)
        if not trace.meta.device_properties:
            return [], "unknown", "the GPU is not identified (the trace has no deviceProperties)"
        return [], "unknown", f"the GPU is not identified (no deviceProperties entry for device {ids})"
    found = {d: lookup(used[d], specs) for d in devs}
    names = sorted({str(used[d].get("name") or "") or f"device {d}" for d in devs if found[d] is None})
    if names:
        return [], ", ".join(names), f"{', '.join(names)}: no peak in the table (views/peaks.py)"
    peaks = [p for p in found.values() if p is not None]
    labels = sorted({p.label for p in peaks})
    return peaks, " + ".join(labels) if len(peaks) == 1 else f"{len(peaks)} × {labels[0]}", None


def peak_for(peak: GpuPeak, dtype: str) -> tuple[float, str]:
    """Peak TFLOP/s for a data type, and the data type whose peak was used (``fp32`` fallback)."""
    if dtype in peak.tflops:
        return peak.tflops[dtype], dtype
    return peak.tflops["fp32"], "fp32"


#: PyTorch dtype names (as the profiler records ``Input type``) → precision: the peak's data type
#: here, the kernel taxonomy's precision where a kernel's name has none
#: (:mod:`ranksight.views.kernel_taxonomy`).
DTYPE_PRECISION = {
    "float": "fp32",
    "c10::Float": "fp32",
    "double": "fp64",
    "c10::Half": "fp16",
    "c10::BFloat16": "bf16",
    "c10::Float8_e4m3fn": "fp8",
    "c10::Float8_e5m2": "fp8",
    "c10::Float8_e4m3fnuz": "fp8",
    "c10::Float8_e5m2fnuz": "fp8",
    "c10::Float8_e8m0fnu": "fp8",
    "c10::Float4_e2m1fn_x2": "fp4",
    "signed char": "int8",
    "unsigned char": "int8",
    "c10::qint8": "int8",
}


def dtype_of(input_type: str | None) -> str | None:
    """Map a Kineto ``Input type`` string (``float``, ``c10::BFloat16``, ...) to a peak data type."""
    return DTYPE_PRECISION.get(input_type or "")
