"""Group entries (issue 19): the rank files decoded together are cached together, one entry of ten
files for the group instead of ten files per rank; read back equal to the uncached traces, every
file checked, a damaged or stale group rebuilt with one warning per rank, listed and verified by
``ranksight cache``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import ranksight
from ranksight.data import example_path
from ranksight.model import cache as cache_mod
from ranksight.model.cache import CacheConfig


@pytest.fixture
def cfg(tmp_path: Path) -> CacheConfig:
    return CacheConfig(tmp_path / "cache", min_bytes=0)


@pytest.fixture
def ranks8(tmp_path: Path) -> Path:
    d = tmp_path / "dlrm"
    shutil.copytree(example_path("dlrm"), d)
    return d


def _entries(cfg: CacheConfig) -> list[Path]:
    return sorted(p for p in cfg.directory.iterdir() if not p.name.startswith("."))


def _same(a: ranksight.Run, b: ranksight.Run) -> None:
    assert a.ranks == b.ranks
    for r in a.ranks:
        x, y = a[r], b[r]
        assert x.events.equals(y.events), r
        for n in x.tables:
            assert x.tables[n].equals(y.tables[n]), (r, n)
        assert x.spans.equals(y.spans), r
        assert x.meta.raw == y.meta.raw and x.meta.devices_used == y.meta.devices_used, r
        assert x.stats == y.stats and x.warnings == y.warnings, r
        assert x.steps.equals(y.steps), r
        assert x.raw_events([3]) == y.raw_events([3]), r


def test_one_group_entry_read_back_equal(cfg, ranks8):
    plain = ranksight.load(ranks8, cache=False)
    first = ranksight.load(ranks8, cache=cfg)
    [entry] = _entries(cfg)
    assert entry.name.startswith("dlrm.8ranks-")
    assert sorted(p.name for p in entry.iterdir()) == sorted(
        ["meta.json", "events.parquet", "spans.parquet", *[f"t_{n}.parquet" for n in cache_mod.TABLES]]
    )
    meta = json.loads((entry / "meta.json").read_text())
    assert meta["group"] and len(meta["members"]) == 8
    assert meta["counts"]["events.parquet"] == [plain[r].events.height for r in plain.ranks]
    _same(first, plain)
    # the second load reads the entry: a marker sealed into one member's warnings comes back
    meta["members"][3]["warnings"] = ["from-the-group"]
    meta["checksum"] = cache_mod._seal(meta)
    (entry / "meta.json").write_text(json.dumps(meta))
    with pytest.warns(ranksight.RanksightWarning, match="from-the-group"):
        again = ranksight.load(ranks8, cache=cfg)
    assert again[3].warnings == ["from-the-group"] and again[2].warnings == []
    for r in plain.ranks:
        assert again[r].events.equals(plain[r].events)
        assert again[r].table("kernel").equals(plain[r].table("kernel"))


@pytest.mark.parametrize("damage", ["truncate", "flip", "remove"])
def test_a_damaged_group_is_rebuilt(cfg, ranks8, damage):
    plain = ranksight.load(ranks8, cache=False)
    ranksight.load(ranks8, cache=cfg)
    [entry] = _entries(cfg)
    p = entry / "t_kernel.parquet"
    raw = p.read_bytes()
    if damage == "truncate":
        p.write_bytes(raw[: len(raw) // 2])
    elif damage == "flip":
        p.write_bytes(raw[:100] + bytes([raw[100] ^ 0xFF]) + raw[101:])
    else:
        p.unlink()
    with pytest.warns(ranksight.RanksightWarning, match="was unusable"):
        run = ranksight.load(ranks8, cache=cfg)
    for r in plain.ranks:
        assert run[r].events.equals(plain[r].events)
    assert cache_mod.check_entry(_entries(cfg)[0]) is None  # rewritten sound
    _same(ranksight.load(ranks8, cache=cfg), plain)


def test_a_changed_member_makes_a_new_group(cfg, ranks8):
    import gzip

    ranksight.load(ranks8, cache=cfg)
    f = sorted(ranks8.glob("*.json.gz"))[5]
    doc = json.loads(gzip.decompress(f.read_bytes()))
    k = next(e for e in doc["traceEvents"] if e.get("cat") == "kernel")
    k["dur"] = k["dur"] + 1000  # one kernel 1 ms longer
    f.write_bytes(gzip.compress(json.dumps(doc).encode()))
    run = ranksight.load(ranks8, cache=cfg)
    assert len(_entries(cfg)) == 2  # a new group key; the old entry is never served for new content
    fresh = ranksight.load(ranks8, cache=False)
    _same(run, fresh)
    assert run[5].events["dur_ns"].sum() != ranksight.load(ranks8, ranks=[4], cache=False)[4].events["dur_ns"].sum()


def test_cache_command_lists_and_verifies_a_group(cfg, ranks8, cli):
    ranksight.load(ranks8, cache=cfg)
    out = cli("cache", "verify", "--cache-dir", str(cfg.directory), "--format", "json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    rows = doc["tables"]["entries"] if "tables" in doc else doc["entries"]
    assert len(rows) == 1 and "ok" in json.dumps(rows[0]).lower()
