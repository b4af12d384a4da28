"""Cache faults (issue 24, family 3): a cache entry proves its contents, any cache error degrades
to decoding with one warning, and the results always equal ``--no-cache``.

Every case damages or withholds the cache in one way (bytes flipped in place at the same size,
files cut or removed, a full disk or a Parquet error while writing or reading, an entry removed
under a loaded run, a killed writer's leftovers, a copy that kept its mtime) and checks the outcome
against a load without the cache.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import sys
import time
from pathlib import Path

import polars as pl
import pytest
from _fault_helpers import case, check_table, cli, events, leftovers, write_trace

import ranksight
from ranksight.analyses import run_analysis
from ranksight.io.kineto import TABLES
from ranksight.model import cache as cache_mod
from ranksight.model.cache import CacheConfig

FAMILY = "cache"
ANALYSES = ("kernels", "temporal", "launches")


@pytest.fixture(autouse=True)
def _fresh_cache_state(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_mod, "_unwritable", {})  # a full disk in one test is not the next one's


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    d = tmp_path / "in"
    d.mkdir()
    return write_trace(d / "rank0.json", events(40, 3))


@pytest.fixture
def cfg(tmp_path: Path) -> CacheConfig:
    return CacheConfig(tmp_path / "cache", min_bytes=0)


def _entry(cfg: CacheConfig) -> Path:
    [e] = [p for p in cfg.directory.iterdir() if not p.name.startswith(".")]
    return e


def _zero(p: Path, n: int = 64, at: float = 0.5) -> None:
    """Zero ``n`` bytes in place at fraction ``at`` of the file (same size)."""
    b = bytearray(p.read_bytes())
    i = int(len(b) * at)
    assert b[i : i + n] != bytes(n)
    b[i : i + n] = bytes(n)
    p.write_bytes(bytes(b))


def _same(a: ranksight.Run, b: ranksight.Run) -> None:
    """Equal events, side tables, spans and analyses."""
    for r in a.ranks:
        assert a[r].events.equals(b[r].events)
        for n in TABLES:
            assert a[r].table(n).equals(b[r].table(n)), n
        assert a[r].spans.equals(b[r].spans)
    for n in ANALYSES:
        x, y = run_analysis(n, a), run_analysis(n, b)
        assert set(x.tables) == set(y.tables)
        for k in x.tables:
            assert x.tables[k].equals(y.tables[k]), (n, k)


def _load(path: Path, cfg: CacheConfig | bool) -> tuple[ranksight.Run, list[str]]:
    with _Recorder() as rec:
        run = ranksight.load(path, cache=cfg)
    return run, rec.messages


class _Recorder:
    """Record every warning (pytest.warns fails when there is none; here none is an outcome)."""

    def __enter__(self) -> _Recorder:
        import warnings

        self._cm = warnings.catch_warnings(record=True)
        self._list = self._cm.__enter__()
        warnings.simplefilter("always")
        return self

    def __exit__(self, *exc: object) -> None:
        self._cm.__exit__(*exc)

    @property
    def messages(self) -> list[str]:
        return [str(w.message) for w in self._list]


# ---- damaged entries: detected, rebuilt, equal to --no-cache -------------------------------------


@pytest.mark.parametrize("fname", ["events.parquet", "t_kernel.parquet", "t_op.parquet", "spans.parquet"])
@case(
    FAMILY,
    "64 bytes zeroed in place (same size) in a cached `events.parquet`, `t_kernel.parquet`, `t_op.parquet` or "
    "`spans.parquet`",
    "salvage with warning",
    "one warning naming the file and 'fails its checksum'; the trace decoded again; every table and analysis "
    "equal to `--no-cache`; the damaged entry replaced (events) or removed (side table, spans: checked on first "
    "use) so the next load is clean",
)
def test_flipped_bytes_are_detected_and_rebuilt(trace, cfg, fname):
    plain, _ = _load(trace, False)
    _load(trace, cfg)
    _zero(_entry(cfg) / fname)
    with _Recorder() as rec:
        run = ranksight.load(trace, cache=cfg)
        _same(run, plain)
    hits = [m for m in rec.messages if "fails its checksum" in m]
    assert len(hits) == 1 and fname in hits[0], rec.messages
    again, msgs = _load(trace, cfg)  # the next load: a sound entry (rewritten now, or on this load)
    assert not [m for m in msgs if m.startswith(("rank 0: cache", "cache"))], msgs
    _same(again, plain)
    assert cache_mod.check_entry(_entry(cfg)) is None


@pytest.mark.parametrize("fname", ["events.parquet", "t_kernel.parquet"])
@case(
    FAMILY,
    "a real trace (HTA's ns-resolution trace, 3 MB gzip): 64 bytes zeroed in its cached `events.parquet` or "
    "`t_kernel.parquet`, then `ranksight analyze ops` and `kernel-config` (the numbers the issue saw change)",
    "salvage with warning",
    "one warning; the ops (device time per op) and kernel-config (blocks per SM) tables equal `--no-cache`",
)
def test_flipped_bytes_on_a_real_trace(tmp_path, data, fname):
    src = data("hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz")
    p = Path(shutil.copyfile(src, tmp_path / src.name))
    c = tmp_path / "cache"
    want = {n: cli("analyze", n, p, "--no-cache", "--format", "csv") for n in ("ops", "kernel-config")}
    assert cli("info", p, "--cache-dir", c).rc == 0
    [entry] = [e for e in c.iterdir() if not e.name.startswith(".")]
    _zero(entry / fname, at=0.3)
    got = {n: cli("analyze", n, p, "--cache-dir", c, "--format", "csv") for n in ("ops", "kernel-config")}
    for n in want:
        assert got[n].rc == want[n].rc == 0 and got[n].out == want[n].out, n
    warned = [w for r in got.values() for w in r.warnings if "fails its checksum" in w]
    assert len(warned) == 1 and fname in warned[0]


@case(
    FAMILY,
    "`meta.json` edited so that it still parses (a stats number changed)",
    "salvage with warning",
    "'meta.json fails its checksum': decoded again, equal to `--no-cache`",
)
def test_meta_edited_but_valid_json(trace, cfg):
    plain, _ = _load(trace, False)
    _load(trace, cfg)
    m = _entry(cfg) / "meta.json"
    meta = json.loads(m.read_text())
    meta["stats"]["events"] = int(meta["stats"]["events"]) + 1
    m.write_text(json.dumps(meta))
    run, msgs = _load(trace, cfg)
    assert len(msgs) == 1 and "meta.json fails its checksum" in msgs[0]
    _same(run, plain)
    assert run[0].stats["events"] == plain[0].stats["events"]


@pytest.mark.parametrize("how", ["truncated", "removed", "emptied"])
@case(
    FAMILY,
    "a cached table file cut in half, removed, or emptied",
    "salvage with warning",
    "one warning ('has N bytes, M were written' / 'is missing'); decoded again, equal to `--no-cache`",
)
def test_cut_or_missing_files(trace, cfg, how):
    plain, _ = _load(trace, False)
    _load(trace, cfg)
    p = _entry(cfg) / "events.parquet"
    if how == "removed":
        p.unlink()
    else:
        p.write_bytes(p.read_bytes()[: p.stat().st_size // 2] if how == "truncated" else b"")
    run, msgs = _load(trace, cfg)
    assert len(msgs) == 1 and "events.parquet" in msgs[0] and "decoded again and rewritten" in msgs[0], msgs
    _same(run, plain)


# ---- errors while writing or reading: decoding without the cache, one warning --------------------


def _enospc(*_a: object, **_k: object) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


def _compute_error(*_a: object, **_k: object) -> None:
    raise pl.exceptions.ComputeError(
        "parquet: File out of specification: underlying IO error: No space left on device (os error 28)"
    )  # noqa: E501


@pytest.mark.parametrize("fault", ["OSError ENOSPC", "polars ComputeError"])
@case(
    FAMILY,
    "a full disk under the cache while an entry is written: `OSError(ENOSPC)` from the file system, or polars' "
    "`ComputeError` (`os error 28`)",
    "salvage with warning",
    "one warning 'cache: not written to DIR: no space left on device; the traces are decoded without it' (one "
    "line for all ranks); every analysis runs, equal to `--no-cache`; no temporary directory left",
)
def test_full_disk_while_writing(tmp_path, cfg, monkeypatch, fault):
    d = tmp_path / "in"
    d.mkdir()
    for r in (0, 1):
        write_trace(d / f"rank{r}.json", events(20, 2))
    plain, _ = _load(d, False)
    if fault == "OSError ENOSPC":
        monkeypatch.setattr(cache_mod.os, "fsync", _enospc)
    else:
        monkeypatch.setattr(pl.DataFrame, "write_parquet", _compute_error)
    run, msgs = _load(d, cfg)
    assert len(msgs) == 1, msgs
    assert msgs[0].startswith("ranks 0, 1: cache: not written to") and "no space left on device" in msgs[0]
    _same(run, plain)
    assert leftovers(cfg.directory) == []
    assert not [p for p in cfg.directory.iterdir() if not p.name.startswith(".")]


@case(
    FAMILY,
    "`ranksight info` with a full disk under the cache (CLI, two ranks)",
    "salvage with warning",
    "exit 0, the tables printed, exactly one warning line naming both ranks and the cause",
)
def test_full_disk_cli(tmp_path, monkeypatch):
    d = tmp_path / "in"
    d.mkdir()
    for r in (0, 1):  # over 1 MiB each: cached by default
        write_trace(d / f"rank{r}.json", events(1200, 3))
    monkeypatch.setattr(cache_mod.os, "fsync", _enospc)
    r = cli("info", d, "--cache-dir", tmp_path / "cache", "--format", "json")
    assert r.rc == 0, r.err
    assert json.loads(r.out)["tables"]["files"][1]["events"] > 0
    cache_lines = [w for w in r.warnings if "cache" in w]
    assert cache_lines == [
        f"ranksight: warning: ranks 0, 1: cache: not written to {tmp_path / 'cache'}: no space left on device; "
        "the traces are decoded without it"
    ], r.err


@case(
    FAMILY,
    "a Parquet/Arrow error (`ComputeError`) while a cached entry is read",
    "salvage with warning",
    "one warning 'cannot read …'; decoded again, equal to `--no-cache`",
)
def test_arrow_error_while_reading(trace, cfg, monkeypatch):
    plain, _ = _load(trace, False)
    _load(trace, cfg)
    real = pl.read_parquet

    def broken(src, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        if str(src).endswith("events.parquet") and str(cfg.directory) in str(src):
            raise pl.exceptions.ComputeError("parquet: invalid page header")
        return real(src, *a, **k)

    monkeypatch.setattr(pl, "read_parquet", broken)
    run, msgs = _load(trace, cfg)
    assert len(msgs) == 1 and "events.parquet cannot be read" in msgs[0], msgs
    monkeypatch.setattr(pl, "read_parquet", real)
    _same(run, plain)


@case(
    FAMILY,
    "an entry removed (`ranksight cache clear`, another run) under a run loaded from it",
    "correct result",
    "the next analyses decode the trace again (once) instead of raising `FileNotFoundError`; equal to `--no-cache`",
)
def test_entry_removed_under_a_loaded_run(trace, cfg):
    plain, _ = _load(trace, False)
    _load(trace, cfg)
    run, msgs = _load(trace, cfg)  # from the cache: side tables and spans read on first use
    assert msgs == [] and run[0].tables._frames == {}
    shutil.rmtree(cfg.directory)
    _same(run, plain)
    assert run[0].raw_events([3]) == plain[0].raw_events([3])


@case(
    FAMILY,
    "a side table damaged (same size) under a run loaded from the entry",
    "salvage with warning",
    "one warning on first use; the table decoded again, equal to `--no-cache`; the entry removed so that the "
    "next load rewrites it",
)
def test_entry_damaged_under_a_loaded_run(trace, cfg):
    plain, _ = _load(trace, False)
    _load(trace, cfg)
    run, _ = _load(trace, cfg)
    entry = _entry(cfg)
    _zero(entry / "t_kernel.parquet")
    with _Recorder() as rec:
        assert run[0].table("kernel").equals(plain[0].table("kernel"))
        assert run[0].table("op").equals(plain[0].table("op"))
    assert len(rec.messages) == 1 and "t_kernel.parquet fails its checksum" in rec.messages[0]
    assert not entry.exists()


@case(
    FAMILY,
    "temporary entry directories left by killed writers: one 2 hours old, one 10 minutes old",
    "correct result",
    "the next load removes the old one and keeps the young one (a live writer's)",
)
def test_stale_tmp_dirs_are_swept(trace, cfg):
    cfg.directory.mkdir(parents=True)
    old, young = cfg.directory / ".tmp-dead0001-x", cfg.directory / ".tmp-live0002-x"
    for d, age in ((old, 7200), (young, 600)):
        d.mkdir()
        (d / "events.parquet").write_bytes(b"PAR1 half")
        t = time.time() - age
        os.utime(d, (t, t))
    ranksight.load(trace, cache=cfg)
    assert not old.exists() and young.exists()


def _gap_offset(size: int) -> int:
    """An offset that the sampled fingerprint does not read (between its first and second block)."""
    block, sample, samples = cache_mod._BLOCK, cache_mod._SAMPLE, cache_mod._SAMPLES
    step = (size - 2 * block) // (samples + 1)
    assert step > 2 * sample
    return block + step // 2


@case(
    FAMILY,
    "a trace changed in place outside the sampled blocks, same size, modification time restored (`cp -p`, `rsync -t`)",
    "correct result",
    "default `sampled`: the stale entry is served (the documented trade-off); `--cache-verify full`: the change is "
    "seen and the new content decoded",
)
def test_same_size_change_with_restored_mtime(tmp_path, cfg):
    d = tmp_path / "in"
    d.mkdir()
    p = write_trace(d / "rank0.json", events(1200, 3))
    text = p.read_text()
    at = text.index('"dur":30.0,', _gap_offset(len(text)))
    st = p.stat()
    ranksight.load(p, cache=cfg)
    full = CacheConfig(cfg.directory, min_bytes=0, verify="full")
    ranksight.load(p, cache=full)
    p.write_text(text[:at] + '"dur":90.0,' + text[at + len('"dur":30.0,') :])
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert p.stat().st_size == st.st_size

    def longest(run: ranksight.Run) -> float:
        return float(run[0].kind("kernel")["dur_ns"].max())  # type: ignore[arg-type]

    assert longest(ranksight.load(p, cache=cfg)) == 32_000  # stale: the sampled fingerprint did not see it
    assert longest(ranksight.load(p, cache=False)) == 90_000
    assert longest(ranksight.load(p, cache=full)) == 90_000
    assert longest(ranksight.load(p, cache=full)) == 90_000  # and again, from its own entry


@case(
    FAMILY,
    "an entry being written (durability: what a power cut leaves)",
    "correct result",
    "every table file and `meta.json` fsync'ed, then the temporary directory, then the cache folder after the "
    "rename; each file's XXH3-128 computed while writing equals the hash of the file on disk",
)
def test_entry_is_fsynced_and_checksummed_while_written(trace, cfg, monkeypatch):
    synced: list[str] = []
    real = os.fsync

    def spy(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}") if sys.platform == "linux" else str(fd))
        real(fd)

    monkeypatch.setattr(cache_mod.os, "fsync", spy)
    ranksight.load(trace, cache=cfg)
    entry = _entry(cfg)
    names = [Path(s).name for s in synced]
    files = ["events.parquet", "spans.parquet", *[f"t_{n}.parquet" for n in TABLES], "meta.json"]
    if sys.platform == "linux":
        assert sorted(names[: len(files)]) == sorted(files)
        assert names[len(files)].startswith(".tmp-") and names[len(files) + 1] == cfg.directory.name
    assert len(synced) == len(files) + 2
    meta = json.loads((entry / "meta.json").read_text())
    for f in files[:-1]:
        assert meta["xxh3_128"][f] == cache_mod.file_digest(entry / f), f


@case(
    FAMILY,
    "`ranksight cache verify` over a folder with a sound entry, a damaged one, an old-format one and an unrelated "
    "file; then `--remove-bad`; then `cache clear`",
    "correct result",
    "verify: exit 1 naming the damaged entry's file; `--remove-bad`: exit 0, only that entry removed; clear: every "
    "entry removed, the unrelated file kept",
)
def test_cache_command(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    a = write_trace(d / "rank0.json", events(1200, 3))
    b = write_trace(d / "rank1.json", events(1201, 3))
    c = tmp_path / "cache"
    # one load per file: one entry each (loaded together they would share a group entry,
    # tests/unit/test_cache_groups.py)
    assert cli("info", a, "--cache-dir", c).rc == 0 and cli("info", b, "--cache-dir", c).rc == 0
    (c / "notes.txt").write_text("mine")
    old = c / "rank9.json-0123456789abcdef0123456789abcdef"
    old.mkdir()
    (old / "meta.json").write_text(json.dumps({"format_version": 1}))
    ea = next(p for p in c.iterdir() if p.name.startswith("rank0.json-"))
    _zero(ea / "t_kernel.parquet")
    r = cli("cache", "verify", "--cache-dir", c, "--format", "json")
    assert r.rc == 1
    rows = {x["trace"]: x for x in json.loads(r.out)["tables"]["entries"]}
    assert rows["rank0.json"]["status"] == "BAD: t_kernel.parquet fails its checksum"
    assert rows["rank1.json"]["status"] == "ok" and rows["rank9.json-0123456789abcdef0123456789abcdef"]["kind"] == "old"
    r = cli("cache", "verify", "--cache-dir", c, "--remove-bad")
    assert r.rc == 0 and not ea.exists() and old.exists()
    info = json.loads(cli("cache", "info", "--cache-dir", c, "--format", "json").out)
    assert sorted(x["kind"] for x in info["tables"]["entries"]) == ["entry", "old"]
    r = cli("cache", "clear", "--cache-dir", c)
    assert r.rc == 0 and r.out.startswith("removed 2 of 2 from")
    assert sorted(p.name for p in c.iterdir()) == ["notes.txt"]


def test_docs_table():
    check_table(sys.modules[__name__], FAMILY)
