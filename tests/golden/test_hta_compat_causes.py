"""One golden test per HTA behaviour that ``hta_compat=True`` reproduces since the cell count
(tests/golden/test_hta_cells.py), on the oracle copies in tests/golden/hta and traces in
tests/data (no ../shared needed), each with the default mode's correction pinned beside it:

- kernel statistics after "others" (HTA recomputes every row of a regrouped type from per-name
  totals);
- aten-op tables pooling every earlier rank;
- kernels without a launching CPU event read event 0's start as their launch (host_wait);
- copies without Kineto's bandwidth arg count 0 GB/s;
- ns traces rounded to µs by the facade's loader (launch statistics and annotation sums exact:
  tests/golden/test_hta_launch.py compares them without tolerance).
"""

from __future__ import annotations

import functools
import warnings
from pathlib import Path

import numpy as np
import pytest

pd = pytest.importorskip("pandas")

from tests.conftest import DATA  # noqa: E402

from ranksight.hta import TraceAnalysis  # noqa: E402

GOLDEN = Path(__file__).resolve().parent / "hta"
DLRM = Path(__file__).resolve().parents[2] / "src" / "ranksight" / "data" / "examples" / "dlrm"


@functools.cache
def analyzer(path: str, compat: bool) -> TraceAnalysis:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return TraceAnalysis(trace_dir=path, hta_compat=compat)


def test_kernel_stats_after_others_are_htas_in_compat() -> None:
    o = pd.read_csv(GOLDEN / "critical_path_alexnet" / "gpu_kernel_breakdown_kernels.csv", index_col=0)
    keys = ["rank", "kernel_type", "name"]
    o = o.sort_values(keys).reset_index(drop=True)
    path = str(DATA / "hta/critical_path/alexnet")
    _, mine = analyzer(path, True).get_gpu_kernel_breakdown(visualize=False)
    mine = mine.sort_values(keys).reset_index(drop=True)
    assert mine["name"].tolist() == o["name"].tolist()
    for c in ("sum (us)", "max (us)", "min (us)", "mean (us)", "stddev"):
        np.testing.assert_allclose(mine[c].to_numpy(float), o[c].to_numpy(float), rtol=1e-9, err_msg=c)
    # HTA's bug, reproduced: a named row shows max = min = mean = sum
    row = mine[mine["name"] == "ampere_sgemm_32x32_sliced1x4_tn"].iloc[0]
    assert row["max (us)"] == row["min (us)"] == row["sum (us)"] == 2621.0
    # default mode: per-event statistics (docs/hta-differences.md)
    _, native = analyzer(path, False).get_gpu_kernel_breakdown(visualize=False)
    row = native[native["name"] == "ampere_sgemm_32x32_sliced1x4_tn"].iloc[0]
    assert (row["max (us)"], row["min (us)"]) == (822.0, 97.0)


def test_aten_op_tables_pool_earlier_ranks_in_compat() -> None:
    o = pd.read_csv(GOLDEN / "dlrm_8ranks" / "aten_op_kernels_and_delay.csv", index_col=0)
    a = analyzer(str(DLRM), True)
    got = a.get_aten_op_kernels_and_delay(ranks=list(range(8)))
    mine = pd.concat([d.assign(rank=r) for r, d in got.items()])
    keys = ["rank", "aten_op_name", "kernel_sequence"]
    j = o.merge(mine, on=keys, how="outer", suffixes=("_o", ""), indicator=True)
    assert (j["_merge"] == "both").all()
    assert (j["occurrence_count"] == j["occurrence_count_o"]).all()
    for c in ("avg_aten_op_launch_delay", "avg_runtime_delay"):
        np.testing.assert_allclose(j[c], j[f"{c}_o"], rtol=0, atol=1e-9, err_msg=c)
    # rank k's counts only grow with k in compat; the default mode keeps each rank's own rows
    totals = [got[r]["occurrence_count"].sum() for r in range(8)]
    assert totals == sorted(totals) and totals[7] > 7 * totals[0] > 0
    own = analyzer(str(DLRM), False).get_aten_op_kernels_and_delay(ranks=list(range(8)))
    assert own[7]["occurrence_count"].sum() < totals[7] / 4


def _stream7(folder: str, compat: bool) -> dict[tuple[int, str], float]:
    df, _ = analyzer(folder, compat).get_idle_time_breakdown(ranks=[1, 3], visualize=False)
    df = df[df["stream"] == 7]
    return {(int(r.rank), r.idle_category): float(r.idle_time) for r in df.itertuples()}


def test_unlinked_kernels_host_wait_in_compat_only() -> None:
    o = pd.read_csv(GOLDEN / "dlrm_8ranks" / "idle_time_breakdown.csv", index_col=0)
    o = o[o["rank"].isin([1, 3]) & (o["stream"] == 7)]
    expect = {(int(r.rank), r.idle_category): float(r.idle_time) for r in o.itertuples()}
    assert expect[(1, "host_wait")] == 17449.0
    assert _stream7(str(DLRM), True) == expect
    native = _stream7(str(DLRM), False)
    assert (native[(1, "host_wait")], native[(1, "kernel_wait")]) == (17356.0, 208.0)


def test_copies_without_bandwidth_arg_are_0_gbps_in_compat() -> None:
    o = pd.read_csv(GOLDEN / "amd_trace" / "memory_bw_time_series.csv", index_col=0)
    assert len(o) and (o["memory_bw_gbps"] == 0.0).all()
    path = str(DATA / "hta/amd_trace")
    got = analyzer(path, True).get_memory_bw_time_series(ranks=[0])[0]
    assert got["memory_bw_gbps"].tolist() == o["memory_bw_gbps"].tolist()
    assert got["ts"].tolist() == o["ts"].tolist()
    # default mode: unknown, not 0 (these ROCm copies carry neither the arg nor a byte count)
    native = analyzer(path, False).get_memory_bw_time_series(ranks=[0])[0]
    assert native["memory_bw_gbps"].isna().all()


def test_ns_trace_launch_stats_are_htas_in_compat() -> None:
    o = pd.read_csv(GOLDEN / "ns_resolution_trace" / "cuda_kernel_launch_stats.csv", index_col=0)
    path = str(DATA / "hta/ns_resolution_trace")
    got = analyzer(path, True).get_cuda_kernel_launch_stats(ranks=[0], visualize=False)[0].head(len(o))
    assert got["correlation"].tolist() == o["correlation"].tolist()
    for c in ("cpu_duration", "gpu_duration", "launch_delay"):
        assert got[c].to_numpy(float).tolist() == o[c].to_numpy(float).tolist(), c
    # default mode keeps exact ns (fractional µs)
    native = analyzer(path, False).get_cuda_kernel_launch_stats(ranks=[0], visualize=False)[0]
    assert (native["cpu_duration"] % 1 != 0).any()


def test_triton_host_op_with_stream_is_a_kernel_in_compat_only() -> None:
    """HTA's GPU rows are ``stream != -1``: Inductor's Triton launch ``cpu_op`` carries a ``stream``
    arg, so HTA counts its 94 µs (rounded) as kernel time beside the 1.76 µs kernel."""
    g = GOLDEN / "triton_example"
    o = pd.read_csv(g / "temporal_breakdown.csv", index_col=0)
    path = str(DATA / "hta/triton_example")
    mine = analyzer(path, True).get_temporal_breakdown(visualize=False)
    for c in ("kernel_time(us)", "compute_time(us)", "idle_time(us)"):
        assert mine[c].tolist() == o[c].tolist(), c
    assert float(mine["kernel_time(us)"].iloc[0]) == 94.0
    ko = pd.read_csv(g / "gpu_kernel_breakdown_kernels.csv", index_col=0)
    _, k = analyzer(path, True).get_gpu_kernel_breakdown(visualize=False)
    row = k[k["name"] == "triton_poi_fused_add_cos_sin_0"].iloc[0]
    orow = ko[ko["name"] == "triton_poi_fused_add_cos_sin_0"].iloc[0]
    assert (row["sum (us)"], row["max (us)"], row["mean (us)"]) == (orow["sum (us)"], orow["max (us)"], 47.5)
    # default mode: the host op is CPU time; only the kernel counts
    native = analyzer(path, False).get_temporal_breakdown(visualize=False)
    assert float(native["kernel_time(us)"].iloc[0]) < 5


def _aten_table(folder: str, path: str, ranks: list[int], oracles: Path = GOLDEN) -> tuple[pd.DataFrame, pd.DataFrame]:
    o = pd.read_csv(oracles / folder / "aten_op_kernels_and_delay.csv", index_col=0)
    got = analyzer(path, True).get_aten_op_kernels_and_delay(ranks=ranks)
    mine = pd.concat([d.assign(rank=r) for r, d in got.items()])
    keys = ["rank", "aten_op_name", "kernel_sequence"]
    j = o.merge(mine, on=keys, how="outer", suffixes=("_o", ""), indicator=True)
    return j, o


def test_deepest_op_ties_go_to_the_first_in_file_order_in_compat() -> None:
    """HTA's deepest op is ``sort_values("ts", ascending=False).iloc[0]`` over ops of any thread;
    among ops starting in the same µs pandas keeps file order, so ``aten::matmul`` (the outer op)
    wins over ``aten::mm``. Every row and value of the oracle, exactly."""
    j, o = _aten_table("timeline_analysis_sampled_rank0", str(DATA / "hta/trace_filter/sampled_rank-0.json.gz"), [0])
    assert (j["_merge"] == "both").all(), j[j["_merge"] != "both"][["aten_op_name", "_merge"]].head()
    assert (j["occurrence_count"] == j["occurrence_count_o"]).all()
    for c in ("avg_aten_op_launch_delay", "avg_runtime_delay"):
        assert (j[c] == j[f"{c}_o"]).all(), c
    assert {"aten::matmul", "aten::mm"} <= set(j["aten_op_name"])


def test_mtia_launch_wrapped_by_an_op_of_another_thread_in_compat() -> None:
    """HTA matches a launch to aten ops of every thread: the MTIA ``runFunction`` on a runtime
    thread is wrapped by ``aten::split_with_sizes`` of the main thread (ranksight: same thread only,
    so the default mode's table is empty)."""
    from tests.conftest import SHARED

    path = SHARED / "traces/hta/mtia_inference_trace"
    if not path.exists():
        pytest.skip(f"SKIPPED LOUDLY: {path} is absent")
    j, _ = _aten_table("mtia_inference_trace", str(path), [0], SHARED / "oracles" / "hta-0.6")
    assert (j["_merge"] == "both").all()
    row = j.iloc[0]
    assert (row["aten_op_name"], row["kernel_sequence"], row["occurrence_count"]) == (
        "aten::split_with_sizes",
        "merge",
        1,
    )
    assert (row["avg_aten_op_launch_delay"], row["avg_runtime_delay"]) == (18.0, 873.0)
    assert len(analyzer(str(path), False).get_aten_op_kernels_and_delay(ranks=[0])[0]) == 0


def test_op_delay_means_are_float_us_rounded_by_numpy_in_compat() -> None:
    """HTA averages µs delays and rounds with numpy: 548.612 (the exact ns mean, 548.6125, rounds
    to 548.613 in the default mode)."""
    from tests.conftest import SHARED

    path = SHARED / "traces/hta/df_index_resolver"
    if not path.exists():
        pytest.skip(f"SKIPPED LOUDLY: {path} is absent")
    j, _ = _aten_table("df_index_resolver", str(path), [1])
    assert (j["_merge"] == "both").all()
    for c in ("occurrence_count", "avg_aten_op_launch_delay", "avg_runtime_delay"):
        assert (j[c] == j[f"{c}_o"]).all(), c
    assert 548.612 in set(j["avg_runtime_delay"])


def test_queue_points_at_equal_us_in_htas_sort_order_in_compat() -> None:
    """HTA argsorts launches-then-kernels (each in file order) by time with numpy's quicksort, so
    at equal µs a kernel start can come before a launch; compat reproduces the series and its
    summary (mean, std); the default mode puts launches first."""
    from tests.golden.hta_cells import argsort_as_oracles, tie_order_diffs

    o = pd.read_csv(GOLDEN / "ns_resolution_trace" / "queue_length_time_series.csv")
    path = str(DATA / "hta/ns_resolution_trace")
    got = analyzer(path, True).get_queue_length_time_series(ranks=[0])[0].reset_index()
    s = pd.read_csv(GOLDEN / "dlrm_8ranks" / "queue_length_summary.csv", header=[0, 1], index_col=[0, 1])
    dlrm = analyzer(str(DLRM), True)
    mine = dlrm.get_queue_length_summary(ranks=list(range(8)))
    if argsort_as_oracles():  # the CPU the goldens were recorded on: HTA's very order
        assert got["index"].tolist()[: len(o)] == o["index"].tolist()
        assert got["queue_length"].tolist()[: len(o)] == o["queue_length"].tolist()
        np.testing.assert_allclose(mine.to_numpy(float), s.to_numpy(float), rtol=1e-12, equal_nan=True)
    else:  # numpy orders ties otherwise here (as HTA would here): the same points and states, and
        # the summary is describe() of that series (docs/hta-differences.md)
        cells, diffs = tie_order_diffs(o, got.assign(rank=0), ["rank", "stream"], "queue_length", truncated=True)
        assert cells > 1000 and not diffs, diffs[:5]
        own = dlrm.get_queue_length_summary_from_time_series(dlrm.get_queue_length_time_series(ranks=list(range(8))))
        np.testing.assert_allclose(mine.to_numpy(float), own.to_numpy(float), rtol=1e-12, equal_nan=True)
        assert list(mine.index) == list(s.index)
        np.testing.assert_array_equal(mine.xs("count", axis=1, level=1), s.xs("count", axis=1, level=1))
    native = analyzer(path, False).get_queue_length_time_series(ranks=[0])[0].reset_index()
    assert native["index"].tolist()[: len(o)] != o["index"].tolist()


def test_zero_length_overlap_label_in_compat_only() -> None:
    """HTA re-sorts its kernel-type edges with numpy's quicksort once per type and keeps the pieces
    of zero length, so a start sorted before an end at the same µs leaves a label with sum 0
    (``COMPUTATION overlapping MEMORY, 0`` on df_index_resolver); the default mode sorts ends first
    and has no such row."""
    from tests.conftest import SHARED

    path = SHARED / "traces/hta/df_index_resolver"
    if not path.exists():
        pytest.skip(f"SKIPPED LOUDLY: {path} is absent")
    o = pd.read_csv(GOLDEN / "df_index_resolver" / "gpu_kernel_breakdown_kernel_type.csv", index_col=0)
    mine, _ = analyzer(str(path), True).get_gpu_kernel_breakdown(visualize=False)
    got = dict(zip(mine["kernel_type"], mine["sum"], strict=True))
    assert got == dict(zip(o["kernel_type"], o["sum"], strict=True))
    assert got["COMPUTATION overlapping MEMORY"] == 0
    native, _ = analyzer(str(path), False).get_gpu_kernel_breakdown(visualize=False)
    assert "COMPUTATION overlapping MEMORY" not in set(native["kernel_type"])


def test_hta_segments_keep_zero_length_pieces_in_the_order_numpy_sorts_ties() -> None:
    """Hand-built: COMPUTATION [10, 20), MEMORY [0, 10). HTA's edges after MEMORY are appended are
    [10, 20, 0, 10] (+C, −C, +M, −M), sorted by numpy's quicksort; whichever way it breaks the tie
    at 10, every piece with a running type is counted, zero length included."""
    from ranksight.views.gpu_work import hta_segments, segments

    groups = [(1, (np.array([10]), np.array([20]))), (2, (np.array([], np.int64), np.array([], np.int64)))]
    groups.append((4, (np.array([0]), np.array([10]))))
    p = np.array([10, 20, 0, 10])
    d = np.array([1, -1, 4, -4])
    first = np.argsort(np.array([10, 20]), kind="quicksort")  # after COMPUTATION
    p, d = p[np.r_[first, 2, 3]], d[np.r_[first, 2, 3]]
    o = np.argsort(p, kind="quicksort")
    running = np.cumsum(d[o])[:-1]
    expect: dict[int, int] = {}
    for v, n in zip(running, np.diff(p[o]), strict=True):
        if v > 0:
            expect[int(v)] = expect.get(int(v), 0) + int(n)
    assert hta_segments(groups) == expect
    assert expect[1] == 10 and expect[4] == 10  # and 5 -> 0 when +C sorts before -M at 10
    assert segments({1: groups[0][1], 4: groups[2][1]}) == {1: 10, 4: 10}  # default: no zero-length label
