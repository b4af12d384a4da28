"""diagnose rules in their run context, on hand-built traces with exact expectations.

- an inference server's preallocated KV cache is not "memory close to full";
- FP8 matrix kernels run on Tensor Cores: no Tensor Core finding, no autocast advice;
- a rank that already replays CUDA graphs is not told to capture CUDA graphs;
- allocator calls (cudaFree) inside steps are a finding of their own;
- a graph launch is one entry in the launch queue, not one per node.
"""

from __future__ import annotations

import ranksight
from ranksight.analyses import run_analysis
from ranksight.analyses.diagnose import findings

GIB = 1 << 30
H100 = [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 80 * GIB, "computeMajor": 9, "computeMinor": 0}]


def op(name, ts, dur, tid=1, **args):
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}


def ann(name, ts, dur, tid=1):
    return {"ph": "X", "cat": "user_annotation", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur}


def rt(name, ts, dur, corr, tid=1):
    return {
        "ph": "X",
        "cat": "cuda_runtime",
        "name": name,
        "pid": 1,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": {"correlation": corr},
    }


def kern(name, ts, dur, corr, stream=7):
    return {
        "ph": "X",
        "cat": "kernel",
        "name": name,
        "pid": 0,
        "tid": stream,
        "ts": ts,
        "dur": dur,
        "args": {"correlation": corr, "stream": stream, "device": 0},
    }


def mem(ts, b, alloc, res):
    return {
        "ph": "i",
        "s": "t",
        "cat": "cpu_instant_event",
        "name": "[memory]",
        "pid": 1,
        "tid": 1,
        "ts": ts,
        "args": {
            "Addr": 1,
            "Bytes": b,
            "Total Allocated": alloc,
            "Total Reserved": res,
            "Device Type": 1,
            "Device Id": 0,
        },
    }


def rules_of(path):
    f, _, notes = findings(ranksight.load(path))
    return {x.rule: x for x in f}, notes


def test_kv_cache_preallocation_is_not_memory_near_capacity(make_trace):
    """The same 95 % peak: a finding for a training step, a note for an inference server."""

    def trace(marker_ops):
        return [
            *marker_ops,
            op("aten::empty", 1, 2),
            mem(2, 76 * GIB, 76 * GIB, 78 * GIB),
            rt("cudaLaunchKernel", 10, 2, 1),
            kern("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>()", 20, 5, 1),
        ]

    serving = trace([ann("execute_context_1(128)_generation_0(0)", 0, 100)])
    training = trace(
        [op("autograd::engine::evaluate_function: MmBackward0", 0, 5), op("Optimizer.step#AdamW.step", 5, 5)]
    )
    found, notes = rules_of(make_trace(serving, deviceProperties=H100))
    assert "memory-near-capacity" not in found
    assert any("preallocates its KV cache" in n for n in notes)
    found, _ = rules_of(make_trace(training, deviceProperties=H100))
    f = found["memory-near-capacity"]
    assert "None" not in f.summary and "outside any step" in f.summary
    assert any("checkpointing" in x for x in f.fixes)


def _matrix_trace(kernel_name, n=40):
    ev = [op("ProfilerStep#1", 0, 10_000)]
    for i in range(n):
        ev += [rt("cudaLaunchKernel", 10 + i * 100, 5, i + 1), kern(kernel_name, 20 + i * 100, 90, i + 1)]
    return ev


FP8_GROUPED_GEMM = (
    "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cutlass::gemm::GroupProblemShape<cute::tuple<"
    "int, int, int> >, cutlass::gemm::collective::CollectiveMma<cutlass::gemm::MainloopSm90TmaGmmaWarpSpecialized"
    "Cooperative<4>, cutlass::float_e4m3_t, cutlass::float_e4m3_t> > >(cutlass::gemm::kernel::GemmUniversal<>::Params)"
)


def test_fp8_matrix_work_is_on_tensor_cores_and_gets_no_autocast_advice(make_trace):
    found, _ = rules_of(make_trace(_matrix_trace(FP8_GROUPED_GEMM), deviceProperties=H100))
    assert "low-tensor-core-use" not in found
    # the same step with FP32 SIMT GEMMs: the finding, and autocast advice (the run is FP32)
    found, _ = rules_of(make_trace(_matrix_trace("volta_sgemm_128x64_nn"), deviceProperties=H100))
    f = found["low-tensor-core-use"]
    assert f.evidence["matrix_us_by_tensor_cores"] == {"no": 3600.0}
    assert any("autocast" in x for x in f.fixes)


def test_launch_bound_on_a_graph_replaying_rank_does_not_suggest_graphs(make_trace):
    """200 tiny kernels in a mostly idle step; one graph launch owns half of them."""
    ev = [op("ProfilerStep#1", 0, 100_000)]
    for i in range(100):
        ev += [
            rt("cudaLaunchKernel", 10 + i * 500, 5, i + 1),
            kern(f"triton_poi_fused_add_{i % 3}", 20 + i * 500, 2, i + 1),
        ]
    ev.append(rt("cudaGraphLaunch", 60_000, 20, 1000))
    ev += [kern(f"triton_poi_fused_mul_{i % 3}", 60_100 + i * 300, 2, 1000) for i in range(100)]
    f = rules_of(make_trace(ev, deviceProperties=H100))[0]["launch-bound"]
    assert f.evidence["replays_graphs"] is True
    assert not any(x.startswith("capture the step in CUDA graphs") for x in f.fixes)
    assert any("already replays" in x for x in f.fixes)


def test_allocator_calls_in_steps_are_a_finding(make_trace):
    ev = [
        op("ProfilerStep#1", 0, 10_000),
        rt("cudaLaunchKernel", 10, 5, 1),
        kern("volta_sgemm_128x64_nn", 20, 500, 1),
        op("aten::empty", 600, 4000),
        rt("cudaFree", 610, 3000, 2),
        rt("cudaMalloc", 3700, 800, 3),
    ]
    f = rules_of(make_trace(ev, deviceProperties=H100))[0]["allocator-sync"]
    assert f.evidence["blocked_us"] == 3800.0 and f.impact == 0.38
    assert f.evidence["longest"]["name"] == "cudaFree" and f.severity == "high"


def test_a_graph_launch_is_one_queue_entry(make_trace):
    """1,500 nodes of one graph launch never fill a 1,024-deep launch queue."""
    ev = [rt("cudaGraphLaunch", 0, 10, 1)] + [kern("k", 20 + i * 3, 2, 1) for i in range(1500)]
    res = run_analysis("queue", ranksight.load(make_trace(ev, deviceProperties=H100)))
    assert res["summary"]["max"].to_list() == [1]
    assert res["blocked"]["duration_at_max_queue_length_us"].sum() == 0


def test_idle_causes_judges_the_gpu_span_when_there_are_no_steps(make_trace):
    """An inference script without ProfilerSteps: two kernels 0–20 and 60–100 µs, the second
    launched at 55 after a CPU op running 20–55: idle 40 of 100 µs, cause cpu_op (and launch
    latency), judged over the GPU span."""
    ev = [
        op("aten::linear", 0, 8),
        rt("cudaLaunchKernel", 1, 2, 1),
        kern("volta_sgemm_128x64_nn", 0, 20, 1),
        op("aten::nonzero", 20, 35),
        rt("cudaLaunchKernel", 55, 2, 2),
        kern("volta_sgemm_128x64_nn", 60, 40, 2),
    ]
    f = rules_of(make_trace(ev, deviceProperties=H100))[0]["idle-causes"]
    assert "40% of its span" in f.summary and "no steps" in f.summary
    assert f.evidence["idle_by_cause_us"] == {"cpu_op": 35.0, "launch_latency": 5.0}
