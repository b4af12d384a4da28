"""collectives / alignment / bandwidth on hand-built multi-rank traces with known times.

The scenario (tests/unit/dist_traces.py): 4 ranks, 3 all-reduces of 1024 floats; true starts
(µs) (1000, 1010, 1020, 1030), (2000, 2300, 2010, 2020), (3000, 3005, 3010, 3015), common ends
1100, 2400, 3100; rank 3 never joins collective 2; rank 2's clock is 500 µs ahead (host b, the
others host a).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from tests.unit.dist_traces import rank_events, scenario, write_rank

import ranksight
from ranksight.analyses import run_analysis
from ranksight.analyses.collectives import comm_data, rank_collectives


@pytest.fixture
def run4(tmp_path: Path) -> ranksight.Run:
    return ranksight.load(scenario(tmp_path))


def test_offsets_recover_the_500us_shift(run4: ranksight.Run) -> None:
    off = run_analysis("alignment", run4)["offsets"]
    assert off["offset_us"].to_list() == [0.0, 0.0, 500.0, 0.0]
    assert off["clock"].to_list() == ["host a", "host a", "host b", "host a"]
    assert off["instances_used"].to_list() == [3, 3, 3, 2]
    s = run_analysis("alignment", run4)["summary"].row(0, named=True)
    assert s["clocks"] == 2 and s["spread_us"] == 500.0


def test_ranks_of_one_host_share_one_offset(tmp_path: Path) -> None:
    # rank 2 now shares host "a": one clock, so its 500 µs lead cannot be corrected away
    run = ranksight.load(scenario(tmp_path, hosts=("a", "a", "a", "a")))
    off = run_analysis("alignment", run)["offsets"]
    assert off["offset_us"].n_unique() == 1 and off["offset_us"][0] == 0.0
    inst = comm_data(run).instances
    # uncorrected: rank 2 reads +500 µs, so it looks last everywhere
    assert inst["late_rank"].to_list() == [2, 2, 2]


def test_no_align_leaves_times_alone(run4: ranksight.Run) -> None:
    inst = comm_data(run4, align=False).instances
    # rank 2 reads +500 µs: starts (1000, 1010, 1520, 1030), (2000, 2300, 2510, 2020), (3000, 3005, 3510)
    assert inst["skew_ns"].to_list() == [520_000, 510_000, 510_000]
    assert inst["late_rank"].to_list() == [2, 2, 2]


def test_instances_skew_wait_transfer(run4: ranksight.Run) -> None:
    cd = comm_data(run4)
    inst = cd.instances
    assert inst["skew_ns"].to_list() == [30_000, 300_000, 10_000]
    assert inst["late_rank"].to_list() == [3, 1, 2]
    assert inst["total_wait_ns"].to_list() == [60_000, 870_000, 15_000]
    assert inst["transfer_ns"].to_list() == [70_000, 100_000, 90_000]
    assert inst["ranks_present"].to_list() == [4, 4, 3]
    assert inst["missing_ranks"].to_list() == [[], [], [3]]
    p = cd.participants.filter(pl.col("instance") == 1).sort("rank")
    assert p["wait_ns"].to_list() == [300_000, 0, 290_000, 280_000]
    assert p["transfer_ns"].to_list() == [100_000] * 4
    # every participant: duration = wait + transfer
    assert (cd.participants["dur_ns"] == cd.participants["wait_ns"] + cd.participants["transfer_ns"]).all()


def test_bandwidth_uses_transfer_and_nccl_tests_factor(run4: ranksight.Run) -> None:
    t = run_analysis("bandwidth", run4)["instances"]
    row = t.filter(pl.col("instance") == 1).row(0, named=True)
    assert row["bytes"] == 4096
    assert row["algbw_gbps"] == pytest.approx(4096 / 100_000)  # bytes per ns = GB/s
    assert row["busbw_gbps"] == pytest.approx(4096 / 100_000 * 1.5)  # 2(n-1)/n, n = 4
    assert row["factor_formula"] == "2(n-1)/n"


def test_missing_collective_without_seq_stays_local(tmp_path: Path) -> None:
    # no Seq args: matching by (group, step, type, size, order); rank 3 skips the middle collective
    run = ranksight.load(scenario(tmp_path, seq=False, sizes=(1024, 2048, 4096), skip=(3, 1)))
    inst = comm_data(run).instances
    assert inst["ranks_present"].to_list() == [4, 3, 4]
    assert inst["missing_ranks"].to_list() == [[], [3], []]
    assert inst["bytes"].to_list() == [4096, 8192, 16384]


def test_type_rules_and_precedence(tmp_path: Path) -> None:
    colls = [
        # collective args on the kernel row win over the kernel name
        {
            "start": 100,
            "end": 150,
            "args_on": "kernel",
            "name": "_allgather_base",
            "nelems": 256,
            "out_nelems": 512,
            "group_size": 2,
            "kernel": "ncclDevKernel_SendRecv",
        },
        # record_param_comms args win over a misleading kernel name (NCCL 2.13 named everything SendRecv)
        {
            "start": 200,
            "end": 250,
            "args_on": "rpc",
            "name": "allreduce",
            "nelems": 100,
            "kernel": "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t",
        },
        # no args: the nccl:* annotation names it, Input Dims give the size
        {
            "start": 300,
            "end": 350,
            "args_on": "none",
            "annotation": "nccl:reduce_scatter",
            "nelems": 64,
            "kernel": "ncclDevKernel_Generic",
        },
        # nothing but the kernel name (RCCL's generic name: unknown)
        {"start": 400, "end": 450, "args_on": "none", "kernel": "ncclDevKernel_Generic"},
        {"start": 500, "end": 550, "args_on": "none", "kernel": "multimem_all_reduce_kernel"},
    ]
    p = write_rank(tmp_path, 0, rank_events(colls=colls), world=2)
    df = rank_collectives(ranksight.load(p)[0])
    assert df["coll_type"].to_list() == ["all_gather", "all_reduce", "reduce_scatter", "unknown", "all_reduce"]
    assert df["type_rule"].to_list() == [
        "kernel_args",
        "record_param_comms",
        "nccl_annotation",
        "kernel_name",
        "kernel_name",
    ]
    # all_gather: the gathered output; reduce_scatter: the full input (the annotation's Input Dims)
    assert df["bytes"].to_list()[:3] == [512 * 4, 400, 64 * 4]
    assert df["size_rule"].to_list()[:3] == ["kernel_args", "record_param_comms", "nccl_annotation"]
    assert df["group_size"].to_list()[0] == 2


def test_gloo_collectives_are_recognised(data) -> None:  # noqa: ANN001
    run = ranksight.load(data("generated/cpu-ddp-gloo-4ranks"))
    cd = comm_data(run)
    assert cd.per_rank.height == 24
    assert set(cd.per_rank["type_rule"].to_list()) == {"gloo_annotation"}
    assert set(cd.per_rank["coll_type"].to_list()) == {"all_reduce"}
    assert sorted(set(cd.per_rank["bytes"].to_list())) == [512_000, 1_131_048]  # 128000 and 282762 floats
    assert cd.instances["ranks_present"].to_list() == [4] * 6
    # one host ('vm'): one clock, no offset
    assert cd.offsets["clock"].n_unique() == 1 and (cd.offsets["offset_ns"] == 0).all()
    # the gloo collective is enqueued by c10d::allreduce_ on the main thread before it runs
    assert (cd.per_rank["launch_ns"] <= cd.per_rank["start_ns"]).all()


def test_single_rank_says_so(data) -> None:  # noqa: ANN001
    run = ranksight.load(data("hta/nccl_parser_config"))
    for name in ("collectives", "alignment", "bandwidth", "stragglers", "alpha-beta", "all-to-all"):
        res = run_analysis(name, run)
        assert any(n.startswith("cross-rank analysis needs several ranks") for n in res.notes), name
    per = run_analysis("collectives", run)["collectives"]
    assert per.height == 21 and set(per["type_rule"].to_list()) == {"kernel_args"}
