"""The GPU table is data (``ranksight/data/gpu_specs.tsv``): every row has a source and a memory
bandwidth, the vendors' GPUs of the issue are in it, a user's ``--gpu-spec`` file is matched first,
a bad file is one usage error, and ``mfu`` reads the same table (one definition)."""

from __future__ import annotations

import json

import pytest

import ranksight
from ranksight.analyses import run_analysis
from ranksight.errors import UsageError
from ranksight.views.peaks import AMD_BY_ARCH, DTYPES, PEAKS, builtin_specs, load_specs, lookup, specs_with

H100 = [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]


def test_every_row_has_a_source_a_bandwidth_and_an_fp32_peak() -> None:
    rows = builtin_specs()
    assert len(rows) >= 40
    for r in rows:
        assert r.source and r.checked, r.label
        assert r.mem_bw_tbps is not None and 0.1 < r.mem_bw_tbps < 20, r.label
        assert "fp32" in r.tflops and set(r.tflops) <= set(DTYPES)
    # the compatibility views keep their shapes
    assert PEAKS[0][0] == "GB200" and AMD_BY_ARCH[(9, 4, 304)] == "MI300"


@pytest.mark.parametrize(
    ("name", "label", "bw", "bf16", "fp8"),
    [
        ("Tesla V100-SXM2-32GB", "V100 SXM2", 0.9, None, None),
        ("NVIDIA A100-SXM4-80GB", "A100", 2.039, 312, None),
        ("NVIDIA A100 80GB PCIe", "A100", 1.935, 312, None),
        ("NVIDIA A100-SXM4-40GB", "A100", 1.555, 312, None),
        ("NVIDIA H100 80GB HBM3", "H100 SXM", 3.35, 989.4, 1978.9),
        ("NVIDIA H100 PCIe", "H100 PCIe", 2.0, 756, 1513),
        ("NVIDIA H200", "H200", 4.8, 989.4, 1978.9),
        ("NVIDIA B200", "B200", 8.0, 2250, 4500),
        ("NVIDIA GB200", "GB200", 8.0, 2500, 5000),
        ("AMD Instinct MI210", "MI210", 1.6384, 181, None),
        ("AMD Instinct MI250X", "MI250X (one GCD)", 1.6384, 191.5, None),
        ("AMD Instinct MI300X", "MI300X", 5.3, 1307.4, 2614.9),
        ("AMD Instinct MI325X", "MI325X", 6.0, 1307.4, 2614.9),
        ("AMD Instinct MI355X", "MI355X", 8.0, 2516.6, 5033.2),
    ],
)
def test_issue_gpus(name: str, label: str, bw: float, bf16: float | None, fp8: float | None) -> None:
    p = lookup({"name": name})
    assert p is not None
    assert (p.label, p.mem_bw_tbps, p.tflops.get("bf16"), p.tflops.get("fp8")) == (label, bw, bf16, fp8)


def test_amd_generic_name_by_arch() -> None:
    p = lookup({"name": "", "computeMajor": 9, "computeMinor": 4, "numSms": 304})
    assert p is not None and p.label == "MI300X" and p.mem_bw_tbps == 5.3
    assert lookup({"name": "NVIDIA X", "computeMajor": 9, "computeMinor": 4, "numSms": 304}) is None


def test_user_table_is_matched_first(tmp_path) -> None:
    tsv = tmp_path / "mine.tsv"
    tsv.write_text(
        "# my lab's measured peaks\npattern\tlabel\tfp32\tbf16\tmem_bw_tbps\tsource\n"
        "H100\tH100 (measured)\t60\t700\t2.9\tour microbenchmarks\n"
    )
    specs = specs_with(str(tsv))
    p = lookup({"name": "NVIDIA H100 80GB HBM3"}, specs)
    assert p is not None and (p.label, p.tflops, p.mem_bw_tbps) == ("H100 (measured)", {"fp32": 60, "bf16": 700}, 2.9)
    # other GPUs still come from the built-in table
    q = lookup({"name": "AMD Instinct MI300X"}, specs)
    assert q is not None and q.label == "MI300X"
    # CSV and JSON, and a catch-all row (no pattern) that applies to every device
    csv = tmp_path / "mine.csv"
    csv.write_text("label,fp32,mem_bw_tbps\nany GPU,10,1\n")
    r = lookup({"name": "ARTEMIS"}, specs_with(str(csv)))
    assert r is not None and (r.label, r.tflops, r.mem_bw_tbps) == ("any GPU", {"fp32": 10.0}, 1.0)
    js = tmp_path / "mine.json"
    js.write_text(json.dumps({"gpus": [{"pattern": "ARTEMIS", "label": "MTIA", "fp32": 5, "fp16": 50}]}))
    s = lookup({"name": "ARTEMIS"}, specs_with(str(js)))
    assert s is not None and s.tflops == {"fp32": 5.0, "fp16": 50.0} and s.mem_bw_tbps is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("label\tfp32\tcolour\nx\t1\tred\n", "unknown column(s) ['colour']"),
        ("label\tbf16\nx\t1\n", "the columns label and fp32 are required"),
        ("pattern\tlabel\tfp32\n(\tx\t1\n", "is not a regular expression"),
        ("label\tfp32\nx\tfast\n", "column 'fp32' is not a number: 'fast'"),
        ("label\tfp32\nx\t-3\n", "must be positive"),
        ("label\tfp32\tamd_arch\nx\t1\tgfx942\n", "amd_arch must read"),
        ("# nothing\n", "no rows"),
    ],
)
def test_bad_user_table_is_one_usage_error(tmp_path, text: str, message: str) -> None:
    f = tmp_path / "bad.tsv"
    f.write_text(text)
    with pytest.raises(UsageError, match=None) as e:
        load_specs(str(f))
    assert message in str(e.value)
    with pytest.raises(UsageError, match="--gpu-spec .*missing.tsv"):
        load_specs(str(tmp_path / "missing.tsv"))


def test_mfu_reads_the_user_table(make_trace, tmp_path) -> None:
    """mfu's peak comes from the same table: a user row for the H100 changes the MFU."""
    ev = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 1000},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 10,
         "args": {"Input Dims": [[1024, 1024], [1024, 1024]], "Input type": ["c10::BFloat16", "c10::BFloat16"]}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 15, "dur": 1,
         "args": {"correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 100, "dur": 900,
         "args": {"correlation": 1, "device": 0, "stream": 7}},
    ]  # fmt: skip
    p = make_trace(ev, deviceProperties=H100)
    run = ranksight.load(p, cache=False)
    gf = 2 * 1024**3
    base = run_analysis("mfu", run)["steps"].row(0, named=True)
    assert base["gpu"] == "H100 SXM" and base["mfu"] == pytest.approx(gf / 1e12 / 989.4 / 1e-3)
    tsv = tmp_path / "h100.tsv"
    tsv.write_text("pattern\tlabel\tfp32\tbf16\nH100\tH100 measured\t50\t500\n")
    mine = run_analysis("mfu", run, gpu_spec=str(tsv))["steps"].row(0, named=True)
    assert mine["gpu"] == "H100 measured" and mine["mfu"] == pytest.approx(gf / 1e12 / 500 / 1e-3)
