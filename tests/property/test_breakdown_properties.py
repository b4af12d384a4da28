"""Property tests for the breakdown analyses on random hand-built traces.

- temporal: idle + compute + non-compute = kernel time (whole trace and every step);
- kernel-types: the segments of a rank sum to its GPU busy time (kernel time − idle);
- overlap: the percentage is within [0, 100] and the efficiency within [0, 1];
- idle: gaps are ≥ 0 and an idle interval never overlaps a kernel of its stream;
- results of a rank do not depend on which other ranks are loaded.
"""

from __future__ import annotations

import json
import math
import tempfile
import warnings
from pathlib import Path

import numpy as np
import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ranksight
from ranksight.analyses import run_analysis

NAMES = ["gemm_kernel", "ncclDevKernel_AllReduce", "Memcpy HtoD (Pageable -> Device)", "relu_kernel"]

kernel = st.tuples(
    st.sampled_from([7, 8, 20]),  # stream
    st.integers(0, 2000),  # start µs
    st.integers(0, 300),  # duration µs
    st.sampled_from(NAMES),
    st.one_of(st.none(), st.integers(0, 2000)),  # launch start (None: no launch)
)
kernels = st.lists(kernel, min_size=1, max_size=25)


def _events(ks: list[tuple], rank: int) -> list[dict]:
    ev: list[dict] = [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "ProfilerStep#1",
            "ts": 0,
            "dur": 1000,
            "pid": 1,
            "tid": 1,
            "args": {},
        },
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "ProfilerStep#2",
            "ts": 1000,
            "dur": 1000,
            "pid": 1,
            "tid": 1,
            "args": {},
        },
    ]
    for i, (stream, ts, dur, name, launch) in enumerate(ks):
        cat = "gpu_memcpy" if name.startswith("Memcpy") else "kernel"
        args = {"stream": stream, "device": 0}
        if launch is not None:
            args["correlation"] = i + 1
            ev.append(
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaLaunchKernel",
                    "ts": launch,
                    "dur": 1,
                    "pid": 1,
                    "tid": 1,
                    "args": {"correlation": i + 1},
                }
            )
        ev.append({"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 0, "tid": stream, "args": args})
    return ev


def _load(*ranks: list[tuple]) -> ranksight.Run:
    with tempfile.TemporaryDirectory(prefix="rs-prop-") as tmp:
        paths = {}
        for r, ks in enumerate(ranks):
            p = Path(tmp) / f"rank{r}.json"
            p.write_text(json.dumps({"distributedInfo": {"rank": r}, "traceEvents": _events(ks, r)}))
            paths[r] = str(p)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ranksight.load(paths, jobs=1)


SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(kernels)
def test_temporal_parts_sum_to_span(ks):
    run = _load(ks)
    res = run_analysis("temporal", run, per_step=True)
    for df, span in ((res["temporal"], "kernel_time_us"), (res["per_step"], "step_time_us")):
        for r in df.iter_rows(named=True):
            assert r["idle_us"] + r["compute_us"] + r["non_compute_us"] == r[span]
            assert min(r["idle_us"], r["compute_us"], r["non_compute_us"]) >= 0


@SETTINGS
@given(kernels)
def test_kernel_type_segments_sum_to_busy_time(ks):
    run = _load(ks)
    t = run_analysis("temporal", run)["temporal"].row(0, named=True)
    kt = run_analysis("kernel-types", run)["kernel_types"]
    assert kt["sum_us"].sum() == t["kernel_time_us"] - t["idle_us"]


@SETTINGS
@given(kernels)
def test_overlap_bounds(ks):
    r = run_analysis("overlap", _load(ks))["overlap"].row(0, named=True)
    p, e = r["comp_comm_overlap_pctg"], r["hidden_share_of_shorter"]
    assert math.isnan(p) or 0.0 <= p <= 100.0
    assert math.isnan(e) or 0.0 <= e <= 1.0
    assert r["overlap_us"] <= min(r["compute_us"], r["comm_us"])


@SETTINGS
@given(kernels)
def test_idle_intervals_never_overlap_a_kernel_of_their_stream(ks):
    from ranksight.analyses.idle import idle_gaps_rank

    run = _load(ks)
    gaps = idle_gaps_rank(run[0]).filter(pl.col("gap_ns") > 0)
    assert (idle_gaps_rank(run[0])["gap_ns"].drop_nulls() >= 0).all()
    g = run[0].gpu_events
    for r in gaps.iter_rows(named=True):
        s = g.filter(pl.col("stream") == r["stream"])
        lo, hi = r["prev_end_ns"], r["ts_ns"]
        inside = s.filter((pl.col("ts_ns") < hi) & (pl.col("end_ns") > lo))
        assert inside.height == 0
    # the idle totals add up to the gaps
    tot = run_analysis("idle", run)["idle"]["idle_us"].sum()
    assert np.isclose(tot, gaps["gap_ns"].sum() / 1e3)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kernels, kernels)
def test_rank_results_do_not_depend_on_other_ranks(k0, k1):
    alone = _load(k0)
    both = _load(k0, k1)
    for name in ("temporal", "idle", "kernel-types", "kernels", "overlap"):
        a = run_analysis(name, alone)
        b = run_analysis(name, both, ranks=[0])
        for key in a.tables:
            assert a[key].equals(b[key]), (name, key)
