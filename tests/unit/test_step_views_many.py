"""``overview`` and ``gpu-metrics`` over many small ranks in one pass (issue 19): the roles'
events, the plugin steps' launches and the kernels read once over the stacked events, the
interval arithmetic run once with each rank in a lane of its own. Each equals its per-rank
computation; a rank never sees another rank's events at the same times."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal
from tests.conftest import DATA

import ranksight
from ranksight.analyses import overview as ov
from ranksight.analyses import run_analysis
from ranksight.analyses.gpu_metrics import trace_gpu_metrics
from ranksight.data import example_path

FOLDERS = [example_path("dlrm"), DATA / "tracelens/mi300", DATA / "generated/cpu-ddp-gloo-4ranks"]


def _per_rank_overview(path: Path, plugin_compat: bool) -> pl.DataFrame:
    run = ranksight.load(path, cache=False)  # a fresh run: nothing memoised by the one-pass path
    parts = [ov._rank_overview(run[r], plugin_compat)[0] for r in run.ranks]
    return pl.concat(parts, how="vertical_relaxed").select(ov.COLUMNS)


@pytest.mark.parametrize("plugin_compat", [False, True])
@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_overview_in_one_pass_equals_per_rank(folder: Path, plugin_compat: bool) -> None:
    run = ranksight.load(folder, cache=False)
    from ranksight.analyses import Session

    assert ov._overviews_stacked(Session.of(run), plugin_compat) is not None  # the one-pass path ran
    got = run_analysis("overview", run, plugin_compat=plugin_compat)["steps"]
    assert got.height > 0
    assert_frame_equal(got, _per_rank_overview(folder, plugin_compat))


@pytest.mark.parametrize("folder", FOLDERS[:2], ids=lambda p: p.name)
def test_gpu_metrics_in_one_pass_equals_per_rank(folder: Path) -> None:
    got = run_analysis("gpu-metrics", ranksight.load(folder, cache=False))
    run = ranksight.load(folder, cache=False)
    parts = [trace_gpu_metrics(run[r]) for r in run.ranks]
    assert_frame_equal(got["overall"], pl.concat([p[0] for p in parts], how="vertical_relaxed"))
    assert_frame_equal(got["per_step"], pl.concat([p[1] for p in parts], how="vertical_relaxed"))


def _x(name: str, cat: str, ts: float, dur: float, **kw: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": kw.pop("pid", 1), "tid": kw.pop("tid", 100), "ts": ts,
            "dur": dur, "args": kw.pop("args", {})}  # fmt: skip


def _rank(rank: int, gpu: bool, occupancy: float | None = None) -> dict[str, Any]:
    """One step [0, 100] µs; with ``gpu``, an ``aten::mm`` [5, 60] launching a kernel [20, 50]
    (launch [10, 15]; ``occupancy``: its est. achieved occupancy, 2 blocks per SM); without, an
    ``aten::add`` [5, 60] only. Every rank at the same times and rows."""
    occ = {} if occupancy is None else {"blocks per SM": 2.0, "est. achieved occupancy %": occupancy}
    ev = [_x("ProfilerStep#1", "user_annotation", 0, 100)]
    if gpu:
        ev += [
            _x("aten::mm", "cpu_op", 5, 55),
            _x("cudaLaunchKernel", "cuda_runtime", 10, 5, args={"correlation": 7}),
            _x("sm90_gemm", "kernel", 20, 30, pid=0, tid=7, args={"correlation": 7, "stream": 7, "device": 0, **occ}),
        ]
    else:
        ev.append(_x("aten::add", "cpu_op", 5, 55))
    return {
        "schemaVersion": 1,
        "distributedInfo": {"rank": rank, "world_size": 2, "backend": "nccl"},
        "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "computeMajor": 9, "computeMinor": 0}],
        "traceEvents": ev,
    }


@pytest.fixture
def gpu_and_cpu_rank(tmp_path: Path) -> Path:
    for rank, gpu in ((0, True), (1, False)):
        (tmp_path / f"rank{rank}.json").write_text(json.dumps(_rank(rank, gpu)))
    return tmp_path


def test_each_rank_in_its_own_lane_exact(gpu_and_cpu_rank: Path) -> None:
    # rank 0's kernel runs inside rank 1's step window (same times): in one lane it would count
    # as rank 1's Kernel time
    res = run_analysis("overview", ranksight.load(gpu_and_cpu_rank, cache=False))
    got = res["steps"].select("rank", "kernel_us", "runtime_us", "cpu_exec_us", "other_us", "total_us").rows()
    assert got == [(0, 30.0, 5.0, 20.0, 45.0, 100.0), (1, 0.0, 0.0, 55.0, 45.0, 100.0)]
    assert res.notes == ["rank 1: no GPU work (CPU-only trace): Kernel/Memcpy/Memset/Runtime are 0"]


def test_gpu_metrics_with_a_rank_without_kernels_exact(gpu_and_cpu_rank: Path) -> None:
    """A rank without kernels has no rows; the others' tables keep their columns (the empty
    ``overall`` of such a rank once had the per-step columns, and the tables did not stack)."""
    res = run_analysis("gpu-metrics", ranksight.load(gpu_and_cpu_rank, cache=False))
    assert res["overall"].select("rank", "device", "kernel_busy_us", "utilization_pct").rows() == [(0, 0, 30.0, 30.0)]
    assert res["per_step"].select("rank", "step", "kernel_busy_us").rows() == [(0, 1, 30.0)]


def test_gpu_metrics_each_rank_reads_its_own_kernel_args_exact(tmp_path: Path) -> None:
    # both kernels sit at the same row of their rank: joined on the row alone, each rank would
    # read both ranks' args
    for rank, occupancy in ((0, 40.0), (1, 60.0)):
        (tmp_path / f"rank{rank}.json").write_text(json.dumps(_rank(rank, True, occupancy)))
    res = run_analysis("gpu-metrics", ranksight.load(tmp_path, cache=False))
    got = res["overall"].select("rank", "kernels", "occupancy_pct", "sm_efficiency_pct").rows()
    assert got == [(0, 1, 40.0, 30.0), (1, 1, 60.0, 30.0)]


def test_lanes_ignore_instants_at_time_zero(tmp_path: Path) -> None:
    """An instant event at time 0 beside ranges at epoch times: the lanes span the ranges, so
    three ranks still fit (were the instant counted, each lane would be ~1.7e18 ns long)."""
    for rank in range(3):
        tr = _rank(rank, gpu=True)
        tr["distributedInfo"]["world_size"] = 3
        for e in tr["traceEvents"]:
            e["ts"] += 1_700_000_000_000_000  # µs since the epoch
        tr["traceEvents"].append({"ph": "i", "cat": "marker", "name": "start", "pid": 1, "tid": 100, "ts": 0, "s": "t"})
        (tmp_path / f"rank{rank}.json").write_text(json.dumps(tr))
    run = ranksight.load(tmp_path, cache=False)
    from ranksight.analyses import Session

    assert ov._overviews_stacked(Session.of(run), False) is not None
    got = run_analysis("overview", run)["steps"].select("rank", "kernel_us", "total_us").rows()
    assert got == [(0, 30.0, 100.0), (1, 30.0, 100.0), (2, 30.0, 100.0)]
