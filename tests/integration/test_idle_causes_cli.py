"""``idle-causes`` on real traces: the CLI (``analyze idle-causes``, the ``summary`` headline), the
report section, and the ``idle-causes`` diagnose rule where it fires and where it must not."""

from __future__ import annotations

import json
import warnings
from functools import cache

import polars as pl
from tests.conftest import DATA

import ranksight
from ranksight.analyses.diagnose import Finding, findings

DDP_GLOO = DATA / "generated" / "h100" / "ddp-gloo-2ranks"  # rank 1's DataLoader sleeps 30 ms per batch
TRAIN_EAGER = DATA / "generated" / "h100" / "train-eager"
CKPT_MI300 = DATA / "tracelens" / "mi300" / "resnet_act_checkpoint.json.gz"  # GPU-bound: idle ≤ 5 % per step
GRAPH_REPLAY = DATA / "generated" / "h100" / "cudagraph-infer"  # one cudaGraphLaunch per step
CAPTURE = DATA / "derived" / "tracelens" / "inference" / "sglang_decode" / "capture_traces"  # graph capture


@cache
def diagnosed(path: str) -> tuple[dict[str, Finding], list[str]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found, _, notes = findings(ranksight.load(path))
    return {f.rule: f for f in found}, notes


def test_cli_attributes_the_ddp_run(cli) -> None:  # noqa: ANN001
    """Rank 1 waits for its DataLoader (30 ms per step); rank 0 waits for rank 1 in gloo's
    all-reduces; per rank the causes sum to `analyze temporal`'s idle."""
    r = cli("analyze", "idle-causes", str(DDP_GLOO), "--format", "json", "--top", "3")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    by_rank = pl.DataFrame(doc["tables"]["by_rank"])
    share = {(x["rank"], x["cause"]): x["share_pct"] for x in by_rank.iter_rows(named=True)}
    assert 20 < share[(1, "dataloader")] < 30 and (1, "collective_wait") not in share
    assert 20 < share[(0, "collective_wait")] < 35 and share[(0, "dataloader")] < 1
    t = cli("analyze", "temporal", str(DDP_GLOO), "--format", "json")
    idle = {x["rank"]: x["idle_us"] for x in json.loads(t.stdout)["tables"]["temporal"]}
    for rank, got in by_rank.group_by("rank").agg(pl.col("idle_us").sum()).iter_rows():
        assert abs(got - idle[rank]) < 1e-3, rank
    sites = pl.DataFrame(doc["tables"]["call_sites"])
    assert sites.filter((pl.col("rank") == 1) & (pl.col("cause") == "dataloader"))["call_site"].to_list() == [
        "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
    ]
    waits = pl.DataFrame(doc["tables"]["gaps"]).filter(pl.col("cause") == "collective_wait")
    assert set(waits["rank"]) == {0} and waits["detail"].str.starts_with("waits for rank 1 (all_reduce").all()
    assert sites.group_by("rank", "cause").len()["len"].max() <= 3


def test_summary_names_the_causes(cli) -> None:  # noqa: ANN001
    r = cli("summary", str(DDP_GLOO), "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    heads = {x["rank"]: x["idle_causes"] for x in doc["tables"]["per_rank"]}
    assert heads[0].startswith("cpu_op 62% · collective_wait 27% · launch_latency 8%")
    assert heads[1].startswith("cpu_op 64% · dataloader 23% · launch_latency 10%")
    assert "idle-causes" in doc["columns"]["idle_causes"]


def test_report_section() -> None:
    from ranksight.report.html.build import build_payload

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        doc = build_payload(ranksight.load(DDP_GLOO))
    (sec,) = [s for s in doc["sections"] if s["slug"] == "idle-causes"]
    assert sec["shown"] and sec["title"] == "Where the idle time went"
    assert [b["id"] for b in sec["blocks"]] == [
        "idle-causes-chart",
        "idle-causes-steps-chart",
        "idle-causes-ranks",
        "idle-causes-steps",
        "idle-causes-sites",
        "idle-causes-gaps",
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cpu = build_payload(ranksight.load(DATA / "hta" / "cpu_only"))
    (sec,) = [s for s in cpu["sections"] if s["slug"] == "idle-causes"]
    assert not sec["shown"] and "no GPU idle time" in sec["reason"]


def test_rule_fires_and_names_the_causes() -> None:
    """Eager training of a small GPT on H100: the GPU idles ~89 % of every step, the launching thread
    busy in the forward's Python and ops (cpu_op) and launch latency."""
    f = diagnosed(str(TRAIN_EAGER))[0]["idle-causes"]
    assert f.severity == "high" and f.ranks == [0]
    assert f.evidence["steps_flagged"] == [2, 3, 4]
    assert list(f.evidence["idle_share_by_cause_pct"])[:2] == ["cpu_op", "launch_latency"]
    assert "why: cpu_op 78% (forward), launch_latency 13% (cudaLaunchKernel)" in f.summary
    assert any("CUDA graphs" in x for x in f.fixes)  # the run does not replay graphs
    longest = f.evidence["longest_idle"][0]
    assert longest["end_ns"] - longest["start_ns"] > 1_000_000 and longest["cause"] == "cpu_op"
    # the two-rank DDP run: the DataLoader on rank 1 and the wait for rank 1 on rank 0 are named
    g = diagnosed(str(DDP_GLOO))[0]["idle-causes"]
    assert g.ranks == [0, 1] and "dataloader 31%" in g.summary
    assert "collective_wait 27% (gloo:all_reduce)" in g.evidence["by_rank"]["0"]
    assert any("DataLoader(num_workers>0" in x for x in g.fixes)
    # CUDA-graph inference (18 % idle per step): graphs are already replayed, so no graph advice
    h = diagnosed(str(GRAPH_REPLAY))[0]["idle-causes"]
    assert h.severity == "low" and h.evidence["replays_graphs"] is True
    assert "launch_latency 49% (cudaGraphLaunch)" in h.summary
    assert not any("CUDA graphs" in x or "CUDAGraph" in x for x in h.fixes)


def test_rule_stays_quiet() -> None:
    """A GPU-bound run (idle ≤ 5 % of each step) and a CUDA-graph capture trace (the kernels were
    recorded, not run: its steps are idle on paper only) get no idle-causes finding."""
    assert "idle-causes" not in diagnosed(str(CKPT_MI300))[0]
    found, notes = diagnosed(str(CAPTURE))
    assert "idle-causes" not in found
    assert any(n.startswith("idle-causes: rank 0 steps [134] capture a CUDA/HIP graph") for n in notes)
