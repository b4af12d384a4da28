"""stragglers on the hand-built scenario (known lateness and cause) and pinned on the DLRM example."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from tests.unit.dist_traces import scenario

import ranksight
from ranksight.analyses import run_analysis
from ranksight.data import example_path


@pytest.fixture(scope="module")
def dlrm() -> ranksight.Run:
    return ranksight.load(example_path("dlrm"))


def test_scenario_names_rank1_with_compute_cause(tmp_path: Path) -> None:
    res = run_analysis("stragglers", ranksight.load(scenario(tmp_path)))
    inst = res["instances"]
    assert inst["late_rank"].to_list() == [3, 1, 2]
    one = inst.filter(pl.col("instance") == 1).row(0, named=True)
    # aligned starts 2000, 2300, 2010, 2020: median 2015, so rank 1 is 285 µs late; it was
    # launched on time (1985 µs), the GPU was busy with slow_gemm (240 µs vs 40 µs elsewhere)
    assert one["lateness_us"] == 285.0
    assert one["late_launch_us"] == 0.0 and one["after_launch_us"] == 285.0
    assert one["cause"] == "compute"
    assert one["wait_caused_us"] == 870.0
    assert one["evidence"] == "[gpu] slow_gemm +200.0 µs"
    ranks = res["ranks"]
    assert ranks["rank"][0] == 1 and ranks["wait_caused_us"][0] == 870.0
    assert ranks["wait_share"][0] == pytest.approx(870 / 945)
    assert res.notes[0].startswith("straggler: rank 1 arrived last at 1 of 3 collectives")
    w = res["wait_by_step"]
    assert w["step_1"].to_list() == [340.0, 25.0, 300.0, 280.0]


def test_scenario_host_cause_when_launch_is_late(tmp_path: Path) -> None:
    # the first collective: rank 3 launched 15 µs after the median rank, the GPU was idle
    res = run_analysis("stragglers", ranksight.load(scenario(tmp_path)))
    zero = res["instances"].filter(pl.col("instance") == 0).row(0, named=True)
    assert zero["late_rank"] == 3 and zero["cause"] == "host"
    assert zero["lateness_us"] == 15.0 and zero["late_launch_us"] == 15.0


def test_min_skew_threshold_hides_small_skews(tmp_path: Path) -> None:
    res = run_analysis("stragglers", ranksight.load(scenario(tmp_path)), min_skew_us=50.0)
    assert res["instances"]["instance"].to_list() == [1]


# ---- the built-in DLRM example (8 ranks, one step): the numbers docs/stragglers.md explains ----


def test_dlrm_collectives_match_across_all_ranks(dlrm: ranksight.Run) -> None:
    res = run_analysis("collectives", dlrm)
    inst = res["instances"]
    assert inst.height == 8
    assert inst["ranks_present"].to_list() == [8] * 8
    assert inst["missing_ranks"].to_list() == [""] * 8
    assert inst["coll_type"].to_list() == ["all_to_all"] * 4 + ["all_reduce", "all_to_all", "all_reduce", "all_reduce"]
    assert res["collectives"].height == 64


def test_dlrm_first_collective_wait_pattern(dlrm: ranksight.Run) -> None:
    per = run_analysis("collectives", dlrm)["collectives"].filter(pl.col("instance") == 0).sort("rank")
    # rank 7's kernel lasts 10 µs; ranks 1 and 3 wait 7.6 and 6.1 ms for it
    assert per.filter(pl.col("rank") == 7)["dur_us"].item() == 10.0
    assert per["wait_us"].to_list() == [2135.0, 7624.0, 508.0, 6122.0, 4872.0, 4669.0, 505.0, 0.0]
    steps = [(t.steps["end_ns"][0] - t.steps["start_ns"][0]) / 1e3 for t in dlrm]
    assert min(steps) == 12509.0 and max(steps) == 19901.0  # step time 12.5–19.9 ms per rank


def test_dlrm_stragglers_pinned(dlrm: ranksight.Run) -> None:
    res = run_analysis("stragglers", dlrm)
    ranks = res["ranks"]
    top = ranks.row(0, named=True)
    assert (
        top["rank"] == 7 and top["times_last"] == 5 and top["wait_caused_us"] == 35552.0 and top["main_cause"] == "host"
    )
    assert ranks["rank"].to_list()[:3] == [7, 5, 4]
    assert ranks["times_last"].to_list()[:3] == [5, 2, 1]
    inst = res["instances"]
    assert inst["late_rank"].to_list() == [7, 7, 7, 7, 7, 5, 5, 4]
    assert set(inst["cause"].to_list()) == {"host"}
    first = inst.row(0, named=True)
    # rank 7 launched 3402 µs after the median rank; it entered step 10 3283.5 µs after the median rank
    assert first["lateness_us"] == 3402.0 and first["carried_us"] == 3283.5 and first["segment_us"] == 118.5
    assert first["wait_caused_us"] == 26435.0
    assert first["late_ranks"] == "2,6,7"  # HTA's oracle names [2, 7]
    assert first["detail"] == "launched 3402 µs late: entered step 10 3284 µs after the median rank"
    assert res.notes[0].startswith(
        "straggler: rank 7 arrived last at 5 of 8 collectives and cost the others 35,552 µs of wait (76 %)"
    )
    assert "also late there (≥ half its lateness): ranks 2, 6" in res.notes[0]
    w = res["wait_by_step"].sort("rank")
    assert w["step_10"].to_list() == [5580.0, 11125.0, 3280.0, 9571.0, 6370.0, 6041.0, 3342.0, 1534.0]


def test_dlrm_hta_oracle_names_rank7_too(dlrm: ranksight.Run, shared_oracles: Path) -> None:
    oracle = pl.read_csv(shared_oracles / "dlrm_8ranks" / "potential_stragglers.csv")["potential_stragglers"].to_list()
    res = run_analysis("stragglers", dlrm)
    named_last = res["ranks"]["rank"][0]
    assert named_last in oracle  # 7
    assert set(oracle) <= {int(r) for r in res["instances"]["late_ranks"][0].split(",")}  # {2, 7} ⊂ {2, 6, 7}


# ---- input-pipeline cause: a rank whose DataLoader fetch runs long ------------------------------

FETCH = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def _data_scenario(dirpath: Path, launch_tid: int) -> Path:
    """2 ranks, one step [0, 2000] µs on the loop thread (CPU_TID). Rank 1's DataLoader fetch at the
    step start takes 500 µs (rank 0's: 20 µs), so it enqueues the first all-reduce 250 µs after the
    median rank and is still late at the second; at the third, rank 0 launches 50 µs late.
    ``launch_tid``: the thread that issues the collectives (DDP issues them from autograd's)."""
    from tests.unit.dist_traces import CPU_TID, _x, rank_events, write_rank

    starts = [(120, 620), (920, 1410), (1700, 1600)]
    ends = [800, 1500, 1800]
    for r in range(2):
        colls = [
            {"start": s[r], "end": e, "launch": s[r] - 20, "seq": i, "group_size": 2, "ranks": "[0, 1]"}
            for i, (s, e) in enumerate(zip(starts, ends))
        ]
        ev = rank_events(colls=colls, steps=[(1, 0, 2000)])
        for e in ev:
            if e["name"] in ("record_param_comms", "cudaLaunchKernel"):
                e["tid"] = launch_tid
        ev.append(_x(FETCH, "user_annotation", 10, 500 if r == 1 else 20, tid=CPU_TID))
        write_rank(dirpath, r, ev, world=2)
    return dirpath


@pytest.mark.parametrize("launch_tid", [100, 200], ids=["launch-on-loop-thread", "launch-on-autograd-thread"])
def test_a_long_dataloader_fetch_is_the_data_cause(tmp_path: Path, launch_tid: int) -> None:
    res = run_analysis("stragglers", ranksight.load(_data_scenario(tmp_path, launch_tid)))
    inst = {r["instance"]: r for r in res["instances"].iter_rows(named=True)}
    # median start (120 + 620) / 2 = 370: rank 1 is 250 µs late, all of it a late launch that
    # arose in the step's first segment; its fetch exceeds the median rank's (260 µs) by 240 µs
    zero = inst[0]
    assert (zero["late_rank"], zero["lateness_us"], zero["late_launch_us"], zero["segment_us"]) == (
        1,
        250.0,
        250.0,
        250.0,
    )
    assert zero["cause"] == "data"
    assert (
        zero["detail"]
        == "launched 250 µs late: input pipeline (DataLoader) +240 µs over the median rank since previous collective"
    )
    assert zero["evidence"] == f"[cpu] {FETCH[:60]} +240.0 µs"
    # the second: 245 µs late, all carried from the first: the first's cause, the carried sentence
    one = inst[1]
    assert (one["late_rank"], one["carried_us"], one["segment_us"], one["cause"]) == (1, 245.0, 0.0, "data")
    assert one["detail"] == "launched 245 µs late: already 245 µs late at its previous collective"
    # the third: rank 0 launched 50 µs late with no fetch in its segment: host
    assert (inst[2]["late_rank"], inst[2]["cause"]) == (0, "host")
    ranks = res["ranks"].row(0, named=True)
    assert (ranks["rank"], ranks["main_cause"], ranks["wait_caused_us"]) == (1, "data", 990.0)
    # 990 of 1090 µs of wait (91 %): named although below 2/n = 100 % (the cap is 75 %)
    assert ranks["wait_share"] == pytest.approx(990 / 1090)
    assert (
        res.notes[0].startswith("straggler: rank 1 arrived last at 2 of 3 collectives")
        and "main cause data" in res.notes[0]
    )


def test_an_even_fetch_is_not_the_data_cause(tmp_path: Path) -> None:
    from tests.unit.dist_traces import CPU_TID, _x

    d = _data_scenario(tmp_path, 100)
    for r in range(2):  # both ranks fetch for 20 µs: rank 1's lateness is other host work
        p = d / f"rank{r}.json"
        doc = json.loads(p.read_text())
        doc["traceEvents"] = [e for e in doc["traceEvents"] if e["name"] != FETCH] + [
            _x(FETCH, "user_annotation", 10, 20, tid=CPU_TID)
        ]
        p.write_text(json.dumps(doc))
    inst = run_analysis("stragglers", ranksight.load(d))["instances"]
    assert inst.filter(pl.col("instance") == 0)["cause"].item() == "host"  # a GPU collective launched late


def test_evidence_ties_are_ordered_by_name_not_by_join_order() -> None:
    """Two names that exceed the median rank's time by the same amount are listed by name (they
    came in join order, which differed between runs of the same report)."""
    from ranksight.analyses.stragglers import _evidence

    names = [f"k{i:02d}" for i in range(40)][::-1]  # many ties, given in reverse order
    rows = [(0, "gpu", n, r, 5_000 if r == 1 else 1_000) for n in names for r in (0, 1, 2)]
    work = pl.DataFrame(rows, schema=["instance", "side", "name", "rank", "total_ns"], orient="row").with_columns(
        pl.col("rank").cast(pl.Int32)
    )
    late = pl.DataFrame(
        {"instance": [0], "rank": [1], "segment_ns": [20_000], "after_launch_ns": [0]},
        schema_overrides={"rank": pl.Int32},
    )
    ev = _evidence(work, late, [0, 1, 2], top=3)
    assert ev["evidence"].to_list() == ["[gpu] k00 +4.0 µs; [gpu] k01 +4.0 µs; [gpu] k02 +4.0 µs"]
