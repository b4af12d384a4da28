"""``ranksight export --perfetto``: the merged trace of the whole job (src/ranksight/report/perfetto.py).

On the hand-built 4-rank scenario (rank 2's clock 500 µs ahead on its own host, rank 3 missing
from the third all-reduce) and on the 8-rank DLRM example: the Chrome trace event format as
Perfetto's JSON reader and chrome://tracing take it, every input event present once per rank,
timestamps shifted by exactly the recorded offsets, collective flows paired and bound inside
the kernels they link, counter tracks as ``ranksight counters`` computes them, the critical-path
track, step and rank selection, never over an input, and the file loads back through
``ranksight.load``.
"""

from __future__ import annotations

import gzip
import json
import sys
import types
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from tests.unit.dist_traces import rank_events, scenario, write_rank

import ranksight
from ranksight.analyses import Session
from ranksight.data import example_path
from ranksight.errors import UsageError
from ranksight.report.counters import counter_events
from ranksight.report.perfetto import ID_STRIDE, SKIPPED_KINDS, WRITTEN_PHASES, write_perfetto

PHASES = {"X", "i", "B", "E", "M", "C", "s", "f"}
META_NAMES = {"process_name", "process_sort_index", "thread_name", "thread_sort_index"}


def _read(path: Path) -> dict[str, Any]:
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return json.loads(raw, parse_float=Decimal)  # exact µs.ns digits


def _ns(us: Any) -> int:
    """µs (int or Decimal with ns digits) as exact integer ns."""
    v = Decimal(us) * 1000
    assert v == v.to_integral_value(), us
    return int(v)


def _inputs(run: Any) -> dict[int, pl.DataFrame]:
    """Per rank, the events the merged file must hold: timed, written phases, not skipped kinds."""
    return {
        r: run[r]
        .events.filter(
            pl.col("ts_ns").is_not_null()
            & ~pl.col("kind").cast(pl.String).is_in(list(SKIPPED_KINDS))
            & pl.col("ph").cast(pl.String).is_in(list(WRITTEN_PHASES))
        )
        .select("row", "ts_ns", "dur_ns", pl.col("name").cast(pl.String), pl.col("kind").cast(pl.String))
        for r in run.ranks
    }


def check_format(doc: dict[str, Any]) -> None:
    """The Chrome trace event format, with what Perfetto's JSON reader needs on top: no
    displayTimeUnit (Perfetto reads "ns" as the unit of ts), ``ts`` before ``args`` and no array
    before ``ts`` in an event (its tokenizer scans keys in order), non-negative integer pid/tid,
    otherData before any other top-level key after traceEvents."""
    keys = list(doc)
    assert keys[0] == "traceEvents" and keys[1] == "otherData", keys
    assert "displayTimeUnit" not in doc
    assert all(isinstance(v, str) for v in doc["otherData"].values())
    assert isinstance(doc["baseTimeNanoseconds"], int)
    tid_pid: dict[int, int] = {}
    for e in doc["traceEvents"]:
        ph = e["ph"]
        assert ph in PHASES, e
        assert isinstance(e["pid"], int) and 0 <= e["pid"] < 2**31, e
        assert isinstance(e.get("name"), str), e
        if ph == "M":
            assert e["name"] in META_NAMES and isinstance(e["args"], dict), e
            assert "ts" not in e
            continue
        order = list(e)
        assert "ts" in order and all(not isinstance(e[k], list) for k in order[: order.index("ts")]), e
        assert isinstance(e["ts"], (int, Decimal)) and e["ts"] >= 0, e
        if "args" in e:
            assert order.index("args") > order.index("ts")
            assert not any(isinstance(v, (list, dict)) for v in e["args"].values()), e
        if ph == "C":
            assert e["args"] and all(isinstance(v, (int, Decimal)) for v in e["args"].values()), e
            continue
        assert isinstance(e["tid"], int) and 0 < e["tid"] < 2**32, e
        assert tid_pid.setdefault(e["tid"], e["pid"]) == e["pid"], "a tid used by two processes"
        if ph == "X":
            assert isinstance(e["dur"], (int, Decimal)) and e["dur"] >= 0 and isinstance(e["cat"], str), e
        if ph == "i":
            assert e["s"] == "t"
        if ph in ("s", "f"):
            assert isinstance(e["id"], int) and e["cat"] == "collective", e
            assert (ph == "f") == (e.get("bp") == "e"), e


def check_flows(doc: dict[str, Any]) -> int:
    """Each flow id has one start and one finish, same name, start before finish, on two
    processes, each inside a collective kernel of its thread; returns the number of flows."""
    by_id: dict[int, dict[str, Any]] = {}
    for e in doc["traceEvents"]:
        if e["ph"] in ("s", "f"):
            assert e["ph"] not in by_id.setdefault(e["id"], {}), f"flow {e['id']} has two {e['ph']}"
            by_id[e["id"]][e["ph"]] = e
    slices: dict[tuple[int, int], list[tuple[int, int, str]]] = {}
    for e in doc["traceEvents"]:
        if e["ph"] == "X":
            s = _ns(e["ts"])
            slices.setdefault((e["pid"], e["tid"]), []).append((s, s + _ns(e["dur"]), e["cat"]))
    for fid, pair in by_id.items():
        assert set(pair) == {"s", "f"}, fid
        s, f = pair["s"], pair["f"]
        assert s["name"] == f["name"] and s["pid"] != f["pid"]
        assert _ns(s["ts"]) < _ns(f["ts"])
        for e in (s, f):
            t = _ns(e["ts"])
            inside = [c for a, b, c in slices[(e["pid"], e["tid"])] if a <= t <= b]
            assert "kernel" in inside, (fid, e)
    return len(by_id)


def check_events(doc: dict[str, Any], run: Any, offsets: dict[int, int], ranks: list[int] | None = None) -> None:
    """Every input event of the selected ranks once (by its row), at ``ts − offset``."""
    base = doc["baseTimeNanoseconds"]
    ins = _inputs(run)
    out: dict[int, list[tuple[int, int, int, str]]] = {}
    for e in doc["traceEvents"]:
        if e["ph"] in ("X", "i", "B", "E") and e.get("cat") != "critical_path":
            r = e["args"]["rank"]
            assert e["pid"] == r + 1
            dur = _ns(e["dur"]) if e["ph"] == "X" else 0
            out.setdefault(r, []).append((e["args"]["row"], base + _ns(e["ts"]), dur, e["name"]))
    for r in ranks if ranks is not None else run.ranks:
        got = sorted(out.get(r, []))
        rows = [g[0] for g in got]
        assert len(rows) == len(set(rows)), f"rank {r}: an event written twice"
        exp = ins[r].sort("row")
        assert rows == exp["row"].to_list(), f"rank {r}: events missing or extra"
        assert [g[1] for g in got] == (exp["ts_ns"] - offsets[r]).to_list(), f"rank {r}: not shifted by the offset"
        assert [g[2] for g in got] == exp["dur_ns"].fill_null(0).to_list()
        assert [g[3] for g in got] == exp["name"].to_list()
    assert set(out) == set(ranks if ranks is not None else run.ranks)


@pytest.fixture(scope="module")
def scen(tmp_path_factory) -> Path:
    return scenario(tmp_path_factory.mktemp("scenario"))


@pytest.fixture(scope="module")
def scen_run(scen):
    return ranksight.load(scen, cache=False)


@pytest.fixture(scope="module")
def scen_doc(scen_run, tmp_path_factory):
    out = tmp_path_factory.mktemp("pf") / "job.json.gz"
    res = write_perfetto(scen_run, str(out))
    return res, _read(out), out


def test_scenario_format_events_offsets(scen_run, scen_doc):
    res, doc, out = scen_doc
    check_format(doc)
    # rank 2's clock reads 500 µs ahead on its own host: its offset, and only its, is 500 µs
    assert res.offsets_ns == {0: 0, 1: 0, 2: 500_000, 3: 0}
    meta = doc["ranksight"]
    assert meta["schema"] == "ranksight-perfetto" and meta["aligned"] is True
    assert {m["rank"]: m["offset_ns"] for m in meta["ranks"]} == res.offsets_ns
    assert doc["otherData"]["clock_offsets_ns"] == "0:0 1:0 2:500000 3:0"
    check_events(doc, scen_run, res.offsets_ns)
    assert res.events == {r: _inputs(scen_run)[r].height for r in scen_run.ranks}
    # the base is the earliest aligned start written: some event sits at ts 0
    assert min(_ns(e["ts"]) for e in doc["traceEvents"] if e["ph"] == "X") == 0
    # one process per rank, named and sorted
    names = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"}
    assert {p: n for p, n in names.items() if p <= 4} == {
        1: "rank 0 (a)",
        2: "rank 1 (a)",
        3: "rank 2 (b)",
        4: "rank 3 (a)",
    }
    assert set(names) <= {1, 2, 3, 4, 5}  # 5: the critical path, when the analysis is available
    threads = Counter(
        (e["pid"], e["args"]["name"]) for e in doc["traceEvents"] if e["name"] == "thread_name" and e["pid"] <= 4
    )
    assert threads[(3, "thread 100")] == 1 and threads[(3, "GPU 0 stream 7")] == 1


def test_scenario_flows(scen_doc):
    res, doc, _ = scen_doc
    # all-reduce 0 and 1 on 4 ranks (3 flows each), all-reduce 2 without rank 3 (2 flows)
    assert check_flows(doc) == res.flows == 8
    # all-reduce 1: rank 1 arrived last (its slow_gemm ahead of it): every arrow starts on rank 1
    starts = {e["pid"] for e in doc["traceEvents"] if e["ph"] == "s" and e["name"].startswith("all_reduce #1")}
    assert starts == {2}
    # arrows sit at the moment the last participant started (aligned clock): 2300 µs + 1 ns
    base = doc["baseTimeNanoseconds"]
    ts = {base + _ns(e["ts"]) for e in doc["traceEvents"] if e["ph"] == "s" and e["name"] == "all_reduce #1"}
    kernel_starts = [
        base + _ns(e["ts"])
        for e in doc["traceEvents"]
        if e["ph"] == "X" and e["args"]["rank"] == 1 and e["name"].startswith("ncclDevKernel")
    ]
    assert ts == {sorted(kernel_starts)[1] + 1}


def test_scenario_counters_match_ranksight_counters(scen_run, scen_doc):
    _, doc, _ = scen_doc
    for r in scen_run.ranks:
        ev = counter_events(scen_run[r])
        pts = [e for e in doc["traceEvents"] if e["ph"] == "C" and e["pid"] == r + 1]
        assert len(pts) == sum(len(v) for v in ev.values()) > 0
        # shifted like the events: the queue's first point is the first launch (aligned)
        base = doc["baseTimeNanoseconds"]
        first = min(base + _ns(e["ts"]) for e in pts if e["name"].startswith("Queue Length"))
        launches = scen_run[r].events.filter(pl.col("name").cast(pl.String) == "cudaLaunchKernel")["ts_ns"]
        assert first == int(launches.min()) - (500_000 if r == 2 else 0)


def test_loads_back_through_ranksight(scen_run, scen_doc):
    res, _, out = scen_doc
    back = ranksight.load(out, cache=False)
    assert len(back) == 1
    ev = back[back.ranks[0]].events
    ins = pl.concat([_inputs(scen_run)[r].with_columns(pl.lit(r).alias("rank")) for r in scen_run.ranks])
    got = ev.filter(
        ~pl.col("kind").cast(pl.String).is_in(["metadata", "counter"])
        & (pl.col("cat").cast(pl.String) != "critical_path")
    )
    assert Counter(got["kind"].cast(pl.String).to_list()) == Counter(ins["kind"].to_list())
    # kernels keep their launches (correlation ids made unique across ranks)
    k = ev.filter(pl.col("kind") == "kernel")
    assert k["launch_row"].null_count() == 0 and k.height == 4 * 2 + 11
    assert int(k["correlation"].max()) > 3 * ID_STRIDE
    # the kernels' times are the inputs' minus the offsets
    exp = sorted(
        (
            ins.filter(pl.col("kind") == "kernel")["ts_ns"]
            - ins.filter(pl.col("kind") == "kernel")["rank"].replace_strict(res.offsets_ns, return_dtype=pl.Int64)
        ).to_list()
    )
    assert sorted(k["ts_ns"].to_list()) == exp


def two_steps(d: Path) -> Path:
    """2 ranks, steps 1 (900–2000 µs) and 2 (2000–3200 µs), one all-reduce in each; rank 1's clock 300 µs ahead."""
    for r in range(2):
        colls = [
            {"start": 1000 + 50 * r, "end": 1100, "seq": 0, "group_size": 2, "ranks": "[0, 1]"},
            {"start": 2500 + 20 * r, "end": 2600, "seq": 1, "group_size": 2, "ranks": "[0, 1]"},
        ]
        ev = rank_events(
            colls=colls,
            kernels=[{"name": "gemm", "start": 1500, "end": 1700}, {"name": "relu", "start": 2100, "end": 2150}],
            steps=[(1, 900, 2000), (2, 2000, 3200)],
            shift_us=300.0 if r == 1 else 0.0,
        )
        write_rank(d, r, ev, world=2, host=f"h{r}")
    return d


def test_step_selection(tmp_path):
    (tmp_path / "in").mkdir()
    run = ranksight.load(two_steps(tmp_path / "in"), cache=False)
    out = tmp_path / "step2.json"
    res = write_perfetto(run, str(out), steps=[2])
    doc = _read(out)
    check_format(doc)
    assert res.steps == [2] and doc["ranksight"]["steps"] == [2]
    off = res.offsets_ns
    assert off[1] - off[0] == 300_000
    lo, hi = doc["ranksight"]["window_ns"]
    # exactly the events overlapping step 2's window (aligned), each once
    base = doc["baseTimeNanoseconds"]
    for r in run.ranks:
        # half-open [lo, hi): an event ending where step 2 starts (ProfilerStep#1) is not in it
        start, end = pl.col("ts_ns") - off[r], pl.col("ts_ns") + pl.col("dur_ns").fill_null(0) - off[r]
        ins = _inputs(run)[r].filter((start < hi) & ((end > lo) | ((end == start) & (start >= lo))))
        got = sorted(
            (e["args"]["row"], base + _ns(e["ts"]))
            for e in doc["traceEvents"]
            if e["ph"] in ("X", "i") and e["cat"] != "critical_path" and e["args"]["rank"] == r
        )
        assert [g[0] for g in got] == sorted(ins["row"].to_list())
        assert [g[1] for g in got] == (ins.sort("row")["ts_ns"] - off[r]).to_list()
        names = {
            e["name"]
            for e in doc["traceEvents"]
            if e.get("cat") != "critical_path" and e.get("args", {}).get("rank") == r
        }
        assert "ProfilerStep#2" in names and "ProfilerStep#1" not in names and "gemm" not in names
    assert check_flows(doc) == 1  # only step 2's all-reduce
    with pytest.raises(UsageError, match="step 7 not found"):
        write_perfetto(run, str(tmp_path / "x.json"), steps=[7])


def test_cli_ranks_and_safety(cli, scen, tmp_path):
    out = tmp_path / "two.json.gz"
    r = cli("export", str(scen), "--rank", "0", "--rank", "2", "--perfetto", str(out), "--no-cache")
    assert r.returncode == 0, r.stderr
    assert f"Wrote {out}" in r.stdout and "2 ranks" in r.stdout and "collective flows" in r.stdout
    doc = _read(out)
    check_format(doc)
    assert {e["pid"] for e in doc["traceEvents"] if e["name"] == "process_name" and e["pid"] != 4} == {1, 3}
    run = ranksight.load(scen, ranks=[0, 2], cache=False)
    check_events(doc, run, {m["rank"]: m["offset_ns"] for m in doc["ranksight"]["ranks"]}, ranks=[0, 2])
    # an existing output needs --force; an input never
    again = cli("export", str(scen), "--perfetto", str(out), "--no-cache")
    assert again.returncode == 2 and "exists; use --force" in again.stderr
    src = scen / "rank1.json"
    before = src.read_bytes()
    bad = cli("export", str(scen), "--perfetto", str(src), "--force", "--no-cache")
    assert bad.returncode == 2 and "refusing to overwrite an input" in bad.stderr
    assert src.read_bytes() == before
    assert cli("export", str(scen), "--no-cache").returncode == 2  # neither --to nor --perfetto
    # plain JSON when the name does not end in .gz; no temporary file left
    plain = tmp_path / "job.json"
    assert cli("export", str(scen), "--perfetto", str(plain), "--counters", "none", "--no-cache").returncode == 0
    assert plain.read_bytes()[:1] == b"{" and not any(p.name.startswith(".ranksight-") for p in tmp_path.iterdir())
    assert not [e for e in _read(plain)["traceEvents"] if e["ph"] == "C"]


def test_critical_path_track(scen_run, tmp_path, monkeypatch):
    """The critical-path process holds one slice per segment of the analysis, on the aligned clock."""
    seg = pl.DataFrame(
        {
            "rank": [1, 2, 0],
            "stream": [None, 7, 7],
            "tid": [100, None, None],
            "row": [3, 5, 7],
            "name": ["slow launch", "ncclDevKernel_AllReduce", "fast_relu"],
            "start_ns": [1_960_000, 2_300_000, 2_400_000],
            "end_ns": [2_000_000, 2_400_000, 2_450_000],
            "type": ["cpu_op", "kernel", "kernel"],
        }
    )
    base_run = scen_run[0].events["ts_ns"].min()
    seg = seg.with_columns(pl.col("start_ns") + base_run - 1_000_000, pl.col("end_ns") + base_run - 1_000_000)
    calls = []

    def critical_path_segments(run, step=None):
        calls.append(step)
        return seg

    mod = types.ModuleType("ranksight.analyses.critical_path")
    mod.critical_path_segments = critical_path_segments  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ranksight.analyses.critical_path", mod)
    out = tmp_path / "cp.json"
    res = write_perfetto(Session(scen_run), str(out), counters=())
    doc = _read(out)
    check_format(doc)
    assert calls == [1] and res.path_segments == 3
    cp = [e for e in doc["traceEvents"] if e.get("cat") == "critical_path"]
    base = doc["baseTimeNanoseconds"]
    assert [(e["name"], e["args"]["rank"], e["args"]["type"]) for e in cp] == [
        ("slow launch", 1, "cpu_op"),
        ("ncclDevKernel_AllReduce", 2, "kernel"),
        ("fast_relu", 0, "kernel"),
    ]
    assert [base + _ns(e["ts"]) for e in cp] == seg["start_ns"].to_list()
    assert [_ns(e["dur"]) for e in cp] == (seg["end_ns"] - seg["start_ns"]).to_list()
    pid = {e["pid"] for e in cp}
    assert pid == {5} and {
        e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name" and e["pid"] == 5
    } == {"critical path"}


def test_no_critical_path_says_why(scen_run, tmp_path, monkeypatch):
    import ranksight.report.perfetto as pf

    why = "the critical-path analysis is not available in this ranksight version"
    monkeypatch.setattr(pf, "critical_path", lambda sess, step: (None, why))  # as if not available
    out = tmp_path / "nocp.json"
    res = write_perfetto(Session(scen_run), str(out), counters=())
    doc = _read(out)
    assert res.path_segments == 0
    assert "the critical-path analysis is not available in this ranksight version" in doc["ranksight"]["notes"]
    assert not [e for e in doc["traceEvents"] if e.get("cat") == "critical_path"]
    assert 5 not in {e["pid"] for e in doc["traceEvents"]}


def test_real_critical_path_track(scen_run, scen_doc):
    """With the critical-path analysis: its segments of step 1 as slices of the `critical path` process."""
    cp_mod = pytest.importorskip("ranksight.analyses.critical_path")
    res, doc, _ = scen_doc
    seg = cp_mod.critical_path_segments(Session(scen_run), step=1)
    base = doc["baseTimeNanoseconds"]
    seg = seg.filter(pl.col("start_ns") >= base).sort("start_ns")
    cp = [e for e in doc["traceEvents"] if e.get("cat") == "critical_path"]
    assert res.path_segments == len(cp) == seg.height > 0
    assert [base + _ns(e["ts"]) for e in cp] == seg["start_ns"].to_list()
    assert [_ns(e["dur"]) for e in cp] == (seg["end_ns"] - seg["start_ns"]).to_list()
    assert [e["args"]["rank"] for e in cp] == seg["rank"].to_list()
    assert {e["pid"] for e in cp} == {5} and {e["tid"] for e in cp} == {5 * doc["ranksight"]["tid_stride"] + 1}


def test_dlrm_example(cli, tmp_path):
    """The 8-rank DLRM example: every event once per rank, the collectives' flows paired, loads back."""
    src = example_path("dlrm")
    out = tmp_path / "dlrm.json.gz"
    r = cli("export", str(src), "--perfetto", str(out), "--no-cache")
    assert r.returncode == 0, r.stderr
    doc = _read(out)
    check_format(doc)
    run = ranksight.load(src, cache=False)
    offsets = {m["rank"]: m["offset_ns"] for m in doc["ranksight"]["ranks"]}
    check_events(doc, run, offsets)
    from ranksight.analyses.collectives import comm_data

    cd = comm_data(run)
    per = cd.per_rank.filter(pl.col("instance").is_not_null()).group_by("instance").len()
    assert check_flows(doc) == int((per["len"] - 1).clip(0).sum()) == 56
    for line in r.stdout.splitlines()[1:9]:
        assert "events" in line and "clock offset" in line
    back = ranksight.load(out, cache=False)
    ev = back[back.ranks[0]].events
    assert ev.filter(pl.col("kind") == "kernel").height == sum(
        run[k].events.filter(pl.col("kind") == "kernel").height for k in run.ranks
    )


def test_written_in_chunks(scen_run, tmp_path, monkeypatch):
    """Events written in several chunks per rank (5 rows each here): still each once, in order of row."""
    import ranksight.report.perfetto as pf

    monkeypatch.setattr(pf, "CHUNK_ROWS", 5)
    out = tmp_path / "chunks.json"
    res = write_perfetto(scen_run, str(out), counters=())
    doc = _read(out)
    check_format(doc)
    check_events(doc, scen_run, res.offsets_ns)
    assert min(res.events.values()) > 2 * 5  # three chunks or more per rank


def test_many_threads_widen_the_tid_stride(tmp_path):
    """1,500 CPU threads on one rank: thread ids stay unique per process (stride 10,000, not 1,000)."""
    ev = [
        {"ph": "X", "cat": "cpu_op", "name": f"op{t}", "pid": 1, "tid": t, "ts": 10 + t, "dur": 5}
        for t in range(1, 1501)
    ]
    d = tmp_path / "in"
    d.mkdir()
    run = ranksight.load([write_rank(d, r, ev, world=2) for r in (0, 1)], cache=False)
    out = tmp_path / "many.json"
    write_perfetto(run, str(out), counters=())
    doc = _read(out)
    check_format(doc)  # a tid used by two processes fails here
    assert doc["ranksight"]["tid_stride"] == 10_000
    tids = {e["tid"] for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] != "critical_path"}
    assert len(tids) == 3000
    check_events(doc, run, {0: 0, 1: 0})
