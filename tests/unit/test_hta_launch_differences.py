"""Where ranksight's launch/queue/counter analyses deliberately differ from HTA v0.6: each test
pins ranksight's behaviour (docs/hta-differences.md, "Launches, op kernels, ...")."""

from __future__ import annotations

import warnings

import polars as pl
import pytest
from tests.unit.test_launch_analyses import K, R, X

import ranksight
from ranksight.analyses import run_analysis

pd = pytest.importorskip("pandas")

from ranksight.hta import TraceAnalysis  # noqa: E402


def _ta(path, **kw):  # noqa: ANN001, ANN003, ANN202
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return TraceAnalysis(trace_dir=str(path), **kw)


def test_aten_op_tables_do_not_leak_across_ranks(data) -> None:  # noqa: ANN001
    """HTA's rank-1 table of hta/trace_filter holds 968 occurrences (487 of rank 0 + 481); the
    default mode keeps each rank's own, ``hta_compat=True`` pools them as HTA does."""
    ta = _ta(data("hta/trace_filter"))
    got = ta.get_aten_op_kernels_and_delay(ranks=[0, 1])
    alone = ta.get_aten_op_kernels_and_delay(ranks=[1])
    assert (
        got[1]["occurrence_count"].sum() == alone[1]["occurrence_count"].sum() < got[0]["occurrence_count"].sum() * 1.5
    )
    hta = _ta(data("hta/trace_filter"), hta_compat=True).get_aten_op_kernels_and_delay(ranks=[0, 1])
    assert hta[0]["occurrence_count"].sum() == 487
    assert hta[1]["occurrence_count"].sum() == 968


def test_blocked_time_on_every_stream(make_trace) -> None:  # noqa: ANN001
    """HTA keys its result by rank, so only one stream per rank survives."""
    p = make_trace(
        [
            R("cudaLaunchKernel", 0, 1, 1),
            R("cudaLaunchKernel", 1, 1, 2),
            K("a", 10, 1, 1, stream=7),
            K("b", 11, 1, 2, stream=7),
            R("cudaLaunchKernel", 2, 1, 3),
            R("cudaLaunchKernel", 3, 1, 4),
            K("c", 20, 1, 3, stream=9),
            K("d", 21, 1, 4, stream=9),
        ]
    )
    a = _ta(p)
    b = a.get_time_spent_blocked_on_full_queue(a.get_queue_length_time_series(), max_queue_length=2)
    assert b["stream"].tolist() == [7, 9]
    assert b["duration_at_max_queue_length"].tolist() == [9, 17]


def test_hip_launches_are_counted(data) -> None:  # noqa: ANN001
    """HTA's launch stats know no hip* API: 0 rows on hta/amd_trace (16 launches)."""
    p = data("hta/amd_trace")
    assert len(_ta(p).get_cuda_kernel_launch_stats(visualize=False)[0]) == 16
    assert len(_ta(p, hta_compat=True).get_cuda_kernel_launch_stats(visualize=False)[0]) == 0


def test_graph_launch_owns_its_kernels(data) -> None:  # noqa: ANN001
    """HTA ignores cudaGraphLaunch/hipGraphLaunch (facebookresearch/HolisticTraceAnalysis#290)."""
    run = ranksight.load(data("tracelens/inference/vllm_decode_full/graph_execution.json.gz"))
    t = run_analysis("launches", run)["launches"]
    g = t.filter(pl.col("api") == "hipGraphLaunch").row(0, named=True)
    assert g["gpu_count"] == 421
    q = run_analysis("queue", run)["series"]
    assert q.filter(pl.col("event") == "launch").height == t.height == 14  # a graph launch is one queue entry
    assert run_analysis("queue", run, hta_apis=True)["series"].filter(pl.col("event") == "launch").height < t.height


def test_sequences_on_ns_trace(data) -> None:  # noqa: ANN001
    """HTA raises ValueError (dur = −1 after its µs rounding) on every ns trace."""
    run = ranksight.load(data("hta/ns_resolution_trace"))
    p = run_analysis("sequences", run, op="aten::conv2d")["patterns"]
    assert p["count"].to_list()[:3] == [35, 15, 10]


def test_single_rank_stragglers_return_empty(data) -> None:  # noqa: ANN001
    """HTA raises TypeError (std over one rank); ranksight returns [] with a warning."""
    a = _ta(data("hta/trace_filter/sampled_rank-0.json.gz"))
    with pytest.warns(ranksight.errors.RanksightWarning):
        assert a.get_potential_stragglers() == []


def test_equal_time_launch_before_start(make_trace) -> None:  # noqa: ANN001
    """At equal timestamps a launch (+1) precedes a kernel start (−1); HTA's order there comes
    from an unstable quicksort."""
    run = ranksight.load(
        make_trace([R("cudaLaunchKernel", 0, 1, 1), K("a", 5, 1, 1), R("cudaLaunchKernel", 5, 1, 2), K("b", 9, 1, 2)])
    )
    assert run_analysis("queue", run)["series"]["queue_length"].to_list() == [1, 2, 1, 0]


def test_annotation_others_stats_are_over_events(make_trace) -> None:  # noqa: ANN001
    """With more names than num_kernels HTA's 'others' row has the stats of the per-name sums."""
    p = make_trace(
        [
            X("a", "user_annotation", 0, 10),
            X("b", "user_annotation", 20, 4),
            X("b", "user_annotation", 30, 2),
            X("c", "user_annotation", 40, 1),
        ]
    )
    df = _ta(p).get_gpu_user_annotation_breakdown(
        use_gpu_annotation=False, visualize=False, num_kernels=1, duration_ratio=1.0
    )
    oth = df[df["name"] == "others"].iloc[0]
    assert (oth["sum (us)"], oth["max (us)"], oth["min (us)"]) == (7.0, 4.0, 1.0)  # events 4, 2, 1
    hta = _ta(p, hta_compat=True).get_gpu_user_annotation_breakdown(
        use_gpu_annotation=False, visualize=False, num_kernels=1, duration_ratio=1.0
    )
    h = hta[hta["name"] == "others"].iloc[0]
    assert (h["sum (us)"], h["max (us)"], h["min (us)"]) == (7.0, 6.0, 1.0)  # sums of b (6) and c (1)


def test_counters_never_overwrite_an_input(tmp_path, make_trace) -> None:  # noqa: ANN001
    """HTA names the output with str.replace('.json', suffix + '.json'): an input without '.json'
    in its name would be overwritten. ranksight always writes <stem>_with_counters.json.gz."""
    p = make_trace([R("cudaLaunchKernel", 0, 1, 1), K("a", 5, 1, 1)], name="trace.gz", gz=True)
    before = p.read_bytes()
    _ta(p).generate_trace_with_counters()
    assert p.read_bytes() == before
    assert (tmp_path / "trace_with_counters.json.gz").exists()
