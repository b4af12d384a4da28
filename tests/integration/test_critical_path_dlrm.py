"""The job-wide critical path on the 8-rank DLRM example: segments tile the step window, so the
time per category sums to the step time; the API the timeline reads has its columns."""

from __future__ import annotations

from pathlib import Path

import polars as pl

import ranksight as rs
from ranksight.analyses import Session
from ranksight.analyses.critical_path import CATEGORIES, critical_path_segments, job_path

DLRM = Path(__file__).resolve().parents[2] / "src" / "ranksight" / "data" / "examples" / "dlrm"


def test_dlrm_segments_tile_the_step() -> None:
    sess = Session.of(rs.load(DLRM))
    jp = job_path(sess)
    seg = jp.segments
    assert jp.step == 10
    assert set(seg["category"].unique().to_list()) <= set(CATEGORIES)
    # contiguous, ordered, and summing to the step window exactly
    assert seg["start_ns"][0] == jp.lo_ns and seg["end_ns"][-1] == jp.hi_ns
    assert (seg["start_ns"].shift(-1).head(seg.height - 1) == seg["end_ns"].head(seg.height - 1)).all()
    assert int((seg["end_ns"] - seg["start_ns"]).sum()) == jp.hi_ns - jp.lo_ns
    res = sess.result("critical-path")
    assert abs(res["job_by_category"]["time_us"].sum() - (jp.hi_ns - jp.lo_ns) / 1e3) < 1e-6
    s2 = critical_path_segments(sess, step=10)
    assert s2.columns[:8] == ["rank", "stream", "tid", "row", "name", "start_ns", "end_ns", "type"]
    assert s2.schema["row"] == pl.UInt32
