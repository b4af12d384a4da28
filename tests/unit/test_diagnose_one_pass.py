"""diagnose's one-pass versions of per-rank work over many small ranks (issue 19): GPU work per
rank, the host-device synchronisations (threads keyed by rank) and their details (calling ops,
first timestamp, device-to-host copies) equal each rank's own; ``Context.per_rank`` takes them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal
from tests.conftest import DATA

import ranksight
from ranksight.analyses import Session, diagnose
from ranksight.analyses.diagnose import Context, _has_gpu_work_many, has_gpu_work
from ranksight.analyses.diagnose import _rules as R
from ranksight.data import example_path
from ranksight.views.event_source import EventSource

FOLDERS = [example_path("dlrm"), DATA / "generated/h100/ddp-gloo-2ranks", DATA / "hta/trace_filter"]


def _source(path: Path) -> tuple[ranksight.Run, EventSource]:
    run = ranksight.load(path, cache=False)
    stacked = Session.of(run).stacked_events()
    assert stacked is not None
    return run, EventSource.stacked([run[r] for r in run.ranks], stacked)


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_syncs_and_details_in_one_pass_equal_per_rank(folder: Path) -> None:
    run, src = _source(folder)
    many = R._syncs_many(src)
    per = {r: R._syncs(run[r]) for r in run.ranks}
    for r in run.ranks:
        assert_frame_equal(many[r], per[r])
    assert all(per[r].height for r in run.ranks)
    details = R._sync_details_many(src, per)
    for r in run.ranks:
        want = R._sync_details(run[r], per[r])
        assert_frame_equal(details[r][0], want[0])
        assert details[r][1:] == want[1:]
    assert _has_gpu_work_many(src) == {r: has_gpu_work(run[r]) for r in run.ranks}


def test_context_takes_the_one_pass_version() -> None:
    run = ranksight.load(example_path("dlrm"), cache=False)
    ctx = Context(Session.of(run))
    calls: list[int] = []
    many = diagnose._ONE_PASS[R._syncs]

    def spy(src: EventSource) -> dict[int, pl.DataFrame]:
        calls.append(len(src.traces))
        return many(src)

    diagnose._ONE_PASS[R._syncs] = spy
    try:
        got = ctx.per_rank(R._syncs)
    finally:
        diagnose._ONE_PASS[R._syncs] = many
    assert calls == [8] and sorted(got) == run.ranks  # one pass over the 8 ranks, none alone


def _x(name: str, cat: str, ts: float, dur: float, **kw: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 100, "ts": ts, "dur": dur, "args": kw}


def _rank(rank: int, item: bool) -> dict[str, Any]:
    """A step [0, 1000] µs; a cudaStreamSynchronize [100, 300] on tid 100, inside an ``aten::item``
    [90, 310] when ``item``, else inside ``aten::copy_``. Every rank at the same times."""
    op = "aten::item" if item else "aten::copy_"
    ev = [
        _x("ProfilerStep#1", "user_annotation", 0, 1000),
        _x(op, "cpu_op", 90, 220),
        _x("cudaStreamSynchronize", "cuda_runtime", 100, 200),
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k",
            "pid": 0,
            "tid": 7,
            "ts": 50,
            "dur": 10,
            "args": {"device": 0, "stream": 7},
        },  # fmt: skip
    ]
    return {
        "schemaVersion": 1,
        "distributedInfo": {"rank": rank, "world_size": 2, "backend": "nccl"},
        "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "computeMajor": 9, "computeMinor": 0}],
        "traceEvents": ev,
    }


def test_each_rank_reads_its_own_threads_exact(tmp_path: Path) -> None:
    # the same thread id and times on both ranks: keyed by thread alone, rank 1's item would take
    # rank 0's sync call, and rank 0's sync call would be charged to rank 1's item
    (tmp_path / "rank0.json").write_text(json.dumps(_rank(0, item=False)))
    (tmp_path / "rank1.json").write_text(json.dumps(_rank(1, item=True)))
    run, src = _source(tmp_path)
    many = R._syncs_many(src)
    got = {r: many[r].select("name", "outer").rows() for r in run.ranks}
    assert got == {0: [("cudaStreamSynchronize", True)], 1: [("aten::item", True), ("cudaStreamSynchronize", False)]}
    details = R._sync_details_many(src, many)
    assert {r: details[r][0]["op"].to_list() for r in run.ranks} == {0: ["aten::copy_"], 1: ["aten::item"]}


def _graph_rank(rank: int, api: str) -> dict[str, Any]:
    """Two steps [0, 100] and [100, 200] µs; ``api`` called in step 2 on tid 100."""
    ev = [
        _x("ProfilerStep#1", "user_annotation", 0, 100),
        _x("ProfilerStep#2", "user_annotation", 100, 100),
        _x(api, "cuda_runtime", 150, 5),
    ]
    return {**_rank(rank, item=False), "traceEvents": ev}


def test_graph_facts_per_rank_exact(tmp_path: Path) -> None:
    # rank 0 captures a graph in step 2, rank 1 replays one there: each rank keeps its own facts
    (tmp_path / "rank0.json").write_text(json.dumps(_graph_rank(0, "cudaStreamBeginCapture")))
    (tmp_path / "rank1.json").write_text(json.dumps(_graph_rank(1, "cudaGraphLaunch")))
    run, src = _source(tmp_path)
    want = {0: ([2], False), 1: ([], True)}
    assert R._idle_graph_facts_many(src) == want
    assert {r: R._idle_graph_facts(run[r]) for r in run.ranks} == want


def _idle_rank(rank: int, idle_step: int) -> dict[str, Any]:
    """Steps 1 [0, 1000] and 2 [1000, 2000] µs; the GPU busy through one step ([10, 990] after its
    start) and nearly idle in ``idle_step`` (one 40 µs kernel)."""
    ev = [_x("ProfilerStep#1", "user_annotation", 0, 1000), _x("ProfilerStep#2", "user_annotation", 1000, 1000)]
    for step in (1, 2):
        t0 = (step - 1) * 1000
        ts, dur = (t0 + 10, 40) if step == idle_step else (t0 + 10, 980)
        ev.append({"ph": "X", "cat": "kernel", "name": f"k{step}", "pid": 0, "tid": 7, "ts": ts, "dur": dur,
                   "args": {"device": 0, "stream": 7}})  # fmt: skip
    return {**_rank(rank, item=False), "traceEvents": ev}


def test_idle_rule_reads_each_ranks_own_flagged_steps_exact(tmp_path: Path) -> None:
    # rank 0 idles in step 1, rank 1 in step 2: the pieces each finding quotes are its own steps'
    (tmp_path / "rank0.json").write_text(json.dumps(_idle_rank(0, 1)))
    (tmp_path / "rank1.json").write_text(json.dumps(_idle_rank(1, 2)))
    run = ranksight.load(tmp_path, cache=False)
    found = {f.ranks[0]: f.evidence for f in R.rule_idle_causes(Context(Session.of(run)))}
    assert {r: e["steps_flagged"] for r, e in found.items()} == {0: [1], 1: [2]}
    assert {r: sorted({p["step"] for p in e["longest_idle"]}) for r, e in found.items()} == {0: [1], 1: [2]}
