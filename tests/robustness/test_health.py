"""``ranksight health``: each check on a real trace or a minimally edited copy of one.

The edited copies start from ``hta/amd_trace`` (MI250, one complete and one empty ProfilerStep,
14 kernels, 2 memcpys, 21 HIP runtime calls); events are addressed by their index in
``traceEvents`` (= ``row``).
"""

from __future__ import annotations

import copy
import gzip
import json
import warnings
from functools import cache
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from _helpers import cli

import ranksight
from ranksight.analyses.health import CHECKS, NESTING_KINDS, _overlap_amounts, crossings, health

DATA = Path(__file__).resolve().parents[1] / "data"
AMD = "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz"


@cache
def _doc(rel: str) -> dict[str, Any]:
    return json.loads(gzip.decompress((DATA / rel).read_bytes()))


def edited(tmp_path: Path, fn, rel: str = AMD, name: str = "rank0.json") -> Path:  # noqa: ANN001
    doc = copy.deepcopy(_doc(rel))
    fn(doc["traceEvents"], doc)
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return p


def checks(path: Path | str, **kw: Any) -> dict[tuple[int | None, str], dict[str, Any]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = health(ranksight.load(path, cache=False), **kw)
    return {(r["rank"], r["check"]): r for r in res["checks"].iter_rows(named=True)}


def one(path: Path | str, check: str, rank: int | None = 0, **kw: Any) -> dict[str, Any]:
    return checks(path, **kw)[(rank, check)]


def _rows(kind: str) -> list[int]:
    return [i for i, e in enumerate(_doc(AMD)["traceEvents"]) if e.get("cat") == kind]


KERNELS = _rows("kernel")  # [125, 127, ...]
RUNTIME = _rows("cuda_runtime")


def _launch_of(k: int) -> int:
    ev = _doc(AMD)["traceEvents"]
    corr = ev[k]["args"]["correlation"]
    return next(i for i in RUNTIME if ev[i].get("args", {}).get("correlation") == corr)


# ---- the real trace as it is ------------------------------------------------------------------------


def test_real_amd_trace_baseline():
    c = checks(DATA / AMD)
    status = {k[1]: v["status"] for k, v in c.items() if k[0] == 0}
    assert status["gpu_without_launch"] == "ok" and status["launch_without_gpu"] == "ok"
    assert status["stream_overlap"] == "ok" and status["cpu_nesting"] == "ok"
    assert status["zero_length_kernels"] == "ok" and status["negative_durations"] == "ok"
    assert status["longer_than_trace"] == "ok" and status["longer_than_step"] == "ok"
    assert c[(0, "distributed_info")]["detail"] == "no distributedInfo: rank taken from the file order"
    assert c[(0, "time_base")]["detail"] == "relative to baseTimeNanoseconds 1735632360000000000"
    assert c[(0, "time_resolution")]["status"] == "ok"
    # the real trace's last step is empty: the profiler stopped right after it began
    last = c[(0, "incomplete_last_step")]
    assert last["status"] == "warning" and last["detail"].startswith("step #2 has 0 kernels, the one before 14")
    assert (c[(0, "outside_steps")]["status"], c[(0, "outside_steps")]["count"]) == ("info", 1)


def test_real_ns_trace_zero_byte_memsets_are_info():
    r = one(DATA / "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz", "launch_without_gpu")
    assert (r["status"], r["count"]) == ("info", 235)
    assert (
        r["detail"].startswith("235 of 6330 launches own no GPU event (copies/sets only")
        and "cudaMemsetAsync ×235" in r["detail"]
    )


def test_real_alexnet_trace_integer_microseconds_and_epoch_base():
    c = checks(DATA / "hta/critical_path/alexnet")
    assert c[(0, "time_resolution")]["status"] == "info"
    assert c[(0, "time_base")]["detail"] == "absolute epoch µs"
    assert c[(0, "distributed_info")]["detail"] == "distributedInfo lacks world_size"


def test_real_trace_python_frames_cross_profiler_step():
    c = checks(DATA / "tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz")
    r = c[(0, "cpu_nesting_python")]
    assert r["status"] == "info" and r["count"] >= 1 and "ProfilerStep#6 ×1" in r["detail"]
    assert c[(0, "cpu_nesting")]["status"] == "ok"  # nothing crosses apart from Python frames


def test_real_cpu_only_trace():
    c = checks(DATA / "hta/cpu_only")
    assert c[(34, "no_gpu_events")]["status"] == "info"
    assert c[(34, "distributed_info")]["status"] == "ok"


def test_real_2021_trace_orphan_kernels_and_zero_length_kernels():
    c = checks(DATA / "kineto/2021-01-13_eebfef30/tb_plugin/samples/resnet50_num_workers_0/worker0.pt.trace.json.gz")
    assert (c[(0, "gpu_without_launch")]["status"], c[(0, "gpu_without_launch")]["count"]) == ("warning", 765)
    assert (c[(0, "zero_length_kernels")]["status"], c[(0, "zero_length_kernels")]["count"]) == ("info", 309)


# ---- minimally edited copies -----------------------------------------------------------------------------


def test_dropped_launch_makes_orphan_gpu_events(tmp_path):
    k = KERNELS[1]
    p = edited(
        tmp_path,
        lambda ev, _: ev.__setitem__(_launch_of(k), {"ph": "i", "name": "removed", "pid": 1, "tid": 1, "ts": 0}),
    )
    r = one(p, "gpu_without_launch")
    assert (r["status"], r["count"]) == ("warning", 1) and r["detail"].startswith(
        "1 of 16 GPU events have no launching call: Cijk_"
    )


def test_dropped_kernel_makes_a_launch_without_gpu(tmp_path):
    k = KERNELS[1]
    p = edited(tmp_path, lambda ev, _: ev.__setitem__(k, {"ph": "i", "name": "removed", "pid": 1, "tid": 1, "ts": 0}))
    r = one(p, "launch_without_gpu")
    assert (r["status"], r["count"]) == ("warning", 1)
    assert "(dropped GPU records): hipExtModuleLaunchKernel ×1" in r["detail"]


def _shift_onto_previous(by_us: float):  # noqa: ANN202
    def fn(ev, _):  # noqa: ANN001, ANN202
        a, b = ev[KERNELS[1]], ev[KERNELS[2]]  # a: 17.6 µs, b: 6.72 µs, same stream
        b["ts"] = a["ts"] + a["dur"] - by_us

    return fn


def test_kernels_overlapping_on_a_stream(tmp_path):
    p = edited(tmp_path, _shift_onto_previous(6.0))
    c = checks(p)
    r = c[(0, "stream_overlap")]
    assert (r["status"], r["count"], r["max_us"]) == ("warning", 1, 6.0)
    assert c[(0, "stream_overlap_noise")]["count"] == 0


def test_cupti_noise_overlap_is_tolerated_but_reported(tmp_path):
    p = edited(tmp_path, _shift_onto_previous(0.004))  # 4 ns
    c = checks(p)
    assert c[(0, "stream_overlap")]["status"] == "ok"
    r = c[(0, "stream_overlap_noise")]
    assert (r["status"], r["count"], r["max_us"]) == ("info", 1, 0.004)
    # the tolerance is an option
    assert one(p, "stream_overlap", noise_us=0.001)["status"] == "warning"


def test_kernel_longer_than_the_trace(tmp_path):
    p = edited(tmp_path, lambda ev, _: ev[KERNELS[0]].__setitem__("dur", 1_600_000.0))
    c = checks(p)
    assert (c[(0, "longer_than_trace")]["status"], c[(0, "longer_than_trace")]["max_us"]) == ("warning", 1_600_000.0)
    assert c[(0, "longer_than_step")]["status"] == "warning"


def test_kernel_longer_than_the_longest_step(tmp_path):
    # step #1's CPU span is 9,288.291 µs; the trace's CPU span is longer
    p = edited(tmp_path, lambda ev, _: ev[KERNELS[0]].__setitem__("dur", 9_300.0))
    c = checks(p)
    r = c[(0, "longer_than_step")]
    assert (r["status"], r["count"], r["max_us"]) == ("warning", 1, 9300.0)
    assert "longest step (9288.291 µs)" in r["detail"]
    assert c[(0, "longer_than_trace")]["status"] == "ok"


def test_zero_length_and_negative_kernels(tmp_path):
    def fn(ev, _):  # noqa: ANN001, ANN202
        ev[KERNELS[0]]["dur"] = 0
        ev[KERNELS[2]]["dur"] = -3.5

    c = checks(edited(tmp_path, fn))
    assert (c[(0, "zero_length_kernels")]["status"], c[(0, "zero_length_kernels")]["count"]) == ("info", 1)
    r = c[(0, "negative_durations")]
    assert (r["status"], r["count"], r["max_us"]) == ("warning", 1, 3.5)


def _child_and_parent() -> tuple[int, int]:
    """A cpu_op and its innermost enclosing CPU range on the same thread, with room to spare."""
    ev = _doc(AMD)["traceEvents"]
    cpu = [i for i, e in enumerate(ev) if e.get("cat") in ("cpu_op", "user_annotation", "cuda_runtime") and "dur" in e]
    for i in cpu:
        if ev[i]["cat"] != "cpu_op":
            continue
        a = ev[i]
        around = [
            j
            for j in cpu
            if j != i
            and ev[j]["tid"] == a["tid"]
            and ev[j]["ts"] <= a["ts"]
            and a["ts"] + a["dur"] <= ev[j]["ts"] + ev[j]["dur"]
        ]
        if not around:
            continue
        j = max(around, key=lambda j: (ev[j]["ts"], -(ev[j]["ts"] + ev[j]["dur"])))
        if ev[j]["ts"] + ev[j]["dur"] - (a["ts"] + a["dur"]) > 100:
            return i, j
    raise AssertionError("no nested pair")


@pytest.mark.parametrize("past_us,check", [(50.0, "cpu_nesting"), (1.0, "cpu_nesting_noise")])
def test_cpu_range_ending_after_its_parent(tmp_path, past_us, check):
    child, parent = _child_and_parent()

    def fn(ev, _):  # noqa: ANN001, ANN202
        c, p = ev[child], ev[parent]
        c["dur"] = round(p["ts"] + p["dur"] + past_us - c["ts"], 3)

    p = edited(tmp_path, fn)
    c = checks(p)
    r = c[(0, check)]
    assert r["count"] >= 1 and r["status"] == ("warning" if check == "cpu_nesting" else "info")
    # the edited child crosses its parent by exactly the amount added
    t = ranksight.load(p, cache=False)[0]
    cpu = (
        t.kind(*NESTING_KINDS)
        .filter(pl.col("dur_ns").is_not_null())
        .select("row", "pid", "tid", "ts_ns", "end_ns", "kind")
    )
    x = crossings(cpu)
    assert x.filter(pl.col("row") == child)["cross"].to_list() == [round(past_us * 1000)]
    assert x.filter(pl.col("row") == parent)["cross"].to_list() == [0]
    if check == "cpu_nesting_noise":
        assert c[(0, "cpu_nesting")]["status"] == "ok"


def test_distributed_info_present(tmp_path):
    p = edited(tmp_path, lambda ev, doc: doc.update(distributedInfo={"backend": "nccl", "rank": 0, "world_size": 1}))
    assert one(p, "distributed_info")["detail"] == "rank 0 of 1, backend nccl"


def test_unknown_launch_api(tmp_path):
    k = KERNELS[1]
    p = edited(tmp_path, lambda ev, _: ev[_launch_of(k)].__setitem__("name", "hipLaunchKernelFancy"))
    r = one(p, "unknown_launch_apis")
    assert (r["status"], r["count"]) == ("info", 1) and "hipLaunchKernelFancy ×1" in r["detail"]


def test_complete_last_step(tmp_path):
    # drop the empty step #2: step #1 is then last and complete
    def fn(ev, _):  # noqa: ANN001, ANN202
        for e in ev:
            if e.get("name") == "ProfilerStep#2":
                e["name"] = "not a step"

    r = one(edited(tmp_path, fn), "incomplete_last_step")
    assert (r["status"], r["detail"]) == ("ok", "step #1 looks complete")


def test_kineto_error_lines(tmp_path):
    line = "ERROR:2024-01-01 DeviceProperties.cpp:47] gpuGetDeviceCount failed with code 35"
    r = one(edited(tmp_path, lambda ev, doc: doc.update(ERROR=[line])), "kineto_log")
    assert (r["status"], r["count"]) == ("warning", 1) and line in r["detail"]


def test_truncated_copy_loses_the_time_base(tmp_path):
    text = json.dumps(_doc(AMD))
    assert text.index('"baseTimeNanoseconds"') > text.index('"traceEvents"')  # Kineto writes it last
    p = tmp_path / "rank0.json"
    p.write_text(text[: text.index('"traceEvents"') + len(text) // 3])
    c = checks(p)
    assert c[(0, "time_base")]["status"] == "warning"
    assert c[(0, "decoder")]["status"] == "warning" and "a truncated file: kept" in c[(0, "decoder")]["detail"]


# ---- run-level checks ---------------------------------------------------------------------------------


def _two_ranks(tmp_path: Path, fn1=None) -> Path:  # noqa: ANN001
    d = tmp_path / "run"
    d.mkdir()
    edited(d, lambda ev, doc: doc.update(distributedInfo={"rank": 0, "world_size": 2}), name="rank0.json")

    def second(ev, doc):  # noqa: ANN001, ANN202
        doc.update(distributedInfo={"rank": 1, "world_size": 2})
        if fn1:
            fn1(ev, doc)

    edited(d, second, name="rank1.json")
    return d


def test_run_level_ok(tmp_path):
    c = checks(_two_ranks(tmp_path))
    assert c[(None, "rank_clock")]["status"] == "ok" and c[(None, "rank_span")]["status"] == "ok"
    assert c[(None, "world_size")]["detail"] == "world size 2, 2 rank(s) loaded"


def test_rank_with_a_clock_one_hour_off(tmp_path):
    def shift(ev, _):  # noqa: ANN001, ANN202
        for e in ev:
            if isinstance(e.get("ts"), (int, float)):
                e["ts"] += 3.6e9

    c = checks(_two_ranks(tmp_path, shift))
    assert c[(None, "rank_clock")]["status"] == "warning"
    assert "do not overlap the other ranks' time window" in c[(None, "rank_clock")]["detail"]


def test_rank_with_an_odd_span(tmp_path):
    def stretch(ev, _):  # noqa: ANN001, ANN202
        ev[KERNELS[-1]]["dur"] = 100_000.0  # one rank runs 10x longer

    d = _two_ranks(tmp_path, stretch)
    edited(d, lambda ev, doc: doc.update(distributedInfo={"rank": 2, "world_size": 3}), name="rank2.json")
    for r in (0, 1):
        p = d / f"rank{r}.json"
        p.write_text(p.read_text().replace('"world_size": 2', '"world_size": 3'))
    c = checks(d)
    r = c[(None, "rank_span")]
    assert r["status"] == "warning" and r["detail"].startswith("ranks [1] span")


def test_mixed_time_bases(tmp_path):
    d = _two_ranks(tmp_path)
    p = d / "rank1.json"
    text = p.read_text()
    p.write_text(text[: len(text) // 2])
    c = checks(d)
    assert c[(None, "time_bases")]["status"] == "warning" and "[1]" in c[(None, "time_bases")]["detail"]


# ---- the vectorised core, by hand ---------------------------------------------------------------------


def test_overlap_amounts_exact():
    df = pl.DataFrame(
        {
            "k": [0, 0, 0, 0, 0, 0, 1, 1],
            "ts_ns": [40, 10, 0, 200, 250, 400, 0, 5],
            "end_ns": [60, 50, 100, 300, 350, 400, 10, 20],
        }
    )
    o = _overlap_amounts(df, ["k"])
    assert o["ts_ns"].to_list() == [0, 10, 40, 200, 250, 400, 0, 5]
    assert o["over_prev_max"].to_list() == [0, 40, 20, 0, 50, 0, 0, 5]


def test_crossings_exact():
    # thread 1: A[0,100] > B[10,50] > C[40,60] crosses B by 10 although A covers it;
    # D[200,300], E[250,350] crosses D by 50; F[400,400] (zero length) nests.
    # thread 2: G[0,10], H[5,20] crosses G by 10.
    df = pl.DataFrame(
        {
            "pid": [1] * 6 + [1, 1],
            "tid": [1] * 6 + [2, 2],
            "ts_ns": [0, 10, 40, 200, 250, 400, 0, 5],
            "end_ns": [100, 50, 60, 300, 350, 400, 10, 20],
            "kind": ["cpu_op"] * 7 + ["python_function"],
        }
    )
    x = crossings(df)
    assert x["cross"].to_list() == [0, 0, 10, 0, 50, 0, 0, 10]
    assert x["cross_python"].to_list() == [False] * 7 + [True]


# ---- the command ----------------------------------------------------------------------------------


def test_health_command_and_info_hint():
    p = DATA / AMD
    r = cli("health", p, "--format", "json")
    assert r.rc == 0
    doc = json.loads(r.out)
    assert [row["check"] for row in doc["tables"]["problems"]] == [
        "distributed_info",
        "incomplete_last_step",
        "outside_steps",
    ]
    assert doc["notes"][0] == "health: 1 warning(s): incomplete_last_step"
    assert cli("health", p, "--fail-on-warning", "-q").rc == 1
    assert cli("health", DATA / "hta/cpu_only", "--fail-on-warning", "-q").rc == 0
    r = cli("health", p, "--all", "--format", "csv")
    assert r.rc == 0 and r.out.count("\n") == 1 + len(CHECKS) + 4
    r = cli("info", p, "--format", "json")
    assert "health: 1 warning(s): incomplete_last_step; details: ranksight health TRACES" in json.loads(r.out)["notes"]
    assert cli("analyze", "health", p, "--format", "csv").rc == 0
