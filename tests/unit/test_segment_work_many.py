"""views/comm_segments.segment_work_many: the work between collectives of every rank in one pass
over the stacked events (issue 19) equals each rank's own (``segment_work``), the host ops of the
launching threads and of the training loop's thread and the GPU work alike; ``stragglers`` takes
that path on many small ranks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal
from tests.conftest import DATA

import ranksight
from ranksight.analyses import Session
from ranksight.analyses import stragglers as sg
from ranksight.analyses.collectives import comm_data
from ranksight.data import example_path
from ranksight.views import comm_segments as cs
from ranksight.views.intervals import with_outermost

_KEY = ["rank", "instance", "side", "name"]


@pytest.mark.parametrize(
    ("folder", "sides", "passes"),
    [
        (example_path("dlrm"), ["cpu", "gpu"], 1),
        (DATA / "tracelens/mi300", ["cpu", "gpu"], 1),
        # DDP launches from the autograd thread: the loop's thread is read in a second pass
        (DATA / "generated/h100/ddp-gloo-2ranks", ["cpu"], 2),
    ],
    ids=lambda v: getattr(v, "name", None),
)
def test_one_pass_equals_per_rank(folder: Path, sides: list[str], passes: int) -> None:
    run = ranksight.load(folder, cache=False)
    sess = Session.of(run)
    assert sess.stacked_events() is not None
    cd = comm_data(sess)
    seg = sg._segments_all(sess, cd)
    every = seg.select("instance").unique()
    calls: list[int] = []
    real = cs._top_level_ops

    def spy(src: cs.EventSource, threads: pl.DataFrame) -> pl.DataFrame:
        calls.append(len(src.traces))
        return real(src, threads)

    cs._top_level_ops = spy  # type: ignore[assignment]
    try:
        got = sg._work(sess, cd, seg, every)
    finally:
        cs._top_level_ops = real  # type: ignore[assignment]
    assert calls == [len(cd.ranks)] * passes  # every rank in each pass
    per = pl.concat([sg.rank_segment_work(run[r], seg, cd.offset_map()) for r in cd.ranks], how="vertical_relaxed")
    assert got.height > 0 and sorted(got["side"].unique()) == sides
    assert_frame_equal(got.sort(_KEY), per.sort(_KEY))


def test_with_outermost_by_several_keys_exact() -> None:
    # the same thread id on two ranks: keyed by (rank, tid), rank 1's op is outermost on its own
    df = pl.DataFrame(
        {"rank": [0, 0, 1], "tid": [7, 7, 7], "ts_ns": [0, 10, 5], "end_ns": [100, 20, 8], "name": ["a", "b", "c"]}
    )
    got = with_outermost(df, ["rank", "tid"]).select("name", "outer").rows()
    assert got == [("a", True), ("b", False), ("c", True)]
    assert with_outermost(df, "tid").filter("outer")["name"].to_list() == ["a"]


def _x(name: str, cat: str, ts: float, dur: float, **kw: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": kw.pop("pid", 1), "tid": kw.pop("tid", 100), "ts": ts,
            "dur": dur, "args": kw.pop("args", {})}  # fmt: skip


def _rank(rank: int, launches: tuple[int, int], extra: list[dict[str, Any]]) -> dict[str, Any]:
    """One step [0, 1000] µs with two all-reduces (``record_param_comms`` at each of ``launches``,
    its launch 5 µs later, the NCCL kernel 50 µs later), on tid 100 on every rank."""
    ev = [_x("ProfilerStep#1", "user_annotation", 0, 1000), *extra]
    for seq, t in enumerate(launches):
        args = {"Collective name": "allreduce", "In msg nelems": 1024, "Out msg nelems": 1024, "dtype": "Float",
                "Group size": 2, "Process Group Name": "0", "Process Group Description": "default_pg", "Seq": seq}  # fmt: skip
        ev += [
            _x("record_param_comms", "cpu_op", t, 20, args=args),
            _x("cudaLaunchKernel", "cuda_runtime", t + 5, 5, args={"correlation": seq + 1}),
            _x(
                "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
                "kernel",
                t + 50,
                30,
                pid=0,
                tid=7,
                args={"correlation": seq + 1, "stream": 7, "device": 0},
            ),
        ]
    return {
        "schemaVersion": 1,
        "distributedInfo": {"rank": rank, "world_size": 2, "backend": "nccl"},
        "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "computeMajor": 9, "computeMinor": 0}],
        "traceEvents": ev,
    }


def test_each_rank_reads_its_own_segments_exact(tmp_path: Path) -> None:
    # the same thread id on both ranks; rank 1's aten::mul (150 µs) lies in its first segment
    # [step start, 305) while rank 0's second segment starts at 105: keyed by thread alone, the
    # op would fall into rank 0's second segment
    mul = _x("aten::mul", "cpu_op", 150, 10)
    (tmp_path / "rank0.json").write_text(json.dumps(_rank(0, (100, 500), [])))
    (tmp_path / "rank1.json").write_text(json.dumps(_rank(1, (300, 600), [mul])))
    run = ranksight.load(tmp_path, cache=False)
    sess = Session.of(run)
    cd = comm_data(sess)
    seg = sg._segments_all(sess, cd)
    first = seg.filter(pl.col("rank") == 1).sort("cpu_to_ns")["instance"][0]
    got = sg._work(sess, cd, seg, seg.select("instance").unique())
    rows = got.filter(pl.col("name") == "aten::mul").select("rank", "instance", "side", "total_ns", "count").rows()
    assert rows == [(1, first, "cpu", 10_000, 1)]
    per = pl.concat([sg.rank_segment_work(run[r], seg, cd.offset_map()) for r in cd.ranks], how="vertical_relaxed")
    assert_frame_equal(got.sort(_KEY), per.sort(_KEY))
