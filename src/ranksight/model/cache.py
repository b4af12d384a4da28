"""On-disk cache of decoded, derived traces (one directory per trace file).

An entry holds the canonical tables as Parquet (``events``, ``spans`` and each side table) and a
``meta.json`` with the trace's top-level metadata, decoder stats and warnings. It is keyed by

- the file identity: real path, size and modification time,
- a content fingerprint: BLAKE2b over the size, the first and last 256 KiB and 16 sampled 16 KiB
  blocks (cheap on multi-GB files; a changed file changes size, mtime or sampled bytes),
- :data:`FORMAT_VERSION`, bumped whenever the model's columns or derivations change.

An entry is trusted only if ``meta.json`` parses, matches the key and lists every table with its
byte size; a missing, truncated or unreadable file makes it stale and it is rebuilt. Entries are
written into a temporary directory and renamed into place, so concurrent runs never see (or
corrupt) a half-written entry.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from ranksight.io.kineto import TABLES, scan_spans
from ranksight.model import trace as _trace
from ranksight.model.trace import LazyTables, Trace

__all__ = [
    "FORMAT_VERSION",
    "CacheConfig",
    "default_cache_dir",
    "fingerprint",
    "entry_dir",
    "write_entry",
    "read_entry",
    "table_loader",
    "spans_loader",
    "store",
    "is_valid",
]

#: Bump when the decoded or derived tables change shape or meaning.
FORMAT_VERSION = 2

_BLOCK = 256 << 10
_SAMPLE = 16 << 10
_SAMPLES = 16


def default_cache_dir() -> Path:
    """``$RANKSIGHT_CACHE_DIR``, else ``$XDG_CACHE_HOME/ranksight``, else ``~/.cache/ranksight``."""
    env = os.environ.get("RANKSIGHT_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "ranksight"


@dataclass(frozen=True)
class CacheConfig:
    """Where and when to cache. Files smaller than ``min_bytes`` load faster than a cache read."""

    directory: Path
    min_bytes: int = 1 << 20

    @classmethod
    def default(cls) -> CacheConfig:
        return cls(default_cache_dir())


def fingerprint(path: str) -> str:
    """Cheap content fingerprint of a file (see the module docstring)."""
    st = os.stat(path)
    h = hashlib.blake2b(digest_size=20)
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


def _files(names: list[str]) -> list[str]:
    return [EVENTS_FILE, "spans.parquet", *[f"t_{n}.parquet" for n in names]]


def write_entry(cfg: CacheConfig, trace: Trace, key: str, *, on_written: Callable[[str], None] | None = None) -> Path:
    """Write a trace's tables atomically; returns the entry directory. Side tables first, then
    spans, then the events; ``on_written(file name)`` after each (the caller may let the table go
    before the next one is written: the peak is then the events table, not everything)."""
    final = entry_dir(cfg, trace.path, key)
    cfg.directory.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{uuid.uuid4().hex[:8]}-", dir=cfg.directory))
    try:
        frames: list[tuple[str, Callable[[], pl.DataFrame]]] = [
            *[(f"t_{n}.parquet", lambda n=n: trace.tables[n]) for n in TABLES],
            ("spans.parquet", lambda: trace.spans),
            (EVENTS_FILE, lambda: trace.events),
        ]
        sizes = {}
        for fname, get in frames:
            p = tmp / fname
            get().write_parquet(p, compression="uncompressed", statistics=False)
            sizes[fname] = p.stat().st_size
            if on_written is not None:
                on_written(fname)
        meta = {
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
        }
        (tmp / "meta.json").write_text(json.dumps(meta, default=str))
        try:
            os.rename(tmp, final)
        except OSError:
            # another run wrote it first (or a stale entry is in the way): keep a valid one
            if final.exists() and _valid(final, key) is not None:
                shutil.rmtree(tmp, ignore_errors=True)
            else:
                shutil.rmtree(final, ignore_errors=True)
                os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def store(cfg: CacheConfig, trace: Trace, key: str, *, rebuild: Callable[[], Trace], spill: bool = True) -> None:
    """Write ``trace``'s cache entry; with ``spill``, let go of each side table and the spans once
    written (read back from the entry when needed) and, for a trace over
    :data:`~ranksight.model.trace.EVENTS_RESIDENT_MAX` events, of the events table too.
    ``rebuild()`` decodes the file again (once) if the entry vanishes later. An unwritable cache
    only adds a warning to the trace."""
    from ranksight.model.trace import EVENTS_RESIDENT_MAX

    final = entry_dir(cfg, trace.path, key)

    def written(fname: str) -> None:  # each table is read back when needed, not held
        if not spill:
            return
        if fname.startswith("t_"):
            name = fname[2:].removesuffix(".parquet")
            trace.spill_table(name, table_loader(final, name, lambda: rebuild().tables))
        elif fname == "spans.parquet":
            trace.spill_spans(spans_loader(final, trace.path))

    try:
        entry = write_entry(cfg, trace, key, on_written=written)
        if spill and trace.n_events > EVENTS_RESIDENT_MAX:
            trace.spill_events(entry / EVENTS_FILE, lambda: rebuild().events)
    except OSError as err:  # an unwritable cache never stops the analysis
        trace.warnings.append(f"could not write the cache entry: {err}")


def is_valid(d: Path, key: str) -> bool:
    """Whether ``d`` holds a complete entry for ``key``."""
    return _valid(d, key) is not None


def _valid(d: Path, key: str) -> dict[str, Any] | None:
    try:
        meta = json.loads((d / "meta.json").read_text())
    except (OSError, ValueError):
        return None
    if meta.get("format_version") != FORMAT_VERSION or meta.get("key") != key:
        return None
    sizes = meta.get("sizes") or {}
    for fname in _files(meta.get("tables") or []):
        p = d / fname
        try:
            if p.stat().st_size != sizes.get(fname):
                return None
        except OSError:
            return None
    return meta


def spans_loader(entry: Path, path: str) -> Callable[[], pl.DataFrame]:
    """Reads an entry's ``spans`` table when called (traces keep their spans on disk); scans the
    trace file again if the entry has gone meanwhile."""

    def load() -> pl.DataFrame:
        try:
            return pl.read_parquet(entry / "spans.parquet")
        except Exception:  # noqa: BLE001 - removed or rewritten by another run
            return scan_spans(path)

    return load


def table_loader(
    entry: Path, name: str, fallback: Callable[[], Mapping[str, pl.DataFrame]]
) -> Callable[[], pl.DataFrame]:
    """Reads side table ``name`` back from an entry when called, instead of holding it (the flow
    table is not read again after the links are derived; the kernel and op tables only by the
    analyses that need their args). ``fallback()`` rebuilds the tables from the trace file if the
    entry has gone meanwhile (the caller makes it decode once)."""

    def read() -> pl.DataFrame:
        try:
            return pl.read_parquet(entry / f"t_{name}.parquet")
        except Exception:  # noqa: BLE001 - removed or rewritten by another run
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
) -> Trace | None:
    """The cached trace, or None when there is no valid entry (it is then rebuilt). With
    ``rebuild_events``, a trace of more than ``EVENTS_RESIDENT_MAX`` events keeps its events in
    the entry (:meth:`Trace.scan` reads them per query; ``rebuild_events()`` if the entry goes)."""
    d = entry_dir(cfg, path, key)
    meta = _valid(d, key)
    if meta is None:
        return None
    try:
        n = pl.scan_parquet(d / EVENTS_FILE).select(pl.len()).collect().item()  # from the file's metadata
        spill = rebuild_events is not None and n > _trace.EVENTS_RESIDENT_MAX
        events = pl.scan_parquet(d / EVENTS_FILE).limit(0).collect() if spill else pl.read_parquet(d / EVENTS_FILE)
    except Exception:  # noqa: BLE001 - any unreadable entry is simply stale
        return None

    def loader(fname: str):  # noqa: ANN202
        return lambda: pl.read_parquet(d / fname)

    tables = LazyTables({n: loader(f"t_{n}.parquet") for n in meta["tables"]})
    t = Trace.from_parts(
        path=path,
        rank=rank,
        rank_source=rank_source,
        events=events,
        tables=tables,
        spans=loader("spans.parquet"),
        raw_meta=meta["raw_meta"],
        id_names={int(k): v for k, v in meta["id_names"].items()},
        stats=meta["stats"],
        warnings=meta["warnings"],
        devices_used=meta.get("devices_used"),
        runtime_names=set(meta.get("runtime_names") or []),
    )
    if spill:
        assert rebuild_events is not None
        t.spill_events(d / EVENTS_FILE, rebuild_events)
        t.n_events = n
    return t
