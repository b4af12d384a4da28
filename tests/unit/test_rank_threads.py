"""Per-rank work on small ranks held in memory runs on a few threads of this process (issue 19):
the same results in the same order as one rank after the other, the first error in rank order,
and one rank after the other when asked (``RANKSIGHT_RANK_THREADS=1``) or when ranks are large."""

from __future__ import annotations

import os
import threading

import polars as pl
import pytest

import ranksight
from ranksight.data import example_path
from ranksight.model import engine
from ranksight.model.trace import Trace


@pytest.fixture(scope="module")
def dlrm() -> ranksight.Run:
    return ranksight.load(example_path("dlrm"), cache=False)


def _who(trace: Trace) -> tuple[int, str, str | None, int]:
    """The rank, the thread it ran on, polars' engine affinity there, and a number from a query."""
    n = trace.events.filter(pl.col("dur_ns") > 0).height
    return trace.rank, threading.current_thread().name, os.environ.get("POLARS_ENGINE_AFFINITY"), n


def test_small_ranks_run_on_threads_with_the_loops_results(dlrm, monkeypatch):
    monkeypatch.setenv("RANKSIGHT_RANK_THREADS", "3")
    got = dlrm.map(_who)
    assert list(got) == dlrm.ranks  # rank order
    assert {t for _, t, _, _ in got.values()} <= {f"ranksight-rank_{i}" for i in range(3)}
    assert {a for _, _, a, _ in got.values()} == {"in-memory"}  # set once for the pool, seen in every thread
    monkeypatch.setenv("RANKSIGHT_RANK_THREADS", "1")
    one = dlrm.map(_who)
    assert {t for _, t, _, _ in one.values()} == {threading.current_thread().name}
    assert {r: (r0, n) for r, (r0, _, _, n) in got.items()} == {r: (r0, n) for r, (r0, _, _, n) in one.items()}


def test_rank_threads_setting(monkeypatch):
    monkeypatch.setenv("RANKSIGHT_RANK_THREADS", "1")
    assert engine.rank_threads() == 1
    monkeypatch.setenv("RANKSIGHT_RANK_THREADS", "junk")
    assert engine.rank_threads() == 1
    monkeypatch.delenv("RANKSIGHT_RANK_THREADS")
    assert engine.rank_threads() == max(1, min(os.cpu_count() or 1, engine.RANK_THREADS_DEFAULT))


def _fail_on_odd(trace: Trace) -> int:
    if trace.rank % 2:
        raise ValueError(f"rank {trace.rank}")
    return trace.rank


def test_first_error_in_rank_order_is_raised(dlrm, monkeypatch):
    monkeypatch.setenv("RANKSIGHT_RANK_THREADS", "4")
    with pytest.raises(ValueError, match="rank 1$"):
        dlrm.map(_fail_on_odd)


def test_large_ranks_run_one_after_the_other(dlrm, monkeypatch):
    monkeypatch.setenv("RANKSIGHT_RANK_THREADS", "4")
    monkeypatch.setattr(engine, "IN_MEMORY_EVENTS", 10)  # every rank counts as large
    got = dlrm.map(_who)
    assert {t for _, t, _, _ in got.values()} == {threading.current_thread().name}
