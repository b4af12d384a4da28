"""The job-wide critical path on the 8-rank DLRM example (ProfilerStep 10).

The stragglers analysis finds rank 7 last at the first four all-to-alls (it entered the step
late and launched them late: host side). The job path must run through rank 7's host work before
the first all-to-all and cross to another rank only at a collective rank 7 was last to; its
segments tile the step window, so the time per category sums to the step time; removing rank 7's
lateness saves time, at most its lead over the next-latest rank at the collectives it was last to
(with it on time those ranks hold the collective)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import ranksight as rs
from ranksight.analyses import Session
from ranksight.analyses.collectives import comm_data
from ranksight.analyses.critical_path import CATEGORIES, critical_path_segments, job_path

DLRM = Path(__file__).resolve().parents[2] / "src" / "ranksight" / "data" / "examples" / "dlrm"


@pytest.fixture(scope="module")
def sess() -> Session:
    return Session.of(rs.load(DLRM))


def test_dlrm_segments_tile_the_step(sess: Session) -> None:
    jp = job_path(sess)
    seg = jp.segments
    assert jp.step == 10
    assert set(seg["category"].unique().to_list()) <= set(CATEGORIES)
    # contiguous, ordered, and summing to the step window exactly
    assert seg["start_ns"][0] == jp.lo_ns and seg["end_ns"][-1] == jp.hi_ns
    assert (seg["start_ns"].shift(-1).head(seg.height - 1) == seg["end_ns"].head(seg.height - 1)).all()
    assert int((seg["end_ns"] - seg["start_ns"]).sum()) == jp.hi_ns - jp.lo_ns
    res = sess.result("critical-path")
    assert res["job_by_category"]["time_us"].sum() == pytest.approx((jp.hi_ns - jp.lo_ns) / 1e3, abs=1e-6)
    assert res["job_by_rank"]["time_us"].sum() == pytest.approx((jp.hi_ns - jp.lo_ns) / 1e3, abs=1e-6)
    s2 = critical_path_segments(sess, step=10)
    assert s2.columns[:8] == ["rank", "stream", "tid", "row", "name", "start_ns", "end_ns", "type"]
    assert s2.schema["row"] == pl.UInt32


def test_dlrm_path_runs_through_rank_7_before_the_first_all_to_all(sess: Session) -> None:
    jp = job_path(sess)
    seg = jp.segments
    pr = comm_data(sess).per_rank
    first = pr.filter(pl.col("instance") == 0)
    assert first["coll_type"].unique().to_list() == ["all_to_all"]
    launch7 = int(first.filter(pl.col("rank") == 7)["launch_ns"][0])  # offsets are 0 on this run
    # from the window start to rank 7's launch of the first all-to-all the path is on rank 7
    before = seg.filter(pl.col("start_ns") < launch7)
    assert before["rank"].unique().to_list() == [7]
    # ... through its host work: CPU ops, data loading and the host time between them
    dur = (pl.col("end_ns") - pl.col("start_ns")) / 1e3
    host = before.filter(pl.col("category").is_in(["host", "data_loading"])).select(dur.sum()).item()
    assert host > 2000  # µs
    assert before.filter(pl.col("type") == "cpu_op")["tid"].unique().to_list() == [59818]  # rank 7's main thread
    # the path leaves rank 7 only at a collective rank 7 was last to: the next segment is another
    # rank's collective kernel, from the ready point (rank 7's start) to its end
    k = int(seg.with_row_index().filter(pl.col("rank") != 7)["index"][0])
    nxt = seg.row(k, named=True)
    assert nxt["category"] == "communication"
    inst = pr.filter((pl.col("rank") == nxt["rank"]) & (pl.col("row") == nxt["row"]))["instance"][0]
    starts = pr.filter(pl.col("instance") == inst).sort("start_ns")
    assert starts["rank"][-1] == 7 and nxt["start_ns"] == starts["start_ns"][-1]
    # ... and that segment records the rank it waited for, as does the crossing (the only one)
    assert nxt["waiting_on_rank"] == 7
    assert seg["waiting_on_rank"].drop_nulls().to_list() == [7]
    cr = jp.crossings.row(0, named=True)
    assert jp.crossings.height == 1 and (cr["instance"], cr["waited_for"], cr["rank"]) == (inst, 7, nxt["rank"])
    assert cr["wait_ns"] == starts["start_ns"][-1] - starts.filter(pl.col("rank") == nxt["rank"])["start_ns"][0]
    late7 = sess.result("stragglers")["instances"].filter(pl.col("instance") == inst)
    assert late7["late_rank"][0] == 7 and cr["lateness_ns"] / 1e3 == late7["lateness_us"][0]
    assert sess.result("critical-path")["job_crossings"]["waited_for"].to_list() == [7]


def test_dlrm_path_follows_the_backward_pass_on_the_autograd_thread(sess: Session) -> None:
    # rank 4's main thread (59815) waits in loss.backward() while the autograd engine's device
    # thread (60015) runs the backward ops: folded into the main thread, the path follows them
    seg = job_path(sess).segments.filter((pl.col("rank") == 4) & (pl.col("type") == "cpu_op"))
    bwd = seg.filter(pl.col("tid") == 60015)
    assert bwd.height > 100
    assert bwd["name"].str.starts_with("autograd::engine::evaluate_function").any()


def test_dlrm_rank_7_what_if_agrees_with_the_stragglers(sess: Session) -> None:
    jp = job_path(sess)
    st = sess.result("stragglers")["instances"].select("instance", "late_rank", "lateness_us")
    mine = jp.late.select("instance", pl.col("rank").alias("late_rank"), (pl.col("lateness_ns") / 1e3).alias("lat"))
    both = st.join(mine, on=["instance", "late_rank"], how="inner")
    # the same late rank and lateness (start − median start) at every instance the stragglers list
    assert both.height == st.height == 8
    assert (both["lateness_us"] == both["lat"]).all()
    wi = jp.what_if.filter((pl.col("scenario") == "rank not late") & (pl.col("target") == "rank 7"))
    saving_us = wi["saving_ms"][0] * 1e3
    # removing rank 7's lateness alone saves at most its lead over the next-latest rank at the
    # collectives it was last to, and the stragglers' wait it caused bounds that
    pr = comm_data(sess).per_rank.filter(
        pl.col("instance").is_in(jp.late.filter(pl.col("rank") == 7)["instance"].implode())
    )
    lead = pr.group_by("instance").agg(
        (pl.col("start_ns").sort().get(-1) - pl.col("start_ns").sort().get(-2)).alias("lead_ns")
    )
    lead_us = lead["lead_ns"].sum() / 1e3
    caused = sess.result("stragglers")["ranks"].filter(pl.col("rank") == 7)["wait_caused_us"][0]
    assert 0 < saving_us <= lead_us <= caused
    assert saving_us == pytest.approx(509.0)
    assert lead_us == pytest.approx(1309.0)
