"""The job-wide critical path on hand-built multi-rank traces whose path is known exactly.

1. ``allreduce``: 2 ranks, one all-reduce. Rank 1 runs 180 µs of host work before launching it,
   so rank 0's kernel waits; rank 0 synchronises on it (``cudaStreamSynchronize``, no CUDA sync
   records: the wait is inferred) and launches the step's last kernel. Rank 1's clock reads
   500 µs ahead (its own host).
2. ``pipeline``: 3 stages, send/recv (``nccl:send 0->1`` annotations name the peers), stage 1's
   GEMM takes 300 µs; every rank queues its work early and ends with ``cudaDeviceSynchronize``.
   Stage 1's clock reads 300 µs ahead.
3. ``gloo``: the all-reduce of 1. over gloo on the CPU: each rank's main thread enqueues it
   (``c10d::allreduce_``), a gloo thread runs it (``gloo:all_reduce``), the main thread waits
   (unrecorded) and resumes after it ends. Rank 1's clock reads 500 µs ahead.

Times in the comments are µs on the true clock. Alignment uses the collectives' end times: with
two participants per instance the median end is their midpoint, so both ranks move by half the
offset and aligned = true + offset/2 on every rank.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from tests.unit.dist_traces import CPU_TID, _x, coll_args, write_rank

import ranksight as rs
from ranksight.analyses import Session
from ranksight.analyses.critical_path import job_path

STREAM = 7
US = 1000


class _Rank:
    """Events of one rank, correlation ids from 1, every time moved by ``shift``."""

    def __init__(self, shift: float = 0.0) -> None:
        self.ev: list[dict[str, Any]] = []
        self.corr = 0
        self.shift = shift

    def cpu(self, name: str, ts: float, end: float, cat: str = "cpu_op", **args: Any) -> None:
        self.ev.append(_x(name, cat, ts + self.shift, end - ts, args=args))

    def launch(self, ts: float, end: float, kernel: str, k_ts: float, k_end: float, stream: int = STREAM) -> None:
        self.corr += 1
        self.ev.append(
            _x("cudaLaunchKernel", "cuda_runtime", ts + self.shift, end - ts, args={"correlation": self.corr})
        )
        args = {"correlation": self.corr, "stream": stream, "device": 0}
        self.ev.append(_x(kernel, "kernel", k_ts + self.shift, k_end - k_ts, pid=0, tid=stream, args=args))

    def runtime(self, name: str, ts: float, end: float) -> None:
        self.corr += 1
        self.ev.append(_x(name, "cuda_runtime", ts + self.shift, end - ts, args={"correlation": self.corr}))


ALLREDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
SENDRECV = "ncclDevKernel_SendRecv"


AR_ARGS = coll_args({"name": "allreduce", "group_size": 2, "ranks": "[0, 1]", "seq": 0})


def _late_rank1(d: Path) -> None:
    r1 = _Rank(shift=500)
    r1.cpu("ProfilerStep#1", 0, 300, cat="user_annotation")
    r1.cpu("slow_host_op", 10, 190)
    r1.cpu("record_param_comms", 190, 210, **AR_ARGS)
    r1.launch(195, 200, ALLREDUCE, 205, 230)
    r1.runtime("cudaStreamSynchronize", 215, 235)
    r1.cpu("aten::add", 240, 260)
    r1.launch(245, 250, "add_kernel", 255, 265)
    write_rank(d, 1, r1.ev, world=2, host="b")


def _allreduce(d: Path) -> Path:
    ar = AR_ARGS
    r0 = _Rank()
    r0.cpu("ProfilerStep#1", 0, 300, cat="user_annotation")
    r0.cpu("aten::mul", 10, 30)
    r0.launch(15, 20, "mul_kernel", 25, 45)
    r0.cpu("record_param_comms", 40, 60, **ar)
    r0.launch(45, 50, ALLREDUCE, 55, 230)
    r0.runtime("cudaStreamSynchronize", 70, 235)
    r0.cpu("aten::add", 240, 260)
    r0.launch(245, 250, "add_kernel", 255, 280)
    write_rank(d, 0, r0.ev, world=2, host="a")
    _late_rank1(d)
    return d


def _held(d: Path) -> Path:
    """As ``_allreduce``, but rank 0's all-reduce runs on a communication stream and a kernel of
    the compute stream, queued early behind a ``cudaStreamWaitEvent``, is held until it ends (no
    sync records: the wait is inferred); rank 0 synchronises on the compute stream."""
    r0 = _Rank()
    r0.cpu("ProfilerStep#1", 0, 300, cat="user_annotation")
    r0.cpu("aten::mul", 10, 30)
    r0.launch(15, 20, "mul_kernel", 25, 45)
    r0.cpu("record_param_comms", 40, 60, **AR_ARGS)
    r0.launch(45, 50, ALLREDUCE, 55, 230, stream=20)
    r0.runtime("cudaStreamWaitEvent", 61, 62)
    r0.cpu("aten::relu", 63, 75)
    r0.launch(65, 70, "consumer_kernel", 232, 240)
    r0.runtime("cudaStreamSynchronize", 80, 242)
    r0.cpu("aten::add", 250, 260)
    r0.launch(252, 255, "add_kernel", 258, 280)
    write_rank(d, 0, r0.ev, world=2, host="a")
    _late_rank1(d)
    return d


def _p2p(rank: _Rank, ann: str, ts: float, k_ts: float, k_end: float) -> None:
    rank.cpu(ann, ts, ts + 15, cat="user_annotation", **{"Input Dims": [[1024]], "Input type": ["float"]})
    rank.launch(ts + 5, ts + 10, SENDRECV, k_ts, k_end)


def _pipeline(d: Path) -> Path:
    r0 = _Rank()
    r0.cpu("ProfilerStep#1", 0, 490, cat="user_annotation")
    r0.cpu("aten::mm", 5, 25)
    r0.launch(10, 15, "stage0_gemm", 20, 100)
    _p2p(r0, "nccl:send 0->1", 30, 100, 120)
    r0.runtime("cudaDeviceSynchronize", 50, 121)
    r1 = _Rank(shift=300)
    r1.cpu("ProfilerStep#1", 0, 490, cat="user_annotation")
    _p2p(r1, "nccl:recv 1<-0", 5, 20, 120)
    r1.cpu("aten::mm", 25, 45)
    r1.launch(30, 35, "stage1_gemm", 120, 420)
    _p2p(r1, "nccl:send 1->2", 50, 420, 430)
    r1.runtime("cudaDeviceSynchronize", 70, 431)
    r2 = _Rank()
    r2.cpu("ProfilerStep#1", 0, 490, cat="user_annotation")
    _p2p(r2, "nccl:recv 2<-1", 5, 20, 430)
    r2.cpu("aten::mm", 25, 45)
    r2.launch(30, 35, "stage2_gemm", 430, 480)
    r2.runtime("cudaDeviceSynchronize", 50, 481)
    for r, (rank, host) in enumerate(zip((r0, r1, r2), "abc", strict=True)):
        write_rank(d, r, rank.ev, world=3, host=host)
    return d


GLOO_TID = 9000


def _gloo(d: Path, groups: int = 1) -> Path:
    """Two ranks, one gloo all-reduce (CPU only); rank 1 runs 180 µs of host work before it
    enqueues it. ``groups``: process groups listed in each trace's ``distributedInfo``."""
    dims = {"Input Dims": [[1024]], "Input type": ["float"]}
    c10d = {"Input Dims": [[[1024]], [], [], [], [], []], "Input type": ["TensorList", "", "", "", "Scalar", "Scalar"]}
    plan = {
        0: [("aten::mm", 10, 40), ("c10d::allreduce_", 40, 50), ("gloo:all_reduce", 52, 230), ("aten::add", 235, 260)],
        1: [
            ("slow_host_op", 10, 190),
            ("c10d::allreduce_", 190, 200),
            ("gloo:all_reduce", 202, 230),
            ("aten::add", 233, 250),
        ],
    }
    pgs = [
        {
            "pg_name": str(k),
            "pg_desc": "default_pg" if k == 0 else "undefined",
            "backend_config": "cpu:gloo",
            "pg_size": 2,
            "ranks": [0, 1],
        }
        for k in range(groups)
    ]
    for r, ops in plan.items():
        rk = _Rank(shift=500 * r)
        rk.cpu("ProfilerStep#1", 0, 300, cat="user_annotation")
        ev = rk.ev
        for name, a, b in ops:
            if name.startswith("gloo:"):
                ev.append(_x(name, "user_annotation", a + rk.shift, b - a, tid=GLOO_TID, args=dims))
            else:
                rk.cpu(name, a, b, **(c10d if name.startswith("c10d::") else {}))
        doc = {
            "schemaVersion": 1,
            "distributedInfo": {"backend": "gloo", "rank": r, "world_size": 2, "pg_count": groups, "pg_config": pgs},
            "host_name": "ab"[r],
            "traceEvents": ev,
        }
        (d / f"rank{r}.json").write_text(json.dumps(doc))
    assert CPU_TID != GLOO_TID
    return d


def _segments(d: Path, base_us: float) -> tuple[Any, list[tuple[Any, ...]]]:
    """The job path and its segments as (rank, type, category, name, start µs, end µs) on the
    true clock (aligned − ``base_us``)."""
    jp = job_path(Session.of(rs.load(d)))
    lo = jp.lo_ns - base_us * US
    rows = [
        (r["rank"], r["type"], r["category"], r["name"], (r["start_ns"] - lo) / US, (r["end_ns"] - lo) / US)
        for r in jp.segments.iter_rows(named=True)
    ]
    return jp, rows


def _offsets_us(d: Path) -> dict[int, float]:
    from ranksight.analyses.collectives import comm_data

    off = comm_data(Session.of(rs.load(d))).offsets
    return {int(r): o / US for r, o in off.select("rank", "offset_ns").iter_rows()}


def _what_if(jp: Any) -> dict[tuple[str, str], float]:
    return {(r["scenario"], r["target"]): round(r["saving_ms"] * 1000, 6) for r in jp.what_if.iter_rows(named=True)}


def _waiting_on(jp: Any) -> list[tuple[Any, ...]]:
    """(rank, name, start µs on the true clock, waiting_on_rank) of the segments that carry one."""
    lo = jp.lo_ns
    return [
        (r["rank"], r["name"], (r["start_ns"] - lo) / US, r["waiting_on_rank"])
        for r in jp.segments.filter(pl.col("waiting_on_rank").is_not_null()).iter_rows(named=True)
    ]


def _crossings(jp: Any) -> list[tuple[Any, ...]]:
    """(instance, waited_for, rank, wait µs, lateness µs) per crossing."""
    return [
        (r["instance"], r["waited_for"], r["rank"], r["wait_ns"] / US, r["lateness_ns"] / US)
        for r in jp.crossings.iter_rows(named=True)
    ]


def test_late_rank_delays_an_all_reduce(tmp_path: Path) -> None:
    d = _allreduce(tmp_path)
    # rank 1's clock reads 500 µs ahead: each rank moves by half of it
    assert _offsets_us(d) == {0: -250.0, 1: 250.0}
    jp, seg = _segments(d, 0)
    assert seg == [
        (1, "idle", "idle", "idle", 0, 10),
        (1, "cpu_op", "host", "slow_host_op", 10, 190),
        (1, "cpu_op", "host", "record_param_comms", 190, 195),
        (1, "launch_delay", "host", "launch_delay", 195, 205),
        # rank 0's all-reduce ends 25 µs after rank 1, the last participant, started it
        (0, "kernel", "communication", ALLREDUCE, 205, 230),
        (0, "sync", "idle", "sync", 230, 235),
        # host time on rank 0's thread between the sync's return and the next op
        (0, "cpu_gap", "host", "cpu_gap", 235, 240),
        (0, "cpu_op", "host", "aten::add", 240, 245),
        (0, "launch_delay", "host", "launch_delay", 245, 255),
        (0, "kernel", "compute", "add_kernel", 255, 280),
        (0, "idle", "idle", "idle", 280, 300),
    ]
    assert jp.hi_ns - jp.lo_ns == 300 * US
    by_cat = jp.segments.group_by("category").agg((pl.col("end_ns") - pl.col("start_ns")).sum() / US)
    assert dict(by_cat.iter_rows()) == {"host": 215, "communication": 25, "compute": 25, "idle": 35}
    # the path crosses from rank 1 to rank 0 at the all-reduce: rank 0's transfer records the rank
    # it waited for, and the crossing its wait (205 − 55) and rank 1's lateness (205 − median 130)
    assert _waiting_on(jp) == [(0, ALLREDUCE, 205, 1)]
    assert _crossings(jp) == [(0, 1, 0, 150, 75)]
    assert _what_if(jp) == {
        ("no exposed communication", "all ranks"): 25,
        # rank 1 starts at the median start (130): rank 0's add_kernel ends at 205, but rank 1's own
        # host work keeps its add_kernel at 245
        ("rank not late", "rank 1"): 35,
        ("operator removed", "slow_host_op"): 150,
        # the step then ends with aten::add on the CPU at 260
        ("operator removed", "add_kernel"): 20,
        ("operator removed", ALLREDUCE): 25,
        ("operator removed", "aten::add"): 30,
        ("operator removed", "record_param_comms"): 30,
    }


def test_a_held_kernel_waits_for_the_collective_on_another_stream(tmp_path: Path) -> None:
    jp, seg = _segments(_held(tmp_path), 0)
    assert seg == [
        (1, "idle", "idle", "idle", 0, 10),
        (1, "cpu_op", "host", "slow_host_op", 10, 190),
        (1, "cpu_op", "host", "record_param_comms", 190, 195),
        (1, "launch_delay", "host", "launch_delay", 195, 205),
        (0, "kernel", "communication", ALLREDUCE, 205, 230),
        # the compute stream's kernel, launched at 65, was held until the all-reduce ended
        (0, "sync", "idle", "sync", 230, 232),
        (0, "kernel", "compute", "consumer_kernel", 232, 240),
        (0, "sync", "idle", "sync", 240, 242),
        (0, "cpu_gap", "host", "cpu_gap", 242, 250),
        (0, "cpu_op", "host", "aten::add", 250, 252),
        (0, "launch_delay", "host", "launch_delay", 252, 258),
        (0, "kernel", "compute", "add_kernel", 258, 280),
        (0, "idle", "idle", "idle", 280, 300),
    ]
    # rank 1 at the median start (130): the consumer runs 232 → 157 and everything after it moves
    # by 75, but rank 1's own add_kernel still ends at 245
    assert _what_if(jp)[("rank not late", "rank 1")] == 35


def test_pipeline_with_a_slow_stage(tmp_path: Path) -> None:
    d = _pipeline(tmp_path)
    assert _offsets_us(d) == {0: -150.0, 1: 150.0, 2: -150.0}
    jp, seg = _segments(d, 0)
    assert seg == [
        (0, "idle", "idle", "idle", 0, 5),
        (0, "cpu_op", "host", "aten::mm", 5, 10),
        (0, "launch_delay", "host", "launch_delay", 10, 20),
        (0, "kernel", "compute", "stage0_gemm", 20, 100),
        # stage 1's recv ends 20 µs after stage 0's send started
        (1, "kernel", "communication", SENDRECV, 100, 120),
        (1, "kernel", "compute", "stage1_gemm", 120, 420),
        (2, "kernel", "communication", SENDRECV, 420, 430),
        (2, "kernel", "compute", "stage2_gemm", 430, 480),
        (2, "sync", "idle", "sync", 480, 481),
        (2, "idle", "idle", "idle", 481, 490),
    ]
    by_rank = jp.segments.group_by("rank").agg((pl.col("end_ns") - pl.col("start_ns")).sum() / US)
    assert dict(by_rank.iter_rows()) == {0: 100, 1: 320, 2: 70}
    # each crossing is a receive that waited for its sender
    assert _waiting_on(jp) == [(1, SENDRECV, 100, 0), (2, SENDRECV, 420, 1)]
    assert [(c[1], c[2]) for c in _crossings(jp)] == [(0, 1), (1, 2)]
    assert _what_if(jp) == {
        ("no exposed communication", "all ranks"): 30,
        # stage 0 starts its send at the median of the pair (60): everything after moves by 40
        ("rank not late", "rank 0"): 40,
        # stage 1's send starts at the pair's median (220), yet its own GEMM still ends at 420
        ("rank not late", "rank 1"): 61,
        ("operator removed", "stage1_gemm"): 300,
        # the send cannot start before its launch at 35
        ("operator removed", "stage0_gemm"): 65,
        ("operator removed", "stage2_gemm"): 50,
        ("operator removed", SENDRECV): 30,
        # every GEMM and the calls that launched them: the step ends at 51
        ("operator removed", "aten::mm"): 430,
    }


def test_gloo_all_reduce_joined_across_ranks(tmp_path: Path) -> None:
    d = _gloo(tmp_path)
    assert _offsets_us(d) == {0: -250.0, 1: 250.0}
    jp, seg = _segments(d, 0)
    assert seg == [
        (1, "idle", "idle", "idle", 0, 10),
        (1, "cpu_op", "host", "slow_host_op", 10, 190),
        # the enqueue: from the c10d op's start to the gloo thread's start of the collective
        (1, "cpu_gap", "host", "cpu_gap", 190, 202),
        # rank 0's gloo thread exchanges from the last arrival (rank 1's, at 202) to its end
        (0, "cpu_op", "communication", "gloo:all_reduce", 202, 230),
        # rank 0's main thread waited (unrecorded) for the collective, then resumed
        (0, "sync", "idle", "sync", 230, 235),
        (0, "cpu_op", "host", "aten::add", 235, 260),
        (0, "idle", "idle", "idle", 260, 300),
    ]
    assert _waiting_on(jp) == [(0, "gloo:all_reduce", 202, 1)]
    # rank 0 arrived at 52: it waited 150 µs; rank 1's lateness 202 − median 127
    assert _crossings(jp) == [(0, 1, 0, 150, 75)]
    assert any(n.startswith("gloo collectives joined across ranks") for n in jp.notes)
    wi = _what_if(jp)
    assert wi[("no exposed communication", "all ranks")] == 28
    assert wi[("rank not late", "rank 1")] > 0


def test_gloo_not_joined_without_evidence_to_pair_instances(tmp_path: Path) -> None:
    # two process groups: gloo's events name neither their group nor a sequence number
    jp = job_path(Session.of(rs.load(_gloo(tmp_path, groups=2))))
    assert jp.crossings.height == 0
    assert jp.segments["rank"].unique().to_list() == [0]
    assert jp.segments["waiting_on_rank"].null_count() == jp.segments.height
    note = [n for n in jp.notes if n.startswith("gloo collectives not joined")]
    assert note and "2 process group(s)" in note[0] and "cannot be paired" in note[0]
    # rank 0's own collective stays on its path, as its gloo thread's work (host), not a transfer
    ar = jp.segments.filter(pl.col("name") == "gloo:all_reduce")
    assert ar["category"].to_list() == ["host"]


@pytest.mark.parametrize("build", [_allreduce, _pipeline, _gloo])
def test_categories_sum_to_the_step(tmp_path: Path, build: Any) -> None:
    sess = Session.of(rs.load(build(tmp_path)))
    res = sess.result("critical-path")
    jp = job_path(sess)
    assert res["job_by_category"]["time_us"].sum() == pytest.approx((jp.hi_ns - jp.lo_ns) / US)
    assert res["job_by_rank"]["time_us"].sum() == pytest.approx((jp.hi_ns - jp.lo_ns) / US)


def test_the_walk_never_goes_back_in_time() -> None:
    """An edge whose source is later than its destination (a call-stack edge between overlapping
    events of two folded threads) is not the last arrival when the node has another."""
    import numpy as np

    from ranksight.analyses.critical_path import _binding, _walk

    ts = np.array([0, 10, 5, 20], np.int64)
    e = pl.DataFrame(
        {"src": [0, 1, 2], "dst": [2, 2, 3], "type": [1, 1, 1]},
        schema={"src": pl.Int64, "dst": pl.Int64, "type": pl.Int8},
    )
    assert _binding(4, e, ts).tolist() == [-1, -1, 0, 2]
    assert _walk(4, e, ts).tolist() == [0, 2, 3]


def test_per_rank_notes_are_grouped() -> None:
    from ranksight.analyses.critical_path import _grouped_notes

    notes = [(0, "a 1 b"), (1, "a 1 b"), (2, "a 2 b"), (3, "c"), (5, "c")]
    assert _grouped_notes(notes) == ["ranks 0–2: a 1 b (on rank 0; likewise on the others)", "ranks 3, 5: c"]
    assert _grouped_notes([(4, "x")]) == ["rank 4: x"]


def test_rank_not_late_for_the_latest_ranks_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # one replay per late rank is over every rank's edges: only the ranks with the most lateness
    # (rank 1's send: 200 µs late; rank 0's: 40 µs) get one, and a note says how many were left out
    import ranksight.analyses.critical_path as cp

    monkeypatch.setattr(cp, "WHAT_IF_LATE_RANKS", 1)
    jp, _ = _segments(_pipeline(tmp_path), 0)
    wi = _what_if(jp)
    assert [k for k in wi if k[0] == "rank not late"] == [("rank not late", "rank 1")]
    assert wi[("rank not late", "rank 1")] == 61
    assert "what-if `rank not late` for the 1 ranks with the most lateness (of 2 ranks" in " ".join(jp.notes)
    late = jp.late.group_by("rank").agg(pl.col("lateness_ns").sum())
    assert dict(late.iter_rows()) == {0: 40 * US, 1: 200 * US}
