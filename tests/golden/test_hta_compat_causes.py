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
