"""``analyze serving``, its report section and the inference findings on real vLLM and SGLang traces (MI300X):
every step annotation of the shared inference traces parsed (unknown forms reported), exact step rows on the
copies in tests/data, each finding on a real trace where it fires and one where it must not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.conftest import DATA, shared_or_skip

import ranksight
from ranksight.analyses.diagnose import findings
from ranksight.report.html.build import build_payload
from ranksight.views.serving_steps import parse_step_name

SGLANG = DATA / "tracelens/inference/sglang_decode/sglang_Qwen3-8B_decode.json.gz"
SGLANG_CAPTURE = DATA / "derived/tracelens/inference/sglang_decode/capture_traces/bs_32_rank0.no_python.json.gz"
VLLM_DECODE = DATA / "tracelens/inference/vllm_decode_full/graph_execution.json.gz"
VLLM_PIECEWISE = DATA / "tracelens/inference/vllm_prefilldecode_piecewise/graph_execution.json.gz"


def _steps(cli, p: Path) -> list[dict]:  # noqa: ANN001
    r = cli("analyze", "serving", str(p), "--format", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["tables"]["steps"]


def test_sglang_decode_step(cli) -> None:  # noqa: ANN001
    (s,) = _steps(cli, SGLANG)
    assert (s["phase"], s["form"], s["mode"], s["batch_size"]) == ("decode", "vllm-stats", "DECODE", 32)
    assert (s["prefill_tokens"], s["decode_tokens"], s["kv_tokens"]) == (0, 32, 32785)
    assert s["cpu_ms"] == pytest.approx(465.716634)
    assert s["gpu_busy_ms"] == pytest.approx(9.772926)  # TraceLens gpu_timeline busy_time: 9.772929 ms
    assert s["gpu_ms"] == pytest.approx(473.749943)  # TraceLens total_time: 473.749943 ms
    assert s["graph_launches"] == 1 and s["activities"] == 558
    assert s["gpu_busy_pct"] == pytest.approx(100 * 9.772926 / 473.830532)


def test_vllm_piecewise_mixed_step(cli) -> None:  # noqa: ANN001
    (s,) = _steps(cli, VLLM_PIECEWISE)
    assert (s["phase"], s["batch_size"], s["prefill_tokens"], s["decode_tokens"], s["kv_tokens"]) == (
        "mixed",
        46,
        8155,
        37,
        8430 + 34489,
    )
    assert s["graph_launches"] == 25
    assert s["gpu_busy_ms"] == pytest.approx(156.085793)  # TraceLens busy_time: 156.085799 ms


def test_vllm_decode_step(cli) -> None:  # noqa: ANN001
    (s,) = _steps(cli, VLLM_DECODE)
    assert (s["phase"], s["batch_size"], s["kv_tokens"], s["graph_launches"]) == ("decode", 32, 55086, 1)


def test_every_step_annotation_of_the_shared_inference_traces() -> None:
    """Every ``execute_…`` / ``step[…`` annotation in the shared vLLM and SGLang traces parses; xDiT's diffusion
    step is the one unknown form, reported."""
    root = shared_or_skip("traces/tracelens")
    parsed, unknown = 0, set()
    for p in sorted([*root.glob("inference/*/*.json.gz"), root / "b200/eager_trace.json.gz"]):
        run = ranksight.load(str(p))
        for n in run[run.ranks[0]].distinct_names():
            if n.startswith(("execute_", "step[")):
                if parse_step_name(n) is None:
                    unknown.add(n)
                else:
                    parsed += 1
    # distinct names: 4 `execute_<T>_context_…` (one per trace), 2 SGLang `step[…]`, b200's `execute_context_1(…)`
    assert parsed == 7
    assert unknown == set()
    xdit = shared_or_skip("traces/tracelens/inference/xdit_flux.1/split_traces")
    from ranksight.views.serving_steps import unknown_step_names

    run = ranksight.load(str(xdit))
    assert unknown_step_names(run[run.ranks[0]])["name"].to_list() == ["execute_diffusion_1_256x256"]


def test_no_steps_says_why(cli) -> None:  # noqa: ANN001
    r = cli("analyze", "serving", str(DATA / "generated/h100/cudagraph-infer"))
    assert "serving needs engine step annotations (vLLM execute_…, SGLang step[…]); these traces have none" in r.stderr


def _rules(p: Path) -> dict[str, object]:
    run = ranksight.load(str(p))
    found, _, _ = findings(run)
    return {f.rule: f for f in found}


def test_host_bound_serving_fires_on_sglang_decode_not_on_vllm_decode() -> None:
    f = _rules(SGLANG)["host-bound-serving"]
    assert f.severity == "high" and f.impact == pytest.approx(463.977 / 473.75, abs=1e-4)
    assert f.evidence["python_frames_recorded"] == 821
    assert f.evidence["replays_graphs"] is True
    got = _rules(VLLM_DECODE)
    assert "host-bound-serving" not in got  # 0.2 % idle in its step
    for rule in ("decode-outside-graphs", "small-decode-batch", "capture-as-run"):
        assert rule not in got
        assert rule not in _rules(SGLANG)  # decode in a graph, batch 32, a replay


def test_capture_as_run_fires_on_the_capture_not_on_the_replay() -> None:
    f = _rules(SGLANG_CAPTURE)["capture-as-run"]
    assert f.evidence["captured_launches"] == 544 and f.evidence["graph_api"] == "HIP"
    assert "host-bound-serving" not in _rules(SGLANG_CAPTURE)
    assert "capture-as-run" not in _rules(VLLM_PIECEWISE)


def test_report_serving_section_only_for_serving_runs() -> None:
    p = build_payload(ranksight.load(str(SGLANG)))
    sec = next(s for s in p["sections"] if s["slug"] == "serving")
    assert sec["shown"] and [b["id"] for b in sec["blocks"]][:3] == [
        "serving-facts",
        "serving-batch-chart",
        "serving-steps-chart",
    ]
    q = build_payload(ranksight.load(str(DATA / "generated/h100/cudagraph-infer")))
    sec = next(s for s in q["sections"] if s["slug"] == "serving")
    assert not sec["shown"] and "serving needs engine step annotations" in sec["reason"]
