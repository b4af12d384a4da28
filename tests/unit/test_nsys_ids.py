"""Every id column of an Nsight Systems export at its type's extremes (hand-built exports).

nsys stores CUPTI's unsigned 32-bit ids (``streamId``, ``deviceId``, ``contextId``,
``correlationId``, ``eventId``, ``eventSyncId``, ``graphId``) as SQLite integers up to
0xFFFFFFFF (CUPTI's "no id"), ``graphNodeId`` as unsigned 64-bit, and ``globalPid`` /
``globalTid`` as 64-bit serialized ids (hardware id, VM id, 24-bit pid, 24-bit tid) that SQLite
holds as signed: a hardware id of 0x80 or more makes them negative. See docs/nsys.md, "Ids".
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from tests.unit.nsys_make import EPOCH_NS, gpid, gtid, kernel, make_nsys, runtime

import ranksight
from ranksight.analyses import REGISTRY, Missing, Session, load_all
from ranksight.errors import RanksightWarning
from ranksight.io.nsys import NO_ID, SYNTH_BASE, decode_nsys, rank_units

MM = "void gemm_kernel<float>(float const*, float*)"
I32_MAX = (1 << 31) - 1
U24_MAX = (1 << 24) - 1


def load(path: Path, **kw: Any) -> ranksight.Run:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RanksightWarning)
        return ranksight.load(path, cache=False, **kw)


def sync(start: int, end: int, corr: int, *, stream: int, device: int = 0, context: int = 1, **kw: Any) -> dict:
    row = {
        "start": start,
        "end": end,
        "deviceId": device,
        "contextId": context,
        "streamId": stream,
        "correlationId": corr,
        "globalPid": gpid(100),
        "syncType": 4,
        "eventId": NO_ID,
        "eventSyncId": NO_ID,
    }
    row.update(kw)
    return row


#: streamId values and the tid each becomes (the stream column keeps the value).
STREAMS = [(0, 0), (I32_MAX, I32_MAX), (1 << 31, SYNTH_BASE), (NO_ID - 1, SYNTH_BASE - 1)]


def stream_tables() -> dict:
    """pid 100 on GPU 0: a kernel on each stream of STREAMS (correlation ids 0, 1, 2 and
    0xFFFFFFFF) with its launch, and a context sync (stream 0xFFFFFFFF)."""
    corrs = [0, 1, 2, NO_ID]
    return {
        "CUPTI_ACTIVITY_KIND_RUNTIME": [
            runtime(10 + 100 * i, 20 + 100 * i, c, "cudaLaunchKernel_v7000") for i, c in enumerate(corrs)
        ]
        + [runtime(500, 600, 9, "cudaDeviceSynchronize_v3020")],
        "CUPTI_ACTIVITY_KIND_KERNEL": [
            kernel(30 + 100 * i, 80 + 100 * i, c, MM, stream=s) for i, (c, (s, _tid)) in enumerate(zip(corrs, STREAMS))
        ],
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": [sync(500, 600, 9, stream=NO_ID)],
    }


def test_stream_ids_at_u32_extremes(tmp_path: Path) -> None:
    p = make_nsys(tmp_path / "streams.sqlite", stream_tables())
    t = load(p)[0]
    k = t.kind("kernel").sort("ts_ns")
    assert k["tid"].to_list() == [tid for _s, tid in STREAMS]
    assert k["stream"].to_list() == [s for s, _tid in STREAMS]  # the original ids, Int64
    assert (k["pid"].to_list(), k["device"].to_list()) == ([0] * 4, [0] * 4)
    assert t.meta.id_names == {SYNTH_BASE: str(1 << 31), SYNTH_BASE - 1: str(NO_ID - 1)}
    # correlation ids 0 and 0xFFFFFFFF link like any other
    launches = t.kind("cuda_runtime").filter(pl.col("name") == "cudaLaunchKernel").sort("ts_ns")
    assert k["launch_row"].to_list() == launches["row"].to_list()
    assert k["correlation"].to_list() == [0, 1, 2, NO_ID]
    # CUPTI's "no stream" of a context sync: -1, as Kineto writes it
    s = t.kind("sync").row(0, named=True)
    assert (s["name"], s["tid"], s["stream"], s["pid"], s["device"]) == ("Context Sync", -1, -1, 0, 0)
    assert t.events.schema["tid"] == pl.Int32 and t.events.schema["stream"] == pl.Int64


def test_synthetic_ids_are_shared_by_pid_tid_and_device(tmp_path: Path) -> None:
    """A device id above 2^31 - 1 (and CUPTI's 0xFFFFFFFF) on GPU rows: the same value gets the
    same synthetic id in pid, tid and device; 0xFFFFFFFF is pid -1 and an empty device."""
    p = make_nsys(
        tmp_path / "dev.sqlite",
        {
            "CUPTI_ACTIVITY_KIND_KERNEL": [
                kernel(10, 20, 1, MM, device=1 << 31, stream=1 << 31),
                kernel(30, 40, 2, MM, device=NO_ID, stream=5),
                kernel(50, 60, 3, MM, device=3, stream=NO_ID - 1),
            ]
        },
    )
    assert [u.devices for u in rank_units(p)] == [(3,), (1 << 31,), (NO_ID,)]
    d = decode_nsys(p)
    ev = d.events.sort("ts_ns")
    assert ev.select("pid", "tid", "device").rows() == [
        (SYNTH_BASE, SYNTH_BASE, SYNTH_BASE),
        (-1, 5, None),
        (3, SYNTH_BASE - 1, 3),
    ]
    assert d.id_names == {SYNTH_BASE: str(1 << 31), SYNTH_BASE - 1: str(NO_ID - 1)}
    run = load(p)
    assert [t.meta.rank_source for t in run] == [
        "nsys pid 100 GPU 3",
        "nsys pid 100 GPU 2147483648",
        "nsys pid 100 GPU 4294967295",
    ]
    assert [t.meta.devices_used for t in run] == [[3], [SYNTH_BASE], []]
    assert run[1].meta.id_names == {SYNTH_BASE: str(1 << 31)}


def test_sync_device_and_context_ids_at_extremes(tmp_path: Path) -> None:
    """Sync rows: the device comes from the context (contextId 0xFFFFFFFF is a context like any
    other); a sync whose context ran nothing and whose deviceId is 0xFFFFFFFF has no device."""
    p = make_nsys(
        tmp_path / "ctx.sqlite",
        {
            "CUPTI_ACTIVITY_KIND_KERNEL": [kernel(10, 20, 1, MM, device=1, context=NO_ID)],
            "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": [
                sync(30, 40, 2, stream=7, device=NO_ID, context=NO_ID, syncType=3),
                sync(50, 60, 3, stream=NO_ID, device=NO_ID, context=NO_ID - 1),
            ],
        },
    )
    d = decode_nsys(p)  # the whole export: no device filter
    s = d.events.filter(pl.col("cat") == "cuda_sync").sort("ts_ns")
    assert s.select("pid", "tid", "stream", "device").rows() == [(1, 7, 7, 1), (-1, -1, -1, None)]
    k = d.tables["kernel"].row(0, named=True)
    assert k["context"] == NO_ID
    t = load(p)[0]
    assert t.meta.rank_source == "nsys pid 100 GPU 1"
    assert t.kind("sync")["device"].to_list() == [1]


def test_event_and_graph_ids_at_extremes(tmp_path: Path) -> None:
    """eventId / eventSyncId: 0xFFFFFFFF is "none" (empty), 0xFFFFFFFE an id; the CUDA event
    record's streamId 0xFFFFFFFF is "none" too. graphId (unsigned 32-bit) and graphNodeId
    (unsigned 64-bit, stored as its signed bits) keep their values; 0 is "not in a graph"."""
    big = NO_ID - 1
    p = make_nsys(
        tmp_path / "ev.sqlite",
        {
            "CUPTI_ACTIVITY_KIND_KERNEL": [
                kernel(10, 20, 1, MM, graphId=NO_ID, graphNodeId=(1 << 63) - 1),
                kernel(30, 40, 2, MM, graphId=1, graphNodeId=-1),  # 0xFFFFFFFFFFFFFFFF
                kernel(50, 60, 3, MM, graphId=0, graphNodeId=0),
                kernel(70, 80, 4, MM, graphId=I32_MAX + 1, graphNodeId=-(1 << 63)),  # 1 << 63
            ],
            "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": [
                sync(100, 110, 5, stream=7, syncType=1, eventId=big, eventSyncId=big),
                sync(120, 130, 6, stream=7, syncType=1, eventId=0, eventSyncId=0),
                sync(140, 150, 7, stream=7, syncType=1, eventId=NO_ID, eventSyncId=NO_ID),
            ],
            "CUPTI_ACTIVITY_KIND_CUDA_EVENT": [
                {
                    "timestamp": 5,
                    "deviceId": 0,
                    "contextId": 1,
                    "streamId": big,
                    "correlationId": NO_ID,
                    "globalPid": gpid(100),
                    "eventId": big,
                    "eventSyncId": big,
                },
                {
                    "timestamp": 6,
                    "deviceId": 0,
                    "contextId": 1,
                    "streamId": NO_ID,
                    "correlationId": 0,
                    "globalPid": gpid(100),
                    "eventId": 0,
                    "eventSyncId": 0,
                },
            ],
        },
    )
    t = load(p)[0]
    k = t.with_args(t.kind("kernel").sort("ts_ns"), "kernel")
    assert k["graph_id"].to_list() == [NO_ID, 1, None, 1 << 31]
    assert k["graph_node_id"].to_list() == [(1 << 63) - 1, -1, None, -(1 << 63)]
    s = t.with_args(t.kind("sync").sort("ts_ns"), "sync")
    assert s.select("wait_on_event_id", "wait_on_stream", "wait_on_event_correlation").rows() == [
        (big, big, NO_ID),
        (0, None, 0),
        (None, None, None),
    ]


def global_id_tables() -> dict:
    """Three processes on GPU 0 whose globalPid / globalTid sit at the 64-bit extremes: hardware
    id 0xFF, VM 0xFF, pid and tid 0xFFFFFF (globalTid -1 as SQLite stores it); hardware 0x7F (the
    largest positive); and pid 0 on VM 0 (globalPid 0). Each launches with correlation id
    0xFFFFFFFF."""
    procs = [
        (U24_MAX, 0xFF, 0xFF, [U24_MAX, 0]),
        (U24_MAX, 0xFF, 0x7F, [U24_MAX]),
        (0, 0, 0, [0]),
    ]
    rt, ks, names = [], [], []
    for i, (pid, vm, hw, tids) in enumerate(procs):
        for j, tid in enumerate(tids):
            corr = NO_ID if j == 0 else 7
            row = runtime(100 * i + 10 * j, 100 * i + 10 * j + 5, corr, "cudaLaunchKernel_v7000")
            row["globalTid"] = gtid(pid, tid, vm, hw)
            rt.append(row)
            ks.append(kernel(100 * i + 10 * j + 6, 100 * i + 10 * j + 8, corr, MM, globalPid=gpid(pid, vm, hw)))
        names.append({"globalPid": gpid(pid, vm, hw), "pid": pid, "name": f"proc{i}"})
    return {"CUPTI_ACTIVITY_KIND_RUNTIME": rt, "CUPTI_ACTIVITY_KIND_KERNEL": ks, "PROCESSES": names}


def test_global_ids_at_64_bit_extremes(tmp_path: Path) -> None:
    p = make_nsys(tmp_path / "gid.sqlite", global_id_tables())
    assert gtid(U24_MAX, U24_MAX, 0xFF, 0xFF) == -1 and gpid(0, 0, 0x80) == -(1 << 63)
    units = rank_units(p)
    assert [u.global_pids for u in units] == [
        (gpid(U24_MAX, 0xFF, 0xFF),),
        (0,),
        (gpid(U24_MAX, 0xFF, 0x7F),),
    ]
    assert [u.label for u in units] == ["pid 16777215 GPU 0", "pid 0 GPU 0", "pid 16777215 GPU 0"]
    run = load(p)
    r0, r1, r2 = run[0], run[1], run[2]
    rt0 = r0.kind("cuda_runtime").sort("ts_ns")
    assert rt0.select("pid", "tid", "correlation").rows() == [(U24_MAX, U24_MAX, NO_ID), (U24_MAX, 0, 7)]
    assert r0.kind("kernel")["launch_row"].null_count() == 0
    assert r0.meta.raw["nsys"]["processes"] == {str(U24_MAX): "proc0"}
    assert r1.kind("cuda_runtime").select("pid", "tid").rows() == [(0, 0)]
    assert r2.kind("cuda_runtime").select("pid", "tid").rows() == [(U24_MAX, U24_MAX)]
    for t in run:
        assert t.kind("kernel")["launch_row"].null_count() == 0
        assert t.meta.id_names == {}


def test_device_rank_keeps_processes_apart_at_id_extremes(tmp_path: Path) -> None:
    """One rank for GPU 0 holds the three processes: the same correlation id 0xFFFFFFFF in each
    links every kernel to its own process' launch (process index put above bit 32)."""
    p = make_nsys(tmp_path / "gid.sqlite", global_id_tables())
    t = load(p, rank_by="device")[0]
    k = t.kind("kernel").sort("ts_ns")
    launches = t.events["row", "pid", "tid", "ts_ns"].filter(pl.col("row").is_in(k["launch_row"].implode()))
    assert k["launch_row"].null_count() == 0
    got = launches.sort("ts_ns").select("pid", "tid").rows()
    assert got == [(U24_MAX, U24_MAX), (U24_MAX, 0), (U24_MAX, U24_MAX), (0, 0)]
    corr = k["correlation"].to_list()
    assert len(set(corr)) == 4 and [c & 0xFFFFFFFF for c in corr] == [NO_ID, 7, NO_ID, NO_ID]


def test_device_properties_match_pid_at_24_bit_max(tmp_path: Path) -> None:
    tabs = global_id_tables()
    tabs["TARGET_INFO_CUDA_DEVICE"] = [
        {"gpuId": 0, "cudaId": 0, "pid": U24_MAX, "numMultiprocessors": 132},
        {"gpuId": 0, "cudaId": 0, "pid": 0, "numMultiprocessors": 108},
    ]
    run = load(make_nsys(tmp_path / "props.sqlite", tabs))
    assert [t.meta.device(0)["numSms"] for t in run] == [132, 108, 132]


@pytest.mark.parametrize("rank_by", [None, "process", "device"])
def test_no_analysis_fails_on_extreme_ids(tmp_path: Path, rank_by: str | None) -> None:
    """Every registered analysis runs (a result, or data the export lacks: never a bug)."""
    tabs = stream_tables()
    tabs["CUPTI_ACTIVITY_KIND_KERNEL"].append(kernel(700, 710, 11, MM, device=1 << 31, stream=NO_ID - 1))
    tabs["CUPTI_ACTIVITY_KIND_RUNTIME"].append(runtime(690, 695, 11, "cudaLaunchKernel_v7000"))
    p = make_nsys(tmp_path / "all.sqlite", tabs)
    sess = Session.of(load(p, rank_by=rank_by))
    load_all()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RanksightWarning)
        got = {name: sess.try_result(name) for name in sorted(REGISTRY)}
    failed = {n: r.reason for n, r in got.items() if isinstance(r, Missing) and r.kind == "failed"}
    assert failed == {}
    assert sess.failures == []
    assert not isinstance(got["temporal"], Missing)


def test_the_reported_crash_is_gone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`ranksight info` on an export with a context sync (stream 0xFFFFFFFF) ended with exit 3."""
    from ranksight.cli import main

    p = make_nsys(tmp_path / "ctx.sqlite", stream_tables())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RanksightWarning)
        assert main(["info", str(p), "--no-cache"]) == 0
    assert "nsys pid 100 GPU 0" in capsys.readouterr().out
    assert load(p)[0].events["ts_ns"].min() == EPOCH_NS + 10
