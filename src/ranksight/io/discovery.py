"""Find trace files and decide which rank each one holds.

Rank resolution order: an explicit user mapping, ``distributedInfo.rank`` (read from the file
header, which is parsed as JSON, so compact and pretty-printed files behave alike), a rank pattern
in the file name (``rank-3``, ``rank3``, ``_rank_3``, ``worker3``), and finally the order of the
files, with a warning.

The header read here ends where ``traceEvents`` begins. A ``distributedInfo`` written *after* the
events is seen only once the file is decoded: :func:`ranksight.model.run.load` then calls
:func:`discover` again with those late headers (``late_headers``), so the rank a file declares
wins wherever it sits, and two files declaring one rank are an error in every order. Warnings about
ranks guessed from the order are handed back in ``notes`` for the caller to issue once the ranks
are final. An Nsight Systems SQLite export (``.sqlite``, recognised by its SQLite
header) holds one rank per (process, GPU) (see :func:`ranksight.io.nsys.rank_units`); its ranks are
numbered after the files that name theirs, in (process, device) order, or take the rank in the
file name when the export holds one rank.
"""

from __future__ import annotations

import errno
import glob
import os
import re
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ranksight.errors import (
    DuplicateRankError,
    MixedRunsError,
    TraceFormatError,
    TraceNotFoundError,
    UsageError,
    warn,
)
from ranksight.io import nsys as _nsys
from ranksight.io.kineto import DEFAULT_MAX_BYTES, read_header

__all__ = [
    "TraceFile",
    "discover",
    "rank_from_name",
    "declared_rank",
    "check_one_run",
    "TRACE_SUFFIXES",
    "PROVISIONAL_SOURCES",
]

TRACE_SUFFIXES = (".json", ".json.gz", ".gz", ".sqlite")
_RANK_RE = re.compile(r"(?:^|[^a-z])(?:rank|worker)[\[\-_/]?(\d+)", re.IGNORECASE)

#: Where a rank came from when the file's header (up to ``traceEvents``) declared none: a
#: ``distributedInfo`` after the events, seen when the file is decoded, overrides these.
PROVISIONAL_SOURCES = ("file name", "order")


@dataclass
class TraceFile:
    """One input file and the rank it was given."""

    path: str
    rank: int
    rank_source: str
    header: dict[str, Any] = field(default_factory=dict)
    #: for an Nsight Systems export: the :class:`~ranksight.io.nsys.NsysUnit` this rank reads
    nsys: Any = None


def rank_from_name(name: str) -> int | None:
    """The rank written in a file name, if any (``rank-3``, ``rank3``, ``_rank_3``, ``worker3``)."""
    m = _RANK_RE.search(Path(name).name)
    return int(m.group(1)) if m else None


def _is_trace_name(p: str) -> bool:
    return p.endswith(TRACE_SUFFIXES)


def _why_not_file(s: str) -> str | None:
    """Why ``s`` cannot be read as a trace file (None when it is a regular file)."""
    try:
        st = os.stat(s)
    except OSError as err:
        if err.errno == errno.ELOOP:
            return "symbolic link loop"
        if os.path.islink(s):
            return f"broken symbolic link (points to {os.readlink(s)})"
        if err.errno == errno.EACCES:
            return "permission denied"
        return "no such file or directory"
    if stat.S_ISDIR(st.st_mode):
        return "is a directory"
    if not stat.S_ISREG(st.st_mode):
        what = "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) else "a device"
        return f"not a regular file ({what})"
    return None


def _expand(item: str | os.PathLike[str], skipped: list[tuple[str, str]]) -> tuple[list[str], bool]:
    """Files for one argument, and whether they came from a directory or glob (lenient).

    Only names ending in ``.json``, ``.json.gz`` or ``.gz`` are considered in a directory, and
    nothing else is opened (not even stat'ed beyond the directory listing's type). Entries with
    such names that are not regular files (symbolic link loops, FIFOs, ...) go to ``skipped``.
    """
    s = os.fspath(item)
    if any(c in s for c in "*?["):
        found = sorted(p for p in glob.glob(s) if _is_trace_name(p) or os.path.isfile(p))
        files = []
        for p in found:
            why = _why_not_file(p)
            if why is None:
                files.append(p)
            elif why != "is a directory":
                skipped.append((p, why))
        if not files:
            raise TraceNotFoundError("the pattern matches no file", path=s)
        return files, True
    if os.path.isdir(s):
        try:
            entries = sorted((e.name, e) for e in os.scandir(s) if _is_trace_name(e.name))
        except OSError as err:
            raise TraceNotFoundError(f"cannot list the directory: {err.strerror}", path=s) from None
        found = []
        for name, e in entries:
            p = os.path.join(s, name)
            try:
                regular = e.is_file()
            except OSError:
                regular = False
            if regular:
                found.append(p)
            else:
                why = _why_not_file(p)
                if why != "is a directory":
                    skipped.append((p, why or "not a regular file"))
        if not found:
            raise TraceNotFoundError(
                "the directory holds no .json or .json.gz file (nor an nsys .sqlite export)", path=s
            )
        return found, True
    why = _why_not_file(s)
    if why is not None:
        cls = TraceFormatError if why.startswith("not a regular file") else TraceNotFoundError
        raise cls(why, path=s)
    return [s], False


def declared_rank(header: Mapping[str, Any]) -> int | None:
    """The rank a trace's top-level metadata declares (``distributedInfo.rank``), if any."""
    return _header_rank(header)


def _header_rank(header: Mapping[str, Any]) -> int | None:
    info = header.get("distributedInfo")
    if isinstance(info, dict):
        r = info.get("rank")
        if isinstance(r, int) and not isinstance(r, bool) and r >= 0:
            return r
        if isinstance(r, str) and r.isdigit():
            return int(r)
    return None


def discover(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]] | Mapping[int, str | os.PathLike[str]],
    *,
    ranks: Iterable[int] | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    rank_by: str | None = None,
    step_range: str | None = None,
    late_headers: Mapping[str, Mapping[str, Any]] | None = None,
    notes: list[str] | None = None,
) -> list[TraceFile]:
    """Resolve paths (files, directories, globs, or a ``{rank: path}`` mapping) to trace files.

    ``rank_by`` (``process`` / ``device``) and ``step_range`` apply to Nsight Systems exports.
    ``late_headers`` maps a file's real path to top-level keys read after its ``traceEvents``
    (known once decoded; merged into the header). With ``notes``, the warning about ranks taken
    from the order of the files is appended there instead of issued."""
    late = late_headers or {}

    def header_of(p: str) -> dict[str, Any]:
        header, _ = read_header(p, max_bytes=max_bytes)
        extra = late.get(os.path.realpath(p))
        return {**dict(extra), **header} if extra else header

    if isinstance(paths, Mapping):
        files = [TraceFile(os.fspath(p), int(r), "user") for r, p in paths.items()]
        for f in files:
            if not os.path.exists(f.path):
                raise TraceNotFoundError("no such file", path=f.path)
            if _nsys.is_sqlite(f.path):
                f.nsys = _one_unit(f.path, rank_by, step_range)
                continue
            f.header = header_of(f.path)
    else:
        items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
        if not items:
            raise UsageError("no trace path given")
        candidates: list[tuple[str, bool]] = []
        seen: set[str] = set()
        skipped: list[tuple[str, str]] = []
        for item in items:
            found, lenient = _expand(item, skipped)
            for p in found:
                key = os.path.realpath(p)
                if key not in seen:
                    seen.add(key)
                    candidates.append((p, lenient))
        files = []
        unordered: list[TraceFile] = []
        nsys_units: list[TraceFile] = []
        for p, lenient in candidates:
            if _nsys.is_sqlite(p):
                got = _nsys_files(p, lenient, skipped, rank_by, step_range)
                (files if len(got) == 1 and got[0].rank >= 0 else nsys_units).extend(got)
                continue
            try:
                header, is_trace = read_header(p, max_bytes=max_bytes)
            except (TraceFormatError, TraceNotFoundError) as err:
                if lenient:
                    skipped.append((p, err.message))
                    continue
                raise
            if not is_trace:
                if lenient:
                    skipped.append((p, "a JSON file that is not a trace (no traceEvents)"))
                    continue
                keys = ", ".join(sorted(header)[:8]) or "none"
                raise TraceFormatError(
                    f"not a trace: the JSON has no 'traceEvents' list (top-level keys: {keys})", path=p
                )
            extra = late.get(os.path.realpath(p))
            if extra and _header_rank(header) is None:  # distributedInfo after traceEvents
                header = {**header, **extra}
            r = _header_rank(header)
            if r is not None:
                files.append(TraceFile(p, r, "distributedInfo", header))
                continue
            r = rank_from_name(p)
            if r is not None:
                files.append(TraceFile(p, r, "file name", header))
            else:
                unordered.append(TraceFile(p, -1, "order", header))
        if skipped:
            _warn_skipped(skipped)
        if not files and not unordered and not nsys_units:
            raise TraceNotFoundError("no trace file found", path=", ".join(os.fspath(i) for i in items))
        if unordered or nsys_units:
            taken = {f.rank for f in files}
            nxt = 0
            for f in unordered + nsys_units:
                while nxt in taken:
                    nxt += 1
                f.rank = nxt
                taken.add(nxt)
            if unordered and len(files) + len(unordered) + len(nsys_units) > 1:
                msg = (
                    f"{len(unordered)} file(s) carry no rank (no distributedInfo, no rank in the name); "
                    "numbered in order: " + ", ".join(f"{Path(f.path).name}→{f.rank}" for f in unordered)
                )
                if notes is not None:
                    notes.append(msg)
                else:
                    warn(msg)
            files.extend(unordered + nsys_units)
    by_rank: dict[int, TraceFile] = {}
    for f in files:
        if f.rank in by_rank:
            other = by_rank[f.rank]
            raise DuplicateRankError(
                f"two files claim rank {f.rank}: {other.path} ({other.rank_source}) and {f.path} ({f.rank_source}); "
                "pass one run at a time or select files explicitly",
                path=f.path,
                rank=f.rank,
            )
        by_rank[f.rank] = f
    out = [by_rank[r] for r in sorted(by_rank)]
    if ranks is not None:
        wanted = set(int(r) for r in ranks)
        missing = wanted - set(by_rank)
        if missing:
            raise UsageError(f"rank(s) {sorted(missing)} not found; available: {sorted(by_rank)}")
        out = [f for f in out if f.rank in wanted]
    check_one_run([(f.path, f.rank, _header_world_size(f.header)) for f in out])
    return out


def _nsys_files(
    p: str, lenient: bool, skipped: list[tuple[str, str]], rank_by: str | None, step_range: str | None
) -> list[TraceFile]:
    """One :class:`TraceFile` per rank of an Nsight Systems export (rank −1: numbered later), or
    the rank in the file name when the export holds one rank."""
    try:
        units = _nsys.rank_units(p, rank_by=rank_by, step_range=step_range)
    except TraceFormatError as err:
        if lenient:
            skipped.append((p, err.message))
            return []
        raise
    if not units:
        if lenient:
            skipped.append((p, "an Nsight Systems export with no process that ran CUDA or NVTX work"))
            return []
        raise TraceFormatError("the Nsight Systems export holds no process with CUDA or NVTX events", path=p)
    r = rank_from_name(p) if len(units) == 1 else None
    if r is not None:
        return [TraceFile(p, r, "file name", {}, units[0])]
    return [TraceFile(p, -1, f"nsys {u.label}", {}, u) for u in units]


def _one_unit(p: str, rank_by: str | None, step_range: str | None) -> Any:
    units = _nsys.rank_units(p, rank_by=rank_by, step_range=step_range)
    if len(units) != 1:
        labels = "; ".join(u.label for u in units) or "none"
        raise UsageError(
            f"{os.path.basename(p)} holds {len(units)} ranks ({labels}): pass it as a path (its ranks are numbered "
            "per process and GPU) or choose --rank-by process|device"
        )
    return units[0]


def _warn_skipped(skipped: list[tuple[str, str]], shown: int = 3) -> None:
    """One warning for every file skipped in a directory or glob (not one per file)."""
    head = "; ".join(f"{p}: {why}" for p, why in skipped[:shown])
    more = f"; and {len(skipped) - shown} more" if len(skipped) > shown else ""
    warn(f"skipped {len(skipped)} file(s) that are not readable traces: {head}{more}")


def _header_world_size(header: dict[str, Any]) -> int | None:
    info = header.get("distributedInfo")
    if isinstance(info, dict):
        ws = info.get("world_size")
        if isinstance(ws, int) and not isinstance(ws, bool) and ws > 0:
            return ws
        if isinstance(ws, str) and ws.isdigit() and int(ws) > 0:
            return int(ws)
    return None


def check_one_run(files: list[tuple[str, int, int | None]]) -> None:
    """Raise :class:`MixedRunsError` when ``(path, rank, world_size)`` triples cannot come from
    one run: two world sizes, or a rank outside ``[0, world_size)``. Unknown world sizes pass."""
    by_size: dict[int, list[str]] = {}
    for path, _rank, ws in files:
        if ws is not None:
            by_size.setdefault(ws, []).append(path)
    if len(by_size) > 1:
        parts = [
            f"world_size {ws}: {os.path.basename(ps[0])}" + (f" (+{len(ps) - 1} more)" if len(ps) > 1 else "")
            for ws, ps in sorted(by_size.items())
        ]
        raise MixedRunsError(
            "ranks of different runs mixed: "
            + "; ".join(parts)
            + "; pass the files of one run (or select ranks with --rank)",
            path=by_size[max(by_size)][0],
        )
    for path, rank, ws in files:
        if ws is not None and not 0 <= rank < ws:
            raise MixedRunsError(
                f"rank {rank} is outside the world size {ws} the trace declares; "
                "files of different runs mixed, or a wrong rank mapping",
                path=path,
                rank=rank,
            )
