"""memory, modules, mfu and diagnose on the DLRM example and on every trace of the shared corpus.

Oracles, all read from the trace itself with Python's ``json`` (never from ranksight's own tables):

- ``memory`` has data exactly when the trace has ``[memory]`` events, ``modules`` exactly when it has
  ``nn.Module: …`` python_function frames; otherwise each raises MissingDataError in one line, and
  when the data exists its main table is not empty;
- ``mfu`` has one ``steps`` row per ProfilerStep (one for the whole trace when there is none), and an
  ``ops`` table, not empty, with model FLOPs > 0, exactly when the trace has matmul, convolution or
  attention ops with input shapes;
- exact values worked out by hand on one trace (BERT-small on an H100: its FLOPs from the shapes of
  its 26 linears and 4 attention calls, its step time, its memory peak, its outermost module);
- the CLI's exact exit code per analysis on the DLRM example (0 with data, 2 without).

diagnose's findings have their own oracles in test_diagnose.py; here it only has to run.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import SHARED, shared_or_skip

import ranksight
from ranksight.analyses import run_analysis
from ranksight.errors import MissingDataError

NAMES = ("memory", "modules", "mfu", "diagnose")
DLRM = Path(ranksight.__file__).parent / "data" / "examples" / "dlrm"
BERT_H100 = "tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz"
#: ops with a FLOP formula from their input shapes (docs: mfu): matmuls, convolutions, attention
FLOP_OPS = re.compile(
    r"aten::(mm|_scaled_mm|addmm_?|bmm|baddbmm|matmul|linear|einsum|conv\w*|\w*convolution\w*"
    r"|\w*scaled_dot_product\w*|_(flash|efficient)_attention\w*)"
)


def _events(path: Path) -> list[dict[str, Any]]:
    raw = gzip.decompress(path.read_bytes()) if path.name.endswith(".gz") else path.read_bytes()
    doc = json.loads(raw)
    return [e for e in (doc["traceEvents"] if isinstance(doc, dict) else doc) if isinstance(e, dict)]


def _traces() -> list[str]:
    """Every trace in the manifest (GPU or not) but the execution trace, which is not a profiler trace."""
    manifest = SHARED / "traces" / "MANIFEST.tsv"
    if not manifest.exists():
        return []
    rows = [line.split("\t")[0] for line in manifest.read_text().splitlines()[1:] if line]
    return [r for r in rows if r.endswith((".json", ".json.gz")) and not r.endswith("_et.json.gz")]


def _oracle(events: list[dict[str, Any]]) -> dict[str, int]:
    def cat(e: dict[str, Any]) -> str:
        return str(e.get("cat", "")).lower()

    def name(e: dict[str, Any]) -> str:
        return str(e.get("name", ""))

    return {
        "memory_events": sum(1 for e in events if name(e) == "[memory]"),
        "module_frames": sum(
            1 for e in events if cat(e) in ("python_function", "python") and name(e).startswith("nn.Module: ")
        ),
        "steps": len({name(e) for e in events if e.get("ph") == "X" and name(e).startswith("ProfilerStep#")}),
        "flop_ops": sum(
            1
            for e in events
            if cat(e) in ("cpu_op", "operator")
            and FLOP_OPS.fullmatch(name(e))
            and (e.get("args") or {}).get("Input Dims")
        ),
    }


def _result(run: ranksight.Run, name: str, **options):  # noqa: ANN202, ANN003
    try:
        return run_analysis(name, run, **options)
    except MissingDataError as err:
        assert str(err) and "\n" not in str(err)
        return err


def _check(run: ranksight.Run, oracle: dict[str, int], n_ranks: int = 1) -> None:
    mem = _result(run, "memory")
    if oracle["memory_events"]:
        assert not isinstance(mem, MissingDataError), mem
        assert mem.main.height > 0 and mem["peaks"]["peak_allocated_bytes"].max() > 0
    else:
        assert isinstance(mem, MissingDataError) and "[memory]" in str(mem)

    # the frames of the file itself (the oracle counts them): not those of a capture trace found beside
    # a graph replay (tracelens/inference/sglang_decode has one, with 508 module frames)
    mods = _result(run, "modules", capture="none")
    if oracle["module_frames"]:
        assert not isinstance(mods, MissingDataError), mods
        assert 0 < mods.main.height <= oracle["module_frames"]
    else:
        assert isinstance(mods, MissingDataError) and "nn.Module" in str(mods)

    mfu = _result(run, "mfu", capture="none")  # the file's own ops (the oracle), as for modules
    assert not isinstance(mfu, MissingDataError), mfu
    assert mfu["steps"].height == n_ranks * max(oracle["steps"], 1)
    if oracle["flop_ops"]:
        assert mfu["ops"].height > 0 and mfu["ops"]["gflop"].min() > 0
        assert mfu["steps"]["model_gflop"].sum() > 0
    else:
        assert "ops" not in mfu.tables and mfu["steps"]["model_gflop"].sum() == 0

    diag = _result(run, "diagnose")
    assert not isinstance(diag, MissingDataError), diag
    assert "findings" in diag.tables


def test_dlrm_example():
    oracle = {k: 0 for k in ("memory_events", "module_frames", "steps", "flop_ops")}
    for f in sorted(DLRM.glob("*.json.gz")):
        for k, v in _oracle(_events(f)).items():
            oracle[k] = max(oracle[k], v) if k == "steps" else oracle[k] + v
    assert oracle["memory_events"] == 0 and oracle["module_frames"] == 0 and oracle["flop_ops"] > 0
    _check(ranksight.load(str(DLRM)), oracle, n_ranks=8)


@pytest.mark.shared
@pytest.mark.parametrize("rel", _traces() or ["(shared traces absent)"], ids=str)
def test_shared_trace(rel):
    path = shared_or_skip(f"traces/{rel}")
    _check(ranksight.load(str(path)), _oracle(_events(path)))


@pytest.mark.shared
def test_trace_list_is_the_corpus():
    shared_or_skip("traces")
    traces = _traces()
    assert len(traces) >= 50 and BERT_H100 in traces


@pytest.mark.shared
def test_bert_h100_values_by_hand():
    """BERT-small on an H100, one step (ProfilerStep#6, 4426.114 µs on the CPU), bf16, sequence 141.

    Linears, 2·M·K·N FLOPs with M = 141: 17 × [512→512] = 17 · 73,924,608; 4 × [512→2048] and
    4 × [2048→512] = 8 · 295,698,432; 1 × [512→30522] (the LM head) = 4,406,888,448; in all
    8,029,194,240. Attention, 4·B·H·L·S·D = 4·1·8·141·141·64 = 40,716,288 per call, 4 calls:
    162,865,152. Model FLOPs 8,192,059,392; achieved 8.192059392e9 / 4426.114e-6 s = 1.850847 TFLOP/s;
    H100 SXM dense bf16 peak 989.4 TFLOP/s (NVIDIA's data sheet), so MFU 0.00187068.
    """
    path = shared_or_skip(f"traces/{BERT_H100}")
    run = ranksight.load(str(path))
    mfu = run_analysis("mfu", run)
    (step,) = mfu["steps"].to_dicts()
    assert step["step"] == 6 and step["step_us"] == pytest.approx(4426.114, rel=1e-12)
    assert step["model_gflop"] == pytest.approx(8.192059392, rel=1e-12)
    assert step["peak_tflop_per_s"] == pytest.approx(989.4, rel=1e-12)
    assert step["achieved_tflop_per_s"] == pytest.approx(8.192059392e9 / 4426.114e-6 / 1e12, rel=1e-9)
    assert step["mfu"] == pytest.approx(8.192059392e9 / 4426.114e-6 / 1e12 / 989.4, rel=1e-9)
    ops = {r["name"]: r for r in mfu["ops"].to_dicts()}
    assert set(ops) == {"aten::linear", "aten::scaled_dot_product_attention"}
    assert (ops["aten::linear"]["calls"], ops["aten::linear"]["dtype"]) == (26, "bf16")
    assert ops["aten::linear"]["gflop"] == pytest.approx(8.029194240, rel=1e-12)
    assert ops["aten::scaled_dot_product_attention"]["calls"] == 4
    assert ops["aten::scaled_dot_product_attention"]["gflop"] == pytest.approx(0.162865152, rel=1e-12)

    # memory: the peak is the largest "Total Allocated" of the device's [memory] events (218 on
    # device 0: 109 allocations, 109 frees; 18 on the CPU, peak 16 bytes)
    events = _events(path)
    dev0 = [e["args"] for e in events if e.get("name") == "[memory]" and e["args"]["Device Id"] == 0]
    peaks = {r["device"]: r for r in run_analysis("memory", run)["peaks"].to_dicts()}
    assert set(peaks) == {"cuda:0", "cpu"}
    g = peaks["cuda:0"]
    assert (g["events"], g["allocs"], g["frees"]) == (len(dev0), 109, 109) == (218, 109, 109)
    assert g["peak_allocated_bytes"] == max(a["Total Allocated"] for a in dev0) == 101_305_344
    assert g["peak_reserved_bytes"] == max(a["Total Reserved"] for a in dev0) == 121_634_816
    assert (peaks["cpu"]["events"], peaks["cpu"]["peak_allocated_bytes"]) == (18, 16)

    # modules: the outermost module's host time is its nn.Module frame's duration
    (frame,) = [e for e in events if e.get("name") == "nn.Module: BertLMHeadModel_0"]
    top = run_analysis("modules", run).main.row(0, named=True)
    assert (top["path"], top["depth"], top["calls"]) == ("BertLMHeadModel_0", 0, 1)
    assert top["host_total_us"] == frame["dur"] == 4216.941


@pytest.mark.parametrize(
    ("args", "data"), [(("mfu",), True), (("memory", "--points", "5"), False), (("modules",), False)]
)
def test_cli_views_on_dlrm(cli, args, data):
    """What DLRM lacks (memory events, module frames) is "nothing to report": exit 0, no table, one
    stderr line saying what is missing (docs/cli.md), not the bad-input exit 2."""
    r = cli("analyze", *args, str(DLRM))
    assert r.returncode == 0, r.stderr
    if data:
        assert "model_gflop" in r.stdout and "aten::" in r.stdout
    else:
        assert r.stdout == "" and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
        assert r.stderr.startswith("ranksight: nothing to report: no ")
