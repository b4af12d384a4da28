"""The job-wide critical path over gloo collectives, on the repo's real gloo traces.

``ddp-gloo-2ranks`` (tests/data/generated/h100/README.md): DDP over gloo on one H100, rank 1's
Dataset sleeps 30 ms per batch, so rank 1 is the straggler and rank 0 waits in the all-reduces.
Gloo's collectives run on its own threads as ``gloo:all_reduce`` annotations; joined across
ranks (the traces list one process group), the path must run through rank 1's data loading
and cross to rank 0 at a gloo all-reduce that waited for rank 1. ``cpu-ddp-gloo-4ranks``: the
CPU-only 4-rank DDP run; its path crosses ranks only at gloo all-reduces.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import ranksight as rs
from ranksight.analyses import Session
from ranksight.analyses.critical_path import job_path

DATA = Path(__file__).resolve().parents[1] / "data" / "generated"
DUR = (pl.col("end_ns") - pl.col("start_ns")) / 1e3


def test_gloo_pair_path_runs_through_the_straggler_data_loading() -> None:
    sess = Session.of(rs.load(DATA / "h100" / "ddp-gloo-2ranks"))
    jp = job_path(sess)
    seg = jp.segments
    assert any(n.startswith("gloo collectives joined across ranks") for n in jp.notes)
    # rank 1's DataLoader (its 30 ms sleep) is on the path
    dl = seg.filter((pl.col("rank") == 1) & (pl.col("category") == "data_loading")).select(DUR.sum()).item()
    assert dl > 25_000
    # the path crosses to rank 0 at a gloo all-reduce whose last participant was rank 1
    assert jp.crossings.height >= 1
    assert set(jp.crossings["name"].to_list()) == {"gloo:all_reduce"}
    assert jp.crossings["waited_for"].to_list()[0] == 1 and jp.crossings["rank"].to_list()[0] == 0
    waited = seg.filter(pl.col("waiting_on_rank").is_not_null())
    assert waited.height == jp.crossings.height
    first = waited.row(0, named=True)
    assert (first["rank"], first["name"], first["category"], first["waiting_on_rank"]) == (
        0,
        "gloo:all_reduce",
        "communication",
        1,
    )
    # rank 0 waited there longer than rank 1's lateness (start − median of the two starts)
    cr = jp.crossings.row(0, named=True)
    assert cr["wait_ns"] > cr["lateness_ns"] > 0
    # tiles the step
    assert int((seg["end_ns"] - seg["start_ns"]).sum()) == jp.hi_ns - jp.lo_ns
    res = sess.result("critical-path")
    assert res["job_by_category"]["time_us"].sum() == pytest.approx((jp.hi_ns - jp.lo_ns) / 1e3, abs=1e-6)
    assert res["job_crossings"].height == jp.crossings.height


def test_cpu_gloo_4_ranks_crosses_only_at_gloo_collectives() -> None:
    jp = job_path(Session.of(rs.load(DATA / "cpu-ddp-gloo-4ranks")))
    seg = jp.segments
    assert seg["rank"].n_unique() > 1
    # every change of rank along the path is a crossing at a gloo all-reduce
    changes = seg.filter((pl.col("rank") != pl.col("rank").shift(1)).fill_null(False))
    assert changes.height == jp.crossings.height >= 1
    assert (changes["name"] == "gloo:all_reduce").all()
    assert (changes["waiting_on_rank"] == jp.crossings["waited_for"]).all()
    assert int((seg["end_ns"] - seg["start_ns"]).sum()) == jp.hi_ns - jp.lo_ns
