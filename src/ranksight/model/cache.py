"""On-disk cache of decoded, derived traces (one directory per trace file, or per group of small
rank files decoded together: :func:`write_group`, docs/scale.md).

An entry holds the canonical tables as Parquet (``events``, ``spans`` and each side table) and a
``meta.json`` with the trace's top-level metadata, decoder stats, warnings and, for every table
file, its byte size and content checksum. It is keyed by

- the file identity: real path, size and modification time,
- a content fingerprint of the trace file, one of two (:attr:`CacheConfig.verify`):

  - ``sampled`` (default): BLAKE2b over the size, the first and last 256 KiB and 16 blocks of
    16 KiB at evenly spaced offsets in between (about 0.8 MiB read whatever the file's size). A
    changed file changes its size, its modification time or, almost always, a sampled block. What
    it misses: a file of the same size whose modification time was restored (``cp -p``,
    ``rsync -t``, ``touch -r``) and whose change lies outside the sampled blocks is served stale.
  - ``full``: XXH3-128 over every byte of the file (modification time not used): a copy with a
    preserved modification time is caught, at the cost of reading the whole file on every load
    (~10 GB/s hashing, plus the disk);

- :data:`FORMAT_VERSION`, bumped whenever the model's columns or derivations change.

**An entry proves its contents.** Each table file's XXH3-128 checksum is computed while it is
written (the Parquet bytes pass through the hash on their way to the file) and ``meta.json``
carries a checksum of its own body. On read, ``meta.json`` must parse, match the key, pass its
checksum and list every table with its size; each table file is hashed again before it is decoded
(the events when the trace is opened, a side table or the spans when first used). A missing,
truncated, flipped or unreadable file makes the entry stale: the trace is decoded again, the entry
rewritten, and the trace says so in one warning.

**Writes are atomic and durable.** An entry is written into a temporary directory
(``.tmp-<random>-…``), every file and the directory are fsync'ed, then the directory is renamed
into place and its parent fsync'ed: a crash or power cut leaves either the old state or a complete
entry, never a torn one. Temporary directories left by a killed writer are removed by the next load
once they are an hour old (:func:`sweep_tmp`).

**The cache never stops an analysis.** Any error while writing (a full disk, a read-only folder, a
Parquet/Arrow error) leaves the trace decoded in memory with one warning; any error while reading
makes the entry stale; an entry removed or damaged under a loaded run makes that run decode the
trace again (once) instead of failing.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import os
import shutil
import tempfile
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import xxhash

from ranksight.io.kineto import TABLES, scan_spans
from ranksight.model import trace as _trace
from ranksight.model.derive import steps_many
from ranksight.model.taxonomy import rules_fingerprint
from ranksight.model.trace import LazyTables, Trace

__all__ = [
    "FORMAT_VERSION",
    "VERIFY_MODES",
    "CACHE_WARNING",
    "CacheConfig",
    "EntryInfo",
    "default_cache_dir",
    "fingerprint",
    "file_digest",
    "entry_dir",
    "write_entry",
    "read_entry",
    "load_or_build",
    "group_key",
    "group_dir",
    "write_group",
    "read_group",
    "store_group",
    "table_loader",
    "spans_loader",
    "store",
    "is_valid",
    "check_entry",
    "list_entries",
    "remove_entry",
    "sweep_tmp",
]

#: Bump when the decoded or derived tables change shape or meaning (3: checksums in meta.json; 4: events
#: without a usable ts/dur dropped, long strings cut, issue 24).
FORMAT_VERSION = 4

#: How a trace file's identity is checked: a sampled fingerprint or a hash of the whole file.
VERIFY_MODES = ("sampled", "full")

#: Every warning about the cache starts with this (the loader shows one line for all ranks).
CACHE_WARNING = "cache: "

#: Temporary entry directories start with this; older than :data:`STALE_TMP_S` they are removed.
TMP_PREFIX = ".tmp-"
STALE_TMP_S = 3600

_BLOCK = 256 << 10
_SAMPLE = 16 << 10
_SAMPLES = 16
_CHUNK = 1 << 20  # reused per file: larger buffers cost more in page faults than they save


def default_cache_dir() -> Path:
    """``$RANKSIGHT_CACHE_DIR``, else ``$XDG_CACHE_HOME/ranksight``, else ``~/.cache/ranksight``."""
    env = os.environ.get("RANKSIGHT_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "ranksight"


@dataclass(frozen=True)
class CacheConfig:
    """Where and when to cache. Files smaller than ``min_bytes`` load faster than a cache read.
    ``verify`` is how a trace file is recognised: ``"sampled"`` or ``"full"`` (module docstring)."""

    directory: Path
    min_bytes: int = 1 << 20
    verify: str = "sampled"

    def __post_init__(self) -> None:
        object.__setattr__(self, "directory", Path(self.directory))
        if self.verify not in VERIFY_MODES:
            raise ValueError(f"verify must be one of {VERIFY_MODES}, not {self.verify!r}")

    @classmethod
    def default(cls) -> CacheConfig:
        return cls(default_cache_dir())


class _Stale(Exception):
    """An entry that cannot be served (never leaves this module); ``missing``: it has gone (removed
    by ``ranksight cache clear`` or another run), not damaged."""

    def __init__(self, message: str, *, missing: bool = False) -> None:
        super().__init__(message)
        self.missing = missing


def file_digest(path: str | os.PathLike[str]) -> str:
    """XXH3-128 of a file's bytes (hex)."""
    h = xxhash.xxh3_128()
    with open(path, "rb", buffering=0) as f:
        buf = bytearray(_CHUNK)
        view = memoryview(buf)
        while n := f.readinto(buf):
            h.update(view[:n])
    return h.hexdigest()


def fingerprint(path: str, *, full: bool = False) -> str:
    """Content fingerprint of a trace file: sampled (cheap), or with ``full`` a hash of every byte
    (see the module docstring)."""
    st = os.stat(path)
    # XXH3-128, not a cryptographic hash: the fingerprint guards against stale entries, not against
    # an adversary who can write the user's cache directory (who could write the entry itself);
    # BLAKE2b cost 0.15 s of a 0.47 s cached re-open of 256 rank files (~0.75 MB sampled per file)
    h = xxhash.xxh3_128()
    h.update(rules_fingerprint().encode())  # the kernel taxonomy decides the stored kernel_class
    if full:
        h.update(f"{FORMAT_VERSION}:full:{os.path.realpath(path)}:{st.st_size}:{file_digest(path)}".encode())
        return h.hexdigest()
    h.update(f"{FORMAT_VERSION}:{os.path.realpath(path)}:{st.st_size}:{st.st_mtime_ns}".encode())
    with open(path, "rb") as f:
        h.update(f.read(_BLOCK))
        if st.st_size > 2 * _BLOCK:
            step = (st.st_size - 2 * _BLOCK) // (_SAMPLES + 1)
            for i in range(1, _SAMPLES + 1):
                f.seek(_BLOCK + i * step)
                h.update(f.read(_SAMPLE))
            f.seek(st.st_size - _BLOCK)
            h.update(f.read(_BLOCK))
    return h.hexdigest()


def entry_dir(cfg: CacheConfig, path: str, key: str) -> Path:
    stem = "".join(c if c.isalnum() or c in "-_." else "_" for c in Path(path).name)[:60]
    return cfg.directory / f"{stem}-{key[:32]}"


#: The events table's file in an entry.
EVENTS_FILE = "events.parquet"
META_FILE = "meta.json"


def _files(names: list[str]) -> list[str]:
    return [EVENTS_FILE, "spans.parquet", *[f"t_{n}.parquet" for n in names]]


class _HashingWriter(io.RawIOBase):
    """A file that hashes every byte on its way to disk (Parquet is written sequentially)."""

    def __init__(self, f: io.BufferedWriter) -> None:
        self._f = f
        self._h = xxhash.xxh3_128()
        self.size = 0

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def tell(self) -> int:
        return self.size

    def write(self, b: Any) -> int:
        n = self._f.write(b)
        self._h.update(memoryview(b)[:n])
        self.size += n
        return n

    def flush(self) -> None:
        self._f.flush()

    def hexdigest(self) -> str:
        return self._h.hexdigest()


def _write_parquet(df: pl.DataFrame, p: Path) -> tuple[int, str]:
    """Write ``df`` to ``p`` (fsync'ed); its size and the checksum of the bytes written."""
    with open(p, "wb") as f:
        w = _HashingWriter(f)
        df.write_parquet(w, compression="uncompressed", statistics=False)  # type: ignore[arg-type] # a binary file
        f.flush()
        os.fsync(f.fileno())
    if p.stat().st_size != w.size:  # a writer that seeked back: the running hash would be wrong
        return p.stat().st_size, file_digest(p)
    return w.size, w.hexdigest()


def _fsync_dir(d: Path) -> None:
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _seal(meta: Mapping[str, Any]) -> str:
    """Checksum of ``meta.json``'s body (every key but ``checksum``)."""
    body = json.dumps({k: v for k, v in meta.items() if k != "checksum"}, sort_keys=True, default=str)
    return xxhash.xxh3_128_hexdigest(body.encode())


def write_entry(cfg: CacheConfig, trace: Trace, key: str, *, on_written: Callable[[str], None] | None = None) -> Path:
    """Write a trace's tables atomically and durably; returns the entry directory. Side tables
    first, then spans, then the events; ``on_written(file name)`` after each (the caller may let
    the table go before the next one is written: the peak is then the events table, not
    everything)."""
    final = entry_dir(cfg, trace.path, key)
    cfg.directory.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{uuid.uuid4().hex[:8]}-", dir=cfg.directory))
    try:
        frames: list[tuple[str, Callable[[], pl.DataFrame]]] = [
            *[(f"t_{n}.parquet", lambda n=n: trace.tables[n]) for n in TABLES],
            ("spans.parquet", lambda: trace.spans),
            (EVENTS_FILE, lambda: trace.events),
        ]
        sizes, sums = {}, {}
        for fname, get in frames:
            sizes[fname], sums[fname] = _write_parquet(get(), tmp / fname)
            if on_written is not None:
                on_written(fname)
        meta: dict[str, Any] = {
            "format_version": FORMAT_VERSION,
            "key": key,
            "source": os.path.realpath(trace.path),
            "rank": trace.rank,
            "rank_source": trace.meta.rank_source,
            "raw_meta": trace.meta.raw,
            "id_names": {str(k): v for k, v in trace.meta.id_names.items()},
            "stats": trace.stats,
            "warnings": trace.warnings,
            "devices_used": trace.meta.devices_used,
            "runtime_names": sorted(trace.runtime_names),
            "tables": list(TABLES),
            "sizes": sizes,
            "xxh3_128": sums,
            "written": time.time(),
        }
        _commit(cfg, tmp, final, key, meta)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def _commit(cfg: CacheConfig, tmp: Path, final: Path, key: str, meta: dict[str, Any]) -> None:
    """Seal and write ``meta.json`` into the temporary directory, fsync it, rename it into place."""
    meta = json.loads(json.dumps(meta, default=str))  # the body exactly as it will be read back
    meta["checksum"] = _seal(meta)
    with open(tmp / META_FILE, "w") as f:
        f.write(json.dumps(meta))
        f.flush()
        os.fsync(f.fileno())
    _fsync_dir(tmp)
    try:
        os.rename(tmp, final)
    except OSError:
        # another run wrote it first (or a damaged entry is in the way): keep a sound one
        if final.exists() and check_entry(final, key) is None:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            remove_entry(final)
            os.rename(tmp, final)
    _fsync_dir(cfg.directory)


# ---- group entries: many small rank files in one entry (issue 19) ----------------------------


def group_key(keys: list[str], paths: list[str]) -> str:
    """The key of a group entry: every member's file and its own key (fingerprint), in order."""
    h = hashlib.blake2b(digest_size=20)
    h.update(f"group:{FORMAT_VERSION}\n".encode())
    for k, p in zip(keys, paths, strict=True):
        h.update(f"{os.path.realpath(p)}\0{k}\n".encode())
    return h.hexdigest()


def group_dir(cfg: CacheConfig, paths: list[str], key: str) -> Path:
    """``<folder of the first file>.<n>ranks-<key>``: one directory for the group."""
    folder = Path(os.path.realpath(paths[0])).parent.name or "traces"
    stem = "".join(c if c.isalnum() or c in "-_." else "_" for c in folder)[:40]
    return cfg.directory / f"{stem}.{len(paths)}ranks-{key[:32]}"


def write_group(cfg: CacheConfig, traces: list[Trace], key: str) -> Path:
    """Write the traces of several rank files as one entry: each table of every member stacked in
    one Parquet file, in member order (``meta.json`` says how many rows each member has), so a
    run of many small ranks writes and reads ten files, not ten per rank. Atomic and durable as
    :func:`write_entry`; the same checksums."""
    paths = [t.path for t in traces]
    final = group_dir(cfg, paths, key)
    cfg.directory.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{uuid.uuid4().hex[:8]}-", dir=cfg.directory))
    try:
        frames: list[tuple[str, Callable[[Trace], pl.DataFrame]]] = [
            *[(f"t_{n}.parquet", lambda t, n=n: t.tables[n]) for n in TABLES],
            ("spans.parquet", lambda t: t.spans),
            (EVENTS_FILE, lambda t: t.events),
        ]
        sizes, sums, counts = {}, {}, {}
        for fname, get in frames:
            parts = [get(t) for t in traces]
            counts[fname] = [p.height for p in parts]
            sizes[fname], sums[fname] = _write_parquet(pl.concat(parts, how="vertical"), tmp / fname)
        meta: dict[str, Any] = {
            "format_version": FORMAT_VERSION,
            "key": key,
            "group": True,
            "source": os.path.dirname(os.path.realpath(paths[0])),
            "members": [
                {
                    "path": os.path.realpath(t.path),
                    "raw_meta": t.meta.raw,
                    "id_names": {str(k): v for k, v in t.meta.id_names.items()},
                    "stats": t.stats,
                    "warnings": t.warnings,
                    "devices_used": t.meta.devices_used,
                    "runtime_names": sorted(t.runtime_names),
                }
                for t in traces
            ],
            "counts": counts,
            "tables": list(TABLES),
            "sizes": sizes,
            "xxh3_128": sums,
            "written": time.time(),
        }
        _commit(cfg, tmp, final, key, meta)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def _split(df: pl.DataFrame, counts: list[int]) -> list[pl.DataFrame]:
    if sum(counts) != df.height:
        raise _Stale(f"the members' row counts add up to {sum(counts)}, the file has {df.height}")
    out, k = [], 0
    for n in counts:
        out.append(df.slice(k, n))
        k += n
    return out


def read_group(
    cfg: CacheConfig,
    paths: list[str],
    key: str,
    *,
    ranks: list[int],
    rank_sources: list[str],
    problems: list[str] | None = None,
) -> list[Trace] | None:
    """The traces of a group entry (every file checked against its checksum), in member order, or
    None when there is no valid entry (with ``problems``, why a present one was refused)."""
    d = group_dir(cfg, paths, key)
    if not d.exists():
        return None
    try:
        meta = _checked(d, key)
        members = meta["members"]
        if [m["path"] for m in members] != [os.path.realpath(p) for p in paths]:
            raise _Stale("written for other files")
        parts: dict[str, list[pl.DataFrame]] = {}
        for fname in _files(meta["tables"]):
            _verify_file(d, fname, meta)
            try:
                df = pl.read_parquet(d / fname)
            except Exception as err:  # noqa: BLE001 - Parquet/Arrow errors on a file that passed its checksum
                raise _Stale(f"{fname} cannot be read: {_why(err)}") from None
            if fname == EVENTS_FILE:  # every member's ProfilerSteps in one query over the group
                steps = steps_many(df, [int(c) for c in meta["counts"][fname]])
            parts[fname] = _split(df, meta["counts"][fname])
        out = []
        for i, (m, p) in enumerate(zip(members, paths, strict=True)):
            out.append(
                Trace.from_parts(
                    path=p,
                    rank=ranks[i],
                    rank_source=rank_sources[i],
                    events=parts[EVENTS_FILE][i],
                    tables=LazyTables({n: parts[f"t_{n}.parquet"][i] for n in meta["tables"]}),
                    spans=parts["spans.parquet"][i],
                    raw_meta=m["raw_meta"],
                    id_names={int(k): v for k, v in m["id_names"].items()},
                    stats=m["stats"],
                    warnings=m["warnings"],
                    devices_used=m.get("devices_used"),
                    runtime_names=set(m.get("runtime_names") or []),
                    steps=steps[i],
                )
            )
    except _Stale as err:
        if problems is not None:
            problems.append(str(err))
        return None
    except Exception as err:  # noqa: BLE001 - a meta.json that passed its checksum but not the model
        if problems is not None:
            problems.append(f"{type(err).__name__}: {err}")
        return None
    return out


def store_group(cfg: CacheConfig, traces: list[Trace], key: str) -> None:
    """:func:`write_group`, never stopping the analysis: an error of the cache adds a warning to
    each trace (as :func:`store`)."""
    folder = str(cfg.directory)
    known = _unwritable.get(folder)
    why = None
    if known is not None and time.monotonic() - known[1] < RETRY_S:
        why = known[0]
    else:
        try:
            write_group(cfg, traces, key)
        except Exception as err:  # noqa: BLE001 - the cache never stops an analysis
            why = _why(err)
            if why in ("no space left on device", "disk quota exceeded", "read-only file system", "permission denied"):
                with _unwritable_lock:
                    _unwritable[folder] = (why, time.monotonic())
    if why is not None:
        for t in traces:
            t.warnings.append(f"{CACHE_WARNING}not written to {folder}: {why}; the traces are decoded without it")


#: Cache folders found unwritable in this process (a full disk, read-only): not tried again for
#: :data:`RETRY_S` seconds (why, when).
_unwritable: dict[str, tuple[str, float]] = {}
RETRY_S = 60.0
_unwritable_lock = threading.Lock()


def _why(err: BaseException) -> str:
    """An error of the cache in words."""
    no = getattr(err, "errno", None)
    text = str(err)
    if no == errno.ENOSPC or "os error 28" in text or "No space left" in text:
        return "no space left on device"
    if no == errno.EDQUOT or "os error 122" in text:
        return "disk quota exceeded"
    if no == errno.EROFS or "os error 30" in text:
        return "read-only file system"
    if no in (errno.EACCES, errno.EPERM) or "os error 13" in text:
        return "permission denied"
    return f"{type(err).__name__}: {text}"


def store(cfg: CacheConfig, trace: Trace, key: str, *, rebuild: Callable[[], Trace], spill: bool = True) -> None:
    """Write ``trace``'s cache entry; with ``spill``, let go of each side table and the spans once
    written (read back from the entry when needed) and, for a trace over
    :data:`~ranksight.model.trace.EVENTS_RESIDENT_MAX` events, of the events table too.
    ``rebuild()`` decodes the file again (once) if the entry vanishes later. Any error of the cache
    (a full disk, a read-only folder, a Parquet error) only adds a warning to the trace; after a
    full disk or a read-only folder, this process does not try that folder again."""
    from ranksight.model.trace import EVENTS_RESIDENT_MAX

    final = entry_dir(cfg, trace.path, key)
    folder = str(cfg.directory)
    known = _unwritable.get(folder)
    if known is not None and time.monotonic() - known[1] < RETRY_S:
        trace.warnings.append(f"{CACHE_WARNING}not written to {folder}: {known[0]}; the traces are decoded without it")
        return

    def written(fname: str) -> None:  # each table is read back when needed, not held
        if not spill:
            return
        if fname.startswith("t_"):
            name = fname[2:].removesuffix(".parquet")
            trace.spill_table(name, table_loader(final, name, lambda: rebuild().tables, key=key))
        elif fname == "spans.parquet":
            trace.spill_spans(spans_loader(final, trace.path, key=key))

    try:
        entry = write_entry(cfg, trace, key, on_written=written)
        if spill and trace.n_events > EVENTS_RESIDENT_MAX:
            trace.spill_events(entry / EVENTS_FILE, lambda: rebuild().events)
    except Exception as err:  # noqa: BLE001 - the cache never stops an analysis
        why = _why(err)
        if why in ("no space left on device", "disk quota exceeded", "read-only file system", "permission denied"):
            with _unwritable_lock:
                _unwritable[folder] = (why, time.monotonic())
        trace.warnings.append(f"{CACHE_WARNING}not written to {folder}: {why}; the traces are decoded without it")


def is_valid(d: Path, key: str) -> bool:
    """Whether ``d`` holds a complete entry for ``key`` (meta checksum and file sizes; the table
    files' checksums are verified when they are read)."""
    return _valid(d, key) is not None


def _meta(d: Path) -> dict[str, Any]:
    """An entry's ``meta.json``, checked against its own checksum; raises :class:`_Stale`."""
    try:
        meta = json.loads((d / META_FILE).read_text())
    except FileNotFoundError:
        raise _Stale("meta.json is missing", missing=True) from None
    except (OSError, ValueError) as err:
        raise _Stale(f"meta.json is unreadable ({type(err).__name__})") from None
    if not isinstance(meta, dict):
        raise _Stale("meta.json is not an object")
    if meta.get("format_version") != FORMAT_VERSION:
        raise _Stale(f"format {meta.get('format_version')} (this version reads {FORMAT_VERSION})")
    if meta.get("checksum") != _seal(meta):
        raise _Stale("meta.json fails its checksum")
    return meta


def _check_sizes(d: Path, meta: Mapping[str, Any]) -> None:
    sizes = meta.get("sizes") or {}
    for fname in _files(meta.get("tables") or []):
        try:
            size = (d / fname).stat().st_size
        except OSError:
            raise _Stale(f"{fname} is missing", missing=True) from None
        if size != sizes.get(fname):
            raise _Stale(f"{fname} has {size} bytes, {sizes.get(fname)} were written")


def _checked(d: Path, key: str | None) -> dict[str, Any]:
    meta = _meta(d)
    if key is not None and meta.get("key") != key:
        raise _Stale("written for another key")
    _check_sizes(d, meta)
    return meta


def _valid(d: Path, key: str) -> dict[str, Any] | None:
    try:
        return _checked(d, key)
    except _Stale:
        return None


def _verify_file(d: Path, fname: str, meta: Mapping[str, Any]) -> None:
    """Hash a table file of the entry and compare with its checksum; raises :class:`_Stale`."""
    want = (meta.get("xxh3_128") or {}).get(fname)
    try:
        got = file_digest(d / fname)
    except OSError as err:
        raise _Stale(f"{fname} is unreadable: {_why(err)}") from None
    if got != want:
        raise _Stale(f"{fname} fails its checksum")


def _read_verified(d: Path, fname: str, key: str | None, meta: Mapping[str, Any] | None = None) -> pl.DataFrame:
    """A table file of an entry, after checking it against the entry's checksums."""
    if meta is None:
        meta = _checked(d, key)
    _verify_file(d, fname, meta)
    try:
        return pl.read_parquet(d / fname)
    except Exception as err:  # noqa: BLE001 - Parquet/Arrow errors on a file that passed its checksum
        raise _Stale(f"{fname} cannot be read: {_why(err)}") from None


def check_entry(d: Path, key: str | None = None) -> str | None:
    """Every check of an entry, each file's checksum included: the problem in words, or None."""
    try:
        meta = _checked(d, key)
        for fname in _files(meta.get("tables") or []):
            _verify_file(d, fname, meta)
    except _Stale as err:
        return str(err)
    return None


_warned: set[str] = set()


def _warn_once(message: str) -> None:
    from ranksight.errors import RanksightWarning

    if message not in _warned:
        _warned.add(message)
        warnings.warn(message, RanksightWarning, stacklevel=3)


def spans_loader(entry: Path, path: str, *, key: str | None = None) -> Callable[[], pl.DataFrame]:
    """Reads an entry's ``spans`` table when called (traces keep their spans on disk), checked
    against its checksum; scans the trace file again if the entry has gone or is damaged."""

    def load() -> pl.DataFrame:
        try:
            return _read_verified(entry, "spans.parquet", key)
        except _Stale as err:  # removed, damaged or rewritten by another run
            if not err.missing:
                _warn_once(f"{CACHE_WARNING}entry {entry.name}: {err}; the byte spans are read from {path} instead")
                remove_entry(entry)  # the next load rebuilds it
            return scan_spans(path)

    return load


def table_loader(
    entry: Path, name: str, fallback: Callable[[], Mapping[str, pl.DataFrame]], *, key: str | None = None
) -> Callable[[], pl.DataFrame]:
    """Reads side table ``name`` back from an entry when called, instead of holding it (the flow
    table is not read again after the links are derived; the kernel and op tables only by the
    analyses that need their args), checked against its checksum. ``fallback()`` rebuilds the
    tables from the trace file if the entry has gone or is damaged meanwhile (the caller makes it
    decode once)."""

    def read() -> pl.DataFrame:
        try:
            return _read_verified(entry, f"t_{name}.parquet", key)
        except _Stale as err:  # removed (decoded again, silently) or damaged (said once)
            if not err.missing:
                _warn_once(f"{CACHE_WARNING}entry {entry.name}: {err}; the trace is decoded again")
                remove_entry(entry)  # the next load rebuilds it
            return fallback()[name]

    return read


def read_entry(
    cfg: CacheConfig,
    path: str,
    key: str,
    *,
    rank: int,
    rank_source: str,
    rebuild_events: Callable[[], pl.DataFrame] | None = None,
    rebuild: Callable[[], Trace] | None = None,
    problems: list[str] | None = None,
) -> Trace | None:
    """The cached trace, or None when there is no valid entry (it is then rebuilt; with
    ``problems``, why a present entry was refused is appended to it). The events file is checked
    against its checksum here, each side table and the spans when first read. With
    ``rebuild_events``, a trace of more than ``EVENTS_RESIDENT_MAX`` events keeps its events in
    the entry (:meth:`Trace.scan` reads them per query; ``rebuild_events()`` if the entry goes).
    ``rebuild()`` decodes the trace again (once) when a side table's file has gone or is damaged
    by the time it is first read."""
    d = entry_dir(cfg, path, key)
    if not d.exists():
        return None
    try:
        meta = _checked(d, key)
        _verify_file(d, EVENTS_FILE, meta)
        try:
            n = pl.scan_parquet(d / EVENTS_FILE).select(pl.len()).collect().item()  # from the file's metadata
            spill = rebuild_events is not None and n > _trace.EVENTS_RESIDENT_MAX
            events = pl.scan_parquet(d / EVENTS_FILE).limit(0).collect() if spill else pl.read_parquet(d / EVENTS_FILE)
        except Exception as err:  # noqa: BLE001 - Parquet/Arrow errors: the entry is stale
            raise _Stale(f"{EVENTS_FILE} cannot be read: {_why(err)}") from None
        t = Trace.from_parts(
            path=path,
            rank=rank,
            rank_source=rank_source,
            events=events,
            tables=LazyTables(
                {
                    n: table_loader(d, n, (lambda: rebuild().tables) if rebuild else _decoder(path, rank), key=key)
                    for n in meta["tables"]
                }
            ),
            spans=spans_loader(d, path, key=key),
            raw_meta=meta["raw_meta"],
            id_names={int(k): v for k, v in meta["id_names"].items()},
            stats=meta["stats"],
            warnings=meta["warnings"],
            devices_used=meta.get("devices_used"),
            runtime_names=set(meta.get("runtime_names") or []),
        )
    except _Stale as err:
        if problems is not None:
            problems.append(str(err))
        return None
    except Exception as err:  # noqa: BLE001 - a meta.json that passed its checksum but not the model
        if problems is not None:
            problems.append(f"{type(err).__name__}: {err}")
        return None
    if spill:
        assert rebuild_events is not None
        t.spill_events(d / EVENTS_FILE, rebuild_events)
        t.n_events = n
    return t


def _decoder(path: str, rank: int) -> Callable[[], Mapping[str, pl.DataFrame]]:
    """The side tables decoded from a Kineto trace file (the fallback of :func:`read_entry` called
    without ``rebuild``)."""

    def tables() -> Mapping[str, pl.DataFrame]:
        from ranksight.io.kineto import decode

        return Trace(decode(path), rank=rank).tables

    return tables


class _Once:
    """``fn()`` called on first use only (the fallback decode shared by a trace's spilled parts)."""

    def __init__(self, fn: Callable[[], Trace]) -> None:
        self._fn = fn
        self._value: Trace | None = None
        self._lock = threading.Lock()

    def __call__(self) -> Trace:
        with self._lock:
            if self._value is None:
                self._value = self._fn()
            return self._value


def load_or_build(
    cfg: CacheConfig,
    key: str,
    *,
    path: str,
    rank: int,
    rank_source: str,
    decode: Callable[[], Trace],
    accept: Callable[[Trace], bool] = lambda t: True,
    spill: bool = True,
) -> Trace:
    """The trace from its cache entry when the entry is valid and ``accept(trace)``; else
    ``decode()`` and write the entry. A damaged entry is rebuilt, and the trace says so in a
    warning."""
    problems: list[str] = []
    rebuilt = _Once(decode)
    t = read_entry(
        cfg,
        path,
        key,
        rank=rank,
        rank_source=rank_source,
        rebuild_events=lambda: rebuilt().events,
        rebuild=rebuilt,
        problems=problems,
    )
    if t is not None and accept(t):
        return t
    if problems:  # a damaged entry: out of the way of the new one
        remove_entry(entry_dir(cfg, path, key))
    t = decode()
    store(cfg, t, key, rebuild=_Once(decode), spill=spill)
    if problems:  # after the write: the warning is about this load, not stored in the new entry
        d = entry_dir(cfg, path, key)
        t.warnings.append(f"{CACHE_WARNING}entry {d.name} was unusable ({problems[0]}): decoded again and rewritten")
    return t


@dataclass(frozen=True)
class EntryInfo:
    """One directory of a cache folder (``ranksight cache info``)."""

    path: Path
    bytes: int
    #: ``entry`` (this format), ``old`` (another format version), ``tmp`` (a temporary directory)
    #: or ``broken`` (no readable meta.json)
    kind: str
    source: str | None = None
    rank: int | None = None
    written: float | None = None


def _du(d: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(d):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, f)).st_size
    return total


def _is_entry_name(name: str) -> bool:
    stem, _, key = name.rpartition("-")
    return bool(stem) and len(key) == 32 and all(c in "0123456789abcdef" for c in key)


def list_entries(directory: Path) -> list[EntryInfo]:
    """The entries and temporary directories in a cache folder (nothing else is listed)."""
    out: list[EntryInfo] = []
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return out
    for name in names:
        d = directory / name
        if not d.is_dir() or d.is_symlink():
            continue
        if name.startswith(TMP_PREFIX):
            out.append(EntryInfo(d, _du(d), "tmp", written=d.stat().st_mtime))
            continue
        if not _is_entry_name(name):
            continue
        try:
            meta = json.loads((d / META_FILE).read_text())
            if not isinstance(meta, dict):
                raise ValueError
        except (OSError, ValueError):
            out.append(EntryInfo(d, _du(d), "broken"))
            continue
        kind = "entry" if meta.get("format_version") == FORMAT_VERSION else "old"
        written = meta.get("written")
        out.append(
            EntryInfo(
                d,
                _du(d),
                kind,
                source=str(meta.get("source")) if meta.get("source") else None,
                rank=meta.get("rank") if isinstance(meta.get("rank"), int) else None,
                written=float(written) if isinstance(written, (int, float)) else d.stat().st_mtime,
            )
        )
    return out


def remove_entry(d: Path) -> None:
    """Remove an entry: renamed to a temporary name first (a reader never sees half of it)."""
    gone = d.parent / f"{TMP_PREFIX}{uuid.uuid4().hex[:8]}-rm"
    try:
        os.rename(d, gone)
    except FileNotFoundError:
        return
    shutil.rmtree(gone, ignore_errors=True)


def sweep_tmp(cfg: CacheConfig, max_age_s: float = STALE_TMP_S) -> int:
    """Remove the temporary directories (``.tmp-*``) older than ``max_age_s`` that a killed writer
    left in the cache folder; returns how many. A live writer's directory is younger."""
    removed = 0
    now = time.time()
    try:
        it = os.scandir(cfg.directory)
    except OSError:
        return 0
    with it:
        for e in it:
            if not e.name.startswith(TMP_PREFIX):
                continue
            try:
                if not e.is_dir(follow_symlinks=False) or now - e.stat(follow_symlinks=False).st_mtime < max_age_s:
                    continue
            except OSError:
                continue
            shutil.rmtree(e.path, ignore_errors=True)
            removed += 1
    return removed
