"""Peak dense matrix throughput per GPU and data type (TFLOP/s), keyed by ``deviceProperties``.

One documented table, used by ``mfu`` and ``diagnose``. Values are the vendors' published
**dense** (no structured sparsity) peaks at boost clock, per device **as PyTorch sees it**: one
MI250/MI250X *GCD* (half of the OAM package the datasheet describes), one GPU otherwise. Each row
of :data:`PEAKS` names its source document in a comment: NVIDIA datasheets and architecture
whitepapers (Quadro GP100, V100, A100, A30, A10, T4, H100 SXM/PCIe/NVL, H200/H200 NVL, B200/GB200, L4, L40,
L40S, Ampere/Ada/Blackwell GeForce and RTX whitepapers) and AMD Instinct datasheets (MI100, MI210,
MI250/MI250X, MI300A, MI300X, MI325X, MI350X, MI355X).

Data types: ``fp64`` (tensor/matrix FP64 where the GPU has it), ``fp32`` (FP32 without TF32:
PyTorch's default for matmuls), ``tf32``, ``fp16``, ``bf16`` (tensor cores / matrix cores with FP32
accumulation: GeForce cards run these at half their FP16-accumulate rate), ``fp8``, ``int8``,
``fp4``. A missing entry means the GPU has no such unit; ``peak_for`` then falls back to ``fp32``
and says so. Figures marked ``approx`` in :data:`APPROXIMATE` were not in a datasheet table and are
derived (e.g. B200 FP32 from SM count × clock).

Lookup: the first pattern (case-insensitive regex searched in ``deviceProperties.name``) that
matches wins, so specific variants come first. AMD traces sometimes carry an empty or generic name
(``""``, ``"AMD Radeon Graphics"``): they are matched by (``computeMajor``, ``computeMinor``,
``numSms``) in :data:`AMD_BY_ARCH`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = ["GpuPeak", "PEAKS", "AMD_BY_ARCH", "APPROXIMATE", "lookup", "peak_for", "DTYPES", "dtype_of"]

DTYPES = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8", "fp4")


@dataclass(frozen=True)
class GpuPeak:
    """Peaks of one GPU model in TFLOP/s (TOP/s for int8)."""

    label: str
    tflops: dict[str, float]


def _p(
    label: str,
    fp64: float | None,
    fp32: float,
    tf32: float | None,
    fp16: float | None,
    bf16: float | None,
    fp8: float | None = None,
    int8: float | None = None,
    fp4: float | None = None,
) -> GpuPeak:
    vals = dict(fp64=fp64, fp32=fp32, tf32=tf32, fp16=fp16, bf16=bf16, fp8=fp8, int8=int8, fp4=fp4)
    return GpuPeak(label, {k: float(v) for k, v in vals.items() if v is not None})


#: (pattern, peaks) in match order. Each row names its source; "sparse ÷ 2": the document gives
#: the figure with 2:4 structured sparsity, the dense peak is half of it; "per GPU": a system's
#: figure divided by its GPU count.
PEAKS: list[tuple[str, GpuPeak]] = [
    # NVIDIA Blackwell
    # GB200 NVL72 datasheet, per GPU (rack ÷ 72), tensor figures sparse ÷ 2; FP32 approx.
    (r"GB200", _p("GB200", 45, 80, 1250, 2500, 2500, 5000, 5000, 10000)),
    # HGX/DGX B200 datasheet, per GPU (8-GPU system ÷ 8), tensor figures sparse ÷ 2; FP32 approx.
    (r"B200", _p("B200", 37, 75, 1125, 2250, 2250, 4500, 4500, 9000)),
    # RTX PRO 6000 Blackwell product page (approx., see APPROXIMATE)
    (r"RTX PRO 6000", _p("RTX PRO 6000 Blackwell", None, 126, 252, 504, 504, 1008, 1008, 2016)),
    # NVIDIA RTX Blackwell GPU architecture whitepaper, GeForce RTX 5090 column (dense, FP32 accumulate)
    (r"RTX 5090", _p("GeForce RTX 5090", None, 104.8, 104.8, 209.5, 209.5, 419, 838, 1676)),
    # NVIDIA Hopper
    # H200 Tensor Core GPU datasheet, H200 NVL column, sparse ÷ 2
    (r"H200 NVL", _p("H200 NVL", 60, 60, 417.5, 835.5, 835.5, 1670.5, 1670.5)),
    # H200 Tensor Core GPU datasheet, H200 SXM column, sparse ÷ 2 (GH200: the same GPU)
    (r"H200|GH200", _p("H200 / GH200", 67, 67, 494.7, 989.4, 989.4, 1978.9, 1978.9)),
    # H100 Tensor Core GPU datasheet, H100 NVL column (per GPU), sparse ÷ 2
    (r"H100 NVL", _p("H100 NVL", 60, 60, 417.5, 835.5, 835.5, 1670.5, 1670.5)),
    # H100 Tensor Core GPU datasheet, H100 PCIe column, sparse ÷ 2
    (r"H100 PCIe", _p("H100 PCIe", 51, 51, 378, 756, 756, 1513, 1513)),
    # H800 SXM5 datasheet (FP64 cut to 1 TFLOPS), sparse ÷ 2
    (r"H800", _p("H800", 1, 67, 494.7, 989.4, 989.4, 1978.9, 1978.9)),
    # H100 Tensor Core GPU datasheet, H100 SXM column, sparse ÷ 2
    (r"H100", _p("H100 SXM", 67, 67, 494.7, 989.4, 989.4, 1978.9, 1978.9)),
    # NVIDIA Ada
    # L40S datasheet, sparse ÷ 2
    (r"L40S", _p("L40S", None, 91.6, 183, 362.05, 362.05, 733, 733)),
    # L40 datasheet, sparse ÷ 2
    (r"L40", _p("L40", None, 90.5, 90.5, 181, 181, 362, 362)),
    # L4 datasheet, sparse ÷ 2
    (r"\bL4\b", _p("L4", None, 30.3, 60, 121, 121, 242.5, 242.5)),
    # RTX 6000 Ada datasheet / Ada Lovelace architecture whitepaper appendix (dense, FP32 accumulate)
    (r"RTX 6000 Ada", _p("RTX 6000 Ada", None, 91.1, 182.1, 364.2, 364.2, 728.5, 728.5)),
    # Ada Lovelace architecture whitepaper, GeForce RTX 4090 column (dense, FP32 accumulate)
    (r"RTX 4090", _p("GeForce RTX 4090", None, 82.6, 82.6, 165.2, 165.2, 330.3, 660.6)),
    # NVIDIA Ampere
    # A100 Tensor Core GPU datasheet (dense figures; A800: the same compute)
    (r"A100|A800", _p("A100", 19.5, 19.5, 156, 312, 312, None, 624)),
    # A30 datasheet (dense)
    (r"\bA30\b", _p("A30", 10.3, 10.3, 82, 165, 165, None, 330)),
    # A10 datasheet (dense)
    (r"\bA10\b", _p("A10", None, 31.2, 62.5, 125, 125, None, 250)),
    # NVIDIA Ampere GA102 GPU architecture whitepaper, RTX A6000 column (dense, FP32 accumulate)
    (r"RTX A6000", _p("RTX A6000", None, 38.7, 77.4, 154.8, 154.8, None, 309.7)),
    # NVIDIA Ampere GA102 GPU architecture whitepaper, GeForce RTX 3090 column (dense, FP32 accumulate)
    (r"RTX 3090", _p("GeForce RTX 3090", None, 35.6, 35.6, 71, 71, None, 284)),
    # NVIDIA Ampere GA102 GPU architecture whitepaper, GeForce RTX 3080 column (dense, FP32 accumulate)
    (r"RTX 3080", _p("GeForce RTX 3080", None, 29.8, 29.8, 59.5, 59.5, None, 238)),
    # NVIDIA Turing / Volta / Pascal
    # Turing GPU architecture whitepaper, GeForce RTX 2080 Ti column (FP32 accumulate)
    (r"RTX 2080 Ti", _p("GeForce RTX 2080 Ti", None, 13.4, None, 53.8, None, None, 215.2)),
    # T4 datasheet
    (r"\bT4\b", _p("T4", None, 8.1, None, 65, None, None, 130)),
    # V100 datasheet (V100S PCIe, V100 PCIe, V100 SXM2 columns)
    (r"V100S", _p("V100S PCIe", 8.2, 16.4, None, 130, None)),
    (r"V100.*PCIE", _p("V100 PCIe", 7, 14, None, 112, None)),
    (r"V100", _p("V100 SXM2", 7.8, 15.7, None, 125, None)),
    # Quadro GP100 datasheet (no tensor cores: FP16 at twice the FP32 rate)
    (r"GP100", _p("Quadro GP100", 5.2, 10.3, None, 20.7, None)),
    # AMD Instinct (datasheets; dense figures: AMD lists sparsity separately)
    # MI355X datasheet (FP64 and FP32 vector/matrix; MXFP4 as fp4)
    (r"MI355", _p("MI355X", 78.6, 157.3, None, 2516.6, 2516.6, 5033.2, 5033.2, 10066.4)),
    # MI350X datasheet
    (r"MI350", _p("MI350X", 72.1, 144.2, None, 2306.9, 2306.9, 4613.7, 4613.7, 9227.5)),
    # MI325X datasheet (the MI300X's compute)
    (r"MI325", _p("MI325X", 163.4, 163.4, 653.7, 1307.4, 1307.4, 2614.9, 2614.9)),
    # MI300A datasheet
    (r"MI300A", _p("MI300A", 122.6, 122.6, 490.3, 980.6, 980.6, 1961.2, 1961.2)),
    # MI300X datasheet (also "MI300X VF", a virtual function of one)
    (r"MI300", _p("MI300X", 163.4, 163.4, 653.7, 1307.4, 1307.4, 2614.9, 2614.9)),
    # MI250X datasheet (OAM, two GCDs) ÷ 2: one GCD, the device PyTorch sees
    (r"MI250X", _p("MI250X (one GCD)", 47.9, 47.9, None, 191.5, 191.5, None, 191.5)),
    # MI250 datasheet (OAM, two GCDs) ÷ 2
    (r"MI250", _p("MI250 (one GCD)", 45.3, 45.3, None, 181, 181, None, 181)),
    # MI210 datasheet (one GCD)
    (r"MI210", _p("MI210", 45.3, 45.3, None, 181, 181, None, 181)),
    # MI100 datasheet (FP32 matrix; BF16 at half the FP16 rate)
    (r"MI100", _p("MI100", 11.5, 46.1, None, 184.6, 92.3, None, 184.6)),
]

#: AMD devices with an empty or generic name: (computeMajor, computeMinor, numSms) → pattern above.
AMD_BY_ARCH: dict[tuple[int, int, int], str] = {
    (9, 4, 304): "MI300",  # gfx942, 304 CUs: MI300X / MI325X (same compute)
    (9, 4, 228): "MI300A",
    (9, 0, 110): "MI250X",  # gfx90a, one GCD of an MI250X
    (9, 0, 104): "MI250",  # gfx90a, one GCD of an MI250 (an MI210 has the same CUs and peaks)
    (9, 5, 256): "MI355",  # gfx950; an MI350X at lower clocks would read 8 % lower
}

#: Entries derived rather than read from a datasheet table.
APPROXIMATE = {
    "B200": "fp32",
    "GB200": "fp32",
    "GeForce RTX 5090": "fp16/bf16 with FP32 accumulate; fp4 = the whitepaper's sparse figure ÷ 2",
    "RTX PRO 6000 Blackwell": "all",
}


def lookup(props: dict[str, Any] | None) -> GpuPeak | None:
    """The peaks for one ``deviceProperties`` entry, or None when the GPU is not in the table."""
    if not props:
        return None
    name = str(props.get("name") or "")
    for pat, peak in PEAKS:
        if re.search(pat, name, re.IGNORECASE):
            return peak
    try:
        key = (int(props.get("computeMajor")), int(props.get("computeMinor")), int(props.get("numSms")))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    arch = AMD_BY_ARCH.get(key)
    if arch is None or "nvidia" in name.lower():
        return None
    return next(p for q, p in PEAKS if q == arch)


def peak_for(peak: GpuPeak, dtype: str) -> tuple[float, str]:
    """Peak TFLOP/s for a data type, and the data type whose peak was used (``fp32`` fallback)."""
    if dtype in peak.tflops:
        return peak.tflops[dtype], dtype
    return peak.tflops["fp32"], "fp32"


_TYPE_TO_DTYPE = {
    "float": "fp32",
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
}


def dtype_of(input_type: str | None) -> str | None:
    """Map a Kineto ``Input type`` string (``float``, ``c10::BFloat16``, ...) to a peak data type."""
    return _TYPE_TO_DTYPE.get(input_type or "")
