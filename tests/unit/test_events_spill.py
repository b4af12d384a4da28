"""Events kept in the cache entry instead of memory (traces over ``EVENTS_RESIDENT_MAX`` events):
every query reads back only what it needs and every analysis gives what it gives on the resident
table (docs/scale.md)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from polars.testing import assert_frame_equal

import ranksight
from ranksight.analyses import names, run_analysis
from ranksight.errors import RanksightError
from ranksight.model import trace as trace_mod
from ranksight.model.cache import CacheConfig


@pytest.fixture
def spill(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace_mod, "EVENTS_RESIDENT_MAX", 100)


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst) if src.is_dir() else shutil.copyfile(src, dst)
    return dst


def test_spilled_trace_reads_the_same_events(tmp_path, data, spill):
    f = _copy(data("hta/trace_filter/sampled_rank-0.json.gz"), tmp_path / "rank0.json.gz")
    cfg = CacheConfig(tmp_path / "cache", min_bytes=0)
    plain = ranksight.load(f, cache=False)[0]
    assert plain.events_resident
    first = ranksight.load(f, cache=cfg)[0]  # wrote the entry
    again = ranksight.load(f, cache=cfg)[0]  # read it
    for t in (first, again):
        assert not t.events_resident and t.n_events == plain.n_events == plain.events.height > 100
        assert_frame_equal(t.events, plain.events)
        assert t.column("end_ns").equals(plain.column("end_ns"))
        assert_frame_equal(t.kind("kernel"), plain.kind("kernel"))
        assert_frame_equal(t.kind("cpu_op", columns=["row", "name"]), plain.kind("cpu_op", columns=["row", "name"]))
        assert_frame_equal(t.steps, plain.steps)
        assert t.span_ns == plain.span_ns
        assert not t.events_resident  # still: nothing above kept the table
    # the entry removed meanwhile: the file is decoded again (once) and the table held from then on
    shutil.rmtree(cfg.directory)
    assert_frame_equal(first.kind("memcpy"), plain.kind("memcpy"))
    assert first.events_resident
    assert_frame_equal(first.table("kernel"), plain.table("kernel"))


def _results(run: ranksight.Run) -> dict[str, object]:
    out: dict[str, object] = {}
    for n in names():
        try:
            out[n] = run_analysis(n, run)
        except RanksightError as err:
            out[n] = type(err).__name__
    return out


@pytest.mark.parametrize(
    "rel",
    [
        "generated/h100/ddp-gloo-2ranks",
        "generated/h100/train-modules",
        "hta/trace_filter",
        "hta/amd_trace",
        "generated/cpu-ddp-gloo-4ranks",
    ],
)
def test_every_analysis_is_the_same_on_spilled_events(tmp_path, data, spill, rel):
    src = _copy(data(rel), tmp_path / "traces")
    resident = _results(ranksight.load(src, cache=False))
    run = ranksight.load(src, cache=CacheConfig(tmp_path / "cache", min_bytes=0))
    assert not any(t.events_resident for t in run)
    spilled = _results(run)
    assert not any(t.events_resident for t in run)  # no analysis put the table back in memory
    assert set(spilled) == set(resident)
    ran = 0
    for n, r in resident.items():
        s = spilled[n]
        if isinstance(r, str):
            assert s == r, n
            continue
        ran += 1
        assert set(s.tables) == set(r.tables), n
        for k in r.tables:
            try:
                assert_frame_equal(s.tables[k], r.tables[k], check_exact=False, rel_tol=1e-9)
            except AssertionError as err:
                raise AssertionError(f"{n}/{k}: {err}") from None
        assert s.notes == r.notes, n
    assert ran >= 15
