"""Run context on real traces: training / inference, graph capture / replay, torch.compile, precision,
through the view, the ``run-context`` analysis and the ``info`` / ``summary`` commands.

Expected values were read from the raw traces (names and counts of the events named in each
evidence line); the traces under ``../shared`` are skipped loudly when it is absent.
"""

from __future__ import annotations

import json

import polars as pl
import pytest
from tests.conftest import DATA, shared_or_skip

import ranksight
from ranksight.views.run_context import context_line, run_context

H100 = DATA / "generated" / "h100"
CAPTURE = DATA / "derived/tracelens/inference/sglang_decode/capture_traces/bs_32_rank0.no_python.json.gz"
VLLM_DECODE = DATA / "tracelens/inference/vllm_decode_full/graph_execution.json.gz"


def ctx(path):
    run = ranksight.load(str(path), cache=False)
    return run_context(run[run.ranks[0]])


def fields(c):
    return (c.mode, c.graphs, c.compiled, c.parallel_hints, c.precision)


# ---- traces in tests/data (always run) ------------------------------------------------------------


def test_h100_eager_training():
    c = ctx(H100 / "train-eager")
    assert fields(c) == ("training", "none", "no", (), "bf16")
    assert c.evidence["mode"].startswith("1,212 backward ops (")
    assert "6 optimizer ops (`Optimizer.step#AdamW.step`, `Optimizer.zero_grad#AdamW.zero_grad`)" in c.evidence["mode"]
    # cuBLAS nvjet GEMMs: bf16 from their ops; cuDNN SDPA kernels name `f16` (fp16 by the taxonomy)
    # every matrix kernel's precision is bf16: cuDNN's SDPA engines name the wgmma f16 family for bf16
    # inputs too, so the taxonomy leaves their name-precision unknown and the launching op's bf16 decides
    assert c.precision_share == 1.0 and c.precision_source == "op dtypes"
    assert c.evidence["precision"] == "bf16: 100% of 2.792 ms of matrix-kernel time (from op dtypes)"
    assert (c.gpu_vendor, c.gpu_model, c.gpu_arch) == ("NVIDIA", "NVIDIA H100 80GB HBM3", "Hopper (sm_90)")


def test_precision_is_kernel_taxonomys_number():
    """One definition, one number: the dominant precision's share is kernel-taxonomy's share of matrix time."""
    from ranksight.analyses import Session
    from ranksight.analyses.run_context import run_contexts

    for path in (H100 / "train-eager", VLLM_DECODE):
        sess = Session(ranksight.load(str(path), cache=False))
        c = run_contexts(sess)[0]
        mp = sess.result("kernel-taxonomy")["matrix_precision"]
        pct = mp.group_by("precision").agg(pl.col("pct_of_matrix").sum())
        top = pct.filter(pl.col("precision") == c.precision)["pct_of_matrix"].item()
        assert round(100 * c.precision_share, 2) == pytest.approx(top, abs=0.01), path


def test_h100_compiled_training():
    c = ctx(H100 / "train-compiled")
    assert fields(c) == ("training", "none", "yes", (), "bf16")
    # 432 Triton kernels of 37 distinct names (README of generated/h100), and the compiled regions
    assert "432 Inductor Triton kernels (37 distinct)" in c.evidence["compiled"]
    assert "compiled regions `## Call CompiledFxGraph" in c.evidence["compiled"]


def test_h100_cuda_graph_inference():
    c = ctx(H100 / "cudagraph-infer")
    assert fields(c)[:4] == ("inference", "replay", "no", ())
    # one cudaGraphLaunch per step (3 steps), 55 kernels + 5 memsets each
    assert (c.graph_launches, c.graph_kernels, c.graph_api, c.captured_launches) == (3, 180, "CUDA", 0)
    assert c.evidence["graphs"] == "replay: 3 `cudaGraphLaunch` calls owning 180 GPU activities"
    assert c.evidence["mode"] == "GPU work and CPU operators recorded, no backward and no optimizer op"
    # the replayed kernels have no launching op, and cuBLAS nvjet names carry no precision: not guessed
    assert c.precision == "unknown" and c.evidence["precision"].startswith("63 matrix kernels (0.908 ms), none with a")


def test_vllm_decode_replay_compiled_fp4():
    c = ctx(VLLM_DECODE)
    assert fields(c) == ("inference", "replay", "yes", (), "fp4")
    assert (c.graph_launches, c.graph_kernels, c.graph_api) == (1, 421, "HIP")
    assert "vLLM step annotation `execute_32_context_0" in c.evidence["mode"]
    assert c.evidence["compiled"] == "48 Inductor Triton kernels (3 distinct)"
    assert c.precision_source == "kernel names"  # the MXFP4 MoE kernels `_matmul_ogs_…_bf16xbf16xmxfp4…`
    assert c.gpu_arch == "CDNA 3 (gfx94x)"


def test_sglang_capture_trace():
    c = ctx(CAPTURE)
    assert fields(c) == ("inference", "capture", "no", (), "unknown")
    assert c.is_capture and not c.replays_graphs
    assert (c.graph_captures, c.captured_launches, c.graph_launches, c.graph_api) == (1, 544, 0, "HIP")
    assert c.evidence["graphs"] == (
        "capture: 1 `hipStreamBeginCapture` call, 1 `hipStreamEndCapture` call, 1 `hipGraphInstantiateWithFlags` "
        "call, capture frames (`torch/cuda/graphs.py(98): capture_begin`), 544 launches recorded under capture "
        "with no GPU record (captured, not executed)"
    )
    assert c.evidence["precision"] == "no executed matrix kernels: 544 launches were captured into graphs, not executed"
    assert "serving graph-capture annotation `capture_32_DECODE`" in c.evidence["mode"]


@pytest.mark.parametrize(
    ("rel", "expected"),
    [
        ("tracelens/mi300/gaunernst_bert-small-uncased__1016001.json.gz", ("inference", "none", "no", (), "bf16")),
        ("tracelens/mi300/resnet_act_checkpoint.json.gz", ("training", "none", "no", ("data",), "bf16")),
        ("tracelens/torch_compile_triton/trace.json.gz", ("inference", "none", "yes", (), "bf16")),
        ("hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz", ("unknown", "unknown", "no", (), "unknown")),
        ("hta/trace_filter/sampled_rank-0.json.gz", ("training", "none", "no", ("expert", "data"), "tf32")),
    ],
)
def test_corpus_copies(rel, expected):
    assert fields(ctx(DATA / rel)) == expected


def test_cli_analyze_run_context_json(cli):
    r = cli("analyze", "run-context", str(CAPTURE), "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    row = doc["tables"]["run context"][0]
    assert (row["mode"], row["graphs"], row["compiled"], row["dominant_precision"]) == (
        "inference",
        "capture",
        "no",
        "unknown",
    )
    assert (row["graph_captures"], row["captured_launches"]) == (1, 544)
    assert row["context"] == "inference, precision unknown, HIP graph capture (captured kernels not executed)"
    aspects = [e["aspect"] for e in doc["tables"]["evidence"]]
    assert aspects == ["mode", "graphs", "compiled", "parallel", "precision", "device"]
    assert any("captured, not executed; not dropped records" in n for n in doc["notes"])


def test_info_heads_with_the_context_line(cli):
    r = cli("info", str(H100 / "train-compiled"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "context: training, bf16, torch.compile, no graphs"
    j = json.loads(cli("info", str(H100 / "cudagraph-infer"), "--format", "json").stdout)
    assert "context: inference, precision unknown, CUDA graph replay" in j["notes"]


def test_summary_has_the_context_field(cli):
    r = cli("summary", str(VLLM_DECODE), "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["tables"]["per_rank"][0]["context"] == "inference, fp4, torch.compile, HIP graph replay"
    assert doc["columns"]["context"].endswith("[run-context]")


def test_report_shows_the_context():
    from ranksight.report.html import build_payload

    run = ranksight.load(str(H100 / "cudagraph-infer"), cache=False)
    doc = build_payload(run)
    assert doc["context"] == "inference, precision unknown, CUDA graph replay"
    ov = next(s for s in doc["sections"] if s["slug"] == "overview")
    facts = next(b for b in ov["blocks"] if b["id"] == "overview-facts")
    assert doc["strings"][facts["items"][0]["text"]] == "inference, precision unknown, CUDA graph replay"
    assert any(b["id"] == "overview-context" for b in ov["blocks"])


# ---- traces under ../shared (skipped loudly when absent) ------------------------------------------

INFERENCE = "traces/tracelens/inference"


@pytest.mark.parametrize(
    ("rel", "expected", "graph_counts"),
    [
        # (launches, kernels, captures, captured launches)
        (
            f"{INFERENCE}/sglang_decode/capture_traces/bs_32_rank0.json.gz",
            ("inference", "capture", "no", (), "unknown"),
            (0, 0, 1, 544),
        ),
        (
            f"{INFERENCE}/vllm_prefilldecode_piecewise/capture_traces/"
            "graph_capture_rank_0.1773709679453551615.pt.trace.json.gz",
            # no executed matrix kernel (the one "fp8" kernel, vLLM's KV-cache write, is data movement)
            ("inference", "capture", "yes", (), "unknown"),
            (0, 0, 25, 361),
        ),
        (
            f"{INFERENCE}/vllm_prefilldecode_piecewise/graph_execution.json.gz",
            ("inference", "replay", "yes", (), "fp4"),
            (25, 361, 0, 0),
        ),
        (
            f"{INFERENCE}/sglang_decode/sglang_Qwen3-8B_decode.json.gz",
            ("inference", "replay", "no", (), "bf16"),
            (1, 544, 0, 0),
        ),
        (
            f"{INFERENCE}/sglang_prefilldecode/sglang_Qwen3-8B_prefilldecode.json.gz",
            ("inference", "none", "no", (), "bf16"),
            (0, 0, 0, 0),
        ),
        (
            f"{INFERENCE}/xdit_flux.1/split_traces/"
            "profile_trace_rank_0_annotation_iteration_0_execute_diffusion_1_256x256.json.gz",
            ("inference", "replay", "yes", (), "bf16"),
            (4, 3972, 0, 0),
        ),
        ("traces/tracelens/b200/eager_trace.json.gz", ("inference", "none", "yes", (), "fp4"), (0, 0, 0, 0)),
        (
            "traces/tracelens/mi210/gpu_only_trace/gpu_only_trace.json.gz",
            ("unknown", "none", "unknown", (), "bf16"),
            (0, 0, 0, 0),
        ),
        (
            "traces/tracelens/mi300/ddp_resnet18_no_pool/train_resnet18.json.gz",
            ("training", "none", "no", (), "bf16"),
            (0, 0, 0, 0),
        ),
        (
            "traces/hta/negative_queue_length_values_check/rank0.json.gz",
            ("training", "replay", "yes", ("expert", "data"), "tf32"),
            (70, 345, 0, 0),
        ),
    ],
)
def test_shared_traces(rel, expected, graph_counts):
    c = ctx(shared_or_skip(rel))
    assert fields(c) == expected
    assert (c.graph_launches, c.graph_kernels, c.graph_captures, c.captured_launches) == graph_counts


def test_xdit_flux_evidence():
    c = ctx(
        shared_or_skip(
            f"{INFERENCE}/xdit_flux.1/split_traces/"
            "profile_trace_rank_0_annotation_iteration_0_execute_diffusion_1_256x256.json.gz"
        )
    )
    assert context_line(c) == "inference, bf16, torch.compile, HIP graph replay"
    assert c.evidence["graphs"] == "replay: 4 `hipGraphLaunch` calls owning 3,972 GPU activities"
    assert c.evidence["mode"].endswith("grad-mode frames (no_grad / inference_mode) seen")
    assert "1,732 Inductor Triton kernels (32 distinct)" in c.evidence["compiled"]
    assert (c.gpu_model, c.gpu_arch) == ("AMD Instinct MI300X", "CDNA 3 (gfx94x)")


def test_every_shared_trace_has_a_context():
    """Every trace of the corpus gets an answer in the documented vocabulary, with evidence for each;
    a trace is a capture trace exactly when it calls a stream-capture API."""
    from ranksight.views.run_context import COMPILED, GRAPHS, HINTS, MODES, PRECISIONS

    root = shared_or_skip("traces")
    files = sorted(p for p in root.rglob("*.json.gz") if "execution_trace/benchmark_simple_add_et" not in str(p))
    assert len(files) > 40
    for f in files:
        run = ranksight.load(str(f), cache=False)
        t = run[run.ranks[0]]
        c = run_context(t)
        assert c.mode in MODES and c.graphs in GRAPHS and c.compiled in COMPILED, f
        assert set(c.parallel_hints) <= set(HINTS) and c.precision in PRECISIONS, f
        assert set(c.evidence) == {"mode", "graphs", "compiled", "parallel", "precision", "device"}, f
        assert all(c.evidence.values()), f
        captures = any("StreamBeginCapture" in n for n in t.runtime_names)
        assert c.is_capture == captures, f
