"""Breakdown analyses on a hand-built trace whose answers are worked out by hand.

The trace (µs; one rank; ProfilerStep#1 = [0, 100), ProfilerStep#2 = [100, 200) on the CPU):

    stream 7   K1 gemm    [10, 30)   launched at 5    (step 1)
               K2 gemm    [35, 45)   launched at 8    (step 1)
               K3 relu    [120,150)  launched at 110  (step 2)
               K4 Memcpy  [190,200)  launched at 160  (step 2)
    stream 20  C1 nccl    [20, 60)   launched at 15   (step 1)
               C2 nccl    [140,160)  no launch, no correlation
               Z  zero_k  [170,170)  zero length, launched at 165 (step 2)
    stream 30  K0 long_k  [90, 110)  launched at 50   (step 1; runs across the step boundary)
    sync       Stream Sync on stream 7 [150, 180) (cuda_sync; not GPU work for ranksight)

Merged GPU work: [10,60) [90,110) [120,160) [170,170) [190,200): busy 120, span 10→200 = 190.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

import ranksight
from ranksight.analyses import run_analysis
from ranksight.views.gpu_work import covered_in_windows, hta_kernel_type, merge, segments

CPU = {"pid": 100, "tid": 100}


def _cpu(name, ts, dur, cat="cuda_runtime", **args):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, **CPU, "args": args}


def _gpu(name, ts, dur, stream, corr=None, cat="kernel"):
    args = {"device": 0, "stream": stream}
    if corr is not None:
        args["correlation"] = corr
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 0, "tid": stream, "args": args}


def events() -> list[dict]:
    return [
        _cpu("ProfilerStep#1", 0, 100, cat="user_annotation"),
        _cpu("ProfilerStep#2", 100, 100, cat="user_annotation"),
        _cpu("cudaLaunchKernel", 5, 2, correlation=1),
        _cpu("cudaLaunchKernel", 8, 2, correlation=2),
        _cpu("cudaLaunchKernel", 15, 2, correlation=5),
        _cpu("cudaLaunchKernel", 50, 2, correlation=8),
        _cpu("cudaLaunchKernel", 110, 2, correlation=3),
        _cpu("cudaStreamSynchronize", 150, 30, correlation=7),
        _cpu("cudaMemcpyAsync", 160, 2, correlation=4),
        _cpu("cudaLaunchKernel", 165, 2, correlation=6),
        _gpu("gemm", 10, 20, 7, 1),
        _gpu("gemm", 35, 10, 7, 2),
        _gpu("relu", 120, 30, 7, 3),
        _gpu("Memcpy HtoD (Pageable -> Device)", 190, 10, 7, 4, cat="gpu_memcpy"),
        _gpu("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 20, 40, 20, 5),
        _gpu("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 140, 20, 20, None),
        _gpu("zero_k", 170, 0, 20, 6),
        _gpu("long_k", 90, 20, 30, 8),
        _gpu("Stream Sync", 150, 30, 7, 7, cat="cuda_sync"),
    ]


@pytest.fixture
def hand(make_trace):
    return make_trace(events(), distributedInfo={"rank": 0, "world_size": 1})


@pytest.fixture
def run(hand):
    return ranksight.load(hand)


def _row(df: pl.DataFrame) -> dict:
    assert df.height == 1
    return df.row(0, named=True)


# ---- temporal -------------------------------------------------------------------------------


def test_temporal_by_hand(run):
    r = _row(run_analysis("temporal", run)["temporal"])
    assert r["kernel_time_us"] == 190.0
    assert (r["idle_us"], r["compute_us"], r["non_compute_us"]) == (70.0, 80.0, 40.0)
    assert (r["idle_pct"], r["compute_pct"], r["non_compute_pct"]) == (36.84, 42.11, 21.05)


def test_temporal_hta_compat_counts_sync_as_busy(run):
    # HTA: Stream Sync [150,180) joins [120,160) and [170,170) into [120,180): busy 140
    r = _row(run_analysis("temporal", run, hta_compat=True)["temporal"])
    assert (r["kernel_time_us"], r["idle_us"], r["compute_us"], r["non_compute_us"]) == (190.0, 50.0, 80.0, 60.0)


def test_temporal_per_step_kernel_spanning_two_steps(run):
    # K0 [90,110) was launched in step 1 and ends after step 2's CPU start: window 1 = [0,110),
    # window 2 = [110,200)
    st = run_analysis("temporal", run, per_step=True)["per_step"]
    assert st["step"].to_list() == [1, 2]
    assert st["step_time_us"].to_list() == [110.0, 90.0]
    assert st["idle_us"].to_list() == [40.0, 40.0]
    assert st["compute_us"].to_list() == [50.0, 30.0]
    assert st["non_compute_us"].to_list() == [20.0, 20.0]


def test_temporal_cpu_only_rank_gives_nulls_and_a_note(make_trace):
    run = ranksight.load(make_trace([_cpu("aten::add", 0, 10, cat="cpu_op")]))
    res = run_analysis("temporal", run)
    assert res["temporal"]["kernel_time_us"].to_list() == [None]
    assert any("no GPU work" in n for n in res.notes)


# ---- idle -----------------------------------------------------------------------------------


def _idle(df: pl.DataFrame) -> dict:
    return {(r["stream"], r["idle_category"]): (r["idle_us"], r["idle_ratio"]) for r in df.iter_rows(named=True)}


def test_idle_by_hand(run):
    got = _idle(run_analysis("idle", run)["idle"])
    assert got[(7, "host_wait")] == (115.0, 0.96)  # K3: launch 110 > 45; K4: launch 160 > 150
    assert got[(7, "kernel_wait")] == (5.0, 0.04)  # K2: gap 5 < 30, launched at 8 < 30
    assert got[(7, "other")] == (0.0, 0.0)  # first kernel of the stream only
    assert got[(20, "other")] == (80.0, 0.89)  # C2 has no launch: never host_wait
    assert got[(20, "host_wait")] == (10.0, 0.11)  # zero-length Z launched at 165 > 160
    assert (20, "kernel_wait") not in got
    assert got[(30, "other")][0] == 0.0 and math.isnan(got[(30, "other")][1])  # one kernel: no idle


def test_idle_threshold_option(run):
    got = _idle(run_analysis("idle", run, kernel_wait_us=4.0)["idle"])
    assert got[(7, "other")][0] == 5.0  # K2's 5 µs gap is no longer below the threshold


def test_idle_stats_and_per_step(run):
    res = run_analysis("idle", run, stats=True, per_step=True, streams=[7])
    st = res["intervals"].filter(pl.col("idle_category") == "host_wait").row(0, named=True)
    assert (st["count"], st["mean_us"], st["min_us"], st["max_us"], st["p50_us"]) == (2, 57.5, 40.0, 75.0, 57.5)
    assert st["std_us"] == round(float(np.std([75, 40], ddof=1)), 2)
    ps = {(r["step"], r["idle_category"]): r["idle_us"] for r in res["per_step"].iter_rows(named=True)}
    assert ps == {(1, "kernel_wait"): 5.0, (1, "other"): 0.0, (2, "host_wait"): 115.0}


def test_idle_overlap_on_one_stream_is_clipped_not_negative(make_trace):
    ev = [_gpu("a", 0, 100, 7), _gpu("b", 10, 20, 7), _gpu("c", 50, 10, 7), _gpu("d", 130, 10, 7)]
    run = ranksight.load(make_trace(ev))
    got = _idle(run_analysis("idle", run)["idle"])
    assert got[(7, "kernel_wait")] == (0.0, 0.0)  # b, c inside a: gap 0
    assert got[(7, "other")] == (30.0, 1.0)  # d after a's end (100), not after c's (60)
    # HTA: previous event's end → gaps -80 (c after b ends at 30: 20) and 70
    got = _idle(run_analysis("idle", run, hta_compat=True)["idle"])
    assert got[(7, "kernel_wait")][0] == -90.0 + 20.0
    assert got[(7, "other")][0] == 70.0


# ---- kernel types, kernels, spread, overlap ---------------------------------------------------


def test_kernel_types_by_hand(run):
    kt = run_analysis("kernel-types", run)["kernel_types"]
    assert kt.rows() == [
        ("COMPUTATION", 50.0, 41.7),
        ("COMMUNICATION", 30.0, 25.0),
        ("COMPUTATION overlapping COMMUNICATION", 30.0, 25.0),
        ("MEMORY", 10.0, 8.3),
    ]
    assert kt["sum_us"].sum() == 120.0  # the union of GPU work


def test_kernel_types_without_memory(run):
    kt = run_analysis("kernel-types", run, include_memory=False)["kernel_types"]
    assert "MEMORY" not in kt["kernel_type"].to_list()


def test_kernels_stats_and_honest_others(run):
    k = run_analysis("kernels", run, num_kernels=1)["kernels"].filter(pl.col("kernel_type") == "COMPUTATION")
    rows = {r["name"]: r for r in k.iter_rows(named=True)}
    assert set(rows) == {"gemm", "others"}  # gemm and relu tie at 30 µs; name breaks the tie
    g = rows["gemm"]
    assert (g["count"], g["sum_us"], g["mean_us"], g["min_us"], g["max_us"]) == (2, 30.0, 15.0, 10.0, 20.0)
    assert g["std_us"] == pytest.approx(math.sqrt(50.0))
    o = rows["others"]  # relu 30, long_k 20, zero_k 0
    assert (o["count"], o["sum_us"], o["min_us"], o["max_us"], o["names"]) == (3, 50.0, 0.0, 30.0, 3)
    assert o["mean_us"] == pytest.approx(50 / 3)
    assert o["std_us"] == pytest.approx(float(np.std([30, 20, 0], ddof=1)))


def test_kernels_launch_view_is_kernel_config(run):
    """``kernels --view launch`` is the kernel-config analysis, read through the same session."""
    from ranksight.analyses import Session

    s = Session(run)
    launch = s.result("kernels", view="launch")
    assert launch is s.result("kernel-config")
    assert launch.main.height > 0 and s.calls["kernel-config"] == 1


def test_kernel_spread(run):
    ks = run_analysis("kernel-spread", run, top=2)["kernel_spread"]
    assert ks["name"].to_list() == ["ncclDevKernel_AllReduce_Sum_f32_RING_LL", "gemm"]
    r = ks.row(0, named=True)
    assert (r["count"], r["mean_us"], r["min_us"], r["max_us"], r["spread_pct"]) == (2, 30.0, 20.0, 40.0, 0.0)


def test_overlap_by_hand(run):
    r = _row(run_analysis("overlap", run)["overlap"])
    assert (r["compute_us"], r["comm_us"], r["union_us"], r["overlap_us"], r["exposed_comm_us"]) == (
        80.0,
        60.0,
        110.0,
        30.0,
        30.0,
    )
    assert r["comp_comm_overlap_pctg"] == 50.0
    assert r["hidden_share_of_shorter"] == 0.5  # 1 − (110 − 80) / (80 + 60 − 80): 30 of the shorter 60 µs


def test_overlap_without_comm_is_nan(make_trace):
    run = ranksight.load(make_trace([_gpu("gemm", 0, 10, 7)]))
    r = _row(run_analysis("overlap", run)["overlap"])
    assert math.isnan(r["comp_comm_overlap_pctg"]) and math.isnan(r["hidden_share_of_shorter"])


# ---- HTA facade -----------------------------------------------------------------------------


def test_facade_drops_last_step_by_default(hand):
    from ranksight.hta import TraceAnalysis

    a = TraceAnalysis(trace_files={0: str(hand)})
    # kept: K1, K2, C1, K0 (launched before step 2 starts at 100)
    t = a.get_temporal_breakdown(visualize=False).iloc[0]
    assert (t["kernel_time(us)"], t["idle_time(us)"], t["compute_time(us)"], t["non_compute_time(us)"]) == (
        100.0,
        30.0,
        50.0,
        20.0,
    )
    assert a._hta_run()[0].steps["step"].to_list() == [1]
    assert a.run[0].steps["step"].to_list() == [1, 2]  # the native run keeps every step
    b = TraceAnalysis(trace_files={0: str(hand)}, include_last_profiler_step=True)
    t = b.get_temporal_breakdown(visualize=False).iloc[0]
    # every correlated GPU event; C2 (no correlation) is still dropped, as HTA does
    assert (t["kernel_time(us)"], t["idle_time(us)"], t["compute_time(us)"], t["non_compute_time(us)"]) == (
        190.0,
        80.0,
        80.0,
        30.0,
    )


def test_facade_shapes(hand):
    from ranksight.hta import TraceAnalysis

    a = TraceAnalysis(trace_files={0: str(hand)}, include_last_profiler_step=True)
    assert list(a.get_temporal_breakdown(visualize=False).columns) == [
        "rank",
        "idle_time(us)",
        "compute_time(us)",
        "non_compute_time(us)",
        "kernel_time(us)",
        "idle_time_pctg",
        "compute_time_pctg",
        "non_compute_time_pctg",
    ]
    df, stats = a.get_idle_time_breakdown(visualize=False)
    assert list(df.columns) == ["rank", "stream", "idle_category", "idle_time", "idle_time_ratio"] and stats is None
    df, stats = a.get_idle_time_breakdown(
        streams=[7], visualize=False, show_idle_interval_stats=True, consecutive_kernel_delay=4
    )
    assert set(df["stream"]) == {7} and stats.index.name == "idle_category"
    assert list(stats.columns) == ["rank", "stream", "count", "mean", "std", "min", "25%", "50%", "75%", "max"]
    kt, kd = a.get_gpu_kernel_breakdown(visualize=False)
    assert list(kt.columns) == ["kernel_type", "sum", "percentage"]
    assert list(kd.columns) == [
        "name",
        "sum (us)",
        "max (us)",
        "min (us)",
        "stddev",
        "mean (us)",
        "kernel_type",
        "rank",
    ]
    assert list(a.get_comm_comp_overlap(visualize=False).columns) == ["rank", "comp_comm_overlap_pctg"]
    # visualize=True without plotly installed does nothing else
    assert len(a.get_temporal_breakdown()) == 1


# ---- helpers --------------------------------------------------------------------------------


def test_merge_hta_keeps_negative_groups():
    s, e = merge(np.array([5, 0]), np.array([4, 3]), hta_compat=True)
    assert s.tolist() == [0, 5] and e.tolist() == [3, 4]  # [5, 4) stays a −1 group as in HTA
    s, e = merge(np.array([5, 0]), np.array([4, 3]))
    assert (e - s).tolist() == [3, 0]


def test_segments_ignore_zero_length_ties():
    # a zero-length COMPUTATION interval exactly where MEMORY starts: no "overlapping" label
    seg = segments({1: (np.array([10]), np.array([10])), 4: (np.array([10]), np.array([20]))})
    assert seg == {4: 10}


def test_covered_in_windows():
    ms, me = np.array([0, 10, 30]), np.array([5, 20, 40])
    assert covered_in_windows(ms, me, np.array([0, 3, 15, 50]), np.array([100, 12, 35, 60])).tolist() == [25, 4, 10, 0]


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("ncclDevKernel_AllReduce", "COMMUNICATION"),
        ("hipKernel_anything", "COMMUNICATION"),
        ("Memcpy DtoH (Device -> Pageable)", "MEMORY"),
        ("Stream Sync", "OTHER"),
        ("Stream Wait Event", "OTHER"),
        ("void gemm_kernel<float>", "COMPUTATION"),
        ("multimem_all_reduce_kernel", "COMPUTATION"),
    ],
)
def test_hta_kernel_type(name, kind):
    assert hta_kernel_type(name) == kind
