"""``analyze graphs`` and the operator view with ``--capture`` on real MI300X traces (HIP graphs) copied into
tests/data: vLLM piecewise prefill+decode (25 graph replays, 3 graphs) and SGLang decode (one 544-kernel
graph), with their capture traces (derived: Python frames removed, tests/data/derived/README.md)."""

from __future__ import annotations

import json

import pytest
from tests.conftest import DATA

VLLM = DATA / "tracelens/inference/vllm_prefilldecode_piecewise/graph_execution.json.gz"
VLLM_CAPTURE = (
    DATA / "derived/tracelens/inference/vllm_prefilldecode_piecewise/capture_traces/"
    "graph_capture_rank_0.1773709679453551615.no_python.json.gz"
)
SGLANG = DATA / "tracelens/inference/sglang_decode/sglang_Qwen3-8B_decode.json.gz"
SGLANG_CAPTURE = DATA / "derived/tracelens/inference/sglang_decode/capture_traces/bs_32_rank0.no_python.json.gz"


def _tables(cli, *args: str) -> tuple[dict, list]:  # noqa: ANN001
    r = cli("analyze", *args, "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    return doc["tables"], doc.get("notes", [])


def test_graphs_on_vllm_piecewise(cli) -> None:  # noqa: ANN001
    t, notes = _tables(cli, "graphs", str(VLLM), "--capture", str(VLLM_CAPTURE))
    g = {row["graph"]: row for row in t["graphs"]}
    assert sorted((row["replays"], row["activities_per_replay"]) for row in g.values()) == [(1, 4), (1, 12), (23, 15)]
    assert all(row["api"] == "hipGraphLaunch" and row["match"] == "exact" for row in g.values())
    assert all(row["attributed_pct"] == 100 for row in g.values())
    layers = next(row for row in g.values() if row["replays"] == 23)
    assert layers["gpu_us"] == pytest.approx(143567, rel=1e-4)
    assert layers["launch_cost_from"] == "median of 62 eager launch calls in this trace"
    assert layers["saved_us_per_replay"] == pytest.approx(
        layers["activities_per_replay"] * layers["eager_launch_us"] - layers["cpu_launch_us"], abs=0.01
    )  # each column rounded to the ns
    caps = t["captures"]
    assert len(caps) == 25 and {c["replays"] for c in caps} == {1}
    assert {c["batch_size"] for c in caps} == {None}  # given with --capture: no execution_details.json
    ops = {(k["graph"], k["pos"]): k for k in t["kernels"]}
    assert ops[(layers["graph"], 0)]["op"] == "aten::addmm"
    assert ops[(layers["graph"], 0)]["module"] == "GraphModule_0"
    assert t["unmatched"] == []
    assert any("100.00 % of the replayed GPU time" in n for n in notes)


def test_operator_view_before_and_after_capture(cli) -> None:  # noqa: ANN001
    before, notes = _tables(cli, "ops", str(VLLM), "--capture", "none")
    names = {row["name"] for row in before["ops"]}
    assert "vllm::moe_forward" not in names and "aten::addmm" not in names
    assert any("149,919.8 µs of GPU time replayed from CUDA/HIP graphs (100.00 %) has no operator" in n for n in notes)
    after, notes = _tables(cli, "ops", str(VLLM), "--capture", str(VLLM_CAPTURE))
    row = {r["name"]: r for r in after["ops"]}
    # TraceLens's merged report (../shared/oracles/tracelens-graph-merge): 124,885.786 and 17,301.817 µs
    assert row["vllm::moe_forward"]["device_self_us"] == pytest.approx(124885.786, abs=0.01)
    assert row["aten::addmm"]["device_self_us"] == pytest.approx(17301.817, abs=0.01)
    assert row["aten::addmm"]["calls"] == 72 and row["aten::addmm"]["host_total_us"] == 0
    # the eager attention between the pieces is as before
    eager = {r["name"]: r for r in before["ops"]}["vllm::unified_attention_with_output"]
    assert row["vllm::unified_attention_with_output"] == eager


def test_sglang_decode_ops_and_op_kernels(cli) -> None:  # noqa: ANN001
    t, _ = _tables(cli, "ops", str(SGLANG), "--capture", str(SGLANG_CAPTURE))
    row = {r["name"]: r for r in t["ops"]}
    assert row["aten::mm"]["calls"] == 145
    assert row["aten::mm"]["device_self_us"] == pytest.approx(5782.254, abs=0.01)  # TraceLens: 5782.254
    assert row["aten::copy_"]["device_self_us"] == pytest.approx(378.609, abs=0.01)  # TraceLens: 378.609
    k, _ = _tables(cli, "op-kernels", str(SGLANG), "--capture", str(SGLANG_CAPTURE))
    mm = [r for r in k["op_kernels"] if r["aten_op_name"] == "aten::mm"]
    assert sum(r["occurrence_count"] for r in mm) == 145
    assert all(r["avg_aten_op_launch_delay"] is None for r in mm)  # replayed: no launch delays


def test_capture_trace_as_input(cli) -> None:  # noqa: ANN001
    t, notes = _tables(cli, "graphs", str(SGLANG_CAPTURE))
    assert t["graphs"] == []
    (c,) = t["captures"]
    assert (c["source"], c["launches"], c["named"]) == ("this trace", 544, 544)
    assert any("profile the replay and pass this trace with --capture" in n for n in notes)


def test_bad_capture_path_is_a_usage_error(cli, tmp_path) -> None:  # noqa: ANN001
    r = cli("analyze", "graphs", str(SGLANG), "--capture", str(tmp_path / "absent"))
    assert r.returncode == 2
    assert "no such file or folder" in r.stderr
