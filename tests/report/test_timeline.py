"""The timeline block's payload (report section ``timeline``, src/ranksight/report/html/sections_timeline.py).

Exact values on the hand-built 4-rank scenario (tests/unit/dist_traces.py: rank 2's clock 500 µs
ahead on its own host, rank 1 late to the second all-reduce, rank 3 missing from the third):
the window, the offsets, every event at its aligned time once, tracks and lanes, the linked
collectives and their last arrivals, idle gaps from ``idle-causes``, the critical path from the
analysis when it is there, the rank selection beyond ``max_ranks``, the event cap. The packed
arrays are decoded here as the browser does (little-endian base64).
"""

from __future__ import annotations

import base64
import json
import sys
import types
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from tests.unit.dist_traces import rank_events, scenario, write_rank

import ranksight
from ranksight.analyses import Session
from ranksight.report.aligned import critical_path
from ranksight.report.html import sections_timeline
from ranksight.report.html.payload import SCHEMA_NAME, SCHEMA_VERSION, StringTable
from ranksight.report.html.sections_timeline import FLAG_BITS, _unit_ns, timeline_block

ROOT = Path(__file__).resolve().parents[2]
DT = {"uint8": "<u1", "uint16": "<u2", "uint32": "<u4", "int32": "<i4"}


def arr(col: dict) -> np.ndarray:
    return np.frombuffer(base64.b64decode(col["data"]), dtype=DT[col["dtype"]])


def events(b: dict, st: StringTable) -> pl.DataFrame:
    """The block's events as a table, lanes expanded: track, depth, start, dur, name, cat, row, flags."""
    ev = b["events"]
    lanes = ev["lanes"]
    track = np.repeat(lanes["track"], lanes["count"])
    depth = np.repeat(lanes["depth"], lanes["count"])
    names = [st.strings[i] for i in b["names"]]
    return pl.DataFrame(
        {
            "i": np.arange(ev["n"]),
            "track": track,
            "depth": depth,
            "rank": [b["tracks"]["rank"][t] for t in track],
            "start": arr(ev["start"]).astype(np.int64),
            "dur": arr(ev["dur"]).astype(np.int64),
            "name": [names[i] for i in arr(ev["name"])],
            "cat": [b["categories"][i] for i in arr(ev["cat"])],
            "row": arr(ev["row"]).astype(np.int64),
            "flags": arr(ev["flags"]),
        }
    )


def doc_of(block: dict, st: StringTable, ranks: list[int]) -> dict:
    return {
        "schema": SCHEMA_NAME,
        "version": SCHEMA_VERSION,
        "generator": "test",
        "created_utc": "2025-01-01T00:00:00Z",
        "title": st("t"),
        "inputs": [],
        "ranks": ranks,
        "groups": ["Steps"],
        "sections": [
            {
                "slug": "timeline",
                "title": "Timeline",
                "group": "Steps",
                "help": "",
                "needs": [],
                "shown": True,
                "reason": None,
                "notes": [],
                "blocks": [block],
            }
        ],
        "failures": [],
        "strings": st.strings,
    }


def validate(block: dict, st: StringTable, ranks: list[int]) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "docs" / "report-schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(doc_of(block, st, ranks))


@pytest.fixture(scope="module")
def scen_run(tmp_path_factory):
    return ranksight.load(scenario(tmp_path_factory.mktemp("scen")), cache=False)


NO_PATH = "the critical-path analysis is not available in this ranksight version"


@pytest.fixture
def no_critical_path(monkeypatch):
    """As if the critical-path analysis were not available (the layout without its track)."""
    monkeypatch.setattr(sections_timeline, "critical_path", lambda sess, step: (None, NO_PATH))


@pytest.fixture(scope="module")
def scen_block(scen_run):
    st = StringTable()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sections_timeline, "critical_path", lambda sess, step: (None, NO_PATH))
        b, notes = timeline_block(Session(scen_run), st)
    return b, notes, st


def test_critical_path_missing_module(scen_run, monkeypatch):
    monkeypatch.setitem(sys.modules, "ranksight.analyses.critical_path", None)
    assert critical_path(Session(scen_run), 1) == (None, NO_PATH)


def test_window_offsets_and_every_event_once(scen_run, scen_block):
    b, notes, st = scen_block
    validate(b, st, scen_run.ranks)
    # step 1: 900–3200 µs on every rank's aligned clock (rank 2's own clock reads 1400–3700)
    assert b["step"] == 1 and b["t0_ns"] == 900_000 and b["span_ns"] == 2_300_000 and b["unit_ns"] == 1
    assert b["ranks"] == [0, 1, 2, 3] and b["offsets_ns"] == [0, 0, 500_000, 0] and b["aligned"] is True
    ev = events(b, st)
    for r in scen_run.ranks:
        inp = (
            scen_run[r]
            .events.filter(
                pl.col("kind").cast(pl.String).is_in(["cpu_op", "user_annotation", "cuda_runtime", "kernel"])
            )
            .select("row", "ts_ns", "dur_ns", pl.col("name").cast(pl.String))
            .sort("row")
        )
        got = ev.filter(pl.col("rank") == r).sort("row")
        assert got["row"].to_list() == inp["row"].to_list()  # each once
        off = 500_000 if r == 2 else 0
        assert got["start"].to_list() == (inp["ts_ns"] - off - 900_000).to_list()
        assert got["dur"].to_list() == inp["dur_ns"].to_list()
        assert got["name"].to_list() == inp["name"].to_list()
    # sorted by (track, depth, start) so each lane can be binary-searched
    assert ev.sort(["track", "depth", "start"], maintain_order=True)["i"].to_list() == ev["i"].to_list()


def test_tracks_and_lanes(scen_block):
    b, _, st = scen_block
    t = b["tracks"]
    labels = [st.strings[i] for i in t["label"]]
    assert t["rank"] == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert t["kind"] == ["cpu", "gpu", "idle"] * 4
    assert labels[:3] == ["thread 100", "GPU 0 stream 7", "GPU idle by cause"]
    # record_param_comms (15 µs) encloses cudaLaunchKernel (2 µs) inside ProfilerStep#1: 3 lanes on the thread
    assert t["lanes"][0] == 3 and t["lanes"][1] == 1
    ev = events(b, st)
    assert set(ev.filter(pl.col("name") == "ProfilerStep#1")["depth"]) == {0}
    assert set(ev.filter(pl.col("name") == "record_param_comms")["depth"]) == {1}
    assert set(ev.filter(pl.col("name") == "cudaLaunchKernel")["depth"]) == {1, 2}  # gemm launches sit at 1


def test_collectives_linked_with_last_arrival(scen_block):
    b, _, st = scen_block
    c = b["collectives"]
    ev = events(b, st)
    off = arr(c["offsets"])
    members = arr(c["events"])
    assert c["n"] == 3 and list(np.diff(off)) == [4, 4, 3]
    late = arr(c["late"])
    # the last to arrive: rank 3 (1030 µs), rank 1 (2300 µs, its slow_gemm ahead), rank 2 (3010 µs)
    assert [ev["rank"][int(i)] for i in late] == [3, 1, 2]
    assert all(ev["cat"][int(i)] == "communication kernel" for i in members)
    flags = ev["flags"].to_numpy()
    assert set(np.flatnonzero(flags & FLAG_BITS["late"])) == set(late.tolist())
    assert set(np.flatnonzero(flags & FLAG_BITS["collective"])) == set(members.tolist())
    # waits: instance 1 (late rank 1 at 2300): ranks 0, 2, 3 waited 300, 290, 280 µs; rank 1 none
    w = arr(c["wait"])[off[1] : off[2]]
    assert [ev["rank"][int(i)] for i in members[off[1] : off[2]]] == [0, 1, 2, 3]
    assert w.tolist() == [300_000, 0, 290_000, 280_000]


def test_idle_gaps_from_idle_causes(scen_run, scen_block):
    b, _, st = scen_block
    g = b["gaps"]
    res = Session(scen_run).result("idle-causes").tables["gaps"]
    lanes = g["lanes"]
    assert (
        sum(lanes["count"])
        == g["n"]
        == res.filter(pl.col("end_ns") > 900_000 + pl.when(pl.col("rank") == 2).then(500_000).otherwise(0)).height
    )
    starts = arr(g["start"]).astype(np.int64)
    durs = arr(g["dur"]).astype(np.int64)
    track = np.repeat(lanes["track"], lanes["count"])
    r2 = [i for i in range(g["n"]) if b["tracks"]["rank"][track[i]] == 2]
    exp = res.filter(pl.col("rank") == 2).sort("start_ns")
    assert starts[r2].tolist() == (exp["start_ns"].clip(lower_bound=1_400_000) - 1_400_000).to_list()
    assert durs[r2].tolist() == (exp["end_ns"] - exp["start_ns"].clip(lower_bound=1_400_000)).to_list()
    assert set(b["tracks"]["kind"][t] for t in lanes["track"]) == {"idle"}


def test_critical_path_when_available(scen_run, monkeypatch):
    seg = pl.DataFrame(
        {
            "rank": [1, 1],
            "stream": [None, 7],
            "tid": [100, None],
            "row": [None, None],
            "name": ["slow_gemm launch", "slow_gemm"],
            "start_ns": [1_960_000, 2_050_000],
            "end_ns": [1_962_000, 2_290_000],
            "type": ["launch", "kernel"],
        },
        schema_overrides={"row": pl.Int64, "stream": pl.Int64, "tid": pl.Int64},
    )
    k = scen_run[1].events.filter(pl.col("name").cast(pl.String) == "slow_gemm")
    seg = seg.with_columns(pl.Series("row", [None, int(k["row"][0])], dtype=pl.Int64))
    mod = types.ModuleType("ranksight.analyses.critical_path")
    mod.critical_path_segments = lambda run, step=None: seg  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ranksight.analyses.critical_path", mod)
    st = StringTable()
    b, notes = timeline_block(Session(scen_run), st, max_ranks=2)
    validate(b, st, scen_run.ranks)
    p = b["path"]
    assert p["n"] == 2 and p["types"] == ["kernel", "launch"]
    assert arr(p["start"]).tolist() == [1_060_000, 1_150_000] and arr(p["dur"]).tolist() == [2_000, 240_000]
    assert b["tracks"]["kind"][0] == "path" and b["tracks"]["rank"][0] == -1
    ev = events(b, st)
    hit = int(arr(p["event"])[1])
    assert ev["name"][hit] == "slow_gemm" and ev["rank"][hit] == 1 and arr(p["event"])[0] == -1
    assert set(np.flatnonzero(ev["flags"].to_numpy() & FLAG_BITS["critical"])) == {hit}
    # rank 1 (on the path) is among the ranks shown although only 2 of 4 are
    assert 1 in b["ranks"]


def test_rank_selection_beyond_max_ranks(scen_run, no_critical_path):
    st = StringTable()
    b, notes = timeline_block(Session(scen_run), st, max_ranks=2)
    # peers waited 870 µs for rank 1, 60 for rank 3, 15 for rank 2, none for rank 0
    assert b["ranks"] == [0, 1] and b["all_ranks"] == 4
    assert "2 of 4 ranks shown: the 1 most waited for in this step's collectives (1) and the 1 least (0)" in notes
    assert set(b["tracks"]["rank"]) == {0, 1}
    validate(b, st, b["ranks"])


def test_event_cap_cuts_the_window(scen_run):
    st = StringTable()
    b, notes = timeline_block(Session(scen_run), st, max_events=10)
    assert b["events"]["n"] <= 10 + 4  # events starting at the cut instant are kept
    assert any("holds more than 10 events" in n for n in notes)
    ev = events(b, st)
    assert int(ev["start"].max()) <= b["span_ns"]


def test_one_rank_without_steps(tmp_path):
    ev = rank_events(colls=[], kernels=[{"name": "gemm", "start": 100, "end": 150}])
    run = ranksight.load(write_rank(tmp_path, 0, ev, world=1), cache=False)
    st = StringTable()
    b, notes = timeline_block(Session(run), st)
    validate(b, st, [0])
    assert b["step"] is None and "whole trace" in b["window"]
    assert b["aligned"] is False and b["offsets_ns"] == [0] and b["collectives"] is None
    assert b["t0_ns"] == 90_000 and b["span_ns"] == 60_000
    assert events(b, st)["name"].to_list() == ["cudaLaunchKernel", "gemm"]


def test_unit_for_long_windows():
    assert _unit_ns(2**32 - 2) == 1
    assert _unit_ns(5_000_000_000) == 10
    assert _unit_ns(100 * 10**9) == 100


def test_demo_report_has_the_timeline(demo_doc):
    sec = next(s for s in demo_doc["sections"] if s["slug"] == "timeline")
    assert sec["shown"], sec["reason"]
    b = sec["blocks"][0]
    assert b["type"] == "timeline" and b["step"] == 10 and b["ranks"] == list(range(8))
    assert b["collectives"]["n"] == 8 and b["gaps"]["n"] > 0
    # step 10's events of the 8 ranks (the ProfilerStep window of each rank, united)
    assert b["events"]["n"] == 19_780


def test_rank_selection_without_collectives(tmp_path, no_critical_path):
    paths = [
        write_rank(tmp_path, r, rank_events(colls=[], kernels=[{"name": "gemm", "start": 100, "end": 150}]), world=3)
        for r in range(3)
    ]
    st = StringTable()
    b, notes = timeline_block(Session(ranksight.load(paths, cache=False)), st, max_ranks=2)
    assert b["ranks"] == [0, 2] and b["collectives"] is None
    assert (
        "2 of 3 ranks shown: no rank waited for another in this step's collectives, so the first 1 and the last 1"
        in notes
    )


def test_real_critical_path(scen_run):
    """With the critical-path analysis: its segments of the step on the top track, the events on
    the path flagged, every rank on the path shown."""
    cp_mod = pytest.importorskip("ranksight.analyses.critical_path")
    sess = Session(scen_run)
    seg = cp_mod.critical_path_segments(sess, step=1).sort("start_ns")
    st = StringTable()
    b, notes = timeline_block(sess, st, max_ranks=2)
    validate(b, st, b["ranks"])
    p = b["path"]
    assert p["n"] == seg.height > 0 and b["tracks"]["kind"][0] == "path"
    assert arr(p["start"]).tolist() == (seg["start_ns"].clip(lower_bound=900_000) - 900_000).to_list()
    assert set(seg["rank"].to_list()) <= set(b["ranks"])
    assert sorted(set(p["categories"])) == sorted(set(seg["category"].to_list()))
    ev = events(b, st)
    hit = arr(p["event"])
    on = seg.with_columns(pl.Series("hit", hit)).filter(pl.col("row").is_not_null())
    assert (on["hit"] >= 0).all()  # every segment with an event points at it
    assert [ev["row"][int(i)] for i in on["hit"]] == on["row"].to_list()
    assert set(np.flatnonzero(ev["flags"].to_numpy() & FLAG_BITS["critical"])) == set(on["hit"].to_list())
    assert any(n.startswith("critical path (") for n in notes)
