"""The decoded-trace cache: hits, and rebuilds when anything is off."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

import ranksight
from ranksight.model import cache as cache_mod
from ranksight.model.cache import CacheConfig


@pytest.fixture
def cfg(tmp_path: Path) -> CacheConfig:
    return CacheConfig(tmp_path / "cache", min_bytes=0)


@pytest.fixture
def trace_file(tmp_path: Path, data) -> Path:
    p = tmp_path / "rank0.json.gz"
    shutil.copyfile(data("hta/trace_filter/sampled_rank-0.json.gz"), p)
    return p


def _entries(cfg: CacheConfig) -> list[Path]:
    return sorted(p for p in cfg.directory.iterdir() if not p.name.startswith("."))


def test_second_load_reads_the_cache(cfg, trace_file):
    a = ranksight.load(trace_file, cache=cfg)[0]
    [entry] = _entries(cfg)
    assert (entry / "events.parquet").exists() and json.loads((entry / "meta.json").read_text())[
        "format_version"
    ] == cache_mod.FORMAT_VERSION
    b = ranksight.load(trace_file, cache=cfg)[0]
    assert b.events.equals(a.events)
    assert b.table("kernel").equals(a.table("kernel"))
    assert b.meta.world_size == a.meta.world_size == 128
    assert b.meta.devices_used == a.meta.devices_used
    assert b.steps.equals(a.steps)
    assert b.raw_events([5]) == a.raw_events([5])
    # proof it came from the cache: a marker put into the cached meta (sealed again) comes back
    meta = json.loads((entry / "meta.json").read_text())
    meta["warnings"] = ["from-the-cache"]
    meta["checksum"] = cache_mod._seal(meta)
    (entry / "meta.json").write_text(json.dumps(meta))
    with pytest.warns(ranksight.RanksightWarning, match="from-the-cache"):
        assert ranksight.load(trace_file, cache=cfg)[0].warnings == ["from-the-cache"]


def test_rebuilt_after_the_trace_changes(cfg, trace_file, data):
    ranksight.load(trace_file, cache=cfg)
    shutil.copyfile(data("hta/trace_filter/sampled_rank-1.json.gz"), trace_file)
    run = ranksight.load(trace_file, cache=cfg)
    assert run.ranks == [1] and run[1].events.height == 4720
    assert len(_entries(cfg)) == 2  # a new key; the old entry is never used for the new content


def test_rebuilt_after_a_truncated_cache_file(cfg, trace_file):
    good = ranksight.load(trace_file, cache=cfg)[0].events
    [entry] = _entries(cfg)
    p = entry / "events.parquet"
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])
    key = cache_mod.fingerprint(str(trace_file))
    assert cache_mod.read_entry(cfg, str(trace_file), key, rank=0, rank_source="x") is None
    again = ranksight.load(trace_file, cache=cfg)[0].events
    assert again.equals(good)
    assert cache_mod.read_entry(cfg, str(trace_file), key, rank=0, rank_source="x") is not None


def test_rebuilt_after_a_corrupt_meta(cfg, trace_file):
    ranksight.load(trace_file, cache=cfg)
    [entry] = _entries(cfg)
    (entry / "meta.json").write_text("{not json")
    assert ranksight.load(trace_file, cache=cfg)[0].events.height == 4855
    assert json.loads((entry / "meta.json").read_text())["key"]


def test_rebuilt_after_a_format_version_bump(cfg, trace_file, monkeypatch):
    ranksight.load(trace_file, cache=cfg)
    key_v1 = cache_mod.fingerprint(str(trace_file))
    monkeypatch.setattr(cache_mod, "FORMAT_VERSION", cache_mod.FORMAT_VERSION + 1)
    assert cache_mod.fingerprint(str(trace_file)) != key_v1
    assert cache_mod.read_entry(cfg, str(trace_file), key_v1, rank=0, rank_source="x") is None
    ranksight.load(trace_file, cache=cfg)
    assert len(_entries(cfg)) == 2


def test_concurrent_writers_never_corrupt(cfg, trace_file):
    from concurrent.futures import ThreadPoolExecutor

    t = ranksight.load(trace_file, cache=False)[0]
    key = cache_mod.fingerprint(str(trace_file))
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda _: cache_mod.write_entry(cfg, t, key), range(8)))
    assert len(_entries(cfg)) == 1
    assert not [p for p in cfg.directory.iterdir() if p.name.startswith(".tmp")]
    back = cache_mod.read_entry(cfg, str(trace_file), key, rank=0, rank_source="x")
    assert back is not None and back.events.equals(t.events)


def test_small_files_are_not_cached(tmp_path, trace_file):
    cfg = CacheConfig(tmp_path / "c2")  # default min_bytes: 1 MiB
    ranksight.load(trace_file, cache=cfg)
    assert not cfg.directory.exists() or not _entries(cfg)


def test_no_cache(tmp_path, trace_file):
    cfg = CacheConfig(tmp_path / "c3", min_bytes=0)
    run = ranksight.load(trace_file, cache=False)
    assert run[0].events.height == 4855 and not cfg.directory.exists()


def test_process_pool_map_equals_local(cfg, tmp_path, data):
    for r in (0, 1):
        shutil.copyfile(data(f"hta/trace_filter/sampled_rank-{r}.json.gz"), tmp_path / f"rank{r}.json.gz")
    files = [tmp_path / "rank0.json.gz", tmp_path / "rank1.json.gz"]
    local = ranksight.load(files, cache=cfg)
    pooled = ranksight.load(files, cache=cfg, jobs=2)
    from ranksight.analyses.summary import gpu_counts

    assert pooled.engine.name == "process"
    assert pooled.map(gpu_counts) == local.map(gpu_counts)
    pool = pooled.engine._executor
    assert pooled.map(gpu_counts) == local.map(gpu_counts) and pooled.engine._executor is pool  # one pool per engine
    pooled.engine.close()
    assert pooled.engine._executor is None and pooled.map(gpu_counts) == local.map(gpu_counts)
    assert pl.DataFrame(list(local.map(gpu_counts).values()))["kernels"].to_list() == [1154, 1104]


def test_spans_stay_on_disk_after_caching(cfg, trace_file):
    """A trace that wrote (or read) its cache entry reads its spans from it only when asked."""
    first = ranksight.load(trace_file, cache=cfg)[0]
    again = ranksight.load(trace_file, cache=cfg)[0]
    plain = ranksight.load(trace_file, cache=False)[0]
    assert callable(first._spans) and callable(again._spans)
    assert first.spans.equals(plain.spans) and again.spans.equals(plain.spans)
    # the entry removed meanwhile: the spans are scanned from the trace file instead
    fresh = ranksight.load(trace_file, cache=CacheConfig(cfg.directory.parent / "other", min_bytes=0))[0]
    shutil.rmtree(cfg.directory.parent / "other")
    assert fresh.raw_events([3]) == plain.raw_events([3])


def test_side_tables_stay_on_disk_after_caching(cfg, trace_file):
    """The trace that wrote its entry holds no side table in memory: each is read back from the
    entry on first use, equal to the decoded one; rebuilt from the trace file if the entry has gone."""
    from ranksight.io.kineto import TABLES

    plain = ranksight.load(trace_file, cache=False)[0]
    first = ranksight.load(trace_file, cache=cfg)[0]
    assert first.tables._frames == {}  # nothing held after the load
    for name in TABLES:
        assert first.table(name).equals(plain.table(name)), name
    assert set(first.tables._frames) == set(TABLES)  # read once, then kept
    other = CacheConfig(cfg.directory.parent / "other", min_bytes=0)
    fresh = ranksight.load(trace_file, cache=other)[0]
    shutil.rmtree(other.directory)
    assert fresh.table("kernel").equals(plain.table("kernel")) and fresh.table("flow").equals(plain.table("flow"))


def test_lazy_run_decodes_a_single_rank_once(tmp_path, trace_file, monkeypatch):
    """Over the resident limit and without a cache, the last rank decoded by load() stays: a
    single huge rank is not decoded a second time by the first analysis."""
    from ranksight.model import engine as engine_mod
    from ranksight.model import run as run_mod

    calls = []
    orig = engine_mod.TraceSource.load

    def counting(self, *args):  # noqa: ANN001, ANN002, ANN202
        calls.append(self.rank)
        return orig(self)

    monkeypatch.setattr(run_mod, "RESIDENT_BYTES", 0)
    monkeypatch.setattr(engine_mod.TraceSource, "load", counting)
    run = ranksight.load(trace_file, cache=False)
    assert run.max_resident is not None  # the lazy path
    assert run[0].events.height == 4855 and list(run)[0] is run[0]
    assert calls == [0]


def test_entry_writes_the_events_last_and_reports_each_file(cfg, trace_file):
    """Side tables, then spans, then the events (the caller lets each table go once written, so
    the peak of a first load is the events table, not every table at once)."""
    from ranksight.io.kineto import TABLES

    t = ranksight.load(trace_file, cache=False)[0]
    seen: list[str] = []
    entry = cache_mod.write_entry(cfg, t, "k", on_written=seen.append)
    assert seen == [*[f"t_{n}.parquet" for n in TABLES], "spans.parquet", "events.parquet"]
    assert all((entry / f).exists() for f in seen)


def test_cache_errors_in_words():
    import errno

    why = cache_mod._why
    assert why(OSError(errno.ENOSPC, "No space left on device")) == "no space left on device"
    assert why(pl.exceptions.ComputeError("parquet: underlying IO error: No space left on device (os error 28)")) == (
        "no space left on device"
    )
    assert why(PermissionError(errno.EACCES, "Permission denied")) == "permission denied"
    assert why(OSError(errno.EROFS, "Read-only file system")) == "read-only file system"
    assert why(ValueError("odd")) == "ValueError: odd"


def test_verify_mode_is_checked(tmp_path, trace_file):
    with pytest.raises(ValueError, match="verify must be one of"):
        CacheConfig(tmp_path, verify="fast")
    with pytest.raises(ranksight.RanksightError, match="cache_verify must be one of sampled, full"):
        ranksight.load(trace_file, cache=CacheConfig(tmp_path / "c", min_bytes=0), cache_verify="fast")


def test_full_fingerprint_reads_the_content_not_the_mtime(trace_file):
    import os

    full, sampled = cache_mod.fingerprint(str(trace_file), full=True), cache_mod.fingerprint(str(trace_file))
    assert full != sampled
    os.utime(trace_file, (1, 1))
    assert cache_mod.fingerprint(str(trace_file), full=True) == full
    assert cache_mod.fingerprint(str(trace_file)) != sampled


def test_cache_warnings_one_line_for_all_ranks():
    from ranksight.model.run import _one_line_per_cache_problem

    lines = [
        "rank 0: cache: not written to /c: no space left on device; the traces are decoded without it",
        "rank 0: 3 events dropped",
        "rank 1: cache: not written to /c: no space left on device; the traces are decoded without it",
        "rank 2: cache: entry x was unusable (events.parquet fails its checksum): decoded again and rewritten",
    ]
    assert _one_line_per_cache_problem(lines) == [
        "ranks 0, 1: cache: not written to /c: no space left on device; the traces are decoded without it",
        "rank 0: 3 events dropped",
        "rank 2: cache: entry x was unusable (events.parquet fails its checksum): decoded again and rewritten",
    ]


def test_list_entries_kinds(cfg, trace_file):
    ranksight.load(trace_file, cache=cfg)
    d = cfg.directory
    (d / ".tmp-abcdef12-x").mkdir()
    (d / "t.json-0123456789abcdef0123456789abcdef").mkdir()  # no meta.json
    (d / "not-an-entry").mkdir()
    (d / "file.txt").write_text("x")
    kinds = sorted((e.kind, e.path.name[:6]) for e in cache_mod.list_entries(d))
    assert kinds == [("broken", "t.json"), ("entry", "rank0."), ("tmp", ".tmp-a")]
    [e] = [e for e in cache_mod.list_entries(d) if e.kind == "entry"]
    assert e.rank == 0 and e.source == str(trace_file.resolve()) and e.bytes > 0
