"""Nsight Systems SQLite reader: hand-built exports with exact expected values, and the two real
exports of tests/data/nsys_ai (counts checked against SQL on the same file)."""

from __future__ import annotations

import sqlite3
import warnings
from pathlib import Path

import polars as pl
import pytest
from tests.unit.nsys_make import EPOCH_NS, gpid, kernel, make_nsys, nvtx, runtime, sql

import ranksight
from ranksight.errors import RanksightWarning, TraceFormatError, UsageError
from ranksight.io.kineto import decode
from ranksight.io.nsys import SIDE_SCHEMAS, decode_nsys, rank_units
from ranksight.model.cache import CacheConfig

NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
MM = "void gemm_kernel<float>(float const*, float*)"
H100 = "nsys_ai/tests/fixtures/h100_2gpu_1s.sqlite"
MOCK = "nsys_ai/tests/fixtures/mock.sqlite"


def basic_tables() -> dict:
    return {
        "NVTX_EVENTS": [
            nvtx(1000, 5000, "ProfilerStep#3"),
            nvtx(5000, 9000, "ProfilerStep#4"),
            nvtx(1100, 2000, "forward"),
            nvtx(1200, 1900, "aten::mm, seq = 7, op_id = 12, sizes = [[64, 128], [128, 256]]"),
            nvtx(8000, None, "never ends"),
            nvtx(3000, None, "a mark", event_type=34),
        ],
        "CUPTI_ACTIVITY_KIND_RUNTIME": [
            runtime(1300, 1400, 1, "cudaLaunchKernel_v7000"),
            runtime(1500, 1550, 2, "cudaMemcpyAsync_v3020"),
            runtime(5100, 5150, 3, "cudaMemsetAsync_v3020"),
            runtime(5300, 5400, 4, "cudaLaunchKernel_v7000"),
            runtime(7600, 7700, 5, "cudaStreamSynchronize_v3020"),
        ],
        "CUPTI_ACTIVITY_KIND_KERNEL": [kernel(2000, 2600, 1, MM), kernel(5500, 7500, 4, NCCL)],
        "CUPTI_ACTIVITY_KIND_MEMCPY": [
            {
                "start": 2700,
                "end": 2800,
                "deviceId": 0,
                "contextId": 1,
                "streamId": 7,
                "correlationId": 2,
                "globalPid": gpid(100),
                "bytes": 1000,
                "copyKind": 1,
                "srcKind": 1,
                "dstKind": 2,
            }
        ],
        "CUPTI_ACTIVITY_KIND_MEMSET": [
            {
                "start": 5200,
                "end": 5250,
                "deviceId": 0,
                "contextId": 1,
                "streamId": 7,
                "correlationId": 3,
                "globalPid": gpid(100),
                "value": 0,
                "bytes": 500,
                "memKind": 2,
            }
        ],
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": [
            {
                "start": 7600,
                "end": 7700,
                "deviceId": 0,
                "contextId": 1,
                "streamId": 7,
                "correlationId": 5,
                "globalPid": gpid(100),
                "syncType": 3,
                "eventId": 0xFFFFFFFF,
                "eventSyncId": 0xFFFFFFFF,
            }
        ],
        "TARGET_INFO_GPU": [
            {
                "vmId": 1 << 48,
                "id": 0,
                "name": "NVIDIA H100 80GB HBM3",
                "totalMemory": 85_000_000_000,
                "smCount": 132,
                "computeMajor": 9,
                "computeMinor": 0,
                "maxWarpsPerSm": 64,
                "threadsPerWarp": 32,
            }
        ],
        "PROCESSES": [{"globalPid": gpid(100), "pid": 100, "name": "python3"}],
    }


@pytest.fixture
def basic(tmp_path: Path) -> Path:
    return make_nsys(tmp_path / "basic.sqlite", basic_tables())


def load(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RanksightWarning)
        return ranksight.load(path, cache=False, **kw)


def test_same_columns_and_dtypes_as_kineto(basic: Path, data) -> None:
    k = decode(data("hta/critical_path/cuda_event_sync/event_sync_trace.json.gz"))
    n = decode_nsys(basic)
    assert n.events.schema == k.events.schema
    for name, t in k.tables.items():
        assert n.tables[name].schema == t.schema, name
        assert dict(SIDE_SCHEMAS[name]) == dict(t.schema), name


def test_basic_export_maps_every_table(basic: Path) -> None:
    t = load(basic)[0]
    ev = t.events
    kinds = dict(ev.group_by("kind").len().iter_rows())
    assert kinds == {
        "user_annotation": 3,
        "cpu_op": 1,
        "cuda_runtime": 5,
        "kernel": 2,
        "memcpy": 1,
        "memset": 1,
        "sync": 1,
    }
    names = set(ev["name"].cast(pl.String))
    assert {
        "cudaLaunchKernel",
        "cudaMemcpyAsync",
        "cudaStreamSynchronize",
        "Memcpy HtoD (Pinned -> Device)",
        "Memset (Device)",
        "Stream Sync",
        "aten::mm",
        "forward",
        MM,
        NCCL,
    } <= names
    assert not any(n.endswith(("_v7000", "_v3020")) for n in names)
    k1 = ev.filter(pl.col("name") == MM).row(0, named=True)
    assert (k1["ts_ns"], k1["dur_ns"], k1["end_ns"]) == (EPOCH_NS + 2000, 600, EPOCH_NS + 2600)
    assert (k1["pid"], k1["tid"], k1["device"], k1["stream"], k1["correlation"]) == (0, 7, 0, 7, 1)
    launch = ev.filter(pl.col("name") == "cudaLaunchKernel").sort("ts_ns").row(0, named=True)
    assert k1["launch_row"] == launch["row"]
    assert (launch["pid"], launch["tid"], launch["ts_ns"]) == (100, 100, EPOCH_NS + 1300)
    nccl = ev.filter(pl.col("name") == NCCL).row(0, named=True)
    assert (nccl["kernel_class"], k1["kernel_class"]) == ("COMMUNICATION", "COMPUTE")
    # steps from the ProfilerStep ranges; GPU work through its launch
    st = t.steps
    assert st.select("step", "start_ns", "end_ns").rows() == [
        (3, EPOCH_NS + 1000, EPOCH_NS + 5000),
        (4, EPOCH_NS + 5000, EPOCH_NS + 9000),
    ]
    assert (k1["step"], nccl["step"]) == (3, 4)
    assert t.meta.base_time_ns == EPOCH_NS
    assert any("1 NVTX ranges never ended" in w for w in t.warnings)


def test_side_tables_exact(basic: Path) -> None:
    t = load(basic)[0]
    k = t.with_args(t.kind("kernel").filter(pl.col("name") == MM), "kernel").row(0, named=True)
    assert (
        k["grid_x"],
        k["grid_y"],
        k["grid_z"],
        k["block_x"],
        k["registers_per_thread"],
        k["shared_memory_bytes"],
    ) == (4, 2, 1, 128, 32, 3072)
    assert k["blocks_per_sm"] == pytest.approx(8 / 132)
    assert k["warps_per_sm"] == pytest.approx(8 / 132 * 128 / 32)
    assert k["graph_id"] is None and k["context"] == 1
    tr = t.with_args(t.kind("memcpy", "memset"), "transfer").sort("ts_ns")
    assert tr.select("bytes", "mem_bw_gbps").rows() == [(1000, 10.0), (500, 10.0)]  # bytes / ns = GB/s
    s = t.with_args(t.kind("sync"), "sync").row(0, named=True)
    assert (s["sync_kind"], s["wait_on_event_id"], s["stream"], s["device"]) == ("Stream Sync", None, 7, 0)
    op = t.with_args(t.kind("cpu_op"), "op").row(0, named=True)
    assert (op["name"], op["input_dims"], op["sequence_number"]) == ("aten::mm", "[[64, 128], [128, 256]]", 7)
    assert t.meta.gpu_model == "NVIDIA H100 80GB HBM3" and t.meta.gpu_vendor == "NVIDIA"
    d = t.meta.device(0)
    assert (d["numSms"], d["maxThreadsPerMultiprocessor"], d["totalGlobalMem"]) == (132, 2048, 85_000_000_000)


def test_columns_selected_by_name(tmp_path: Path, basic: Path) -> None:
    rev = make_nsys(tmp_path / "rev.sqlite", basic_tables(), reverse_columns=True)
    a, b = decode_nsys(basic), decode_nsys(rev)
    assert a.events.equals(b.events)
    for name in a.tables:
        assert a.tables[name].equals(b.tables[name]), name


def test_enum_tables_absent_use_cuptis_values(tmp_path: Path, basic: Path) -> None:
    bare = make_nsys(tmp_path / "bare.sqlite", basic_tables(), enums=False)
    assert (
        decode_nsys(bare).events["name"].cast(pl.String).to_list()
        == decode_nsys(basic).events["name"].cast(pl.String).to_list()
    )


def test_raw_events_are_the_sqlite_rows(basic: Path) -> None:
    t = load(basic)[0]
    rows = [int(t.kind("cuda_runtime").sort("ts_ns")["row"][0]), int(t.kind("kernel").sort("ts_ns")["row"][0])]
    raw = t.raw_events(rows)
    assert [r["source_table"] for r in raw] == ["CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL"]
    assert raw[1]["args"]["gridX"] == 4 and raw[1]["args"]["start"] == 2000
    assert raw[0]["args"]["correlationId"] == 1


def test_missing_tables_are_warnings(tmp_path: Path) -> None:
    p = make_nsys(tmp_path / "k.sqlite", {"CUPTI_ACTIVITY_KIND_KERNEL": [kernel(10, 20, 1, MM)]}, session_start=None)
    t = load(p)[0]
    assert t.events.height == 1 and t.events["ts_ns"][0] == 10  # no session start: relative ns
    w = " | ".join(t.warnings)
    assert (
        "tables absent from the export (data not collected): CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET, "
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, CUPTI_ACTIVITY_KIND_RUNTIME, NVTX_EVENTS" in w
    )
    assert "no TARGET_INFO_SESSION_START_TIME" in w and "no TARGET_INFO_GPU" in w
    assert t.meta.base_time_ns is None


def multi_tables() -> dict:
    """pid 100 drives GPUs 0 and 1 (one thread), pid 200 GPU 2. A sync on pid 100 says device 0 but
    its context 2 is GPU 1's."""
    rt = [runtime(10 * c, 10 * c + 5, c, "cudaLaunchKernel_v7000") for c in (1, 2, 3, 4)]
    rt.append(runtime(100, 110, 99, "cudaDeviceSynchronize_v3020"))
    rt.append(runtime(10, 15, 1, "cudaLaunchKernel_v7000", pid=200, tid=201))
    return {
        "CUPTI_ACTIVITY_KIND_RUNTIME": rt,
        "CUPTI_ACTIVITY_KIND_KERNEL": [
            kernel(20, 30, 1, MM, device=0),
            kernel(40, 50, 3, MM, device=0),
            kernel(30, 45, 2, MM, device=1, context=2, stream=13),
            kernel(50, 60, 4, NCCL, device=1, context=2, stream=13),
            kernel(20, 25, 1, NCCL, pid=200, device=2, context=3),
        ],
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": [
            {
                "start": 100,
                "end": 110,
                "deviceId": 0,
                "contextId": 2,
                "streamId": 13,
                "correlationId": 99,
                "globalPid": gpid(100),
                "syncType": 4,
                "eventId": 0xFFFFFFFF,
                "eventSyncId": 0xFFFFFFFF,
            }
        ],
        "NVTX_EVENTS": [nvtx(0, 200, "train")],
    }


def test_ranks_per_process_and_gpu(tmp_path: Path) -> None:
    p = make_nsys(tmp_path / "multi.sqlite", multi_tables())
    run = load(p)
    assert run.ranks == [0, 1, 2]
    assert [t.meta.rank_source for t in run] == ["nsys pid 100 GPU 0", "nsys pid 100 GPU 1", "nsys pid 200 GPU 2"]
    assert [t.meta.devices_used for t in run] == [[0], [1], [2]]
    r0, r1 = run[0], run[1]
    # launches of the other GPU's kernels are in that GPU's rank; unlinked calls and NVTX in both
    assert sorted(r0.kind("cuda_runtime")["correlation"].to_list()) == [1, 3, 99]
    assert sorted(r1.kind("cuda_runtime")["correlation"].to_list()) == [2, 4, 99]
    assert r0.kind("kernel")["launch_row"].null_count() == 0 and r1.kind("kernel")["launch_row"].null_count() == 0
    assert r1.kind("sync")["device"].to_list() == [1] and r0.kind("sync").height == 0  # context 2 is GPU 1
    assert r1.kind("sync")["name"].to_list() == ["Context Sync"]
    assert r0.kind("user_annotation").height == 1 == r1.kind("user_annotation").height
    assert any("drives several GPUs" in w for w in r0.warnings)
    assert not any("drives several GPUs" in w for w in run[2].warnings)


def test_rank_by_process_and_device(tmp_path: Path) -> None:
    p = make_nsys(tmp_path / "multi.sqlite", multi_tables())
    by_p = load(p, rank_by="process")
    assert [t.meta.devices_used for t in by_p] == [[0, 1], [2]]
    assert by_p[0].kind("kernel").height == 4 and by_p[0].kind("cuda_runtime").height == 5
    by_d = load(p, rank_by="device")
    assert [t.meta.devices_used for t in by_d] == [[0], [1], [2]]
    with pytest.raises(UsageError, match="--rank-by"):
        rank_units(p, rank_by="node")


def test_device_rank_keeps_processes_apart(tmp_path: Path) -> None:
    """Two processes on GPU 0 use the same correlation id: each kernel links to its own launch."""
    p = make_nsys(
        tmp_path / "shared.sqlite",
        {
            "CUPTI_ACTIVITY_KIND_RUNTIME": [
                runtime(10, 15, 1, "cudaLaunchKernel_v7000"),
                runtime(12, 16, 1, "cudaLaunchKernel_v7000", pid=200, tid=201),
            ],
            "CUPTI_ACTIVITY_KIND_KERNEL": [kernel(20, 30, 1, MM), kernel(30, 40, 1, NCCL, pid=200, context=2)],
        },
    )
    t = load(p, rank_by="device")[0]
    ev = t.events
    k = t.kind("kernel").sort("ts_ns")
    launch_pids = ev["pid"].gather(k["launch_row"].cast(pl.Int64)).to_list()
    assert launch_pids == [100, 200]


def test_step_range(tmp_path: Path) -> None:
    def steps(names: list[str], rng: str) -> list[int]:
        tabs = {
            "NVTX_EVENTS": [nvtx(100 * i, 100 * i + 90, n) for i, n in enumerate(names)],
            "CUPTI_ACTIVITY_KIND_KERNEL": [kernel(5, 6, 1, MM)],
        }
        p = make_nsys(tmp_path / f"s{len(list(tmp_path.iterdir()))}.sqlite", tabs)
        return load(p, step_range=rng)[0].steps["step"].to_list()

    assert steps(["train_step", "train_step", "other", "train_step"], "train_step") == [0, 1, 2]
    assert steps(["iter 5", "iter 6", "iteration 9"], "iter") == [5, 6]
    assert steps(["iter#5", "iter#5"], "iter") == [0, 1]  # repeated numbers: numbered in time order
    p = make_nsys(
        tmp_path / "none.sqlite",
        {"NVTX_EVENTS": [nvtx(0, 10, "x")], "CUPTI_ACTIVITY_KIND_KERNEL": [kernel(5, 6, 1, MM)]},
    )
    t = load(p, step_range="train_step")[0]
    assert t.steps.height == 0 and any("no NVTX range named 'train_step'" in w for w in t.warnings)


def test_not_an_export(tmp_path: Path) -> None:
    p = tmp_path / "other.sqlite"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE foo (a INTEGER)")
    con.commit()
    con.close()
    with pytest.raises(TraceFormatError, match="not an Nsight Systems export"):
        load(p)
    (tmp_path / "garbage.sqlite").write_bytes(b"not sqlite at all")
    make_nsys(tmp_path / "good.sqlite", {"CUPTI_ACTIVITY_KIND_KERNEL": [kernel(5, 6, 1, MM)]})
    with pytest.warns(RanksightWarning) as rec:
        run = ranksight.load(tmp_path, cache=False)
    assert any("skipped 2 file" in str(w.message) for w in rec)
    assert run.ranks == [0]


def test_mapping_and_file_name_rank(tmp_path: Path) -> None:
    multi = make_nsys(tmp_path / "multi.sqlite", multi_tables())
    with pytest.raises(UsageError, match="holds 3 ranks"):
        load({0: multi})
    one = make_nsys(tmp_path / "rank3.sqlite", {"CUPTI_ACTIVITY_KIND_KERNEL": [kernel(5, 6, 1, MM)]})
    assert load({5: one}).ranks == [5]
    run = load(one)
    assert run.ranks == [3] and run[3].meta.rank_source == "file name"


def test_cache_keeps_ranks_of_one_file_apart(tmp_path: Path) -> None:
    p = make_nsys(tmp_path / "multi.sqlite", multi_tables())
    cfg = CacheConfig(tmp_path / "cache", min_bytes=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RanksightWarning)
        first = ranksight.load(p, cache=cfg)
        second = ranksight.load(p, cache=cfg)
    assert len(list((tmp_path / "cache").iterdir())) == 3
    for r in first.ranks:
        assert second[r].events.equals(first[r].events)
        assert second[r].meta.devices_used == [r]
    row = int(second[1].kind("kernel")["row"][0])
    assert second[1].raw_events([row])[0]["args"]["deviceId"] == 1


def test_mixed_with_kineto(tmp_path: Path, make_trace) -> None:
    k = make_trace(
        [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 1, "args": {"device": 0}}],
        name="rank0.json",
        distributedInfo={"rank": 0},
    )
    d = tmp_path / "mixed"
    d.mkdir()
    Path(k).rename(d / "rank0.json")
    make_nsys(d / "node.sqlite", {"CUPTI_ACTIVITY_KIND_KERNEL": [kernel(5, 6, 1, MM)]})
    run = load(d)
    assert run.ranks == [0, 1]
    assert run[1].meta.rank_source == "nsys pid 100 GPU 0" and run[0].meta.rank_source == "distributedInfo"


# ---- the real exports -------------------------------------------------------------------------


def test_h100_export_counts_match_sql(data) -> None:
    p = data(H100)
    run = load(p)
    assert run.ranks == [0, 1]
    units = rank_units(p)
    for t, u in zip(run, units):
        (g,), (d,) = u.global_pids, u.devices
        for table, kind in (
            ("CUPTI_ACTIVITY_KIND_KERNEL", "kernel"),
            ("CUPTI_ACTIVITY_KIND_MEMCPY", "memcpy"),
            ("CUPTI_ACTIVITY_KIND_MEMSET", "memset"),
        ):
            ((n, total),) = sql(
                p, f"SELECT count(*), sum(end - start) FROM {table} WHERE globalPid = ? AND deviceId = ?", g, d
            )
            ev = t.kind(kind)
            assert (ev.height, ev["dur_ns"].sum()) == (n, total), kind
        ((n_rt,),) = sql(p, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE globalTid >> 24 = ?", g >> 24)
        ((n_nvtx,),) = sql(p, "SELECT count(*) FROM NVTX_EVENTS WHERE globalTid >> 24 = ? AND eventType = 59", g >> 24)
        assert t.kind("cuda_runtime").height == n_rt
        assert t.kind("cpu_op", "user_annotation").height == n_nvtx
        ((epoch,),) = sql(p, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")
        ((first,),) = sql(
            p, "SELECT min(start) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE globalPid = ? AND deviceId = ?", g, d
        )
        assert t.kind("kernel")["ts_ns"].min() == epoch + first
        ((linked,),) = sql(
            p,
            "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k WHERE globalPid = ? AND deviceId = ? AND EXISTS "
            "(SELECT 1 FROM CUPTI_ACTIVITY_KIND_RUNTIME r WHERE r.correlationId = k.correlationId AND r.globalTid >> "
            "24 = ?)",
            g,
            d,
            g >> 24,
        )
        assert t.kind("kernel")["launch_row"].is_not_null().sum() == linked
    assert run[0].meta.host_name == "modal"
    assert any("no TARGET_INFO_GPU" in w for w in run[0].warnings)


def test_mock_export_device_properties(data) -> None:
    t = load(data(MOCK))[0]
    assert t.meta.gpu_model == "NVIDIA GeForce RTX 3080"
    assert t.meta.device(0)["numSms"] == 68
    k = t.with_args(t.kind("kernel"), "kernel")
    assert k["blocks_per_sm"].to_list() == pytest.approx([1 / 68, 1 / 68])
    assert any("NVTX_EVENTS" in w for w in t.warnings)
    assert t.kind("memcpy")["name"].cast(pl.String).to_list() == ["Memcpy DtoH (Device -> Pinned)"]
    assert t.kind("sync")["name"].cast(pl.String).to_list() == ["Stream Wait Event"]
