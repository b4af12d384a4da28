"""``idle-causes`` on hand-built traces with hand-worked attributions (times in µs), and the
corpus property: the causes sum to ``temporal``'s idle time, per rank (GPU span) and per step."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from tests.conftest import DATA

import ranksight
from ranksight.analyses import Session, run_analysis
from ranksight.views.idle_gaps import CAUSES, cut


def X(name, cat, ts, dur, *, pid=1, tid=1, **args):  # noqa: ANN001, ANN003, N802
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def K(name, ts, dur, corr, *, kind="kernel"):  # noqa: ANN001, N802
    args = {"stream": 7, "device": 0} | ({"correlation": corr} if corr is not None else {})
    return {"ph": "X", "cat": kind, "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur, "args": args}


def R(name, ts, dur, corr, *, tid=1):  # noqa: ANN001, N802
    return X(name, "cuda_runtime", ts, dur, tid=tid, correlation=corr)


FETCH = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def one_rank_events() -> list[dict]:
    """One ProfilerStep [0, 1000) on thread 1; six GPU works; every cause but collective_wait.

    gap 0 [0,100)     before K1 (launched at 90 in aten::mm): step start, DataLoader fetch [10,60)
    gap 1 [200,300)   before K2 (launched at 270): a Python frame [200,260)
    gap 2 [400,420)   before K3, launched at 300: launch latency only
    gap 3 [600,800)   before K4 (launched at 780): .item() sync [560,610) drained the queue at 600
    gap 4 [850,900)   before K5: no launch recorded
    gap 5 [950,1200)  before K6, launched at 1150 by thread 2 that has no other span
    """
    return [
        X("ProfilerStep#1", "user_annotation", 0, 1000),
        X(FETCH, "user_annotation", 10, 50),
        X("aten::mm", "cpu_op", 85, 15),
        R("cudaLaunchKernel", 90, 5, 1),
        K("k1", 100, 100, 1),
        X("train.py(42): preprocess", "python_function", 200, 60),
        R("cudaLaunchKernel", 270, 5, 2),
        K("k2", 300, 100, 2),
        R("cudaLaunchKernel", 300, 5, 3),
        K("k3", 420, 180, 3),
        X("aten::item", "cpu_op", 550, 150),
        X("aten::_local_scalar_dense", "cpu_op", 555, 145),
        R("cudaStreamSynchronize", 560, 50, 90),
        X("aten::add", "cpu_op", 770, 20),
        R("cudaLaunchKernel", 780, 5, 4),
        K("k4", 800, 50, 4),
        K("k5", 900, 50, None),
        R("cudaLaunchKernel", 1150, 5, 6, tid=2),
        K("k6", 1200, 100, 6),
    ]


def _ns(df: pl.DataFrame) -> pl.Series:
    return ((df["end_ns"] - df["start_ns"]) // 1000).alias("us")


@pytest.fixture
def one_rank(make_trace):  # noqa: ANN001, ANN201
    return ranksight.load(make_trace(one_rank_events()))


def test_every_cause_on_one_rank(one_rank) -> None:  # noqa: ANN001
    res = run_analysis("idle-causes", one_rank)
    g = res["gaps"]
    t0 = int(g["start_ns"].min())  # the step starts at 0 µs: gap 0 starts there
    rows = (
        g.with_columns(((pl.col("start_ns") - t0) // 1000).alias("s"), ((pl.col("end_ns") - t0) // 1000).alias("e"))
        .sort("s")
        .select("gap", "step", "in_span", "s", "e", "cause", "call_site")
        .rows()
    )
    assert rows == [
        (0, 1, False, 0, 10, "cpu_op", "ProfilerStep#*"),
        (0, 1, False, 10, 60, "dataloader", FETCH),
        (0, 1, False, 60, 85, "cpu_op", "ProfilerStep#*"),
        (0, 1, False, 85, 90, "cpu_op", "aten::mm"),
        (0, 1, False, 90, 100, "launch_latency", "cudaLaunchKernel"),
        (1, 1, True, 200, 260, "cpu_op", "train.py(42): preprocess"),
        (1, 1, True, 260, 270, "cpu_op", "ProfilerStep#*"),
        (1, 1, True, 270, 300, "launch_latency", "cudaLaunchKernel"),
        (2, 1, True, 400, 420, "launch_latency", "cudaLaunchKernel"),
        # in the sync call, then the 40 µs it was blocked before the GPU went idle (the drained queue)
        (3, 1, True, 600, 610, "sync", "aten::_local_scalar_dense"),
        (3, 1, True, 610, 650, "sync", "aten::_local_scalar_dense"),
        (3, 1, True, 650, 700, "cpu_op", "aten::_local_scalar_dense"),
        (3, 1, True, 700, 770, "cpu_op", "ProfilerStep#*"),
        (3, 1, True, 770, 780, "cpu_op", "aten::add"),
        (3, 1, True, 780, 800, "launch_latency", "cudaLaunchKernel"),
        (4, 1, True, 850, 900, "unexplained", None),
        (5, 1, True, 950, 1000, "unexplained", None),
        (5, None, True, 1000, 1150, "unexplained", None),
        (5, None, True, 1150, 1200, "launch_latency", "cudaLaunchKernel"),
    ]
    detail = dict(zip(g["start_ns"] - t0, g["detail"], strict=True))
    assert detail[10_000] == "tid 1 fetching a batch"
    assert detail[600_000] == "tid 1 blocked in cudaStreamSynchronize"
    assert (
        detail[610_000] == "queue drained by cudaStreamSynchronize: tid 1 was blocked 40.0 µs before the GPU went idle"
    )
    assert detail[400_000] == "k3 launched by cudaLaunchKernel on tid 1 120.0 µs before it started"
    assert detail[850_000] == "no launch recorded for the next GPU work k5"
    assert detail[950_000] == "tid 2: no span recorded on the launching thread"
    assert detail[200_000] == "tid 1 in a python_function"
    # per rank: inside the GPU span [100, 1300) only; the causes sum to temporal's idle (620 µs)
    by_rank = {c: v for c, v in res["by_rank"].select("cause", "idle_us").iter_rows()}
    assert by_rank == {"unexplained": 250.0, "cpu_op": 200.0, "launch_latency": 120.0, "sync": 50.0}
    assert sum(by_rank.values()) == run_analysis("temporal", one_rank)["temporal"]["idle_us"].item() == 620.0
    assert res["by_rank"]["share_pct"].to_list() == [40.32, 32.26, 19.35, 8.06]
    # per step: the step window [0, 1000) also holds gap 0 (before the GPU span)
    by_step = {c: v for c, v in res["by_step"].select("cause", "idle_us").iter_rows()}
    assert by_step == {"cpu_op": 240.0, "unexplained": 100.0, "launch_latency": 80.0, "dataloader": 50.0, "sync": 50.0}
    assert sum(by_step.values()) == run_analysis("temporal", one_rank, per_step=True)["per_step"]["idle_us"].item()
    sites = res["call_sites"].filter(pl.col("cause") == "cpu_op").select("call_site", "idle_us", "gaps").rows()
    assert sites == [
        ("ProfilerStep#*", 115.0, 3),
        ("train.py(42): preprocess", 60.0, 1),
        ("aten::_local_scalar_dense", 50.0, 1),
        ("aten::add", 10.0, 1),
        ("aten::mm", 5.0, 1),
    ]
    assert res["gaps"]["dur_us"].to_list() == sorted(res["gaps"]["dur_us"].to_list(), reverse=True)


def test_top_limits_call_sites(one_rank) -> None:  # noqa: ANN001
    sites = run_analysis("idle-causes", one_rank, top=2)["call_sites"]
    assert sites.filter(pl.col("cause") == "cpu_op")["call_site"].to_list() == [
        "ProfilerStep#*",
        "train.py(42): preprocess",
    ]


def test_sync_without_drain_and_after_the_last_work(make_trace) -> None:  # noqa: ANN001
    """The sync starts after the GPU went idle (it waits for nothing): only its own time is sync.
    After the last GPU work the step goes on: the thread that launched that work is read."""
    run = ranksight.load(
        make_trace(
            [
                X("ProfilerStep#3", "user_annotation", 0, 500),
                R("cudaLaunchKernel", 50, 5, 1),
                K("k", 100, 100, 1),
                R("cudaDeviceSynchronize", 220, 10, 2),
                X("Optimizer.step#SGD.step", "user_annotation", 250, 150),
            ]
        )
    )
    res = run_analysis("idle-causes", run)
    g = res["gaps"]
    t0 = int(g["start_ns"].min())
    rows = g.sort("start_ns").select((pl.col("start_ns") - t0) // 1000, "gap", "cause", "call_site").rows()
    assert rows == [
        (0, 0, "cpu_op", "ProfilerStep#*"),
        (50, 0, "launch_latency", "cudaLaunchKernel"),
        (200, 1, "cpu_op", "ProfilerStep#*"),
        (220, 1, "sync", "cudaDeviceSynchronize"),
        (230, 1, "cpu_op", "ProfilerStep#*"),
        (250, 1, "cpu_op", "Optimizer.step#SGD.step"),
        (400, 1, "cpu_op", "ProfilerStep#*"),
    ]
    assert _ns(g).sum() == 100 + 300  # the step [0, 500) minus the kernel [100, 200)
    assert not g["in_span"].any() and res["by_rank"].height == 0  # the GPU span is one kernel: no idle in it


def test_dataloader_wins_over_a_sync_inside_it(make_trace) -> None:  # noqa: ANN001
    run = ranksight.load(
        make_trace(
            [
                X("ProfilerStep#1", "user_annotation", 0, 400),
                R("cudaLaunchKernel", 10, 5, 1),
                K("a", 20, 30, 1),
                X(FETCH, "user_annotation", 60, 200),
                R("cudaStreamSynchronize", 100, 50, 2),
                R("cudaLaunchKernel", 280, 5, 3),
                K("b", 300, 50, 3),
            ]
        )
    )
    res = run_analysis("idle-causes", run)
    assert dict(res["by_rank"].select("cause", "idle_us").iter_rows()) == {
        "dataloader": 200.0,
        "launch_latency": 20.0,
        "cpu_op": 30.0,
    }


def _gloo_rank(gloo_start: float) -> list[dict]:
    """A kernel, then a gloo all-reduce on thread 5 ending at 520 on both ranks (so no clock offset
    is estimated); the gloo thread copies the result back to the GPU at 520."""
    return [
        X("ProfilerStep#1", "user_annotation", 0, 1000),
        R("cudaLaunchKernel", 40, 5, 1),
        K("k", 50, 50, 1),
        X("c10d::allreduce_", "cpu_op", gloo_start - 10, 5),
        X("gloo:all_reduce", "user_annotation", gloo_start, 520 - gloo_start, tid=5),
        R("cudaMemcpyAsync", 520, 5, 2, tid=5),
        K("Memcpy HtoD (Pinned -> Device)", 530, 30, 2, kind="gpu_memcpy"),
    ]


def test_collective_wait_across_two_ranks(make_trace, tmp_path) -> None:  # noqa: ANN001
    """Rank 0 enters the all-reduce at 120 and waits for rank 1 until 400: 280 µs collective_wait;
    the rest of the all-reduce (400–520) is the collective's own CPU time. Rank 1, the late one,
    waits for nobody."""
    for r, start in ((0, 120), (1, 400)):
        make_trace(_gloo_rank(start), name=f"rank{r}.json", distributedInfo={"rank": r, "world_size": 2})
    res = run_analysis("idle-causes", ranksight.load(tmp_path))
    g = res["gaps"].filter(pl.col("gap") == 1).sort("start_ns")  # [100, 530): before the copy back
    r0, r1 = g.filter(pl.col("rank") == 0), g.filter(pl.col("rank") == 1)
    assert r0.select("cause", "call_site", "detail").rows() == [
        ("unexplained", None, "tid 5: no span recorded on the launching thread"),
        ("collective_wait", "gloo:all_reduce", "waits for rank 1 (all_reduce, instance 0)"),
        ("cpu_op", "gloo:all_reduce", "tid 5 in a user_annotation"),
        ("launch_latency", "cudaMemcpyAsync",
         "Memcpy HtoD (Pinned -> Device) launched by cudaMemcpyAsync on tid 5 10.0 µs before it started"),
    ]  # fmt: skip
    assert _ns(r0).to_list() == [20, 280, 120, 10]
    assert r1["cause"].to_list() == ["unexplained", "cpu_op", "launch_latency"]
    assert _ns(r1).to_list() == [300, 120, 10]
    w = res["by_rank"].filter(pl.col("cause") == "collective_wait")
    assert w.select("rank", "idle_us", "gaps").rows() == [(0, 280.0, 1)]
    # one rank alone: no peer to wait for
    alone = run_analysis("idle-causes", ranksight.load(tmp_path / "rank0.json"))
    assert "collective_wait" not in alone["by_rank"]["cause"].to_list()
    assert any("need several ranks" in n for n in alone.notes)


def test_cpu_only_rank_gives_nothing_and_says_why(make_trace) -> None:  # noqa: ANN001
    run = ranksight.load(make_trace([X("ProfilerStep#1", "user_annotation", 0, 100), X("aten::add", "cpu_op", 10, 5)]))
    res = run_analysis("idle-causes", run)
    assert res["gaps"].height == 0 and res["by_rank"].height == 0
    assert any("no GPU work (CPU-only)" in n for n in res.notes)


def test_cut() -> None:
    idx, s, e = cut(np.array([0, 10, 20]), np.array([5, 15, 30]), np.array([0, 3, 5, 12, 25, 30]))
    assert idx.tolist() == [0, 0, 1, 1, 2, 2]
    assert list(zip(s.tolist(), e.tolist(), strict=True)) == [(0, 3), (3, 5), (10, 12), (12, 15), (20, 25), (25, 30)]
    idx, s, e = cut(np.array([0]), np.array([5]), np.array([], dtype=np.int64))
    assert (idx.tolist(), s.tolist(), e.tolist()) == ([0], [0], [5])


# ---- the corpus property --------------------------------------------------------------------------


def _check_corpus(paths: list[Path]) -> int:
    """Per rank, the pieces inside the GPU span sum to ``temporal``'s idle_us and per step to
    ``temporal --per-step``'s idle_us, to the nanosecond; ranks without GPU work get no piece and a
    note. Returns the number of ranks checked."""
    checked = 0
    for path in paths:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                run = ranksight.load(path)
        except ranksight.RanksightError:
            continue  # not a profiler trace (e.g. an execution trace): `info` tests cover the message
        s = Session(run)
        res = s.result("idle-causes")
        tem = s.result("temporal", per_step=True)
        g = res["gaps"].with_columns((pl.col("end_ns") - pl.col("start_ns")).alias("ns"))
        assert g["cause"].is_in(list(CAUSES)).all() and (g["ns"] > 0).all(), path
        for r in run.ranks:
            row = tem["temporal"].filter(pl.col("rank") == r).row(0, named=True)
            mine = g.filter(pl.col("rank") == r)
            if row["idle_us"] is None:  # no GPU work
                assert mine.height == 0 and any("no GPU work" in n for n in res.notes), path
                continue
            assert int(mine.filter("in_span")["ns"].sum()) == round(row["idle_us"] * 1000), (path, r)
            per = tem["per_step"].filter(pl.col("rank") == r).select("step", "idle_us")
            got = mine.filter(pl.col("step").is_not_null()).group_by("step").agg(pl.col("ns").sum())
            j = per.join(got, on="step", how="left").with_columns(pl.col("ns").fill_null(0))
            assert (j["ns"] == (j["idle_us"] * 1000).round(0).cast(pl.Int64)).all(), (path, r, j)
            assert got["step"].is_in(per["step"].implode()).all(), (path, r)
            by_rank = res["by_rank"].filter(pl.col("rank") == r)["idle_us"].sum()
            assert abs(by_rank - row["idle_us"]) <= 1e-6 * max(1.0, row["idle_us"]), (path, r)
            checked += 1
    return checked


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.name.endswith((".json", ".json.gz", ".sqlite")))


def test_causes_sum_to_temporal_idle_on_every_test_data_trace() -> None:
    """Every trace file under tests/data, each loaded alone."""
    assert _check_corpus(_files(DATA)) >= 30


@pytest.mark.shared
def test_causes_sum_to_temporal_idle_on_every_shared_trace(shared_traces: Path) -> None:
    """Every trace file under ../shared/traces (skipped loudly when absent), each loaded alone, and
    the multi-rank folders loaded whole (collective waits across ranks)."""
    assert _check_corpus(_files(shared_traces)) >= 40
    assert _check_corpus([DATA / "generated" / "h100" / "ddp-gloo-2ranks", shared_traces / "hta" / "trace_filter"]) == 4
