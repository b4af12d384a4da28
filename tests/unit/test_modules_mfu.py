"""modules and mfu on hand-built traces, with values worked out by hand."""

from __future__ import annotations

import pytest

import ranksight
from ranksight.analyses import run_analysis
from ranksight.errors import MissingDataError

H100 = [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85 << 30}]


def py(name, ts, dur, pid_, parent, module=None):
    args = {"Python id": pid_, "Python parent id": parent}
    if module is not None:
        args["Python module id"] = module
    return {"ph": "X", "cat": "python_function", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": args}


def op(name, ts, dur, tid=1, dims=None, types=None, concrete=None):
    args = {}
    if dims is not None:
        args = {"Input Dims": dims, "Input type": types or ["c10::BFloat16"] * len(dims)}
        if concrete is not None:
            args["Concrete Inputs"] = concrete
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}


def launch(ts, corr, kernel_ts, kernel_dur, tid=1, name="gemm_kernel"):
    return [
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 1,
            "tid": tid,
            "ts": ts,
            "dur": 1,
            "args": {"correlation": corr},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": name,
            "pid": 0,
            "tid": 7,
            "ts": kernel_ts,
            "dur": kernel_dur,
            "args": {"correlation": corr, "device": 0, "stream": 7},
        },
    ]


def module_events():
    # Model_0 [0,100) > Linear_0 [10,40) (one op launching a 20 µs kernel) and Linear_1 [50,70)
    # (a 5 µs kernel); an op directly in Model_0 at [80,90) launches a 3 µs kernel.
    return [
        py("nn.Module: Model_0", 0, 100, 1, 0, 0),
        py("torch/nn/modules/linear.py(124): forward", 10, 30, 2, 1),
        py("nn.Module: Linear_0", 10, 30, 3, 1, 0),
        op("aten::linear", 12, 20),
        *launch(15, 1, 200, 20),
        py("nn.Module: Linear_1", 50, 20, 4, 1, 1),
        op("aten::linear", 52, 10),
        *launch(55, 2, 230, 5),
        op("aten::relu", 80, 10),
        *launch(82, 3, 240, 3),
    ]


def test_modules_times(make_trace):
    res = run_analysis("modules", ranksight.load(make_trace(module_events())))
    m = {r["path"]: r for r in res["modules"].iter_rows(named=True)}
    assert list(m) == ["Model_0", "Model_0/Linear_0", "Model_0/Linear_1"]
    assert (m["Model_0"]["host_total_us"], m["Model_0"]["host_self_us"]) == (100.0, 50.0)
    assert (m["Model_0"]["device_total_us"], m["Model_0"]["device_self_us"]) == (28.0, 3.0)
    assert (m["Model_0/Linear_0"]["device_total_us"], m["Model_0/Linear_0"]["ops"], m["Model_0/Linear_0"]["depth"]) == (
        20.0,
        1,
        1,
    )
    assert m["Model_0/Linear_1"]["host_self_us"] == 20.0 and m["Model_0"]["ops"] == 1
    assert m["Model_0/Linear_1"]["module"] == "  Linear_1"


def test_modules_missing_is_one_line(make_trace):
    with pytest.raises(MissingDataError, match="with_stack"):
        run_analysis("modules", ranksight.load(make_trace([op("aten::add", 0, 1)])))


# ---- mfu ---------------------------------------------------------------------------------------


def step(n, ts, dur):
    return {
        "ph": "X",
        "cat": "user_annotation",
        "name": f"ProfilerStep#{n}",
        "pid": 1,
        "tid": 1,
        "ts": ts,
        "dur": dur,
        "args": {},
    }


def mfu_events():
    # step 1 [0, 1000 µs): linear [1024x4096] x [4096x4096]^T in bf16 (its addmm child is not
    # counted again), launching a kernel that ends at 1500 µs: the step window is [0, 1500).
    # backward on thread 2: MmBackward0 > two aten::mm of the same size; a recomputed linear
    # (inside ReluBackward0) counts for HFU only.
    lin = [[1024, 4096], [4096, 4096], [4096]]
    mm = [[1024, 4096], [4096, 4096]]
    return [
        step(1, 0, 1000),
        op("aten::linear", 10, 100, dims=lin),
        op(
            "aten::addmm",
            20,
            80,
            dims=[[4096], [1024, 4096], [4096, 4096], [], []],
            types=["c10::BFloat16"] * 3 + ["Scalar"] * 2,
        ),
        *launch(30, 1, 40, 1460),
        op("autograd::engine::evaluate_function: MmBackward0", 200, 300, tid=2),
        op("MmBackward0", 210, 280, tid=2),
        op("aten::mm", 220, 100, tid=2, dims=mm),
        op("aten::mm", 330, 100, tid=2, dims=mm),
        op("autograd::engine::evaluate_function: ReluBackward0", 600, 300, tid=2),
        op("aten::linear", 610, 100, tid=2, dims=lin),
    ]


GF = 2 * 1024 * 4096 * 4096  # one matmul: 34,359,738,368 FLOPs


def test_mfu_counts_phases_once(make_trace):
    run = ranksight.load(make_trace(mfu_events(), deviceProperties=H100))
    res = run_analysis("mfu", run)
    s = res["steps"].row(0, named=True)
    assert s["step"] == 1 and s["step_us"] == 1500.0
    assert s["model_gflop"] == pytest.approx(3 * GF / 1e9) and s["recompute_gflop"] == pytest.approx(GF / 1e9)
    assert s["achieved_tflop_per_s"] == pytest.approx(3 * GF / 1.5e-3 / 1e12)
    assert s["peak_tflop_per_s"] == pytest.approx(989.4) and s["gpu"] == "H100 SXM"
    assert s["mfu"] == pytest.approx(3 * GF / 1.5e-3 / 989.4e12)
    assert s["hfu"] == pytest.approx(4 * GF / 1.5e-3 / 989.4e12)
    ops = {(r["name"], r["phase"]): r for r in res["ops"].iter_rows(named=True)}
    assert set(ops) == {("aten::linear", "forward"), ("aten::mm", "backward"), ("aten::linear", "recompute")}
    assert ops[("aten::linear", "forward")]["device_us"] == 1460.0 and ops[("aten::mm", "backward")]["calls"] == 2


def test_mfu_overrides(make_trace):
    run = ranksight.load(make_trace(mfu_events(), deviceProperties=H100))
    s = run_analysis("mfu", run, peak_tflops=100.0, model_flops_per_step=1e12)["steps"].row(0, named=True)
    assert s["model_gflop"] == 1000.0 and s["mfu"] == pytest.approx(1e12 / 1.5e-3 / 100e12)
    assert s["gpu"] == "--peak-tflops 100"


def test_mfu_unknown_gpu_leaves_mfu_empty(make_trace):
    run = ranksight.load(make_trace(mfu_events(), deviceProperties=[{"id": 0, "name": "ARTEMIS"}]))
    res = run_analysis("mfu", run)
    assert res["steps"]["mfu"].to_list() == [None] and any("--peak-tflops" in n for n in res.notes)


def test_mfu_without_steps_uses_the_gpu_span(make_trace):
    ev = [e for e in mfu_events() if not e["name"].startswith("ProfilerStep")]
    s = run_analysis("mfu", ranksight.load(make_trace(ev, deviceProperties=H100)))["steps"].row(0, named=True)
    assert s["step"] is None and s["step_us"] == 1460.0


def test_tf32_flag(make_trace):
    ev = [
        step(1, 0, 1000),
        op("aten::mm", 10, 100, dims=[[1024, 1024], [1024, 1024]], types=["float", "float"]),
        *launch(20, 1, 30, 970),
    ]
    run = ranksight.load(make_trace(ev, deviceProperties=H100))
    assert run_analysis("mfu", run)["steps"]["peak_tflop_per_s"].item() == pytest.approx(67)
    assert run_analysis("mfu", run, allow_tf32=True)["steps"]["peak_tflop_per_s"].item() == pytest.approx(494.7)
