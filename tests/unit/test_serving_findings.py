"""The inference findings on hand-built serving traces: host-bound serving, decode steps outside CUDA/HIP
graphs, small decode batches leaving the GPU idle, a capture trace given as a run — each firing where it
should and quiet where its context or a contradicting fact says so (no training remedy in any fix)."""

from __future__ import annotations

from pathlib import Path

from tests.unit.test_graphs import Tr, capture, graph_replay

import ranksight
from ranksight.analyses.diagnose import findings

TRAINING_WORDS = ("checkpoint", "FSDP", "ZeRO", "GradScaler", "zero_grad", "gradient accumulation", "bucket")


def _server(
    tmp: Path,
    *,
    n: int = 6,
    bs: int = 32,
    graphs: bool = True,
    kernels: int = 30,
    gap: float = 0.0,
    name: str = "s.json",
) -> Path:
    """``n`` decode steps (SGLang annotations) of 200 µs CPU; each runs ``kernels`` kernels of 5 µs back to back
    from 10 µs into the step, from one graph launch or one launch each; ``gap`` µs more between steps."""
    tr = Tr()
    t = 1000.0
    for _ in range(n):
        tr.ann(f"step[DECODE bs={bs}]", t, 200)
        at = [t + 10 + 5 * j for j in range(kernels)]
        if graphs:
            graph_replay(tr, t + 2, [(f"k{j}", a, 5) for j, a in enumerate(at)], api="hipGraphLaunch")
        else:
            for j, a in enumerate(at):
                c = tr.rt("hipLaunchKernel", t + 2 + 0.01 * j, 0.005)
                tr.k(f"k{j}", a, 5, c)
        t += 200 + gap
    return tr.write(tmp / name)


def _rules(p: Path) -> dict[str, object]:
    run = ranksight.load(str(p), cache=False)
    found, rules, notes = findings(run)
    assert {"host-bound-serving", "decode-outside-graphs", "small-decode-batch", "capture-as-run"} <= set(rules)
    for f in found:
        for fix in f.fixes:
            assert not any(w in fix for w in TRAINING_WORDS), fix
    return {f.rule: f for f in found}


def test_busy_graph_decoding_server_has_no_inference_finding(tmp_path: Path) -> None:
    got = _rules(_server(tmp_path, kernels=38))  # 190 µs of work in a 190 µs span; 10 µs between steps
    for rule in ("host-bound-serving", "decode-outside-graphs", "small-decode-batch", "capture-as-run"):
        assert rule not in got


def test_host_bound_serving(tmp_path: Path) -> None:
    # 150 µs of kernels per step, then 850 µs until the next step's first kernel
    got = _rules(_server(tmp_path, kernels=30, gap=800))
    f = got["host-bound-serving"]
    ev = f.evidence
    assert ev["steps"] == 6
    assert ev["gpu_busy_ms"] == 0.9 and ev["idle_inside_steps_ms"] == 0.0
    assert ev["idle_between_steps_ms"] == 4.25  # 5 gaps of 850 µs
    assert f.impact == round(4.25 / (0.9 + 4.25), 4)
    assert f.severity == "high"
    assert ev["replays_graphs"] is True
    assert not any("CUDA/HIP graphs" in x for x in f.fixes)  # it replays graphs already
    assert ev["python_frames_recorded"] == 0 and not any("with_stack" in x for x in f.fixes)


def test_decode_outside_graphs(tmp_path: Path) -> None:
    got = _rules(_server(tmp_path, graphs=False, kernels=30))
    f = got["decode-outside-graphs"]
    assert f.evidence["eager_decode_steps"] == 6 and f.evidence["decode_steps"] == 6
    assert f.evidence["eager_batch_sizes"] == [32]
    assert any("--enforce-eager" in x for x in f.fixes)
    # the same steps from graphs: quiet; so are steps with fewer than 20 activities
    assert "decode-outside-graphs" not in _rules(_server(tmp_path, kernels=30, name="g.json"))
    assert "decode-outside-graphs" not in _rules(_server(tmp_path, graphs=False, kernels=10, name="few.json"))


def test_small_decode_batch(tmp_path: Path) -> None:
    # batch 4: five 5 µs kernels spread over a 185 µs GPU span per step (busy 13.5 %)
    tr = Tr()
    t = 1000.0
    for _ in range(4):
        tr.ann("step[DECODE bs=4]", t, 200)
        c = tr.rt("hipGraphLaunch", t + 2, 2)
        for j in range(5):  # 5 kernels of 5 µs spread over 180 µs: busy 25/185
            tr.k(f"k{j}", t + 10 + 45 * j, 5, c)
        t += 200
    got = _rules(tr.write(tmp_path / "small.json"))
    f = got["small-decode-batch"]
    assert f.evidence["small_steps"] == 4 and f.evidence["batch_sizes"] == {"4": 4}
    assert f.evidence["gpu_busy_pct_mean"] == round(100 * 25 / 185, 2)
    assert any("--max-num-seqs" in x for x in f.fixes)
    # the same batch on a busy GPU is no finding
    assert "small-decode-batch" not in _rules(_server(tmp_path, bs=4, kernels=38, name="busy.json"))


def test_capture_as_run(tmp_path: Path) -> None:
    tr = Tr()
    capture(tr, 0, [("aten::mm", "gemm_a", None), ("aten::add", "add_b", None)])
    got = _rules(tr.write(tmp_path / "cap.json"))
    f = got["capture-as-run"]
    assert f.evidence["captured_launches"] == 2 and f.evidence["graph_api"] == "HIP"
    assert any("--capture" in x for x in f.fixes)
    # capture and replay in one trace measures the replay: no finding
    end = capture(tr := Tr(), 0, [("aten::mm", "gemm_a", None)])
    graph_replay(tr, end + 10, [("gemm_a", end + 20, 5)])
    assert "capture-as-run" not in _rules(tr.write(tmp_path / "both.json"))


def test_serving_rules_do_not_judge_training(tmp_path: Path) -> None:
    """The same host-bound steps in a training run (a backward op) are not judged by the serving rules."""
    p = _server(tmp_path, kernels=30, gap=800)
    import json

    doc = json.loads(p.read_text())
    doc["traceEvents"].append(
        {"ph": "X", "cat": "cpu_op", "name": "MmBackward0", "pid": 1, "tid": 1, "ts": 0, "dur": 1, "args": {}}
    )
    p.write_text(json.dumps(doc))
    run = ranksight.load(str(p), cache=False)
    found, _, notes = findings(run)
    assert "host-bound-serving" not in {f.rule for f in found}
    assert "host-bound-serving: not judged on rank 0, a training run" in notes
