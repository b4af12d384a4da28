"""health over many small ranks (issue 19): the CPU ranges' crossings, the GPU streams' overlaps
and the event counts of every rank read in one pass over the stacked events equal each rank's
own checks; a rank's ranges are nested within its own threads only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal
from tests.conftest import DATA

import ranksight
from ranksight.analyses import run_analysis
from ranksight.analyses.health import trace_health
from ranksight.data import example_path


@pytest.mark.parametrize(
    "folder",
    [example_path("dlrm"), DATA / "tracelens/mi300", DATA / "generated/cpu-ddp-gloo-4ranks"],
    ids=lambda p: p.name,
)
@pytest.mark.parametrize("noise_us", [5.0, 0.5])
def test_one_pass_equals_per_rank(folder: Path, noise_us: float) -> None:
    got = run_analysis("health", ranksight.load(folder, cache=False), noise_us=noise_us)["checks"]
    run = ranksight.load(folder, cache=False)
    want = pl.concat([trace_health(run[r], noise_us=noise_us) for r in run.ranks])
    assert_frame_equal(got.filter(pl.col("rank").is_not_null()), want)


def _x(name: str, ts: float, dur: float) -> dict[str, Any]:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 100, "ts": ts, "dur": dur, "args": {}}


def _rank(rank: int, ev: list[dict[str, Any]]) -> dict[str, Any]:
    return {"schemaVersion": 1, "distributedInfo": {"rank": rank, "world_size": 2}, "traceEvents": ev}


_KERNEL = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 20,
           "args": {"device": 0, "stream": 7}}  # fmt: skip


def test_each_rank_in_its_own_threads_and_streams_exact(tmp_path: Path) -> None:
    # the same pid and tid on both ranks: rank 0's [0, 100] would enclose rank 1's [50, 200],
    # which would then cross it by 100 µs; the same device and stream too: the two kernels at
    # the same times would overlap by 20 µs
    (tmp_path / "rank0.json").write_text(json.dumps(_rank(0, [_x("aten::a", 0, 100), _KERNEL])))
    ev1 = [_x("aten::b", 50, 150), _x("aten::c", 60, 200), _KERNEL]
    (tmp_path / "rank1.json").write_text(json.dumps(_rank(1, ev1)))
    checks = run_analysis("health", ranksight.load(tmp_path, cache=False))["checks"]
    got = checks.filter(pl.col("check") == "cpu_nesting").select("rank", "status", "count", "total_us").rows()
    assert got == [(0, "ok", 0, 0), (1, "warning", 1, 60.0)]
    got = checks.filter(pl.col("check") == "stream_overlap").select("rank", "status", "count").rows()
    assert got == [(0, "ok", 0), (1, "ok", 0)]
