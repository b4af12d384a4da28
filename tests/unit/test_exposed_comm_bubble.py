"""exposed-comm and bubble on hand-built traces with known intervals (µs)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.unit.dist_traces import rank_events, write_rank

import ranksight
from ranksight.analyses import run_analysis
from ranksight.analyses.bubble import expected_bubble


def test_exposed_comm_split(tmp_path: Path) -> None:
    # rank 0: compute [0, 100), all-reduce [50, 150); rank 1: compute [0, 110), all-reduce [120, 150)
    # rank 0 waits [50, 120) for rank 1; exposed [100, 150) = 50, of which waiting [100, 120) = 20
    for r, (kend, cstart) in enumerate([(100, 50), (110, 120)]):
        ev = rank_events(
            colls=[{"start": cstart, "end": 150, "launch": 10, "seq": 0, "group_size": 2, "ranks": "[0, 1]"}],
            kernels=[{"name": "gemm", "start": 0, "end": kend, "launch": 1}],
            steps=[(1, 0, 200)],
        )
        write_rank(tmp_path, r, ev, world=2)
    res = run_analysis("exposed-comm", ranksight.load(tmp_path))
    row = res["per_step"].row(0, named=True)
    assert (row["step_us"], row["compute_us"], row["comm_us"], row["hidden_us"], row["exposed_us"]) == (
        200.0,
        100.0,
        100.0,
        50.0,
        50.0,
    )
    assert (row["exposed_wait_us"], row["exposed_transfer_us"]) == (20.0, 30.0)
    assert row["overlap_efficiency"] == 0.5 and row["perfect_overlap_step_us"] == 150.0
    r1 = res["per_step"].row(1, named=True)
    assert (r1["comm_us"], r1["hidden_us"], r1["exposed_us"], r1["exposed_wait_us"]) == (30.0, 0.0, 30.0, 0.0)


def test_exposed_comm_single_rank_note(data) -> None:  # noqa: ANN001
    res = run_analysis("exposed-comm", ranksight.load(data("hta/nccl_parser_config")))
    assert res.notes[0].startswith("one rank loaded")
    assert res["per_step"]["exposed_wait_us"].null_count() == res["per_step"].height


def _stage(tmp_path: Path, rank: int, compute: list[tuple[float, float]], p2p: list[tuple[str, float, float]]) -> None:
    kernels = [{"name": f"fwdbwd{i}", "start": s, "end": e, "launch": 0} for i, (s, e) in enumerate(compute)]
    colls = [
        {"start": s, "end": e, "launch": 0, "args_on": "none", "annotation": a, "kernel": "ncclDevKernel_SendRecv"}
        for a, s, e in p2p
    ]
    write_rank(tmp_path, rank, rank_events(colls=colls, kernels=kernels, steps=[(1, 0, 60)]), world=2)


def test_bubble_gpipe_two_stages_two_microbatches(tmp_path: Path) -> None:
    # GPipe, p = 2, m = 2, F = B = 10 µs: stage 0 F1 F2 . . B2 B1; stage 1 . F1 F2 B2 B1 .
    _stage(
        tmp_path,
        0,
        [(0, 10), (10, 20), (40, 50), (50, 60)],
        [
            ("nccl:send 0->1", 10, 11),
            ("nccl:send 0->1", 20, 21),
            ("nccl:recv 0<-1", 21, 40),
            ("nccl:recv 0<-1", 40, 41),
        ],
    )
    _stage(
        tmp_path,
        1,
        [(10, 20), (20, 30), (30, 40), (40, 50)],
        [("nccl:recv 1<-0", 0, 10), ("nccl:recv 1<-0", 20, 21), ("nccl:send 1->0", 40, 41), ("nccl:send 1->0", 50, 51)],
    )
    res = run_analysis("bubble", ranksight.load(tmp_path))
    per = res["per_stage_step"].sort("rank")
    assert per["bubble_us"].to_list() == [20.0, 20.0]
    assert per["in_p2p_us"].to_list() == [20.0, 11.0]
    assert per["outside_p2p_us"].to_list() == [0.0, 9.0]
    assert per["bubble_fraction"].to_list() == pytest.approx([1 / 3, 1 / 3])
    step = res["per_step"].row(0, named=True)
    assert (step["stages"], step["microbatches"]) == (2, 2)
    assert step["expected_fraction"] == pytest.approx(expected_bubble(2, 2)) == pytest.approx(1 / 3)
    assert step["excess_fraction"] == pytest.approx(0.0)
    given = run_analysis("bubble", ranksight.load(tmp_path), stages=4, microbatches=8)["per_step"].row(0, named=True)
    assert given["expected_fraction"] == pytest.approx(3 / 11)


def test_bubble_without_p2p_says_so(data) -> None:  # noqa: ANN001
    from ranksight.data import example_path

    res = run_analysis("bubble", ranksight.load(example_path("dlrm")))
    assert res["per_stage_step"].height == 0
    assert res.notes[0].startswith("no point-to-point send/recv found")
