"""Pins ranksight's behaviour where its breakdown analyses deliberately differ from HTA v0.6.

One test per entry of docs/hta-differences.md, "Breakdown analyses". HTA's own numbers come from
the oracles in tests/golden/hta (HTA v0.6.0 on the same traces).
"""

from __future__ import annotations

import warnings

import pandas as pd
import polars as pl
import pytest
from tests.conftest import DATA
from tests.golden.test_hta_breakdown import EXAMPLE, GOLDEN

import ranksight
from ranksight.analyses import run_analysis
from ranksight.hta import TraceAnalysis


def _ta(rel: str, **kw) -> TraceAnalysis:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return TraceAnalysis(trace_dir=rel if rel.startswith("/") else DATA / rel, **kw)


def _oracle(folder: str, name: str) -> pd.DataFrame:
    return pd.read_csv(GOLDEN / folder / name, index_col=0)


def test_ns_traces_keep_exact_durations():
    """HTA rounds ns traces to whole µs (each event loses up to 2 µs); ranksight keeps ns."""
    ours = _ta("hta/ns_resolution_trace").get_temporal_breakdown(visualize=False).iloc[0]
    hta = _oracle("ns_resolution_trace", "temporal_breakdown.csv").iloc[0]
    assert hta["kernel_time(us)"] == 384634.0 and hta["idle_time(us)"] == 10113.0
    assert ours["kernel_time(us)"] == pytest.approx(384634.463)
    assert ours["idle_time(us)"] == pytest.approx(6452.701)  # HTA's rounding invents 3.7 ms of idle
    assert ours["compute_time(us)"] == pytest.approx(374738.006)
    # hta_compat reproduces HTA
    compat = _ta("hta/ns_resolution_trace", hta_compat=True).get_temporal_breakdown(visualize=False).iloc[0]
    assert compat["idle_time(us)"] == 10113.0


def test_kernel_stats_are_per_kernel_after_others():
    """HTA replaces named kernels' stats by their total once "others" is formed; ranksight keeps
    per-kernel stats, equal to HTA's own unaggregated (``*_all``) table."""
    _, ours = _ta("hta/trace_filter").get_gpu_kernel_breakdown(visualize=False)
    hta = _oracle("trace_filter_sampled_ranks01", "gpu_kernel_breakdown_kernels.csv")
    hta_all = _oracle("trace_filter_sampled_ranks01", "gpu_kernel_breakdown_all_kernels.csv")
    name = "ampere_sgemm_128x64_nn"
    h = hta[(hta["name"] == name) & (hta["rank"] == 1)].iloc[0]
    assert (h["sum (us)"], h["max (us)"], h["min (us)"], h["mean (us)"], h["stddev"]) == (
        1956.0,
        1956.0,
        1956.0,
        1956.0,
        0.0,
    )
    o = ours[(ours["name"] == name) & (ours["rank"] == 1)].iloc[0]
    a = hta_all[(hta_all["name"] == name) & (hta_all["rank"] == 1)].iloc[0]
    for c in ("sum (us)", "max (us)", "min (us)", "mean (us)", "stddev"):
        assert o[c] == pytest.approx(a[c], rel=1e-9)
    assert o["max (us)"] < o["sum (us)"]
    # the others row: statistics over the kernels it holds
    run = ranksight.load(DATA / "hta/trace_filter")
    from ranksight.hta._base import filter_last_step

    k = run_analysis("kernels", filter_last_step(run))["kernels"]
    oth = k.filter((pl.col("name") == "others") & (pl.col("rank") == 0) & (pl.col("kernel_type") == "COMPUTATION")).row(
        0, named=True
    )
    h = hta[(hta["name"] == "others") & (hta["rank"] == 0) & (hta["kernel_type"] == "COMPUTATION")].iloc[0]
    assert oth["sum_us"] == h["sum (us)"] == 59998.0
    assert h["mean (us)"] == pytest.approx(59998.0 / 183)  # HTA: mean of 183 per-name totals
    assert oth["count"] > oth["names"] == 183
    assert oth["mean_us"] == pytest.approx(59998.0 / oth["count"])  # ranksight: mean kernel duration


def test_sync_events_are_not_gpu_busy():
    """HTA counts cuda_sync events (stream != -1) as GPU busy time; ranksight does not."""
    ours = _ta("hta/critical_path/alexnet").get_temporal_breakdown(visualize=False).iloc[0]
    hta = _oracle("critical_path_alexnet", "temporal_breakdown.csv").iloc[0]
    assert (hta["kernel_time(us)"], hta["idle_time(us)"], hta["non_compute_time(us)"]) == (
        12996011.0,
        12929684.0,
        55697.0,
    )
    assert (ours["kernel_time(us)"], ours["idle_time(us)"], ours["non_compute_time(us)"]) == (
        12920244.0,
        12854103.0,
        55511.0,
    )
    assert ours["compute_time(us)"] == hta["compute_time(us)"] == 10630.0


def test_amd_stream_0_is_a_gpu_stream(make_trace):
    """HTA coerces ROCm's stream "0x0" to −1 (not GPU); ranksight keeps stream 0 kernels."""
    ev = [
        {
            "ph": "X",
            "cat": "kernel",
            "name": "Cijk_gemm",
            "ts": 10,
            "dur": 5,
            "pid": 2,
            "tid": 0,
            "args": {"stream": "0x0", "device": 0},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "Cijk_gemm",
            "ts": 20,
            "dur": 5,
            "pid": 2,
            "tid": 0,
            "args": {"stream": "0x0", "device": 0},
        },
    ]
    run = ranksight.load(make_trace(ev))
    t = run_analysis("temporal", run)["temporal"].row(0, named=True)
    assert (t["kernel_time_us"], t["compute_us"], t["idle_us"]) == (15.0, 10.0, 5.0)
    idle = run_analysis("idle", run)["idle"]
    assert idle["stream"].unique().to_list() == [0]


def test_unlinked_kernels_are_never_host_wait():
    """HTA looks up the launch of a kernel without CPU partner at index 0 (the first event of the
    file), so on DLRM rank 1 it classes 63 of the 64 unlinked kernels of stream 7 as host_wait (rank 3 alike). ranksight: no
    launch, no host_wait."""
    df, _ = _ta(str(EXAMPLE)).get_idle_time_breakdown(ranks=[1], visualize=False)
    got = {r.idle_category: r.idle_time for r in df[df["stream"] == 7].itertuples()}
    assert (got["host_wait"], got["kernel_wait"]) == (17356.0, 208.0)
    hta = _oracle("dlrm_8ranks", "idle_time_breakdown.csv")
    h = {r.idle_category: r.idle_time for r in hta[(hta["rank"] == 1) & (hta["stream"] == 7)].itertuples()}
    assert (h["host_wait"], h["kernel_wait"]) == (17449.0, 115.0)
    assert got["host_wait"] + got["kernel_wait"] == h["host_wait"] + h["kernel_wait"]  # same gaps, other causes


def test_no_zero_length_overlap_labels():
    """HTA sorts overlap edges unstably, so equal timestamps can leave a label with sum 0 (e.g.
    ``COMPUTATION overlapping MEMORY, 0`` on df_index_resolver); ranksight sorts ends first."""
    hta = _oracle("df_index_resolver", "gpu_kernel_breakdown_kernel_type.csv")
    assert ("COMPUTATION overlapping MEMORY", 0) in list(zip(hta["kernel_type"], hta["sum"]))
    # the same situation by hand: a zero-length kernel where a memcpy starts
    import numpy as np

    from ranksight.views.gpu_work import segments

    assert segments({1: (np.array([10]), np.array([10])), 4: (np.array([10]), np.array([20]))}) == {4: 10}


def test_host_ops_with_a_stream_arg_are_not_gpu_work():
    """HTA treats every row with a stream arg as GPU work, including the Triton host op (cpu_op
    ``triton_poi_fused_add_cos_sin_0`` with ``stream: 0``): it reports 95 µs of kernel time for a
    1.76 µs kernel. ranksight counts the kernel only."""
    hta = _oracle("triton_example", "gpu_kernel_breakdown_all_kernels.csv").iloc[0]
    assert hta["sum (us)"] == 95.0
    _, ours = _ta("hta/triton_example").get_gpu_kernel_breakdown(visualize=False)
    assert ours["sum (us)"].tolist() == [pytest.approx(1.76)]


def test_custom_collectives_are_communication(make_trace):
    """HTA's name regex makes ``multimem_all_reduce_kernel`` COMPUTATION; ranksight classes it as
    communication (hta_compat keeps HTA's regex)."""
    ev = [
        {
            "ph": "X",
            "cat": "kernel",
            "name": "multimem_all_reduce_kernel",
            "ts": 0,
            "dur": 10,
            "pid": 0,
            "tid": 7,
            "args": {"stream": 7},
        },
        {"ph": "X", "cat": "kernel", "name": "gemm", "ts": 5, "dur": 10, "pid": 0, "tid": 8, "args": {"stream": 8}},
    ]
    run = ranksight.load(make_trace(ev))
    assert run_analysis("overlap", run)["overlap"]["comp_comm_overlap_pctg"].to_list() == [50.0]
    kt = run_analysis("kernel-types", run, hta_compat=True)["kernel_types"]
    assert kt["kernel_type"].to_list() == ["COMPUTATION"]


def test_cpu_only_traces_give_empty_results():
    """HTA raises IndexError (temporal) and ValueError (idle) on a rank without GPU work;
    ranksight returns empty tables (and a note in the native API)."""
    a = _ta("hta/cpu_only")
    assert a.get_temporal_breakdown(visualize=False).empty
    df, stats = a.get_idle_time_breakdown(visualize=False, show_idle_interval_stats=True)
    assert df.empty and stats is None
    assert a.get_comm_comp_overlap(visualize=False)["comp_comm_overlap_pctg"].isna().all()
    res = run_analysis("temporal", ranksight.load(DATA / "hta/cpu_only"))
    assert res.notes and "no GPU work" in res.notes[0]
