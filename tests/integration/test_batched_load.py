"""Many rank files load through one native decode and one derivation over all of them (issue 19):
the traces are equal, table for table and column for column, to those of the per-rank path (each
file decoded and derived alone), on the repository's multi-rank traces, on every multi-rank
trace of ../shared/traces, and on hand-built ranks whose ids collide across ranks.

The per-rank path is what ``load`` does for one file (and for files read from the cache); the
test forces it for every file by making ``predecode`` decode nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest
from tests.conftest import SHARED, data_path

import ranksight
from ranksight.io.kineto import decode, decode_many
from ranksight.model import run as run_mod
from ranksight.model.derive import derive, derive_many
from ranksight.model.trace import Trace

DLRM = Path(ranksight.__file__).parent / "data" / "examples" / "dlrm"


def _same_trace(a: Trace, b: Trace, where: str) -> None:
    assert a.rank == b.rank, where
    assert a.events.schema == b.events.schema, where
    assert a.events.equals(b.events), f"{where}: events differ"
    assert list(a.tables) == list(b.tables), where
    for name in a.tables:
        assert a.tables[name].equals(b.tables[name]), f"{where}: table {name} differs"
    assert a.meta.raw == b.meta.raw and a.meta.devices_used == b.meta.devices_used, where
    assert a.runtime_names == b.runtime_names and a.meta.gpu_vendor == b.meta.gpu_vendor, where
    assert a.stats == b.stats and a.warnings == b.warnings, where
    assert a.steps.equals(b.steps), f"{where}: steps differ"


def _both_paths(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any, int]:
    calls = {"native": 0}
    real = run_mod.predecode

    def counted(*args: Any, **kw: Any) -> Any:
        out = real(*args, **kw)
        calls["native"] += len(out)
        return out

    with monkeypatch.context() as m:
        m.setattr(run_mod, "predecode", counted)
        batched = ranksight.load(path, cache=False)
    with monkeypatch.context() as m:
        m.setattr(run_mod, "predecode", lambda *a, **k: {})
        single = ranksight.load(path, cache=False)
    return batched, single, calls["native"]


def _compare_runs(path: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    batched, single, native = _both_paths(path, monkeypatch)
    assert batched.ranks == single.ranks
    for r in batched.ranks:
        _same_trace(batched[r], single[r], f"{path} rank {r}")
    assert batched.warnings == single.warnings
    return native


def test_dlrm_example_batched_equals_per_rank(monkeypatch):
    n = _compare_runs(DLRM, monkeypatch)
    assert n == 8  # every rank went through the batched path


@pytest.mark.parametrize("rel", ["generated/cpu-ddp-gloo-4ranks", "hta/trace_filter"])
def test_repository_multi_rank_traces_batched_equal_per_rank(rel, monkeypatch):
    n = _compare_runs(data_path(rel), monkeypatch)
    assert n >= 2


def _multi_rank_dirs() -> list[Path]:
    root = SHARED / "traces"
    if not root.exists():
        return []
    dirs: dict[Path, int] = {}
    for p in root.rglob("*"):
        if p.is_file() and p.name.endswith((".json", ".json.gz")):
            dirs[p.parent] = dirs.get(p.parent, 0) + 1
    return sorted(d for d, k in dirs.items() if k >= 2)


@pytest.mark.shared
def test_every_multi_rank_corpus_trace_batched_equals_per_rank(shared_traces, monkeypatch):
    dirs = _multi_rank_dirs()
    assert len(dirs) >= 10, dirs
    checked = 0
    for d in dirs:
        try:
            _compare_runs(d, monkeypatch)
        except ranksight.RanksightError as e:  # a folder the loader refuses: refused alike both ways
            with monkeypatch.context() as m, pytest.raises(type(e)):
                m.setattr(run_mod, "predecode", lambda *a, **k: {})
                ranksight.load(d, cache=False)
            continue
        checked += 1
    assert checked >= 10


@pytest.mark.shared
def test_derive_many_over_the_whole_corpus_equals_derive_per_trace(shared_traces):
    """All corpus traces derived as one batch (unrelated traces side by side: ids, steps and
    streams that collide across them) equal each one derived alone."""
    files = sorted(p for p in shared_traces.rglob("*") if p.is_file() and p.name.endswith((".json", ".json.gz")))
    good = []
    for f in files:
        try:
            decode(f)
        except ranksight.RanksightError:
            continue
        good.append(f)
    assert len(good) >= 40
    # at most ~100 MB of JSON at once (a few huge traces are compared in their own batches)
    batches: list[list[Path]] = [[]]
    size = 0
    for f in good:
        b = f.stat().st_size
        if batches[-1] and size + b > 60 << 20:
            batches.append([])
            size = 0
        batches[-1].append(f)
        size += b
    for batch in batches:
        many = decode_many(batch)
        derived = derive_many([d.events for d in many], [d.tables for d in many])
        for f, ev in zip(batch, derived, strict=True):
            d = decode(f)
            alone = derive([d.events], d.tables)
            assert ev.schema == alone.schema, f
            assert ev.equals(alone), f"{f}: derive_many differs from derive"


def _rank(rank: int, *, corr: bool = True, step0: int = 1) -> dict[str, Any]:
    """A rank with two steps, two launches and their kernels; every id is the same on every rank."""
    ev: list[dict[str, Any]] = []
    for s in range(2):
        t0 = 1000 * s
        ev.append(
            {"ph": "X", "cat": "cpu_op", "name": f"ProfilerStep#{step0 + s}", "pid": 1, "tid": 1, "ts": t0, "dur": 900}
        )
        launch: dict[str, Any] = {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 1,
            "tid": 1,
            "ts": t0 + 10,
            "dur": 5,
            "args": {"correlation": 7 + s} if corr else {},
        }
        kern: dict[str, Any] = {
            "ph": "X",
            "cat": "kernel",
            "name": "ampere_sgemm_128x64_nn",
            "pid": 0,
            "tid": 7,
            "ts": t0 + 20 + rank,
            "dur": 100,
            "args": {"correlation": 7 + s, "stream": 7, "device": 0} if corr else {"stream": 7, "device": 0},
        }
        ev += [launch, kern]
        if not corr:  # linked by ac2g flows only (2021 traces)
            ev += [
                {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 7 + s, "pid": 1, "tid": 1, "ts": t0 + 10},
                {
                    "ph": "f",
                    "cat": "ac2g",
                    "name": "ac2g",
                    "id": 7 + s,
                    "pid": 0,
                    "tid": 7,
                    "ts": t0 + 20 + rank,
                    "bp": "e",
                },
            ]
    return {"distributedInfo": {"rank": rank, "world_size": 3}, "traceEvents": ev}


def test_ids_that_collide_across_ranks_link_within_their_rank(tmp_path, monkeypatch):
    import json

    d = tmp_path / "run"
    d.mkdir()
    docs = [_rank(0), _rank(1, corr=False), _rank(2, step0=5)]
    for r, doc in enumerate(docs):
        (d / f"rank{r}.json").write_text(json.dumps(doc))
    batched, single, native = _both_paths(d, monkeypatch)
    assert native == 3
    for r in range(3):
        _same_trace(batched[r], single[r], f"rank {r}")
        ev = batched[r].events
        k = ev.filter(pl.col("kind") == "kernel").sort("ts_ns")
        launches = ev.filter(pl.col("kind") == "cuda_runtime").sort("ts_ns")
        # each kernel is linked to its own rank's launch (rows are per rank), in its own step
        assert k["launch_row"].to_list() == launches["row"].to_list(), r
        first = 5 if r == 2 else 1
        assert k["step"].to_list() == [first, first + 1], r
        assert launches["gpu_count"].to_list() == [1, 1], r
        assert k["ts_ns"].to_list() == [(20 + r) * 1000, (1020 + r) * 1000]
