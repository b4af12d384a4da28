"""diagnose's Context.per_rank: one map for a rule's loop over ranks, read back by on_rank."""

from __future__ import annotations

import collections
import threading
from pathlib import Path

import ranksight
from ranksight.analyses.diagnose import Context

DATA = Path(__file__).resolve().parents[1] / "data" / "generated" / "cpu-ddp-gloo-4ranks"
CALLS: collections.Counter[int] = collections.Counter()
_LOCK = threading.Lock()


def _events(trace):  # module-level: the engine may run it on threads
    with _LOCK:
        CALLS[trace.rank] += 1
    return trace.n_events


def test_per_rank_maps_once_and_on_rank_reads_it_back() -> None:
    CALLS.clear()
    run = ranksight.load(DATA)
    ctx = Context(run)
    got = ctx.per_rank(_events)
    assert sorted(got) == list(run.ranks) and len(got) == 4
    assert got == {r: run[r].n_events for r in run.ranks}
    assert dict(CALLS) == dict.fromkeys(run.ranks, 1)
    assert [ctx.on_rank(_events, r) for r in run.ranks] == [got[r] for r in run.ranks]
    assert ctx.per_rank(_events, run.ranks[:2]) == {r: got[r] for r in run.ranks[:2]}
    assert dict(CALLS) == dict.fromkeys(run.ranks, 1)  # nothing computed twice


def test_per_rank_on_some_ranks_then_the_rest() -> None:
    CALLS.clear()
    run = ranksight.load(DATA)
    ctx = Context(run)
    first = run.ranks[:1]
    assert ctx.per_rank(_events, first) == {first[0]: run[first[0]].n_events}
    assert sum(CALLS.values()) == 1
    ctx.per_rank(_events)
    assert dict(CALLS) == dict.fromkeys(run.ranks, 1)
    assert ctx.gpu_ranks() == dict.fromkeys(run.ranks, False)  # a CPU-only (gloo) run
