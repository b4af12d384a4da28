"""memory analysis on a hand-built trace (values worked out by hand) and the memory-timeline
reader against HTA's oracle."""

from __future__ import annotations

import polars as pl
import pytest

import ranksight
from ranksight.analyses import run_analysis
from ranksight.errors import MissingDataError
from ranksight.io.memory_timeline import CATEGORIES, by_category, read_memory_timeline

GIB = 1 << 30


def op(name, ts, dur, tid=1):
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": {}}


def mem(ts, addr, nbytes, alloc, reserved, dtype=1, did=0, tid=1):
    return {
        "ph": "i",
        "s": "t",
        "cat": "cpu_instant_event",
        "name": "[memory]",
        "pid": 1,
        "tid": tid,
        "ts": ts,
        "args": {
            "Addr": addr,
            "Bytes": nbytes,
            "Total Allocated": alloc,
            "Total Reserved": reserved,
            "Device Type": dtype,
            "Device Id": did,
        },
    }


def events():
    # step 1 [0, 100): aten::linear [10, 50) > aten::empty [12, 14) allocates 1 GiB at 13;
    # aten::add [60, 80) allocates 2 GiB at 65 (the peak: 3 GiB of 8 GiB reserved); the linear's
    # block is freed at 70, the add's at 90. A free at 5 has no allocation (allocated before).
    return [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "ProfilerStep#1",
            "pid": 1,
            "tid": 1,
            "ts": 0,
            "dur": 100,
            "args": {},
        },
        op("aten::linear", 10, 40),
        op("aten::empty", 12, 2),
        op("aten::add", 60, 20),
        mem(5, 999, -GIB, 0, 8 * GIB),
        mem(13, 100, GIB, GIB, 8 * GIB),
        mem(65, 200, 2 * GIB, 3 * GIB, 8 * GIB),
        mem(70, 100, -GIB, 2 * GIB, 8 * GIB),
        mem(90, 200, -2 * GIB, 0, 4 * GIB),
        mem(20, 7, 64, 64, 0, dtype=0, did=-1),  # a CPU allocation inside aten::linear, never freed
    ]


@pytest.fixture
def run(make_trace):
    return ranksight.load(
        make_trace(events(), deviceProperties=[{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 10 * GIB}])
    )


def test_peak_op_capacity_and_fragmentation(run):
    res = run_analysis("memory", run)
    p = {r["device"]: r for r in res["peaks"].iter_rows(named=True)}
    g = p["cuda:0"]
    assert g["peak_allocated_bytes"] == 3 * GIB and g["peak_op"] == "aten::add" and g["peak_step"] == 1
    assert g["peak_time_ms"] == pytest.approx(0.065)  # 65 µs after the first event (the step at 0)
    assert g["peak_reserved_bytes"] == 8 * GIB and g["capacity_bytes"] == 10 * GIB
    assert g["peak_pct_of_capacity"] == pytest.approx(30.0) and g["peak_reserved_pct_of_capacity"] == pytest.approx(
        80.0
    )
    assert g["fragmentation_at_peak"] == pytest.approx(1 - 3 / 8)
    assert g["max_unused_reserved_bytes"] == 8 * GIB  # at 5 µs: nothing allocated
    # time-weighted: 1 (5→13, 8 µs), 7/8 (13→65, 52), 5/8 (65→70, 5), 6/8 (70→90, 20)
    assert g["mean_fragmentation"] == pytest.approx((8 * 1 + 52 * 7 / 8 + 5 * 5 / 8 + 20 * 6 / 8) / 85)
    assert g["frees_without_alloc"] == 1 and g["allocs"] == 2 and g["frees"] == 3
    assert p["cpu"]["peak_allocated_bytes"] == 64 and p["cpu"]["fragmentation_at_peak"] is None


def test_allocation_table_pairs_by_address(run):
    a = run_analysis("memory", run, top=0)["allocations"].filter(pl.col("device") == "cuda:0").sort("alloc_ts_ns")
    assert a["bytes"].to_list() == [GIB, 2 * GIB]
    assert a["lifetime_us"].to_list() == [57.0, 25.0]
    # the allocation inside aten::empty is charged to its caller; alloc_op keeps the innermost op
    assert a["op"].to_list() == ["aten::linear", "aten::add"] and a["alloc_op"].to_list() == [
        "aten::empty",
        "aten::add",
    ]
    cpu = run_analysis("memory", run, top=0)["allocations"].filter(pl.col("device") == "cpu")
    assert cpu["free_ts_ns"].to_list() == [None] and cpu["op"].to_list() == ["aten::linear"]


def test_curve_and_downsampling(run):
    full = run_analysis("memory", run, points=0)["curve"].filter(pl.col("device") == "cuda:0")
    assert full["allocated_bytes"].to_list() == [0, GIB, 3 * GIB, 2 * GIB, 0]
    assert full["fragmentation"].to_list()[2] == pytest.approx(0.625)
    small = run_analysis("memory", run, points=2)["curve"].filter(pl.col("device") == "cuda:0")
    assert small.height == 2 and 3 * GIB in small["allocated_bytes"].to_list()  # the peak survives


def test_rocm_device_type_is_kept(make_trace):
    ev = [mem(1, 1, 100, 100, 1000, dtype=6, did=2), mem(2, 1, -100, 0, 1000, dtype=6, did=2)]
    res = run_analysis("memory", ranksight.load(make_trace(ev)))
    assert res["peaks"]["device"].to_list() == ["hip:2"]


def test_no_memory_events_is_one_line_error(make_trace):
    with pytest.raises(MissingDataError, match="profile_memory"):
        run_analysis("memory", ranksight.load(make_trace([op("aten::add", 0, 1)])))


def test_pre_1_10_records_use_a_running_sum(data):
    run = ranksight.load(
        data(
            "kineto/2021-07-08_c6e5fe20/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
        )
    )
    res = run_analysis("memory", run)
    g = res["peaks"].filter(pl.col("device") == "cuda:0").row(0, named=True)
    assert g["allocated_source"] == "running_sum" and g["capacity_bytes"] == 34084028416
    assert res["allocations"].height == 0 and any("running sum" in n for n in res.notes)


# ---- memory-timeline export ----------------------------------------------------------------------


def test_timeline_matches_hta_oracle(data):
    raw = read_memory_timeline(data("hta/memory_analysis/memory_timeline.raw.gz"))
    assert raw.height == 16845 and raw["t_ns"].null_count() == 645  # pre-existing tensors
    s = by_category(raw)
    oracle = pl.read_csv(data("../golden/memory/memory_timeline_by_category.csv"))
    assert s.height == 7721  # manifest rows
    assert s.head(oracle.height).select(list(CATEGORIES)).equals(oracle.select(list(CATEGORIES)).cast(pl.Int64))
    assert s["t_ns"].head(oracle.height).to_list() == oracle["time"].to_list()
    assert s.select(pl.sum_horizontal(list(CATEGORIES))).to_series().max() == 3082832104  # manifest peak
    # HTA's own test: sizes[744]
    assert list(s.row(744)[1:]) == [102440608, 102228128, 19395584, 0, 2618160128, 58417152, 41811968, 25494440]


def test_timeline_option_adds_categories(data, run):
    res = run_analysis("memory", run, timeline=str(data("hta/memory_analysis/memory_timeline.raw.gz")))
    t = res["timeline_categories"]
    assert t.filter(pl.col("category") == "Total")["peak_bytes"].item() == 3082832104
    assert (
        t.filter(pl.col("category") == "Activation")["at_total_peak_bytes"].item()
        <= t.filter(pl.col("category") == "Activation")["peak_bytes"].item()
    )


def test_timeline_rejects_a_trace(data):
    from ranksight.errors import TraceFormatError

    with pytest.raises(TraceFormatError):
        read_memory_timeline(data("hta/triton_example/triton_example.json.gz"))
