"""Analyses written over a rank column (issue 19): on many small ranks they run once over the
run's stacked events (``Session.stacked_events``) instead of once per rank, and every table they
return equals, row for row and column for column, the rank-by-rank result (the same code on each
rank alone). Checked on the repository's multi-rank traces and on every multi-rank folder of
../shared/traces, with each analysis' options that change what is read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.conftest import data_path
from tests.integration.test_batched_load import DLRM, _multi_rank_dirs

import ranksight
from ranksight.analyses import Session, run_analysis

#: the analyses that read ``Session.stacked_events`` and the option sets to compare
STACKED: dict[str, list[dict[str, Any]]] = {
    "launches": [{}, {"hta_apis": True}, {"include_memory": False}, {"launch_delay_cutoff_us": 5.0}],
    "queue": [{}, {"hta_apis": True}, {"max_queue_length": 2}],
    "temporal": [{}, {"per_step": True}],
    "kernels": [{}, {"num_kernels": 3}, {"include_memory": False, "duration_ratio": 0.5}],
    "idle": [{}, {"kernel_wait_us": 5.0, "per_step": True, "stats": True}, {"streams": [7, 20]}],
    "overlap": [{}],
    "kernel-types": [{}, {"include_memory": False}],
}


def _both(path: Path, name: str, options: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    run = ranksight.load(path, cache=False)
    assert run.small_ranks and Session.of(run).stacked_events() is not None, path
    run_analysis("temporal", run)  # seeds every rank's GPU-work view from the stacked events
    stacked = run_analysis(name, run, **options)
    with monkeypatch.context() as m:
        m.setattr(Session, "stacked_events", lambda self: None)
        per_rank = run_analysis(name, ranksight.load(path, cache=False), **options)
    return stacked, per_rank


def _same(a: Any, b: Any, where: str) -> None:
    assert list(a.tables) == list(b.tables), where
    for t in a.tables:
        assert a[t].schema == b[t].schema, f"{where}: {t} schema"
        assert a[t].equals(b[t]), f"{where}: table {t} differs"
    assert a.notes == b.notes, where


def _check(path: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    rows = 0
    for name, option_sets in STACKED.items():
        for options in option_sets:
            a, b = _both(path, name, options, monkeypatch)
            _same(a, b, f"{path} {name} {options}")
            rows += sum(t.height for t in a.tables.values())
    return rows


@pytest.mark.parametrize("path", [DLRM, data_path("hta/trace_filter"), data_path("generated/cpu-ddp-gloo-4ranks")])
def test_stacked_equals_rank_by_rank_on_repository_traces(path, monkeypatch):
    rows = _check(path, monkeypatch)
    if path == DLRM:
        assert rows > 1000  # the DLRM ranks launch thousands of kernels: the comparison is not vacuous


@pytest.mark.shared
def test_stacked_equals_rank_by_rank_on_every_multi_rank_corpus_folder(shared_traces, monkeypatch):
    checked = 0
    for d in _multi_rank_dirs():
        try:
            run = ranksight.load(d, cache=False)
        except ranksight.RanksightError:
            continue  # refused alike by both paths (test_batched_load)
        if not run.small_ranks or len(run.ranks) < 2:
            continue
        _check(d, monkeypatch)
        checked += 1
    assert checked >= 6, checked  # 7 folders of ../shared/traces load as several small ranks


def test_no_stacking_for_one_rank_or_large_ranks():
    one = ranksight.load(data_path("hta/trace_filter"), cache=False, ranks=[0])
    assert Session.of(one).stacked_events() is None  # one rank: the per-rank code is the whole work


def test_gpu_work_seeded_from_the_stacked_events_equals_each_ranks_own():
    """temporal over a rank column gives each trace its GPU-work view (views/gpu_work.seed_gpu_work);
    what the other analyses then read per rank equals the view computed on the rank alone."""
    from ranksight.views.gpu_work import gpu_work_of

    run = ranksight.load(DLRM, cache=False)
    run_analysis("temporal", run)
    for r in run.ranks:
        t = run[r]
        seeded = t.memo("gpu_work", lambda: None)
        assert seeded is not None, r
        own = gpu_work_of(t.scan(), by=[])
        assert seeded.schema == own.schema and seeded.equals(own), r


def test_temporal_of_edge_ranks_exact():
    """A rank whose GPU work has zero span keeps NaN percentages (as rank by rank: 0 / 0), a rank
    without GPU work a row of nulls; values exact."""
    import math

    import polars as pl

    from ranksight.analyses.temporal import temporal_of

    work = pl.DataFrame(
        {
            "rank": [0, 1, 1],
            "ts_ns": [5, 10, 30],
            "end_ns": [5, 20, 40],
            "kernel_type": ["COMPUTATION", "COMPUTATION", "MEMORY"],
        },
        schema={"rank": pl.Int32, "ts_ns": pl.Int64, "end_ns": pl.Int64, "kernel_type": pl.String},
    )
    t = temporal_of(work, [0, 1, 2]).to_dicts()
    assert t[0]["kernel_time_us"] == 0.0 and math.isnan(t[0]["idle_pct"])
    assert t[1] == {
        "rank": 1,
        "kernel_time_us": 0.03,
        "idle_us": 0.01,
        "compute_us": 0.01,
        "non_compute_us": 0.01,
        "idle_pct": 33.33,
        "compute_pct": 33.33,
        "non_compute_pct": 33.33,
    }
    assert all(v is None for k, v in t[2].items() if k != "rank")
