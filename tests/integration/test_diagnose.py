"""diagnose on real traces: every rule fires on a trace that shows the problem and stays quiet on
one that does not; the CLI text and the versioned JSON document."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest
from tests.conftest import DATA

import ranksight
from ranksight.analyses.diagnose import SCHEMA, SCHEMA_VERSION, Finding, findings

NW0 = "kineto/2021-07-08_c6e5fe20/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
NW4 = "kineto/2021-07-08_c6e5fe20/tb_plugin/samples/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz"
DLRM = str(Path(ranksight.__file__).parent / "data" / "examples" / "dlrm")
NCCL = "hta/nccl_parser_config/nccl_data.json.gz"
BERT_H100 = "tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz"
BERT_MI300 = "tracelens/mi300/gaunernst_bert-small-uncased__1016001.json.gz"
TIMESFORMER_MI300 = "tracelens/mi300/facebook_timesformer-base-finetuned-k400__1016002.json.gz"
CKPT_MI300 = "tracelens/mi300/resnet_act_checkpoint.json.gz"
CPU_DDP = "generated/cpu-ddp-gloo-4ranks"
H100_NEAR_CAPACITY = "generated/h100/train-near-capacity"
NSYS_H100 = "nsys_ai/tests/fixtures/h100_2gpu_1s.sqlite"  # a step that is 95 % host-to-device copies


@cache
def found(rel: str) -> dict[str, Finding]:
    path = rel if rel.startswith("/") else str(DATA / rel)
    return {f.rule: f for f in findings(ranksight.load(path))[0]}


CASES = [
    # rule, trace that shows it, trace that does not
    ("dataloader-bound", NW0, NW4),
    ("launch-bound", DLRM, NW0),
    ("low-gpu-utilization", DLRM, NW4),
    ("low-gpu-utilization", DLRM, NSYS_H100),  # busy with copies: memcpy-bound, not idle
    ("exposed-communication", CKPT_MI300, NCCL),
    ("exposed-communication", None, DLRM),  # exposed time there is waiting for rank 7: the straggler rule's
    ("host-device-sync", DLRM, NW4),
    ("pageable-memcpy", NW0, BERT_H100),
    ("low-tensor-core-use", NW0, BERT_H100),
    ("memory-fragmentation", TIMESFORMER_MI300, BERT_MI300),
    ("full-launch-queue", CKPT_MI300, NW0),
    ("load-imbalance", CPU_DDP, DLRM),
    ("memory-near-capacity", H100_NEAR_CAPACITY, TIMESFORMER_MI300),  # also hand-built below
    ("straggler", DLRM, NW0),  # a single rank makes nobody wait
    ("memcpy-bound", NSYS_H100, BERT_H100),
    ("unfused-attention", TIMESFORMER_MI300, BERT_H100),  # BERT runs FlashAttention
]


@pytest.mark.parametrize(("rule", "shows", "clean"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_rule_fires_and_stays_quiet(rule, shows, clean):
    if shows is not None:
        f = found(shows)[rule]
        assert f.severity in ("high", "medium", "low") and f.ranks and f.evidence and f.fixes and f.summary
    assert rule not in found(clean)


def test_dataloader_finding_has_the_step_share():
    f = found(NW0)["dataloader-bound"]
    assert f.severity == "high" and f.impact == pytest.approx(0.3337, abs=1e-4)
    assert "33.4% of the step time is in DataLoader" in f.summary and "num_workers=0" in f.summary
    assert f.evidence["dataloader_share_by_rank"] == {"0": 33.37}
    assert set(f.evidence["dataloader_share_by_step_pct"]) == {"5", "6", "7", "8", "9", "10"}
    assert any("num_workers" in x for x in f.fixes) and any("pin_memory" in x for x in f.fixes)


def test_evidence_names_ops_kernels_and_steps():
    assert found(NW0)["pageable-memcpy"].evidence["launching_ops"] == {"aten::copy_": 12}
    sync = found(DLRM)["host-device-sync"]
    assert sync.evidence["blocked_us"] > 0 and sync.evidence["longest"]["name"]
    assert found(DLRM)["launch-bound"].evidence["top_tiny_kernels"]
    tc = found(NW0)["low-tensor-core-use"]
    assert tc.evidence["matrix_us_by_tensor_cores"].keys() == {"no"} and tc.evidence["dominant_precision"] == "fp32"
    assert any("autocast" in x for x in tc.fixes)  # an FP32 run is told about mixed precision
    assert found(DLRM)["straggler"].ranks == [7] and found(DLRM)["straggler"].evidence["wait_share"] > 0.7
    assert found(CPU_DDP)["load-imbalance"].evidence["slowest_rank"] == 2


def test_findings_are_sorted_worst_first():
    fs = list(found(DLRM).values())
    keys = [f.sort_key() for f in fs]
    assert keys == sorted(keys)


def test_memory_near_capacity_on_a_hand_built_trace(make_trace):
    gib = 1 << 30

    def mem(ts, addr, b, alloc, res):
        return {
            "ph": "i",
            "s": "t",
            "cat": "cpu_instant_event",
            "name": "[memory]",
            "pid": 1,
            "tid": 1,
            "ts": ts,
            "args": {
                "Addr": addr,
                "Bytes": b,
                "Total Allocated": alloc,
                "Total Reserved": res,
                "Device Type": 1,
                "Device Id": 0,
            },
        }

    ev = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::matmul", "pid": 1, "tid": 1, "ts": 0, "dur": 10, "args": {}},
        mem(1, 1, 76 * gib, 76 * gib, 78 * gib),
        mem(5, 1, -76 * gib, 0, 78 * gib),
    ]
    run = ranksight.load(
        make_trace(ev, deviceProperties=[{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 80 * gib}])
    )
    f = {x.rule: x for x in findings(run)[0]}["memory-near-capacity"]
    assert f.severity == "high" and f.evidence["peak_op"] == "aten::matmul" and "97.5%" in f.summary


def test_cli_text_and_json(cli):
    r = cli("diagnose", str(DATA / NW0))
    assert r.returncode == 0, r.stderr
    assert "[HIGH] Steps wait for the DataLoader" in r.stdout and "33.4% of the step time is in DataLoader" in r.stdout
    assert "fix: DataLoader(num_workers=N)" in r.stdout
    r = cli("diagnose", str(DATA / NW4), "--format", "json")
    doc = json.loads(r.stdout)
    assert doc["schema"] == SCHEMA and doc["schema_version"] == SCHEMA_VERSION
    assert set(doc) == {"schema", "schema_version", "ranksight_version", "traces", "rules", "findings", "notes"}
    assert "dataloader-bound" in doc["rules"] and "dataloader-bound" not in [f["rule"] for f in doc["findings"]]
    for f in doc["findings"]:
        assert set(f) == {"rule", "title", "severity", "impact", "ranks", "summary", "evidence", "fixes"}
    r = cli("diagnose", str(DATA / NW0), "--min-severity", "high", "--format", "json")
    assert {f["severity"] for f in json.loads(r.stdout)["findings"]} == {"high"}
