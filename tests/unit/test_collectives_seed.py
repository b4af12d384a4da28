"""views/comm_extract.seed_rank_collectives: every rank's collectives from one pass over the
stacked events equal each rank's own (issue 19): GPU kernels with their launching
``record_param_comms``, gloo annotations with their ``c10d::`` ops, process-group defaults from
each rank's own ``pg_config`` and world size, and a rank's kernels take their metadata from their
own rank's ops."""

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
from ranksight.analyses.collectives import comm_data
from ranksight.data import example_path
from ranksight.views import comm_extract as ce
from ranksight.views.event_source import EventSource


def _per_rank_and_seeded(path: Path) -> tuple[dict[int, pl.DataFrame], dict[int, pl.DataFrame]]:
    run = ranksight.load(path, cache=False)
    sess = Session.of(run)
    per = {r: ce._collectives(EventSource.one(run[r])) for r in sess.ranks}  # nothing memoised
    stacked = sess.stacked_events()
    assert stacked is not None
    ce.seed_rank_collectives([run[r] for r in sess.ranks], stacked)
    assert all(run[r].has_memo("collectives") for r in sess.ranks)
    return per, {r: ce.rank_collectives(run[r]) for r in sess.ranks}


@pytest.mark.parametrize(
    ("folder", "rows", "rules"),
    [
        # DLRM: NCCL kernels typed by the nccl:* annotation around their launch
        (example_path("dlrm"), 64, {"nccl_annotation"}),
        # gloo on CPU: the annotation gives the type, its c10d:: op the launch
        (DATA / "generated/cpu-ddp-gloo-4ranks", 24, {"gloo_annotation"}),
        # MI300: two ranks declare process groups, one does not (two fills of the defaults)
        (DATA / "tracelens/mi300", 17, {"kernel_args", "kernel_name"}),
    ],
)
def test_seeded_equals_per_rank_on_real_traces(folder: Path, rows: int, rules: set[str]) -> None:
    per, seeded = _per_rank_and_seeded(folder)
    for r, want in per.items():
        assert_frame_equal(seeded[r], want)
        assert seeded[r]["rank"].unique().to_list() in ([r], [])
    got = pl.concat(list(seeded.values()))
    assert got.height == rows
    assert set(got["type_rule"].unique()) == rules


def _x(name: str, cat: str, ts: float, dur: float, **kw: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": kw.pop("pid", 1), "tid": kw.pop("tid", 100), "ts": ts,
            "dur": dur, "args": kw.pop("args", {})}  # fmt: skip


def _rank_trace(rank: int, nelems: int, shift: int, pgs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """One rank: a ``record_param_comms`` of ``nelems`` floats on tid 100 launching an NCCL
    all-reduce kernel. Every rank uses the same tid and times, except that the op starts
    ``shift`` µs later. With ``pgs`` (``pg_config``), the op carries no process-group args."""
    args = {"Collective name": "allreduce", "In msg nelems": nelems, "Out msg nelems": nelems, "dtype": "Float",
            "Group size": 2, "Process Group Name": "0", "Process Group Description": "default_pg"}  # fmt: skip
    if pgs is not None:
        args = {k: v for k, v in args.items() if not k.startswith(("Group", "Process"))}
    ev = [
        _x("ProfilerStep#1", "user_annotation", 0, 200),
        _x("record_param_comms", "cpu_op", 5 + shift, 100 - shift, args=args),
        _x("cudaLaunchKernel", "cuda_runtime", 10, 5, args={"correlation": 7}),
        _x(
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
            "kernel",
            20,
            30,
            pid=0,
            tid=7,
            args={"correlation": 7, "stream": 7, "device": 0},
        ),
    ]
    return {
        "schemaVersion": 1,
        "distributedInfo": {"rank": rank, "world_size": 8, "backend": "nccl", **({"pg_config": pgs} if pgs else {})},
        "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "computeMajor": 9, "computeMinor": 0}],
        "traceEvents": ev,
    }


def test_each_rank_reads_its_own_ops_exact(tmp_path: Path) -> None:
    # rank 1's op starts later on the same tid: were the ranks' threads swept as one, rank 0's
    # launch would take rank 1's op (the latest-starting one that contains it) and its size
    for rank, nelems, shift in ((0, 1024, 0), (1, 4096, 1)):
        (tmp_path / f"rank{rank}.json").write_text(json.dumps(_rank_trace(rank, nelems, shift)))
    per, seeded = _per_rank_and_seeded(tmp_path)
    got = {r: seeded[r].select("coll_type", "in_nelems", "bytes", "size_rule").rows() for r in seeded}
    assert got == {
        0: [("all_reduce", 1024, 4096, "record_param_comms")],
        1: [("all_reduce", 4096, 16384, "record_param_comms")],
    }
    for r in per:
        assert_frame_equal(seeded[r], per[r])


def test_each_rank_fills_its_own_process_groups_exact(tmp_path: Path) -> None:
    """Rank 0 declares its default group (2 ranks) in ``pg_config``, rank 1 declares none (world
    size 8): the ops carry no group args, so each rank's defaults come from its own metadata."""
    pg = {"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "pg_size": 2, "ranks": [0, 1]}
    for rank, pgs in ((0, [pg]), (1, [])):
        (tmp_path / f"rank{rank}.json").write_text(json.dumps(_rank_trace(rank, 1024, 0, pgs)))
    per, seeded = _per_rank_and_seeded(tmp_path)
    got = {r: seeded[r].select("pg_desc", "group_size", "group_rule", "group_ranks").rows() for r in seeded}
    assert got == {
        0: [("default_pg", 2, "pg_config", "[0, 1]")],
        1: [("default_pg (assumed)", 8, "world_size", None)],
    }
    for r in per:
        assert_frame_equal(seeded[r], per[r])


def test_comm_data_seeds_every_rank(tmp_path: Path) -> None:
    """comm_data on several small ranks fills every rank's collectives in one pass before its map."""
    for rank, nelems in ((0, 1024), (1, 1024)):
        (tmp_path / f"rank{rank}.json").write_text(json.dumps(_rank_trace(rank, nelems, 0)))
    run = ranksight.load(tmp_path, cache=False)
    calls: list[int] = []
    real = ce._collectives

    def spy(src: Any) -> pl.DataFrame:
        calls.append(len(src.traces))
        return real(src)

    ce._collectives = spy  # type: ignore[assignment]
    try:
        cd = comm_data(run)
    finally:
        ce._collectives = real  # type: ignore[assignment]
    assert calls == [2]  # one pass over both ranks, none on its own
    assert cd.instances.height == 1
