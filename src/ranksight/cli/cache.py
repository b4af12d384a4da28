"""``ranksight cache info|verify|clear``: look into, check and empty the cache of decoded traces.

- ``info``: the folder, its entries (source trace, rank, size, when written), entries of an older
  format, temporary directories and unreadable ones.
- ``verify``: every check an entry gets when it is read, every file's checksum included; exit 1
  when an entry fails (``--remove-bad`` removes those: they are rebuilt on the next load).
- ``clear``: removes every entry and temporary directory (``--stale`` only the ones a load would
  not use: older formats, unreadable, temporary ones an hour old). Only directories named like a
  cache entry are touched: other files in the folder are left alone.

``--format json`` writes the versioned document of ``docs/cache-schema.json`` for every action
(``clear`` included: its table lists the directories it removed).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import polars as pl

from ranksight.cli._common import Command, Context, add_format_arg
from ranksight.errors import EXIT_FAILED_GATE, UsageError
from ranksight.model.cache import (
    FORMAT_VERSION,
    STALE_TMP_S,
    EntryInfo,
    check_entry,
    default_cache_dir,
    list_entries,
    remove_entry,
)

__all__ = ["CACHE_SCHEMA", "CACHE_SCHEMA_VERSION", "COMMAND", "cache_doc"]

#: ``cache --format json`` follows ``docs/cache-schema.json``: bumped when a field is removed or
#: changes meaning; adding fields keeps the version.
CACHE_SCHEMA = "ranksight-cache"
CACHE_SCHEMA_VERSION = 1


def _add(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("info", "verify", "clear"), help="what to do")
    p.add_argument(
        "--cache-dir",
        default=None,
        metavar="DIR",
        help="the cache folder (default: $RANKSIGHT_CACHE_DIR or ~/.cache/ranksight)",
    )
    p.add_argument("--remove-bad", action="store_true", help="verify: remove the entries that fail")
    p.add_argument(
        "--stale",
        action="store_true",
        help="clear: only entries a load would not use (older format, unreadable, temporary ones an hour old)",
    )
    add_format_arg(p, table=False)


def _mb(n: int) -> float:
    return round(n / 1e6, 2)


def _when(t: float | None) -> str | None:
    return None if t is None else _dt.datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S")


def _table(entries: list[EntryInfo], status: dict[Path, str] | None = None) -> pl.DataFrame:
    """One row per directory: the trace it holds (file name), rank, size, when written, kind, the
    entry's key prefix (its directory name ends with the key) and, for verify, the outcome."""
    rows = [
        {
            "trace": os.path.basename(e.source) if e.source else e.path.name,
            "rank": e.rank,
            "mb": _mb(e.bytes),
            "written": _when(e.written),
            "kind": e.kind,
            "key": e.path.name.rpartition("-")[2][:12] if e.kind in ("entry", "old") else "",
            **({"status": status.get(e.path, "")} if status is not None else {}),
        }
        for e in entries
    ]
    schema = {
        "trace": pl.String,
        "rank": pl.Int64,
        "mb": pl.Float64,
        "written": pl.String,
        "kind": pl.String,
        "key": pl.String,
        **({"status": pl.String} if status is not None else {}),
    }
    return pl.DataFrame(rows, schema=schema)


def _totals(entries: list[EntryInfo]) -> str:
    parts = []
    for kind, label in (
        ("entry", "entr"),
        ("old", "of an older format"),
        ("broken", "unreadable"),
        ("tmp", "temporary"),
    ):
        sel = [e for e in entries if e.kind == kind]
        if kind == "entry":
            label += "y" if len(sel) == 1 else "ies"
        if sel or kind == "entry":
            parts.append(f"{len(sel)} {label} ({_mb(sum(e.bytes for e in sel)):.2f} MB)")
    return ", ".join(parts)


def cache_doc(action: str, folder: Path, tables: dict[str, pl.DataFrame], notes: list[str]) -> dict[str, Any]:
    """The versioned JSON document of ``ranksight cache ACTION --format json``
    (``docs/cache-schema.json``): the action, the folder, the cache format, every table's column
    types, the tables as lists of row objects and the notes."""
    from ranksight import __version__
    from ranksight.report.terminal import analysis_doc

    body = analysis_doc(action, tables, notes)  # columns and rows written as every other document writes them
    return {
        "schema": CACHE_SCHEMA,
        "schema_version": CACHE_SCHEMA_VERSION,
        "ranksight_version": __version__,
        "action": action,
        "cache_dir": str(folder),
        "format_version": FORMAT_VERSION,
        "columns": body["columns"],
        "tables": body["tables"],
        "notes": body["notes"],
    }


def _print(action: str, folder: Path, tables: dict[str, pl.DataFrame], fmt: str, notes: list[str]) -> None:
    from ranksight.report.terminal import print_tables

    if fmt == "json":
        sys.stdout.write(json.dumps(cache_doc(action, folder, tables, notes), indent=1, default=str) + "\n")
        return
    print_tables(tables, fmt, notes=notes)


def _run(args: argparse.Namespace, ctx: Context) -> int:
    folder = Path(args.cache_dir) if args.cache_dir else default_cache_dir()
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{folder} is not a folder")
    entries = list_entries(folder)
    if args.action == "info":
        notes = [
            f"cache folder {folder}: {_totals(entries)}",
            f"format {FORMAT_VERSION}; each table file carries an XXH3-128 checksum verified when read; traces are "
            "recognised by size, mtime and sampled blocks (--cache-verify full: a hash of the whole file)",
        ]
        _print("info", folder, {"entries": _table(entries)}, args.format, notes)
        return 0
    if args.action == "verify":
        status: dict[Path, str] = {}
        bad = 0
        for e in entries:
            if e.kind != "entry":
                status[e.path] = {
                    "old": "older format (unused)",
                    "tmp": "temporary",
                    "broken": "no readable meta.json",
                }[e.kind]
                continue
            problem = check_entry(e.path)
            if problem is None:
                status[e.path] = "ok"
                continue
            bad += 1
            if args.remove_bad:
                remove_entry(e.path)
                status[e.path] = f"removed: {problem}"
            else:
                status[e.path] = f"BAD: {problem}"
        n_ok = sum(1 for v in status.values() if v == "ok")
        notes = [
            f"{n_ok} entr{'y' if n_ok == 1 else 'ies'} ok, {bad} failed"
            + (" (removed)" if bad and args.remove_bad else "")
        ]
        if bad and not args.remove_bad:
            notes.append("failed entries are rebuilt on the next load; --remove-bad removes them now")
        _print("verify", folder, {"entries": _table(entries, status)}, args.format, notes)
        return EXIT_FAILED_GATE if bad and not args.remove_bad else 0
    # clear
    now = time.time()
    gone = [
        e
        for e in entries
        if not args.stale
        or e.kind in ("old", "broken")
        or (e.kind == "tmp" and e.written is not None and now - e.written >= STALE_TMP_S)
    ]
    for e in gone:
        remove_entry(e.path)
    said = f"removed {len(gone)} of {len(entries)} from {folder} ({_mb(sum(e.bytes for e in gone)):.2f} MB)"
    if args.format == "json":
        _print("clear", folder, {"removed": _table(gone)}, "json", [said])
    elif not ctx.quiet:
        sys.stdout.write(said + "\n")
    return 0


COMMAND = Command(
    "cache",
    "show, verify or clear the cache of decoded traces",
    _add,
    _run,
    description="info: what the cache folder holds; verify: check every entry's checksums (exit 1 when one fails; "
    "--remove-bad removes those); clear: remove every entry (--stale: only those a load would not use).",
    order=80,
)
