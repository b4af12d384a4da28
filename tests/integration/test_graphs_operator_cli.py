"""``modules``, ``mfu``, ``op-perf``, ``diff`` and ``report`` with ``--capture`` on the real MI300X replays copied into
tests/data (vLLM piecewise prefill+decode, SGLang decode) and their derived captures (Python frames removed
but ``nn.Module`` frames and the model runners', tests/data/derived/README.md); golden against TraceLens's
merged reports in ../shared/oracles/tracelens-graph-merge when ../shared is present (skipped loudly
otherwise)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from tests.conftest import DATA
from tests.integration.test_graphs_cli import SGLANG, SGLANG_CAPTURE, VLLM, VLLM_CAPTURE

SHARED = Path(__file__).resolve().parents[3] / "shared"
ORACLES = SHARED / "oracles/tracelens-graph-merge"


def _tables(cli, *args: str) -> tuple[dict, list]:  # noqa: ANN001
    r = cli("analyze", *args, "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    return doc["tables"], doc.get("notes", [])


#: TraceLens's merged report (ops_summary.csv: total_direct_kernel_time_sum, Count) for the vLLM case
VLLM_TRACELENS = {
    "vllm::moe_forward": (124885.786, 24),
    "aten::addmm": (17301.817, 72),
    "vllm::unified_attention_with_output": (5146.907, 24),
    "aiter::rmsnorm2d_fwd_with_add_ck": (3367.738, 48),
    "_C::rotary_embedding": (1706.329, 24),
    "triton_poi_fused_constant_pad_nd_moe_forward_0": (1566.326, 24),
}


def test_op_perf_on_vllm_replay_matches_tracelens(cli) -> None:  # noqa: ANN001
    t, notes = _tables(cli, "op-perf", str(VLLM), "--capture", str(VLLM_CAPTURE))
    per: dict[str, list[float]] = {}
    for r in t["ops"]:
        s = per.setdefault(r["name"], [0.0, 0])
        s[0] += r["kernel_us_sum"]
        s[1] += r["count"]
    for name, (us, count) in VLLM_TRACELENS.items():
        assert per[name][0] == pytest.approx(us, rel=1e-4), name
        assert per[name][1] == count, name
    a = t["attribution"][0]
    assert a["unattributed_us"] == pytest.approx(0, abs=1e-6)
    assert any("149,919.8 µs of GPU time replayed from CUDA/HIP graphs (100.00 % of 149,919.8 µs)" in n for n in notes)
    assert any("(exact 100.00 %; lowest confidence 1.00" in n for n in notes)
    # without the capture 96 % of the GPU time is launched outside every op
    t, notes = _tables(cli, "op-perf", str(VLLM), "--capture", "none")
    assert t["attribution"][0]["outside_ops_us"] == pytest.approx(149919.755, abs=0.01)
    assert "vllm::moe_forward" not in {r["name"] for r in t["ops"]}


def _oracle(case: str) -> dict[str, tuple[float, int, float]]:
    p = ORACLES / case / "ops_summary.csv"
    if not p.is_file():
        pytest.skip(f"SKIPPED LOUDLY: {p} absent (../shared not mounted): the TraceLens golden comparison did not run")
    with p.open() as f:
        return {
            r["name"]: (float(r["total_direct_kernel_time_sum"]), int(r["Count"]), float(r["Percentage (%)"]))
            for r in csv.DictReader(f)
        }


@pytest.mark.parametrize(
    ("case", "replay", "cap"),
    [("vllm_prefilldecode_piecewise", VLLM, VLLM_CAPTURE), ("sglang_decode", SGLANG, SGLANG_CAPTURE)],
)
def test_op_perf_golden_every_operator(cli, case: str, replay: Path, cap: Path) -> None:  # noqa: ANN001
    """Every operator over 0.5 % of the step within 1 % of TraceLens's direct kernel time, same count."""
    oracle = _oracle(case)
    t, _ = _tables(cli, "op-perf", str(replay), "--capture", str(cap))
    per: dict[str, list[float]] = {}
    for r in t["ops"]:
        s = per.setdefault(r["name"], [0.0, 0])
        s[0] += r["kernel_us_sum"]
        s[1] += r["count"]
    checked = 0
    for name, (us, count, pct) in oracle.items():
        if pct < 0.5:
            continue
        checked += 1
        assert per[name][0] == pytest.approx(us, rel=0.01), name
        assert per[name][1] == count, name
    assert checked >= 6


def test_mfu_on_vllm_replay(cli) -> None:  # noqa: ANN001
    t, notes = _tables(cli, "mfu", str(VLLM), "--capture", str(VLLM_CAPTURE))
    st = t["steps"][0]
    # the 73 aten::linear calls of the capture (72 replayed + the eager LM head) have shapes
    assert st["model_gflop"] == pytest.approx(10526.29, rel=1e-5)
    assert st["mfu"] == pytest.approx(0.051457, rel=1e-3)
    assert {(r["name"], r["calls"]) for r in t["ops"]} == {("aten::linear", 73)}
    assert any("their FLOPs count from the capture's input shapes" in n for n in notes)
    t, _ = _tables(cli, "mfu", str(VLLM), "--capture", "none")
    assert t["steps"][0]["model_gflop"] == pytest.approx(53.28, rel=1e-3)  # the LM head only


def test_modules_on_vllm_and_sglang_replays(cli) -> None:  # noqa: ANN001
    t, notes = _tables(cli, "modules", str(VLLM), "--capture", str(VLLM_CAPTURE))
    rows = {r["path"]: r for r in t["modules"]}
    graph = rows["GptOssForCausalLM_0/GraphModule_0"]
    # vLLM's capture records GraphModule_0 around each whole capture window, not inside: the replayed kernels
    # count for the replay's own frame that encloses the graph launches
    assert graph["device_self_us"] == pytest.approx(149919.755, abs=0.01)
    assert any("the capture's nn.Module frames enclose whole capture windows" in n for n in notes)
    # SGLang's replay has one module frame (Sampler_0) and the derived capture none: said, not guessed
    t, notes = _tables(cli, "modules", str(SGLANG), "--capture", str(SGLANG_CAPTURE))
    assert [r["path"] for r in t["modules"]] == ["Sampler_0"]
    assert any("the capture trace records no nn.Module frame around its captured launches" in n for n in notes)


def test_modules_from_the_full_sglang_capture(cli) -> None:  # noqa: ANN001
    """The original SGLang capture (../shared) keeps its Python frames: the model's modules come along."""
    full = SHARED / "traces/tracelens/inference/sglang_decode/capture_traces/bs_32_rank0.json.gz"
    if not full.is_file():
        pytest.skip(f"SKIPPED LOUDLY: {full} absent (../shared not mounted)")
    t, notes = _tables(cli, "modules", str(SGLANG), "--capture", str(full))
    rows = {r["path"]: r for r in t["modules"]}
    root = rows["Qwen3Model_0"]
    assert root["host_total_us"] == 0 and root["device_total_us"] == pytest.approx(9251.121, abs=0.01)
    assert sum(1 for p in rows if p.startswith("Qwen3Model_0/Qwen3DecoderLayer_") and p.count("/") == 1) == 36
    assert any("module frames hold them" in n for n in notes)


def test_diff_replay_without_and_with_capture(cli) -> None:  # noqa: ANN001
    r = cli("diff", str(VLLM), str(VLLM), "--base-capture", "none", "--capture", str(VLLM_CAPTURE), "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    only = {row["op"]: row["only"] for row in doc["tables"]["op_perf"]}
    assert only["vllm::moe_forward"] == "test" and only["aten::addmm"] == "test"
    assert only["vllm::unified_attention_with_output"] is None  # eager on both sides
    assert any(n.startswith("base: rank 0: 149,919.8 µs") and "has no operator" in n for n in doc["notes"])
    assert any(n.startswith("test: rank 0: 149,919.8 µs") and "kernels are keyed by" in n for n in doc["notes"])


def _rows(doc: dict, b: dict) -> list[dict]:
    s = doc["strings"]
    names = [c["name"] for c in b["columns"]]
    kinds = [c["kind"] for c in b["columns"]]
    return [
        {n: (s[v] if k == "str" and v is not None else v) for n, k, v in zip(names, kinds, row, strict=True)}
        for row in zip(*b["data"], strict=True)
    ]


def _section_names(doc: dict, slug: str) -> set[str]:
    sec = next(s for s in doc["sections"] if s["slug"] == slug)
    out: set[str] = set()
    for b in sec.get("blocks", []):
        if b.get("type") == "table" and "data" in b:
            out |= {str(r.get("name") or r.get("op") or "") for r in _rows(doc, b)}
    return out


def test_report_with_capture(cli, tmp_path: Path) -> None:  # noqa: ANN001
    from ranksight.report.html import read_payload

    docs = {}
    for cap in ("none", str(VLLM_CAPTURE)):
        out = tmp_path / f"{'none' if cap == 'none' else 'cap'}.html"
        r = cli("report", str(VLLM), "--capture", cap, "-o", str(out))
        assert r.returncode == 0, r.stderr
        docs[cap] = read_payload(out.read_text())
    with_cap, without = docs[str(VLLM_CAPTURE)], docs["none"]
    # ops lists every operator; op-perf's section the ones with a FLOP/byte model (the replayed GEMMs)
    for slug, name in (("ops", "vllm::moe_forward"), ("op-perf", "aten::addmm")):
        assert name in _section_names(with_cap, slug), slug
        assert name not in _section_names(without, slug), slug
    notes = [with_cap["strings"][i] for s in with_cap["sections"] if s["slug"] == "ops" for i in s.get("notes", [])]
    assert any("counted for the capture-side operators" in n for n in notes)


def test_capture_is_offered_by_each_command(cli) -> None:  # noqa: ANN001
    for args in (("analyze", "modules"), ("analyze", "mfu"), ("analyze", "op-perf"), ("diff",), ("report",)):
        r = cli(*args, "--help")
        assert r.returncode == 0 and "--capture" in r.stdout, args
    assert "--base-capture" in cli("diff", "--help").stdout
    assert DATA.is_dir()
