"""analyses/mfu.seed_counted_ops: every rank's counted ops from one pass over the stacked events
(issue 19) equal each rank's own; the sweeps (conv backward children, enclosing autograd node,
outermost counted op) key threads by rank; an op and its child with the same times count once, as
the op recorded first (the enclosing one)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal
from tests.conftest import DATA

import ranksight
from ranksight.analyses import Session, mfu, run_analysis
from ranksight.data import example_path
from ranksight.views.event_source import EventSource


def _per_rank_and_seeded(path: Path) -> tuple[dict[int, pl.DataFrame], dict[int, pl.DataFrame]]:
    run = ranksight.load(path, cache=False)
    per = {r: mfu._counted(EventSource.one(run[r])) for r in run.ranks}  # nothing memoised
    stacked = Session.of(run).stacked_events()
    assert stacked is not None
    mfu.seed_counted_ops([run[r] for r in run.ranks], stacked)
    assert all(run[r].has_memo("counted_ops") for r in run.ranks)
    return per, {r: mfu.counted_ops(run[r]) for r in run.ranks}


@pytest.mark.parametrize(
    ("folder", "phases"),
    [
        (DATA / "hta/trace_filter", {"forward", "backward", "recompute"}),
        (DATA / "generated/h100/ddp-gloo-2ranks", {"forward", "backward"}),
        (DATA / "tracelens/mi300", {"forward", "backward", "recompute"}),
        (example_path("dlrm"), {"forward", "backward"}),
    ],
    ids=lambda v: getattr(v, "name", None),
)
def test_seeded_equals_per_rank_on_real_traces(folder: Path, phases: set[str]) -> None:
    per, seeded = _per_rank_and_seeded(folder)
    for r, want in per.items():
        assert want.height > 0
        assert_frame_equal(seeded[r], want)
    assert set(pl.concat(list(seeded.values()))["phase"].unique()) == phases


def _x(name: str, ts: float, dur: float, **kw: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 100, "ts": ts, "dur": dur, "args": kw}


_MM = {"Input Dims": [[64, 32], [32, 16]], "Input type": ["float", "float"]}


def _rank(rank: int, ev: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "schemaVersion": 1,
        "distributedInfo": {"rank": rank, "world_size": 2, "backend": "nccl"},
        "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "computeMajor": 9, "computeMinor": 0}],
        "traceEvents": [{**_x("ProfilerStep#1", 0, 1000), "cat": "user_annotation"}, *ev],
    }


def test_each_rank_reads_its_own_autograd_nodes_exact(tmp_path: Path) -> None:
    # rank 1 runs its mm inside an autograd node, rank 0 at the same times on the same thread id
    # outside any: keyed by thread alone, rank 0's mm would be read as backward work
    (tmp_path / "rank0.json").write_text(json.dumps(_rank(0, [_x("aten::mm", 100, 50, **_MM)])))
    node = _x("autograd::engine::evaluate_function: MmBackward0", 90, 70)
    (tmp_path / "rank1.json").write_text(json.dumps(_rank(1, [node, _x("aten::mm", 100, 50, **_MM)])))
    per, seeded = _per_rank_and_seeded(tmp_path)
    got = {r: seeded[r].select("name", "flops", "phase").rows() for r in seeded}
    assert got == {0: [("aten::mm", 65536.0, "forward")], 1: [("aten::mm", 65536.0, "backward")]}
    for r in per:
        assert_frame_equal(seeded[r], per[r])


def test_same_times_count_the_enclosing_op_exact(make_trace: Any) -> None:
    """``aten::matmul`` and the ``aten::mm`` it calls start and end together: the op recorded
    first encloses the other, and only it counts (HTA trace_filter rank 0 has such a pair)."""
    ev = [_x("aten::matmul", 100, 50, **_MM), _x("aten::mm", 100, 50, **_MM)]
    run = ranksight.load(make_trace(ev), cache=False)
    c = mfu.counted_ops(run[run.ranks[0]])
    assert c.select("name", "flops", "phase").rows() == [("aten::matmul", 65536.0, "forward")]
    ops = run_analysis("mfu", run, peak_tflops=100.0)["ops"]
    assert ops.select("name", "calls", "gflop").rows() == [("aten::matmul", 1, 65536.0 / 1e9)]
