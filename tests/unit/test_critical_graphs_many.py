"""views/critical_graph.critical_graphs: the critical-path graphs (fixed model) of many small
ranks built in one pass over their stacked events (issue 19) equal each rank's own graph, nodes,
edges (their order too: it breaks ties between paths), events, call tree and notes; on real
multi-rank traces and on a run that mixes traces with and without CUDA sync records and
cross-stream waits; and the job path through it equals the job path rank by rank."""

from __future__ import annotations

import gzip
import json
import warnings
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal
from tests.conftest import DATA

import ranksight
from ranksight.analyses import Session, run_analysis
from ranksight.analyses.critical_path import DATA_LOAD_PATTERNS, _window
from ranksight.data import example_path
from ranksight.views import critical_graph as cg


def _load(path: Path) -> ranksight.Run:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ranksight.load(path, cache=False)


def _windows(run: ranksight.Run, step: bool) -> dict[int, tuple[int, int]]:
    out = {}
    for t in run:
        if not step:
            out[t.rank] = _window(t, None, None, None)
        elif t.steps.height:
            r = t.steps.sort("step").row(min(1, t.steps.height - 1), named=True)
            out[t.rank] = (int(r["start_ns"]), int(r["end_ns"]))
    return out


def _assert_same(run: ranksight.Run, step: bool) -> int:
    wins = _windows(run, step)
    stacked = Session.of(run).stacked_events()
    assert stacked is not None
    many = cg.critical_graphs(list(run), wins, stacked, data_load=DATA_LOAD_PATTERNS, gloo=True)
    assert many is not None and set(many) == set(wins)
    n = 0
    for r, w in wins.items():
        want = cg.critical_graph(run[r], *w, hta_compat=False, data_load=DATA_LOAD_PATTERNS, gloo=True)
        got = many[r]
        for part in ("nodes", "edges", "events", "tree"):
            assert_frame_equal(getattr(got, part), getattr(want, part))
        assert (got.rank, got.lo_ns, got.hi_ns, got.notes) == (want.rank, want.lo_ns, want.hi_ns, want.notes)
        n += want.edges.height
    return n


@pytest.mark.parametrize(
    "path", [DATA / "generated/h100/ddp-gloo-2ranks", DATA / "tracelens/mi300", example_path("dlrm")]
)
@pytest.mark.parametrize("step", [False, True])
def test_one_pass_equals_each_rank(path: Path, step: bool) -> None:
    assert _assert_same(_load(path), step) > 1000


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """HTA's critical-path test traces and its ns-resolution trace as the ranks of one run: ranks
    with CUDA sync records (Event/Context/Stream Sync, Stream Wait Events) beside ranks without any
    (their waits inferred) and with cudaStreamWaitEvent calls (cross-stream waits inferred)."""
    out = tmp_path_factory.mktemp("mixed")
    files = sorted((DATA / "hta/critical_path").glob("*/*.json.gz")) + sorted(
        (DATA / "hta/ns_resolution_trace").glob("*.json.gz")
    )
    for i, f in enumerate(files):
        doc = json.loads(gzip.open(f).read())
        doc["distributedInfo"] = {**doc.get("distributedInfo", {}), "rank": i, "world_size": len(files)}
        (out / f"rank{i}.json").write_text(json.dumps(doc))
    return out


def test_ranks_with_and_without_sync_records(mixed: Path) -> None:
    run = _load(mixed)
    sync = {t.rank: t.kind("sync").height > 0 for t in run}
    assert set(sync.values()) == {True, False}  # both kinds side by side
    assert _assert_same(run, step=False) > 1000


@pytest.mark.parametrize("which", ["mixed", "dlrm"])
def test_job_path_in_one_pass_equals_rank_by_rank(which: str, mixed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = mixed if which == "mixed" else example_path("dlrm")
    one = run_analysis("critical-path", _load(path))
    monkeypatch.setattr(Session, "stacked_events", lambda self: None)  # rank by rank
    each = run_analysis("critical-path", _load(path))
    for name, table in each.tables.items():
        assert_frame_equal(one[name], table)
    assert one.notes == each.notes
    assert one["job_by_rank"].height >= (2 if which == "dlrm" else 1)  # the DLRM path crosses ranks


def test_too_long_for_one_pass_says_so(mixed: Path) -> None:
    """Ranks whose stretches would pass int64: None (the caller builds rank by rank)."""
    run = _load(mixed)
    stacked = Session.of(run).stacked_events()
    assert stacked is not None
    wins = {t.rank: (0, 1 << 61) for t in run}
    assert cg.critical_graphs(list(run), wins, stacked) is None
    assert cg.critical_graphs(list(run), {}, stacked) == {}


def test_the_events_keep_their_types() -> None:
    run = _load(DATA / "generated/h100/ddp-gloo-2ranks")
    wins = _windows(run, False)
    many = cg.critical_graphs(list(run), wins, Session.of(run).stacked_events())  # type: ignore[arg-type]
    assert many is not None
    want = cg.critical_graph(run[1], *wins[1])
    assert many[1].events.schema == want.events.schema
    assert many[1].events.filter(pl.col("launch_row").is_not_null()).height > 0


def _sync_rank(with_record: bool) -> list[dict]:
    """A kernel [100, 200) launched at 10; ``cudaDeviceSynchronize`` [150, 210) returns after it
    ended. ``with_record``: the trace also has a CUDA sync record (an unrelated Event Sync)."""

    def x(name: str, cat: str, ts: float, dur: float, pid: int = 1, tid: int = 1, **args: object) -> dict:
        return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}

    ev = [
        x("ProfilerStep#1", "user_annotation", 0, 300),
        x("cudaLaunchKernel", "cuda_runtime", 10, 5, correlation=1),
        x("k", "kernel", 100, 100, pid=0, tid=7, correlation=1, stream=7, device=0),
        x("cudaDeviceSynchronize", "cuda_runtime", 150, 60, correlation=2),
        x("cudaEventSynchronize", "cuda_runtime", 250, 5, correlation=3),
    ]
    if with_record:
        ev.append(x("Event Sync", "cuda_sync", 250, 5, pid=0, tid=7, correlation=3, stream=-1, device=0))
    return ev


def test_waits_are_inferred_only_on_ranks_without_sync_records(make_trace, tmp_path: Path) -> None:  # noqa: ANN001
    """Rank 0 records CUDA sync events: its graph has only the recorded waits (none for the device
    synchronisation); rank 1 records none: its device synchronisation waits for the kernel (an
    inferred edge from the kernel's end to the call's end). In one pass as rank by rank."""
    for r in (0, 1):
        make_trace(_sync_rank(r == 0), name=f"rank{r}.json", distributedInfo={"rank": r, "world_size": 2})
    run = _load(tmp_path)
    wins = _windows(run, False)
    many = cg.critical_graphs(list(run), wins, Session.of(run).stacked_events())  # type: ignore[arg-type]
    assert many is not None
    inferred = {}
    for r in (0, 1):
        g = many[r]
        n = g.nodes
        row_of = dict(zip(n["node"].to_list(), n["row"].to_list(), strict=True))
        names = dict(zip(g.events["row"].to_list(), g.events["name"].to_list(), strict=True))
        sync = g.edges.filter(pl.col("type") == cg.SYNC)
        inferred[r] = sorted((names[row_of[s]], names[row_of[d]]) for s, d in sync.select("src", "dst").iter_rows())
        want = cg.critical_graph(run[r], *wins[r])
        assert_frame_equal(g.edges, want.edges)
    assert ("k", "cudaDeviceSynchronize") not in inferred[0]
    assert ("k", "cudaDeviceSynchronize") in inferred[1]
