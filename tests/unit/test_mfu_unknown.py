"""mfu and the summary's mfu_pct: what cannot be computed is empty with a note saying why, never 0;
the GPU is the one ``info`` names (one definition: ``meta.used_devices()``); the peak table knows
the GPUs of 2023-2026 by the names their traces carry."""

from __future__ import annotations

import json

import polars as pl
import pytest

import ranksight
from ranksight.analyses import run_analysis
from ranksight.model.meta import used_device_properties
from ranksight.report.headline import build_summary
from ranksight.report.markdown import table_to_markdown
from ranksight.report.terminal import format_value, print_tables
from ranksight.views.peaks import lookup

H100 = [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85 << 30}]
MI300X_VF = {
    "id": 0,
    "name": "AMD Instinct MI300X VF",
    "computeMajor": 9,
    "computeMinor": 4,
    "numSms": 304,
    "totalGlobalMem": 205822885888,
}
MM = [[1024, 1024], [1024, 1024]]
GF = 2 * 1024**3  # FLOPs of one 1024³ matmul


def step(n: int, ts: int, dur: int) -> dict:
    return {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 1, "tid": 1, "ts": ts, "dur": dur}


def mm(ts: int, types: list[str] | None = ("c10::BFloat16", "c10::BFloat16"), dims: list | None = MM) -> dict:  # type: ignore[assignment]
    args = {} if dims is None else {"Input Dims": dims, "Input type": list(types or [])}
    return {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": ts, "dur": 10, "args": args}


def launch(ts: int, corr: int, kts: int, kdur: int, device: int = 0) -> list[dict]:
    return [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts, "dur": 1,
         "args": {"correlation": corr}},
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": device, "tid": 7, "ts": kts, "dur": kdur,
         "args": {"correlation": corr, "device": device, "stream": 7}},
    ]  # fmt: skip


def one_step(*ops: dict, device: int = 0) -> list[dict]:
    """Step 1 over [0, 1000) µs; the ops at 10, 30, ...; a kernel [100, 1000) on ``device``."""
    return [step(1, 0, 1000), *ops, *launch(15, 1, 100, 900, device)]


def steps_row(path, **opts) -> dict:
    return run_analysis("mfu", ranksight.load(path, cache=False), **opts)["steps"].row(0, named=True)


EMPTY = ("model_gflop", "recompute_gflop", "achieved_tflop_per_s", "peak_tflop_per_s", "mfu", "hfu")


def test_no_shapes_is_empty_not_zero(make_trace) -> None:
    p = make_trace(one_step(mm(10, dims=None)), deviceProperties=H100)
    run = ranksight.load(p, cache=False)
    res = run_analysis("mfu", run)
    s = res["steps"].row(0, named=True)
    assert {k: s[k] for k in EMPTY} == dict.fromkeys(EMPTY)
    assert s["step_us"] == 1000.0 and s["gpu"] == "H100 SXM"
    assert s["note"] == (
        "no op in this step has a FLOP formula and input shapes (no Input Dims: profile with record_shapes=True)"
    )
    assert "rank 0: mfu empty: no op in this step has a FLOP formula" in " | ".join(res.notes)
    # the summary: mfu_pct empty (null in JSON), and a note saying why
    doc = build_summary(run)
    row = doc.tables["per_rank"].row(0, named=True)
    assert "mfu_pct" in row and row["mfu_pct"] is None
    assert (
        "`mfu`: mfu_pct empty on rank 0: no op in this step has a FLOP formula and input shapes (no Input Dims: "
        "profile with record_shapes=True)" in doc.notes
    )
    assert json.loads(json.dumps(doc.to_json_doc()))["tables"]["per_rank"][0]["mfu_pct"] is None


def test_counted_step_beside_an_empty_one(make_trace) -> None:
    """Step 2 counts nothing: its FLOPs, rates and MFU are empty; step 1's are numbers (and the
    summary's mean is over the step where MFU is known)."""
    ev = [*one_step(mm(10)), step(2, 1000, 1000), *launch(1010, 2, 1100, 900)]
    run = ranksight.load(make_trace(ev, deviceProperties=H100), cache=False)
    st = run_analysis("mfu", run)["steps"].sort("step")
    assert st["model_gflop"].to_list() == [pytest.approx(GF / 1e9), None]
    assert st["recompute_gflop"].to_list() == [0.0, None]
    mfu1 = GF / 1e-3 / 989.4e12
    assert st["mfu"].to_list() == [pytest.approx(mfu1), None]
    assert st["note"].to_list() == [None, "no op in this step has a FLOP formula and input shapes"]
    doc = build_summary(run)
    assert doc.tables["per_rank"]["mfu_pct"].to_list() == [pytest.approx(100 * mfu1)]
    assert not any(n.startswith("`mfu`") for n in doc.notes)


def test_unknown_precision_is_not_counted_as_fp32(make_trace) -> None:
    """An op whose input type maps to no data type: its peak is unknown, so is the step's MFU
    (not its FLOPs or rate); --peak-tflops applies to every type, unknown ones included."""
    p = make_trace(one_step(mm(10), mm(30, types=["c10::ComplexFloat"] * 2)), deviceProperties=H100)
    s = steps_row(p)
    assert s["model_gflop"] == pytest.approx(2 * GF / 1e9)
    assert s["achieved_tflop_per_s"] == pytest.approx(2 * GF / 1e-3 / 1e12)
    assert (s["mfu"], s["peak_tflop_per_s"], s["hfu"]) == (None, None, None)
    assert s["note"] == (
        f"{round(GF / 1e9, 3)} GFLOP in ops of unknown precision (input type c10::ComplexFloat); pass --peak-tflops"
    )
    o = steps_row(p, peak_tflops=100.0)
    assert o["mfu"] == pytest.approx(2 * GF / 1e-3 / 100e12) and o["note"] is None
    # no input type recorded at all
    s = steps_row(make_trace(one_step(mm(10, types=[])), deviceProperties=H100))
    assert s["mfu"] is None and s["note"].endswith("(input type not recorded); pass --peak-tflops")


def test_model_flops_without_a_counted_op_has_no_precision(make_trace) -> None:
    p = make_trace(one_step(mm(10, dims=None)), deviceProperties=H100)
    s = steps_row(p, model_flops_per_step=1e12)
    assert s["model_gflop"] == 1000.0 and s["achieved_tflop_per_s"] == pytest.approx(1000.0)
    assert s["mfu"] is None and "gives the precision of --model-flops-per-step" in s["note"]
    assert steps_row(p, model_flops_per_step=1e12, peak_tflops=2000.0)["mfu"] == pytest.approx(0.5)


def test_gpu_is_the_one_info_names(make_trace) -> None:
    """ROCm traces: GPU events on device 2, one deviceProperties entry with id 0. info and mfu
    both read meta.used_devices(): the MI300X and its bf16 peak."""
    p = make_trace(one_step(mm(10), device=2), deviceProperties=[MI300X_VF])
    run = ranksight.load(p, cache=False)
    t = run[0]
    assert t.meta.devices_used == [2] and t.meta.used_devices() == {2: MI300X_VF}
    assert run_analysis("info", run)["files"]["gpu"].to_list() == ["AMD Instinct MI300X VF"]
    s = run_analysis("mfu", run)["steps"].row(0, named=True)
    assert (s["gpu"], s["peak_tflop_per_s"], s["note"]) == ("MI300X", 1307.4, None)
    assert s["mfu"] == pytest.approx(GF / 1e-3 / 1307.4e12)


def test_unidentified_and_unknown_gpus(make_trace) -> None:
    # several different GPUs listed, none with the id used: not identified (info shows the vendor)
    props = [{"id": 0, "name": "NVIDIA A100-SXM4-80GB"}, {"id": 1, "name": "NVIDIA H100 80GB HBM3"}]
    run = ranksight.load(make_trace(one_step(mm(10), device=2), deviceProperties=props), cache=False)
    assert run[0].meta.gpu_model is None and run_analysis("info", run)["files"]["gpu"].to_list() == ["NVIDIA"]
    s = run_analysis("mfu", run)["steps"].row(0, named=True)
    assert (s["gpu"], s["mfu"]) == ("unknown", None)
    assert s["note"] == (
        "no peak for the GPU: the GPU is not identified (no deviceProperties entry for device 2); pass --peak-tflops"
    )
    assert s["model_gflop"] == pytest.approx(GF / 1e9)  # FLOPs and rate do not need the GPU
    # no deviceProperties at all
    s = steps_row(make_trace(one_step(mm(10))))
    assert s["note"] == (
        "no peak for the GPU: the GPU is not identified (the trace has no deviceProperties); pass --peak-tflops"
    )
    # a GPU the table does not know
    s = steps_row(make_trace(one_step(mm(10)), deviceProperties=[{"id": 0, "name": "ARTEMIS"}]))
    assert (s["gpu"], s["mfu"]) == ("ARTEMIS", None)
    assert s["note"] == "no peak for the GPU: ARTEMIS: no peak in the table (views/peaks.py); pass --peak-tflops"
    # no GPU work: the CPU ops' span, no GPU
    ev = [step(1, 0, 1000), mm(10)]
    s = steps_row(make_trace(ev, deviceProperties=H100))
    assert (s["gpu"], s["mfu"], s["note"]) == (
        "none",
        None,
        "no peak for the GPU: no GPU work in the trace; pass --peak-tflops",
    )


def test_used_device_properties() -> None:
    a0, a1 = {"id": 0, "name": "A"}, {"id": 1, "name": "A"}
    b1 = {"id": 1, "name": "B"}
    assert used_device_properties([a0, b1], [1]) == {1: b1}
    assert used_device_properties([a0, a1], [5]) == {5: a0}  # one model listed
    assert used_device_properties([a0, b1], [5]) == {}  # two models: not identified
    assert used_device_properties([a0, b1], [0, 5]) == {0: a0}
    assert used_device_properties([], [0]) == {}


@pytest.mark.parametrize(
    ("name", "label", "dtype", "tflops"),
    [
        ("AMD Instinct MI300X", "MI300X", "bf16", 1307.4),
        ("AMD Instinct MI300X VF", "MI300X", "bf16", 1307.4),
        ("AMD Instinct MI325X", "MI325X", "bf16", 1307.4),
        ("AMD Instinct MI355X", "MI355X", "bf16", 2516.6),
        ("AMD Instinct MI250X / MI250", "MI250X (one GCD)", "bf16", 191.5),
        ("NVIDIA H100 80GB HBM3", "H100 SXM", "bf16", 989.4),
        ("NVIDIA H100 PCIe", "H100 PCIe", "bf16", 756),
        ("NVIDIA H200", "H200", "bf16", 989.4),
        ("NVIDIA GH200 480GB", "GH200 (96 GB HBM3)", "bf16", 989.4),
        ("NVIDIA H200 NVL", "H200 NVL", "fp64", 60),
        ("NVIDIA B200", "B200", "bf16", 2250),
        ("NVIDIA GB200", "GB200", "bf16", 2500),
        ("NVIDIA A100-SXM4-80GB", "A100", "bf16", 312),
        ("NVIDIA L40S", "L40S", "bf16", 362.05),
        ("NVIDIA GeForce RTX 3080", "GeForce RTX 3080", "bf16", 59.5),
        ("NVIDIA GeForce RTX 3090", "GeForce RTX 3090", "int8", 284),
        ("Quadro GP100", "Quadro GP100", "fp16", 20.7),
    ],
)
def test_peak_table_knows_current_gpus(name: str, label: str, dtype: str, tflops: float) -> None:
    p = lookup({"name": name})
    assert p is not None and (p.label, p.tflops[dtype]) == (label, tflops)


def test_empty_is_empty_in_every_format(capsys) -> None:
    """None, NaN and ±inf print as an empty cell (terminal, Markdown, CSV) and null in JSON."""
    assert [format_value(v) for v in (None, float("nan"), float("inf"), -float("inf"), 0.0)] == ["", "", "", "", "0.00"]
    df = pl.DataFrame({"rank": [0, 1, 2], "x": [float("nan"), None, 1.5]})
    assert table_to_markdown(df).splitlines()[2:] == ["| 0 |  |", "| 1 |  |", "| 2 | 1.50 |"]
    print_tables({"t": df}, "csv")
    assert capsys.readouterr().out == "rank,x\n0,\n1,\n2,1.5\n"
    print_tables({"t": df}, "json")
    assert [r["x"] for r in json.loads(capsys.readouterr().out)["tables"]["t"]] == [None, None, 1.5]
