"""Hand-built traces with hand-worked answers for launches, queue, memcpy-bw, op-kernels,
sequences, late-start, steps, annotations and the counters writer."""

from __future__ import annotations

import gzip
import json

import polars as pl
import pytest

import ranksight
from ranksight.analyses import run_analysis


def X(name, cat, ts, dur, *, pid=1, tid=1, **args):  # noqa: ANN001, ANN003, N802
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def K(name, ts, dur, corr, *, stream=7, cat="kernel", **args):  # noqa: ANN001, ANN003, N802
    return X(name, cat, ts, dur, pid=0, tid=stream, stream=stream, correlation=corr, device=0, **args)


def R(name, ts, dur, corr, *, tid=1):  # noqa: ANN001, N802
    return X(name, "cuda_runtime", ts, dur, tid=tid, correlation=corr)


@pytest.fixture
def graph_trace(make_trace):  # noqa: ANN001, ANN201
    """A cudaGraphLaunch (10–14 µs) owning 3 kernels, and one ordinary launch (20–22) of a 1 µs
    kernel starting at 30."""
    return make_trace(
        [
            X("aten::graph_replay", "cpu_op", 5, 20),
            R("cudaGraphLaunch", 10, 4, 100),
            K("k1", 16, 5, 100),
            K("k2", 21, 3, 100),
            K("k3", 24, 2, 100),
            R("cudaLaunchKernel", 20, 2, 101),
            K("k4", 30, 1, 101),
        ]
    )


def test_graph_launch_is_one_launch_with_three_children(graph_trace) -> None:  # noqa: ANN001
    run = ranksight.load(graph_trace)
    t = run_analysis("launches", run)["launches"].sort("ts_ns")
    g = t.row(0, named=True)
    assert (g["api"], g["gpu_count"], g["kernel"]) == ("cudaGraphLaunch", 3, "k1")
    assert g["cpu_dur_us"] == 4.0 and g["gpu_dur_us"] == 10.0  # 5 + 3 + 2
    assert g["launch_delay_us"] == 2.0  # k1 at 16 − launch end 14: the first child only
    assert g["launch_delay_from_start_us"] == 6.0
    assert not g["short_kernel"]  # 10 µs of GPU work for a 4 µs call
    k = t.row(1, named=True)
    assert (k["gpu_count"], k["launch_delay_us"], k["short_kernel"]) == (1, 8.0, True)  # 1 µs kernel, 2 µs call
    hta = run_analysis("launches", run, hta_apis=True)["launches"]
    assert hta["api"].to_list() == ["cudaLaunchKernel"]  # HTA ignores graph launches


def test_findings_use_cutoffs(graph_trace) -> None:  # noqa: ANN001
    """The ordinary launch (20–22) waits 8 µs for k4 at 30: 4 µs queued behind the graph's k3
    (running until 26), 4 µs with the stream idle. Only the idle part can make an outlier; HTA's
    definition (``hta_apis``) counts the whole delay."""
    run = ranksight.load(graph_trace)
    t = run_analysis("launches", run)["launches"].sort("ts_ns")
    assert t.select("launch_delay_us", "queued_us", "idle_delay_us").rows() == [(2.0, 0.0, 2.0), (8.0, 4.0, 4.0)]
    res = run_analysis("launches", run, runtime_cutoff_us=3, launch_delay_cutoff_us=3)
    f = {r["finding"]: r["count"] for r in res["findings"].iter_rows(named=True)}
    assert f == {"launch_delay_outlier": 1, "runtime_outlier": 1, "short_kernel": 1}
    res = run_analysis("launches", run, runtime_cutoff_us=3, launch_delay_cutoff_us=5)
    f = {r["finding"]: r["count"] for r in res["findings"].iter_rows(named=True)}
    assert "launch_delay_outlier" not in f  # 8 µs of delay, but only 4 µs idle: queued is not late


def test_a_gpu_bound_step_has_no_launch_delay_outliers(make_trace) -> None:  # noqa: ANN001
    """The CPU launches 50 kernels of 200 µs in 50 µs: every kernel waits behind the previous one
    (delays up to ~10 ms), the stream is never idle: no outlier. HTA's rule marks 49."""
    ev = []
    for i in range(50):
        ev += [R("cudaLaunchKernel", i, 1, i + 1), K(f"k{i}", 10 + i * 200, 200, i + 1)]
    run = ranksight.load(make_trace(ev))
    t = run_analysis("launches", run)["launches"]
    assert t["idle_delay_us"].max() == 9.0 and t["launch_delay_outlier"].sum() == 0
    assert run_analysis("launches", run, hta_apis=True)["launches"]["launch_delay_outlier"].sum() == 49


def test_queue_length_with_overlapping_launches(make_trace) -> None:  # noqa: ANN001
    """Launches at 0, 2, 4 (stream 7) whose kernels start at 5, 9, 12: the queue is 1,2,3 then
    drops 2,1,0. A graph launch at 20 with 2 kernels at 22 and 25 is one queue entry: +1 at 20, −1
    when its first node starts at 22 (the queue holds the launch, not the graph's nodes)."""
    run = ranksight.load(
        make_trace(
            [
                R("cudaLaunchKernel", 0, 1, 1),
                R("cudaLaunchKernel", 2, 1, 2),
                R("cudaLaunchKernel", 4, 1, 3),
                K("a", 5, 4, 1),
                K("b", 9, 3, 2),
                K("c", 12, 2, 3),
                R("cudaGraphLaunch", 20, 1, 4),
                K("g1", 22, 3, 4),
                K("g2", 25, 1, 4),
            ]
        )
    )
    res = run_analysis("queue", run, max_queue_length=3)
    s = res["series"]
    assert s["queue_length"].to_list() == [1, 2, 3, 2, 1, 0, 1, 0]
    assert s["event"].to_list()[:3] == ["launch"] * 3
    summ = res["summary"].row(0, named=True)
    assert summ["count"] == 8 and summ["max"] == 3
    assert summ["mean"] == pytest.approx(10 / 8)
    # time-weighted over 0..22 µs: 1·2 + 2·2 + 3·1 + 2·4 + 1·3 + 0·8 + 1·2 = 22 → 22/22
    assert summ["tw_mean"] == pytest.approx(22 / 22)
    assert summ["span_us"] == 22.0
    b = res["blocked"].row(0, named=True)
    assert b["stream"] == 7 and b["duration_at_max_queue_length_us"] == 1.0  # queue 3 from 4 to 5
    assert b["relative_duration_at_max_queue_length"] == pytest.approx(1 / 25)  # first to last start: 0..25


def test_blocked_time_for_every_stream(make_trace) -> None:  # noqa: ANN001
    run = ranksight.load(
        make_trace(
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
    )
    blocked = run_analysis("queue", run, max_queue_length=2)["blocked"]
    assert blocked.select("stream", "duration_at_max_queue_length_us").rows() == [(7, 9.0), (9, 17.0)]


def test_memcpy_bandwidth_without_arg(make_trace) -> None:  # noqa: ANN001
    """2,000,000 bytes in 1 µs HtoD = 2000 GB/s computed; a DtoH copy with Kineto's arg keeps it."""
    run = ranksight.load(
        make_trace(
            [
                R("cudaMemcpyAsync", 0, 1, 1),
                K("Memcpy HtoD (Pageable -> Device)", 2, 1, 1, cat="gpu_memcpy", bytes=2_000_000),
                R("cudaMemcpyAsync", 3, 1, 2),
                K(
                    "Memcpy DtoH (Device -> Pageable)",
                    5,
                    2,
                    2,
                    cat="gpu_memcpy",
                    bytes=1000,
                    **{"memory bandwidth (GB/s)": 0.75},
                ),
                R("cudaMemsetAsync", 6, 1, 3),
                K("Memset (Device)", 8, 1, 3, cat="gpu_memset", bytes=4),
            ]
        )
    )
    res = run_analysis("memcpy-bw", run)
    cp = {r["copy_kind"]: r for r in res["copies"].iter_rows(named=True)}
    assert cp["Memcpy HtoD"]["bw_gbps"] == 2000.0 and cp["Memcpy HtoD"]["bw_source"] == "bytes/dur"
    assert cp["Memcpy DtoH"]["bw_gbps"] == 0.75 and cp["Memcpy DtoH"]["bw_source"] == "arg"
    assert cp["Memset"]["bw_gbps"] == 0.004
    summ = {r["copy_kind"]: r for r in res["summary"].iter_rows(named=True)}
    assert summ["Memcpy HtoD"]["tw_mean_gbps"] == 2000.0 and summ["Memcpy HtoD"]["bytes"] == 2_000_000
    assert summ["Memcpy DtoH"]["busy_us"] == 2.0
    assert res["series"].filter(pl.col("copy_kind") == "Memcpy HtoD")["bw_gbps"].to_list() == [2000.0, 0.0]
    hta = run_analysis("memcpy-bw", run, hta_compat=True)["copies"]
    # HTA: the arg only; a copy without it gets the parser default, 0.0 GB/s
    assert hta.filter(pl.col("copy_kind") == "Memcpy HtoD")["bw_gbps"].to_list() == [0.0]


def test_op_kernels_innermost_op_on_the_same_thread(make_trace) -> None:  # noqa: ANN001
    """aten::linear (0–20) ⊃ aten::addmm (2–18) launching two kernels; a launch on another
    thread inside the time of aten::linear is not attributed to it."""
    run = ranksight.load(
        make_trace(
            [
                X("aten::linear", "cpu_op", 0, 20),
                X("aten::addmm", "cpu_op", 2, 16),
                R("cudaLaunchKernel", 4, 2, 1),
                R("cudaLaunchKernel", 8, 2, 2),
                K("gemm", 10, 5, 1),
                K("bias", 15, 1, 2),
                R("cudaLaunchKernel", 5, 1, 3, tid=2),
                K("other", 30, 1, 3),
            ]
        )
    )
    t = run_analysis("op-kernels", run)["op_kernels"]
    assert t.rows() == [(0, "aten::addmm", "gemm -> bias", 1, 2.0, 6.0)]  # launch 4 − op 2; kernel 10 − launch 4


def test_sequences_group_by_exact_pattern(make_trace) -> None:  # noqa: ANN001
    """Two aten::linear ops launching (mm, add) and one launching (mm, add, relu)."""
    ev = []
    for i, ks in enumerate([("mm", "add"), ("mm", "add"), ("mm", "add", "relu")]):
        base = i * 100
        ev.append(X("aten::linear", "cpu_op", base, 50))
        for j, k in enumerate(ks):
            corr = i * 10 + j
            ev += [R("cudaLaunchKernel", base + 1 + 5 * j, 2, corr), K(k, base + 60 + 10 * j, 4, corr)]
    run = ranksight.load(make_trace(ev))
    res = run_analysis("sequences", run, op="aten::linear", min_pattern_len=2)
    assert res["patterns"].select("pattern", "count", "gpu_dur_us", "cpu_dur_us").rows() == [
        ("aten::linear|mm|add", 2, 16.0, 100.0),
        ("aten::linear|mm|add|relu", 1, 12.0, 50.0),
    ]
    assert run_analysis("sequences", run, op="aten::linear", min_pattern_len=3)["patterns"]["count"].to_list() == [1]


def test_late_start_names_the_late_rank_on_ncclDevKernel(make_trace, tmp_path) -> None:  # noqa: ANN001, N802
    """Three ranks, one step; rank 2 starts the all-reduce 30 µs after the others."""
    paths = {}
    for r, start in ((0, 50), (1, 52), (2, 80)):
        ev = [
            X("ProfilerStep#1", "user_annotation", 0, 100),
            R("cudaLaunchKernel", 10, 2, 1),
            K(
                "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                start,
                120 - start,
                1,
                stream=20,
            ),
        ]
        paths[r] = make_trace(ev, name=f"rank{r}.json", distributedInfo={"rank": r, "world_size": 3})
    run = ranksight.load(paths)
    res = run_analysis("late-start", run, candidates=1)
    assert res["stragglers"].filter(pl.col("straggler"))["rank"].to_list() == [2]
    compat = run_analysis("late-start", run, candidates=1, hta_names=True)
    assert compat["stragglers"].height == 0 and "ncclKernel_*" in compat.notes[0]
    single = run_analysis("late-start", run, ranks=[0])
    assert single["stragglers"].height == 0 and "one rank" in single.notes[0]


def test_annotations_stats(make_trace) -> None:  # noqa: ANN001
    run = ranksight.load(
        make_trace(
            [
                X("fwd", "user_annotation", 0, 10),
                X("fwd", "user_annotation", 20, 20),
                X("opt", "user_annotation", 50, 5),
                X("fwd", "gpu_user_annotation", 3, 12, pid=0, tid=7),
            ]
        )
    )
    t = run_analysis("annotations", run)["annotations"]
    fwd = t.filter((pl.col("side") == "cpu") & (pl.col("name") == "fwd")).row(0, named=True)
    assert (fwd["count"], fwd["sum_us"], fwd["mean_us"], fwd["min_us"], fwd["max_us"]) == (2, 30.0, 15.0, 10.0, 20.0)
    assert fwd["std_us"] == pytest.approx(7.0710678)
    assert t.filter(pl.col("side") == "gpu")["sum_us"].to_list() == [12.0]
    top1 = run_analysis("annotations", run, side="cpu", top=1)["annotations"]
    assert top1.select("name", "count", "sum_us").rows() == [("fwd", 2, 30.0), ("others", 1, 5.0)]


def test_steps_table(make_trace) -> None:  # noqa: ANN001
    run = ranksight.load(
        make_trace(
            [
                X("ProfilerStep#3", "user_annotation", 0, 50),
                R("cudaLaunchKernel", 10, 2, 1),
                K("k", 40, 30, 1),
                X("ProfilerStep#4", "user_annotation", 50, 40),
            ]
        )
    )
    t = run_analysis("steps", run)["steps"]
    assert t.select("step", "cpu_dur_us", "gpu_span_us", "kernels").rows() == [(3, 50.0, 30.0, 1), (4, 40.0, None, 0)]


def test_counters_cli_writes_tracks_and_refuses_overwrites(graph_trace, cli, tmp_path) -> None:  # noqa: ANN001
    out = tmp_path / "out"
    r = cli("counters", str(graph_trace), "-o", str(out))
    assert r.returncode == 0, r.stderr
    f = out / (graph_trace.name.removesuffix(".json") + "_with_counters.json.gz")
    doc = json.loads(gzip.decompress(f.read_bytes()))
    q = [e for e in doc["traceEvents"] if e.get("ph") == "C" and e["name"] == "Queue Length (stream 7)"]
    # graph launch at 10 (+1: one queue entry), its first node k1 at 16, launch 20 (+1), k4 30
    assert [(e["ts"], e["args"]["Queue Length"]) for e in q] == [(10, 1), (16, 0), (20, 1), (30, 0)]
    assert len(doc["traceEvents"]) == 7 + 4  # the input's events are all kept
    again = cli("counters", str(graph_trace), "-o", str(out))
    assert again.returncode == 2 and "exists" in again.stderr
    assert cli("counters", str(graph_trace), "-o", str(out), "--force").returncode == 0
    before = graph_trace.read_bytes()
    clash = cli("counters", str(graph_trace), "-o", str(graph_trace.parent))
    assert clash.returncode == 0 and graph_trace.read_bytes() == before  # a new name next to the input


def test_memcpy_per_key_exact_over_several_ranks_in_one_pass() -> None:
    """``copies, bytes, busy_us, tw_mean_gbps`` per (rank, stream, kind) computed for every key at
    once: overlapping copies count their union once, a copy of unknown bandwidth counts in the busy
    time but not in the time-weighted mean, a key where no copy has bytes has null bytes."""
    from ranksight.analyses.memcpy_bw import _COPY_SCHEMA, bw_per_stream

    rows = [
        # rank, row, name, kind, pid, stream, ts, dur, bytes, bw
        (0, 1, "Memcpy HtoD", "Memcpy HtoD", 0, 7, 0, 1_000, 1_000, 1.0),
        (0, 2, "Memcpy HtoD", "Memcpy HtoD", 0, 7, 500, 1_000, 4_000, 4.0),  # overlaps: union 1,500 ns
        (0, 3, "Memcpy HtoD", "Memcpy HtoD", 0, 7, 3_000, 500, None, None),  # unknown bw: busy only
        (0, 4, "Memset (Device)", "Memset", 0, 8, 0, 2_000, None, 2.0),
        (1, 1, "Memcpy HtoD", "Memcpy HtoD", 0, 7, 0, 2_000, 6_000, 3.0),
    ]
    cp = pl.DataFrame([(*r[:10], "arg" if r[9] is not None else None) for r in rows], schema=_COPY_SCHEMA, orient="row")
    got = bw_per_stream(cp)
    assert got.to_dicts() == [
        {"rank": 0, "stream": 7, "copy_kind": "Memcpy HtoD", "copies": 3, "bytes": 5_000, "busy_us": 2.0,
         "tw_mean_gbps": (1.0 * 1_000 + 4.0 * 1_000) / 1_500},
        {"rank": 0, "stream": 8, "copy_kind": "Memset", "copies": 1, "bytes": None, "busy_us": 2.0,
         "tw_mean_gbps": 2.0},
        {"rank": 1, "stream": 7, "copy_kind": "Memcpy HtoD", "copies": 1, "bytes": 6_000, "busy_us": 2.0,
         "tw_mean_gbps": 3.0},
    ]  # fmt: skip


def test_kernel_top_n_is_per_rank_and_type_over_a_rank_column() -> None:
    """kernel_stats_of over two ranks at once: HTA's top-N rule runs per (rank, kernel type), so
    two ranks of two kernels each keep every name with ``num_kernels=2`` (a rule over both ranks'
    four names would fold two into ``others``); statistics exact."""
    from ranksight.analyses.kernels import kernel_stats_of

    work = pl.DataFrame(
        {
            "rank": [0, 0, 0, 1, 1],
            "kernel_type": ["COMPUTATION"] * 5,
            "name": ["a", "a", "b", "c", "d"],
            "dur_ns": [1_000, 3_000, 500, 7_000, 2_000],
        }
    )
    got = kernel_stats_of(work, num_kernels=2).select("rank", "name", "count", "sum_us", "mean_us", "std_us")
    assert got.rows() == [
        (0, "a", 2, 4.0, 2.0, 2.0**0.5),
        (0, "b", 1, 0.5, 0.5, 0.0),
        (1, "c", 1, 7.0, 7.0, 0.0),
        (1, "d", 1, 2.0, 2.0, 0.0),
    ]
    three = kernel_stats_of(work.with_columns(pl.lit(0).alias("rank")), num_kernels=2)  # one rank, four names
    assert "others" in three["name"].to_list()
