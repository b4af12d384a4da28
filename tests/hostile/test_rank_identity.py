"""Rank identity (issue 24, family 5): a file's rank is decided once its whole header is known,
wherever ``distributedInfo`` sits (before or after ``traceEvents``); two files claiming one rank
are an error in every order; ranks written in another time unit (ns vs µs) are flagged by ``info``
and ``diagnose``, not only by ``health``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from _fault_helpers import assert_clear_error, case, check_table, cli, dist, events, write_trace

import ranksight
from ranksight.errors import DuplicateRankError, MixedRunsError
from ranksight.model.cache import CacheConfig

FAMILY = "ranks"


def _files(run: ranksight.Run) -> dict[int, tuple[str, str]]:
    return {t.rank: (Path(t.path).name, t.meta.rank_source) for t in run}


def _pair(d: Path, a: dict[str, Any], b: dict[str, Any], *, names: tuple[str, str] = ("a.json", "b.json")) -> Path:
    """Two files; ``a``/``b``: ``{"before": {...}}`` and/or ``{"after": {...}}`` top-level keys."""
    d.mkdir(exist_ok=True)
    for name, spec in zip(names, (a, b), strict=True):
        write_trace(d / name, events(3, 2), **spec)
    return d


@pytest.mark.parametrize(
    "where",
    ["both after", "both before", "first before, second after", "first after, second before"],
)
@case(
    FAMILY,
    "two files whose `distributedInfo` says rank 0, placed after `traceEvents`, before it, or one of each",
    "clear error",
    "exit 2, 'two files claim rank 0: a.json (distributedInfo) and b.json (distributedInfo)' in every order; "
    "no 'carry no rank' warning",
)
def test_duplicate_rank_in_every_order(tmp_path, where):
    spec = {"before": {"before": dist(0, 2)}, "after": {"after": dist(0, 2)}}
    first, second = {
        "both after": ("after", "after"),
        "both before": ("before", "before"),
        "first before, second after": ("before", "after"),
        "first after, second before": ("after", "before"),
    }[where]
    d = _pair(tmp_path / "t", spec[first], spec[second])
    r = cli("info", d, "--no-cache")
    assert_clear_error(r, "two files claim rank 0", "a.json (distributedInfo)", "b.json (distributedInfo)")
    assert "carry no rank" not in r.err
    with pytest.raises(DuplicateRankError):
        ranksight.load(d, cache=False)


@case(
    FAMILY,
    "two files declaring ranks 1 and 0 after `traceEvents` (the reverse of their name order)",
    "correct result",
    "a.json is rank 1 and b.json rank 0, both 'distributedInfo'; no warning",
)
def test_late_ranks_are_taken(tmp_path):
    d = _pair(tmp_path / "t", {"after": dist(1, 2)}, {"after": dist(0, 2)})
    r = cli("info", d, "--no-cache", "--format", "json")
    assert r.rc == 0 and r.warnings == [], r.err
    rows = json.loads(r.out)["tables"]["files"]
    assert [(x["rank"], x["file"], x["rank_from"]) for x in rows] == [
        (0, "b.json", "distributedInfo"),
        (1, "a.json", "distributedInfo"),
    ]


@case(
    FAMILY,
    "files named `rank0.json`, `rank1.json` whose `distributedInfo` after `traceEvents` says 1 and 0",
    "correct result",
    "the declared ranks win over the names: rank0.json is rank 1",
)
def test_late_rank_wins_over_the_file_name(tmp_path):
    d = _pair(tmp_path / "t", {"after": dist(1)}, {"after": dist(0)}, names=("rank0.json", "rank1.json"))
    run = ranksight.load(d, cache=False)
    assert _files(run) == {0: ("rank1.json", "distributedInfo"), 1: ("rank0.json", "distributedInfo")}


@case(
    FAMILY,
    "a file declaring rank 0 after `traceEvents` and a file with no rank anywhere",
    "salvage with warning",
    "the declared file is rank 0; the other numbered 1 with one warning naming it ('b.json→1')",
)
def test_late_rank_and_an_unranked_file(tmp_path):
    d = _pair(tmp_path / "t", {"after": dist(0)}, {})
    with pytest.warns(ranksight.RanksightWarning) as rec:
        run = ranksight.load(d, cache=False)
    assert _files(run) == {0: ("a.json", "distributedInfo"), 1: ("b.json", "order")}
    msgs = [str(w.message) for w in rec]
    assert msgs == ["1 file(s) carry no rank (no distributedInfo, no rank in the name); numbered in order: b.json→1"]


@case(
    FAMILY,
    "`--rank 0` over two files that both declare rank 0 after `traceEvents`",
    "clear error",
    "exit 2, 'two files claim rank 0' (the other files' declarations are read too)",
)
def test_selection_does_not_hide_a_duplicate(tmp_path):
    d = _pair(tmp_path / "t", {"after": dist(0)}, {"after": dist(0)})
    assert_clear_error(cli("info", d, "--rank", "1", "--no-cache"), "two files claim rank 0")
    assert_clear_error(cli("info", d, "--rank", "0", "--no-cache"), "two files claim rank 0")


@case(
    FAMILY,
    "`--rank 0` over a.json (declares 1 after `traceEvents`) and b.json (declares 0 after)",
    "correct result",
    "rank 0 is b.json",
)
def test_selection_by_late_rank(tmp_path):
    d = _pair(tmp_path / "t", {"after": dist(1)}, {"after": dist(0)})
    run = ranksight.load(d, ranks=[0], cache=False)
    assert _files(run) == {0: ("b.json", "distributedInfo")}


@case(
    FAMILY,
    "`--rank 1` over `rank0.json`, `rank1.json` whose `distributedInfo` after `traceEvents` agrees with the names",
    "correct result",
    "rank 1 is rank1.json ('distributedInfo') and rank0.json is not decoded (a name that agrees with the "
    "declaration is trusted; a file numbered by order, or a declaration that contradicts the name, makes every "
    "file's declaration be read)",
)
def test_selection_by_agreeing_names_decodes_one_file(tmp_path, monkeypatch):
    from ranksight.model import engine as engine_mod

    d = _pair(tmp_path / "t", {"after": dist(0)}, {"after": dist(1)}, names=("rank0.json", "rank1.json"))
    loaded: list[str] = []
    real = engine_mod.TraceSource.load

    def counting(self, *args):  # noqa: ANN001, ANN002, ANN202
        loaded.append(Path(self.path).name)
        return real(self, *args)

    monkeypatch.setattr(engine_mod.TraceSource, "load", counting)
    run = ranksight.load(d, ranks=[1], cache=False)
    assert _files(run) == {1: ("rank1.json", "distributedInfo")} and loaded == ["rank1.json"]


@pytest.mark.parametrize("mode", ["cached re-run", "process pool (--jobs 2)"])
@case(
    FAMILY,
    "the duplicate and the swapped late ranks again, loaded from the cache, and decoded in worker processes",
    "correct result",
    "the same outcomes: the cache and the workers report each file's `distributedInfo`",
)
def test_late_ranks_through_cache_and_workers(tmp_path, mode):
    cfg = CacheConfig(tmp_path / "cache", min_bytes=0)
    jobs = 2 if mode.startswith("process") else None
    ok = _pair(tmp_path / "ok", {"after": dist(1)}, {"after": dist(0)})
    dup = _pair(tmp_path / "dup", {"after": dist(0)}, {"after": dist(0)})
    for _ in range(2 if mode == "cached re-run" else 1):
        run = ranksight.load(ok, cache=cfg, jobs=jobs)
        assert _files(run) == {0: ("b.json", "distributedInfo"), 1: ("a.json", "distributedInfo")}
        assert [t.rank for t in run] == [0, 1] and run[0].meta.rank == 0
        with pytest.raises(DuplicateRankError):
            ranksight.load(dup, cache=cfg, jobs=jobs)
        if jobs:
            run.engine.close()


@case(
    FAMILY,
    "world sizes 2 and 4 declared after `traceEvents`",
    "clear error",
    "exit 2, 'ranks of different runs mixed: world_size 2: r0.json; world_size 4: r1.json' (as when declared first)",
)
def test_late_world_sizes_disagree(tmp_path):
    d = _pair(tmp_path / "t", {"after": dist(0, 2)}, {"after": dist(1, 4)}, names=("r0.json", "r1.json"))
    assert_clear_error(cli("info", d, "--no-cache"), "world_size 2: r0.json; world_size 4: r1.json")
    with pytest.raises(MixedRunsError):
        ranksight.load(d, cache=False)


# ---- time units ----------------------------------------------------------------------------------


def _ranks(d: Path, scales: list[float], steps: list[int] | None = None) -> Path:
    d.mkdir()
    for r, s in enumerate(scales):
        n = steps[r] if steps else 4
        write_trace(d / f"rank{r}.json", events(n, 3, scale=s), before=dist(r, len(scales)))
    return d


@case(
    FAMILY,
    "three ranks, rank 2's times written in ns (every `ts` and `dur` × 1000)",
    "salvage with warning",
    "`info`: a note 'time unit: rank 2 3900.000 ms (1000× the others')…'; `diagnose`: a high finding "
    "`time-unit-mismatch` on rank 2 with spans and median durations per rank",
)
def test_ns_rank_flagged_by_info_and_diagnose(tmp_path):
    d = _ranks(tmp_path / "t", [1, 1, 1000])
    r = cli("info", d, "--no-cache", "--format", "json")
    assert r.rc == 0
    notes = [n for n in json.loads(r.out)["notes"] if n.startswith("time unit:")]
    assert notes == [
        "time unit: rank 2 3900.000 ms (1000× the others'): span and event durations ~1000× apart, as when one trace's "
        "timestamps are in ns and the others' in µs (Kineto writes µs); numbers across these ranks cannot be compared"
    ]
    r = cli("diagnose", d, "--no-cache", "--format", "json")
    assert r.rc == 0, r.err
    [f] = [f for f in json.loads(r.out)["findings"] if f["rule"] == "time-unit-mismatch"]
    assert f["ranks"] == [2] and f["severity"] == "high"
    assert f["evidence"]["span_ms_by_rank"] == {"0": 3.9, "1": 3.9, "2": 3900.0}
    assert f["evidence"]["median_event_us_by_rank"] == {"0": 31.5, "1": 31.5, "2": 31500.0}


@case(
    FAMILY,
    "two ranks, one in ns",
    "salvage with warning",
    "both named (two ranks cannot say which one is off): 'rank 0 … (1/1000 of the others'), rank 1 … (1000×…)'",
)
def test_two_ranks_both_flagged(tmp_path):
    d = _ranks(tmp_path / "t", [1, 1000])
    notes = json.loads(cli("info", d, "--no-cache", "--format", "json").out)["notes"]
    [n] = [x for x in notes if x.startswith("time unit:")]
    assert n.startswith("time unit: rank 0 3.900 ms (1/1000 of the others'), rank 1 3900.000 ms (1000× the others')")


@case(
    FAMILY,
    "two ranks in µs, one profiled over 1000 steps and the other over 1 (span 1000× apart, durations alike)",
    "correct result",
    "no time-unit note and no finding",
)
def test_long_profile_is_not_a_time_unit(tmp_path):
    d = _ranks(tmp_path / "t", [1, 1], steps=[1, 1000])
    r = cli("info", d, "--no-cache", "--format", "json")
    assert r.rc == 0 and not [n for n in json.loads(r.out)["notes"] if n.startswith("time unit:")]
    doc = json.loads(cli("diagnose", d, "--no-cache", "--format", "json").out)
    assert "time-unit-mismatch" in doc["rules"] and not [
        f for f in doc["findings"] if f["rule"] == "time-unit-mismatch"
    ]


def test_docs_table():
    check_table(sys.modules[__name__], FAMILY)
