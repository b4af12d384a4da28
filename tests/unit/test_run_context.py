"""Run context on hand-built traces: every answer of every aspect, with exact evidence counts."""

from __future__ import annotations

from typing import Any

import pytest

import ranksight
from ranksight.analyses import Session
from ranksight.analyses.run_context import run_context_line, run_contexts
from ranksight.views.run_context import architecture_of, context_line, run_context

H100 = {"deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "computeMajor": 9, "computeMinor": 0}]}
NVJET = "nvjet_sm90_tst_128x128_64x6_2x1_v_bz_NNT"
NVJET2 = "nvjet_sm90_tst_128x64_64x8_1x2_h_bz_NTT"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >()"
MI300 = {"deviceProperties": [{"id": 0, "name": "AMD Instinct MI300X", "computeMajor": 9, "computeMinor": 4}]}


class Ev:
    """A tiny Kineto trace builder: CPU ops, runtime calls and the kernels they launch."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.t = 0
        self.corr = 0
        self.ext = 0

    def cpu(self, name: str, *, cat: str = "cpu_op", dur: int = 5, types: list[str] | None = None, tid: int = 1):
        self.ext += 1
        self.t += 10
        args: dict[str, Any] = {"External id": self.ext}
        if types is not None:
            args["Input type"] = types
        self.events.append(
            {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": self.t, "dur": dur, "args": args}
        )
        return self.ext

    def py(self, name: str):
        self.t += 10
        self.events.append(
            {"ph": "X", "cat": "python_function", "name": name, "pid": 1, "tid": 1, "ts": self.t, "dur": 2}
        )

    def runtime(self, name: str, *, ext: int | None = None, dur: int = 2, tid: int = 1) -> int:
        self.corr += 1
        self.t += 10
        args: dict[str, Any] = {"correlation": self.corr}
        if ext is not None:
            args["External id"] = ext
        self.events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": name,
                "pid": 1,
                "tid": tid,
                "ts": self.t,
                "dur": dur,
                "args": args,
            }
        )
        return self.corr

    def kernel(self, name: str, corr: int | None, *, ext: int | None = None, dur: int = 100, **extra: Any):
        self.t += 10
        args: dict[str, Any] = {"device": 0, "stream": 7, **extra}
        if corr is not None:
            args["correlation"] = corr
        if ext is not None:
            args["External id"] = ext
        self.events.append(
            {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": self.t, "dur": dur, "args": args}
        )

    def launch(
        self, op: str, kernel: str, *, types: list[str] | None = None, dur: int = 100, api: str = "cudaLaunchKernel"
    ):
        ext = self.cpu(op, types=types, dur=15)  # encloses its launch call (ts + 10, 2 µs)
        corr = self.runtime(api, ext=ext)
        self.kernel(kernel, corr, ext=ext, dur=dur)


def ctx_of(make_trace, ev: Ev, **top: Any):
    path = make_trace(ev.events, **(top or H100))
    run = ranksight.load(path, cache=False)
    return run_context(run[run.ranks[0]])


# ---- mode ---------------------------------------------------------------------------------------


def test_training_from_backward_and_optimizer(make_trace):
    ev = Ev()
    ev.launch("aten::mm", "sm90_xmma_gemm_bf16bf16_bf16f32", types=["c10::BFloat16", "c10::BFloat16"])
    ev.cpu("autograd::engine::evaluate_function: MmBackward0")
    ev.cpu("MmBackward0")
    ev.cpu("Optimizer.step#AdamW.step", cat="user_annotation")
    c = ctx_of(make_trace, ev)
    assert c.mode == "training" and c.is_training and not c.is_inference
    assert c.evidence["mode"].startswith("2 backward ops (")
    assert "1 optimizer op (`Optimizer.step#AdamW.step`)" in c.evidence["mode"]


def test_training_from_optimizer_alone(make_trace):
    ev = Ev()
    ev.launch("aten::_fused_adamw_", "fused_adamw_kernel")
    c = ctx_of(make_trace, ev)
    assert c.mode == "training"
    assert c.evidence["mode"] == "1 optimizer op (`aten::_fused_adamw_`)"


def test_inference_from_serving_markers(make_trace):
    ev = Ev()
    ev.cpu("step[DECODE bs=32]", cat="user_annotation")
    ev.py("/sgl-workspace/sglang/python/sglang/srt/model_executor/model_runner.py(2000): forward")
    ev.launch("aten::mm", NVJET)
    c = ctx_of(make_trace, ev)
    assert c.mode == "inference" and c.is_inference
    assert "SGLang step annotation `step[DECODE bs=32]` ×1" in c.evidence["mode"]
    assert "SGLang model executor frame" in c.evidence["mode"]


@pytest.mark.parametrize("name", ["execute_context_1(128)_generation_0(0)", "execute_context_0(0)_generation_32(32)"])
def test_inference_from_vllm_step_annotation_without_token_count(make_trace, name):
    ev = Ev()
    ev.cpu(name, cat="user_annotation")
    c = ctx_of(make_trace, ev)
    assert c.mode == "inference" and f"vLLM step annotation `{name}` ×1" in c.evidence["mode"]


def test_inference_from_vllm_step_annotation(make_trace):
    ev = Ev()
    ev.cpu("execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk55086sqsq32sqsk55086)", cat="user_annotation")
    c = ctx_of(make_trace, ev)
    assert c.mode == "inference"
    assert c.evidence["mode"].startswith("serving markers: vLLM step annotation `execute_32_context_0")


def test_inference_from_gpu_work_without_backward(make_trace):
    ev = Ev()
    ev.launch("aten::addmm", NVJET)
    c = ctx_of(make_trace, ev)
    assert c.mode == "inference"
    assert c.evidence["mode"] == "GPU work and CPU operators recorded, no backward and no optimizer op"


def test_unknown_mode_on_gpu_only_trace(make_trace):
    ev = Ev()
    ev.kernel(NVJET, None)
    c = ctx_of(make_trace, ev)
    assert c.mode == "unknown"
    assert c.evidence["mode"].startswith("no CPU operators recorded (GPU-only trace)")
    assert c.graphs == "unknown" and c.compiled == "unknown"


def test_unknown_mode_without_gpu_work(make_trace):
    ev = Ev()
    ev.cpu("aten::add")
    c = ctx_of(make_trace, ev)
    assert c.mode == "unknown"
    assert c.evidence["mode"] == "no GPU work and no backward, optimizer or serving marker"


def test_backward_pattern_needs_an_autograd_node_name(make_trace):
    # a user annotation or an op that only *contains* "Backward" is no evidence
    ev = Ev()
    ev.cpu("my_Backward_helper")
    ev.cpu("run_backward_pass", cat="user_annotation")
    ev.launch("aten::mm", NVJET)
    assert ctx_of(make_trace, ev).mode == "inference"


def test_backward_names_count_only_as_cpu_ops(make_trace):
    # the backward pattern judges CPU ops: an annotation or a Python frame with a node's name is
    # no backward op (each pattern is matched only against the kinds it names)
    ev = Ev()
    ev.cpu("MmBackward0", cat="user_annotation")
    ev.cpu("MmBackward0", cat="python_function")
    ev.launch("aten::mm", NVJET)
    assert ctx_of(make_trace, ev).mode == "inference"


# ---- graphs -------------------------------------------------------------------------------------


def test_graph_replay(make_trace):
    ev = Ev()
    ev.cpu("aten::empty")
    corr = ev.runtime("cudaGraphLaunch")
    for _ in range(3):
        ev.kernel(NVJET, corr)
    c = ctx_of(make_trace, ev)
    assert c.graphs == "replay" and c.replays_graphs and not c.is_capture
    assert (c.graph_launches, c.graph_kernels, c.graph_api) == (1, 3, "CUDA")
    assert c.evidence["graphs"] == "replay: 1 `cudaGraphLaunch` call owning 3 GPU activities"


def test_graph_capture_counts_launches_under_capture(make_trace):
    ev = Ev()
    ev.runtime("hipLaunchKernel")  # before the capture, no GPU record: not counted
    ev.runtime("hipStreamBeginCapture")
    ev.runtime("hipLaunchKernel")
    ev.runtime("hipLaunchKernel")
    ev.kernel(NVJET, ev.runtime("hipLaunchKernel"))  # ran (another stream, not capturing): not captured
    ev.runtime("hipLaunchKernel", tid=2)  # another thread: not under this capture
    ev.runtime("hipStreamEndCapture")
    ev.runtime("hipGraphInstantiateWithFlags")
    ev.runtime("hipLaunchKernel")  # after the capture
    c = ctx_of(make_trace, ev, **MI300)
    assert c.graphs == "capture" and c.is_capture and not c.replays_graphs
    assert (c.graph_captures, c.captured_launches, c.graph_api) == (1, 2, "HIP")
    assert "2 launches recorded under capture with no GPU record (captured, not executed)" in c.evidence["graphs"]


def test_unclosed_capture_stays_on_its_thread(make_trace):
    ev = Ev()
    ev.runtime("cudaStreamBeginCapture", tid=1)  # its EndCapture is past the end of the trace
    ev.runtime("cudaLaunchKernel", tid=1)
    ev.runtime("cudaLaunchKernel", tid=2)  # a launch whose GPU record is missing, on another thread
    c = ctx_of(make_trace, ev)
    assert (c.graphs, c.graph_captures, c.captured_launches) == ("capture", 1, 1)


def test_graph_capture_and_replay(make_trace):
    ev = Ev()
    ev.runtime("cudaStreamBeginCapture")
    ev.runtime("cudaLaunchKernel")
    ev.runtime("cudaStreamEndCapture")
    corr = ev.runtime("cudaGraphLaunch")
    ev.kernel("k", corr)
    c = ctx_of(make_trace, ev)
    assert c.graphs == "capture+replay" and c.is_capture and c.replays_graphs
    assert (c.graph_captures, c.captured_launches, c.graph_launches) == (1, 1, 1)


def test_no_graphs(make_trace):
    ev = Ev()
    ev.launch("aten::mm", NVJET)
    c = ctx_of(make_trace, ev)
    assert c.graphs == "none"
    assert c.evidence["graphs"] == "runtime calls recorded, no graph capture or graph launch API"


def test_graph_replay_from_graph_ids_without_runtime(make_trace):
    ev = Ev()
    ev.kernel(NVJET, None, **{"graph id": 4, "graph node id": 9})
    ev.kernel(NVJET, None, **{"graph id": 4, "graph node id": 10})
    c = ctx_of(make_trace, ev)
    assert c.graphs == "replay"
    assert c.evidence["graphs"] == "replay: 2 kernels carry a graph id (no runtime calls recorded)"


# ---- torch.compile ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "cat"),
    [
        ("Torch-Compiled Region: 0/0", "cpu_op"),
        ("CompiledFunction", "cpu_op"),
        ("## Call CompiledFxGraph fh46ub5s ##", "user_annotation"),
    ],
)
def test_compiled_from_regions(make_trace, name, cat):
    ev = Ev()
    ev.cpu(name, cat=cat)
    ev.launch("aten::mm", NVJET)
    c = ctx_of(make_trace, ev)
    assert c.compiled == "yes" and c.is_compiled
    assert c.evidence["compiled"].startswith("compiled regions `")


def test_compiled_from_inductor_kernels_on_gpu_only_trace(make_trace):
    ev = Ev()
    ev.kernel("triton_poi_fused_add_0", None)
    ev.kernel("triton_red_fused_sum_1", None)
    ev.kernel("my_triton_kernel", None)  # a Triton kernel Inductor did not name: no evidence
    c = ctx_of(make_trace, ev)
    assert c.compiled == "yes"
    assert c.evidence["compiled"] == "2 Inductor Triton kernels (2 distinct)"


def test_not_compiled_and_dynamo_frames_are_no_evidence(make_trace):
    # eager optimizers run under torch._disable_dynamo: _dynamo frames appear without compiling
    ev = Ev()
    ev.py("torch/_dynamo/eval_frame.py(1165): _fn")
    ev.launch("aten::mm", NVJET)
    c = ctx_of(make_trace, ev)
    assert c.compiled == "no"


# ---- parallel hints -----------------------------------------------------------------------------


def test_parallel_hints_from_groups_and_ops(make_trace):
    ev = Ev()
    ev.cpu("nccl:send")
    ev.cpu("nccl:recv")
    ev.cpu("nccl:all_to_all")
    ev.kernel("void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*)", None)
    ev.launch("aten::mm", NVJET)
    top = {
        **H100,
        "distributedInfo": {
            "backend": "nccl",
            "rank": 0,
            "world_size": 8,
            "pg_config": [
                {"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "pg_size": 8, "ranks": []},
                {"pg_name": "3", "pg_desc": "mesh_tp", "backend_config": "cuda:nccl", "pg_size": 2, "ranks": [0, 1]},
            ],
        },
    }
    c = ctx_of(make_trace, ev, **top)
    assert c.parallel_hints == ("tensor", "pipeline", "expert")
    e = c.evidence["parallel"]
    assert "tensor: process group `mesh_tp`" in e
    assert (
        "pipeline: 2 send/recv ops (`nccl:send`, `nccl:recv`)" in e
        or "pipeline: 2 send/recv ops (`nccl:recv`, `nccl:send`)" in e
    )
    assert (
        "expert: 1 all-to-all op (`nccl:all_to_all`; all-to-all also serves embedding sharding and sequence parallelism), 1 all-to-all kernel (DeepEP: `void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float`)"
        in e
    )


def test_no_parallel_hints(make_trace):
    ev = Ev()
    ev.launch("aten::mm", NVJET)
    c = ctx_of(make_trace, ev)
    assert c.parallel_hints == ()
    assert c.evidence["parallel"] == "no parallel-group description, send/recv, all-to-all or DDP/FSDP evidence"


# ---- precision ----------------------------------------------------------------------------------


def test_precision_from_op_dtypes_weighted_by_kernel_time(make_trace):
    ev = Ev()
    ev.launch("aten::mm", NVJET, types=["c10::BFloat16", "c10::BFloat16"], dur=300)
    ev.launch("aten::mm", NVJET2, types=["float", "float"], dur=100)
    ev.launch("aten::add", ADD, types=["float", "float"], dur=1000)  # not matrix work
    c = ctx_of(make_trace, ev)
    assert c.precision == "bf16" and c.low_precision
    assert c.precision_share == 0.75
    assert c.evidence["precision"].startswith("bf16: 75% of 0.400 ms of matrix-kernel time")


def test_precision_fp8_from_scaled_mm(make_trace):
    ev = Ev()
    ev.launch("aten::_scaled_mm", NVJET, types=["c10::Float8_e4m3fn", "c10::Float8_e4m3fn", "float", "float"])
    c = ctx_of(make_trace, ev)
    assert c.precision == "fp8" and c.low_precision


def test_precision_unknown_without_matrix_work(make_trace):
    ev = Ev()
    ev.launch("aten::add", ADD, types=["float", "float"])
    c = ctx_of(make_trace, ev)
    assert c.precision == "unknown" and not c.low_precision and c.precision_share is None


def test_precision_unknown_when_no_matrix_kernel_has_one(make_trace):
    ev = Ev()
    ev.launch("aten::mm", NVJET, types=["TensorList"])  # a cuBLAS name without precision, an op without dtype
    c = ctx_of(make_trace, ev)
    assert c.precision == "unknown" and c.precision_share is None
    assert c.evidence["precision"] == (
        "1 matrix kernel (0.100 ms), none with a precision in its name or its launching op's input dtypes"
    )


def test_precision_unknown_when_no_precision_covers_half(make_trace):
    ev = Ev()
    ev.launch("aten::mm", NVJET, types=["c10::BFloat16", "c10::BFloat16"], dur=100)
    ev.launch("aten::mm", NVJET2, types=["TensorList"], dur=300)  # dtype not known
    c = ctx_of(make_trace, ev)
    assert c.precision == "unknown"
    assert c.evidence["precision"].startswith("no precision covers more than half of 0.400 ms")


# ---- device and the one-line summary --------------------------------------------------------------


@pytest.mark.parametrize(
    ("props", "vendor", "arch"),
    [
        ({"computeMajor": 9, "computeMinor": 0}, "NVIDIA", "Hopper (sm_90)"),
        ({"computeMajor": 8, "computeMinor": 9}, "NVIDIA", "Ada (sm_89)"),
        ({"computeMajor": 10, "computeMinor": 0}, "NVIDIA", "Blackwell (sm_100)"),
        ({"computeMajor": 9, "computeMinor": 4}, "AMD", "CDNA 3 (gfx94x)"),
        ({"computeMajor": 9}, "NVIDIA", None),
        (None, "NVIDIA", None),
    ],
)
def test_architecture(props, vendor, arch):
    assert architecture_of(props, vendor) == arch


def test_context_line_and_session_accessor(make_trace):
    ev = Ev()
    ev.cpu("Torch-Compiled Region: 0/0")
    ev.launch("aten::mm", NVJET, types=["c10::BFloat16", "c10::BFloat16"])
    ev.cpu("MmBackward0")
    corr = ev.runtime("cudaGraphLaunch")
    ev.kernel("k", corr)
    path = make_trace(ev.events, **H100)
    sess = Session(ranksight.load(path, cache=False))
    ctxs = run_contexts(sess)
    assert run_contexts(sess) is ctxs  # computed once per session
    c = ctxs[0]
    assert (c.gpu_vendor, c.gpu_model, c.gpu_arch) == ("NVIDIA", "NVIDIA H100 80GB HBM3", "Hopper (sm_90)")
    line = "training, bf16, torch.compile, CUDA graph replay"
    assert context_line(c) == line
    assert run_context_line(ctxs) == line
    res = sess.result("run-context")
    row = res["run context"].row(0, named=True)
    assert (row["mode"], row["graphs"], row["compiled"], row["dominant_precision"]) == (
        "training",
        "replay",
        "yes",
        "bf16",
    )
    assert res["evidence"]["aspect"].to_list() == ["mode", "graphs", "compiled", "parallel", "precision", "device"]
