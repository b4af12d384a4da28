"""NCCL_DEBUG log parser on the synthetic fixtures (tests/data/nccl_logs, see its README) and on
single hand-written lines of each format."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import ranksight
from ranksight.data import example_path
from ranksight.errors import TraceNotFoundError
from ranksight.io.nccl_log import parse_nccl_logs
from ranksight.views.comm_extract import rank_collectives
from ranksight.views.nccl_join import join_log_to_traces, logical_operations


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest) -> object:
    d = Path(__file__).resolve().parents[1] / "data" / "nccl_logs"
    return parse_nccl_logs([d / "cluster-gpu-node-a.log", d / "cluster-gpu-node-b.log"])


def test_cluster_summary(cluster) -> None:  # noqa: ANN001
    assert cluster.versions == ["2.18.3+cuda12.2"]
    c = cluster.comms
    assert c.select("host", "pid").n_unique() == 8 and c["host"].n_unique() == 2
    sizes = c.group_by("comm_key").agg(pl.col("nranks").first(), pl.len()).sort("nranks")
    assert sizes["nranks"].to_list() == [2, 2, 2, 2, 4, 4, 8]
    assert sizes["len"].to_list() == [2, 2, 2, 2, 4, 4, 8]
    world = c.filter(pl.col("nranks") == 8).sort("rank")
    assert world["global_rank"].to_list() == list(range(8))
    assert world["host"].to_list() == ["gpu-node-a"] * 4 + ["gpu-node-b"] * 4
    assert set(cluster.networks["network"].to_list()) == {"IB"}


def test_cluster_topology_and_transports(cluster) -> None:  # noqa: ANN001
    key = cluster.comms.select("host", "pid", "comm", "comm_key", "nranks")
    t = cluster.transports.join(key, on=["host", "pid", "comm"])
    world = t.filter(pl.col("nranks") == 8)
    # ring 0..7 over two nodes: 3→4 and 7→0 cross the nodes (send and receive side, 2 channels)
    assert world.group_by("transport").len().sort("transport").rows() == [("NET", 8), ("P2P", 12)]
    net = world.filter(pl.col("transport") == "NET")
    assert set(net["kind"].to_list()) == {"IB"} and set(net["direction"].to_list()) == {"send", "receive"}
    assert t.filter(pl.col("nranks") == 4)["transport"].unique().to_list() == ["P2P"]
    rings = cluster.rings.join(key, on=["host", "pid", "comm"]).filter(pl.col("nranks") == 8)
    assert set(rings["order"].to_list()) == {"0 1 2 3 4 5 6 7"}
    assert cluster.trees.height > 0
    ch = cluster.channels.join(key, on=["host", "pid", "comm"])
    assert ch.filter(pl.col("nranks") == 4)["coll_channels"].unique().to_list() == [4]


def test_cluster_operations(cluster) -> None:  # noqa: ANN001
    ops = cluster.operations
    assert ops.height == 96
    tuned = ops.filter(pl.col("algorithm").is_not_null())
    assert (tuned["bytes"] == tuned["tuned_bytes"]).all()  # count × size (× nranks for AllGather)
    ag = ops.filter(pl.col("op") == "AllGather").row(0, named=True)
    assert (ag["count"], ag["dtype"], ag["bytes"], ag["algorithm"], ag["protocol"]) == (
        131072,
        "bfloat16",
        2097152,
        "RING",
        "LL128",
    )
    small = ops.filter((pl.col("op") == "AllReduce") & (pl.col("count") == 1)).row(0, named=True)
    assert (small["algorithm"], small["protocol"], small["model_time_us"]) == ("TREE", "LL", 9.6)
    assert ops["op_count"].max() == 5  # hex opCount per communicator
    lo = logical_operations(ops)
    assert sorted(lo.filter(pl.col("nranks") == 2)["coll_type"].unique().to_list()) == ["recv", "send"]


def test_line_formats(tmp_path: Path) -> None:
    lines = [
        "h1:10:10 [0] NCCL INFO NCCL version 2.21.5+cuda12.4",
        "h1:10:10 [0] NCCL INFO ncclCommInitRank comm 0xabc rank 3 nranks 16 cudaDev 0 nvmlDev 0 busId 1b000 commId "
        "0xfeed - Init START",
        "h1:10:10 [0] NCCL INFO Channel 00/0 : 2[1] -> 3[0] via P2P/CUMEM/read",
        "h1:10:10 [0] NCCL INFO Channel 01/0 : 3[0] -> 4[0] [send] via NET/Socket/0",
        "h1:10:10 [0] NCCL INFO Channel 00 : 3[0] -> 2[1] via SHM/direct/direct",
        "h1:10:10 [0] NCCL INFO 24 coll channels, 24 collnet channels, 16 nvls channels, 32 p2p channels, 32 p2p "
        "channels per peer",
        "h1:10:10 [0] NCCL INFO ncclCommInitRank comm 0xabc rank 3 nranks 16 cudaDev 0 nvmlDev 0 busId 1b000 commId "
        "0xfeed - Init COMPLETE",
        "h1:10:10 [0] NCCL INFO ReduceScatter: opCount 2a sendbuff 0x1 recvbuff 0x2 count 1024 datatype 9 op 0 root 0 "
        "comm 0xabc [nranks=16] stream 0x9",
        "h1:10:10 [0] 1234.567 enqueue.cc:1400 NCCL TRACE ReduceScatter: 32768 Bytes -> Algo 4 proto 2 time 12.5",
        "h1:10:10 [0] NCCL WARN Cuda failure 'out of memory'",
        "unrelated application output",
    ]
    p = tmp_path / "one.log"
    p.write_text("\n".join(lines) + "\n")
    log = parse_nccl_logs(p)
    assert log.versions == ["2.21.5+cuda12.4"] and log.lines == 11 and log.nccl_lines == 10
    c = log.comms.row(0, named=True)
    assert (c["rank"], c["nranks"], c["comm_id"], c["bus_id"], c["global_rank"]) == (3, 16, "0xfeed", "1b000", 3)
    assert log.transports["transport"].to_list() == ["P2P", "NET", "SHM"]
    assert log.transports["kind"].to_list() == ["P2P", "Socket", "SHM"]
    assert set(log.transports["comm"].to_list()) == {"0xabc"}
    ch = log.channels.row(0, named=True)
    assert (ch["coll_channels"], ch["collnet_channels"], ch["nvls_channels"], ch["p2p_channels"]) == (24, 24, 16, 32)
    op = log.operations.row(0, named=True)
    assert (op["op_count"], op["bytes"], op["algorithm"], op["protocol"]) == (0x2A, 1024 * 2 * 16, "NVLS", "SIMPLE")
    assert log.warnings and "out of memory" in log.warnings[0]


def test_missing_file_raises(tmp_path: Path) -> None:
    with pytest.raises(TraceNotFoundError):
        parse_nccl_logs(tmp_path / "nope.log")


def test_join_dlrm_log_to_the_example_traces() -> None:
    d = Path(__file__).resolve().parents[1] / "data" / "nccl_logs"
    log = parse_nccl_logs(d / "dlrm-8ranks.log.gz")
    assert log.versions == ["2.14.3+cuda11.7"] and set(log.networks["network"].to_list()) == {"Socket"}
    joined, notes = join_log_to_traces(log, ranksight.load(example_path("dlrm")).map(rank_collectives))
    assert joined.height == 64 and joined["bytes_match"].all()
    ar = joined.filter(pl.col("coll_type") == "all_reduce")
    # the log's tuning lines agree with the kernel names (ncclKernel_AllReduce_RING_LL_...)
    assert set(ar["algorithm"].to_list()) == {"RING"} and set(ar["protocol"].to_list()) == {"LL"}
    assert (ar["algorithm"] == ar["kernel_algorithm"]).all() and (ar["protocol"] == ar["kernel_protocol"]).all()
    # three identical steps in the log: the earliest fit is used, and said so
    assert joined.filter(pl.col("rank") == 0)["op_count"].to_list() == list(range(0x48, 0x50))
    assert any("fits 3 places" in n for n in notes)
