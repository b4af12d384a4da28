"""Find trace files and decide which rank each one holds.

Rank resolution order: an explicit user mapping, ``distributedInfo.rank`` (read from the file
header, which is parsed as JSON, so compact and pretty-printed files behave alike), a rank pattern
in the file name (``rank-3``, ``rank3``, ``_rank_3``, ``worker3``), and finally the order of the
files, with a warning.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ranksight.errors import DuplicateRankError, TraceFormatError, TraceNotFoundError, UsageError, warn
from ranksight.io.kineto import DEFAULT_MAX_BYTES, read_header

__all__ = ["TraceFile", "discover", "rank_from_name", "TRACE_SUFFIXES"]

TRACE_SUFFIXES = (".json", ".json.gz", ".gz")
_RANK_RE = re.compile(r"(?:^|[^a-z])(?:rank|worker)[\[\-_/]?(\d+)", re.IGNORECASE)


@dataclass
class TraceFile:
    """One input file and the rank it was given."""

    path: str
    rank: int
    rank_source: str
    header: dict[str, Any] = field(default_factory=dict)


def rank_from_name(name: str) -> int | None:
    """The rank written in a file name, if any (``rank-3``, ``rank3``, ``_rank_3``, ``worker3``)."""
    m = _RANK_RE.search(Path(name).name)
    return int(m.group(1)) if m else None


def _is_trace_name(p: str) -> bool:
    return p.endswith(TRACE_SUFFIXES)


def _expand(item: str | os.PathLike[str]) -> tuple[list[str], bool]:
    """Files for one argument, and whether they came from a directory or glob (lenient)."""
    s = os.fspath(item)
    if any(c in s for c in "*?["):
        found = sorted(p for p in glob.glob(s) if os.path.isfile(p))
        if not found:
            raise TraceNotFoundError("the pattern matches no file", path=s)
        return found, True
    if os.path.isdir(s):
        try:
            names = sorted(os.listdir(s))
        except OSError as err:
            raise TraceNotFoundError(f"cannot list the directory: {err.strerror}", path=s) from None
        found = [os.path.join(s, n) for n in names if _is_trace_name(n)]
        found = [p for p in found if os.path.isfile(p)]
        if not found:
            raise TraceNotFoundError("the directory holds no .json or .json.gz file", path=s)
        return found, True
    if os.path.lexists(s) and not os.path.exists(s):
        raise TraceNotFoundError("broken symbolic link", path=s)
    if not os.path.exists(s):
        raise TraceNotFoundError("no such file or directory", path=s)
    return [s], False


def _header_rank(header: dict[str, Any]) -> int | None:
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
) -> list[TraceFile]:
    """Resolve paths (files, directories, globs, or a ``{rank: path}`` mapping) to trace files."""
    if isinstance(paths, Mapping):
        files = [TraceFile(os.fspath(p), int(r), "user") for r, p in paths.items()]
        for f in files:
            if not os.path.exists(f.path):
                raise TraceNotFoundError("no such file", path=f.path)
            f.header, _ = read_header(f.path, max_bytes=max_bytes)
    else:
        items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
        if not items:
            raise UsageError("no trace path given")
        candidates: list[tuple[str, bool]] = []
        seen: set[str] = set()
        for item in items:
            found, lenient = _expand(item)
            for p in found:
                key = os.path.realpath(p)
                if key not in seen:
                    seen.add(key)
                    candidates.append((p, lenient))
        files = []
        unordered: list[TraceFile] = []
        for p, lenient in candidates:
            try:
                header, is_trace = read_header(p, max_bytes=max_bytes)
            except (TraceFormatError, TraceNotFoundError) as err:
                if lenient:
                    warn(f"skipped {p}: {err.message}")
                    continue
                raise
            if not is_trace:
                if lenient:
                    warn(f"skipped {p}: a JSON file that is not a trace (no traceEvents)")
                    continue
                raise TraceFormatError("not a trace: the JSON has no 'traceEvents' list", path=p)
            r = _header_rank(header)
            if r is not None:
                files.append(TraceFile(p, r, "distributedInfo", header))
                continue
            r = rank_from_name(p)
            if r is not None:
                files.append(TraceFile(p, r, "file name", header))
            else:
                unordered.append(TraceFile(p, -1, "order", header))
        if not files and not unordered:
            raise TraceNotFoundError("no trace file found", path=", ".join(os.fspath(i) for i in items))
        if unordered:
            taken = {f.rank for f in files}
            nxt = 0
            for f in unordered:
                while nxt in taken:
                    nxt += 1
                f.rank = nxt
                taken.add(nxt)
            if len(files) + len(unordered) > 1:
                warn(
                    f"{len(unordered)} file(s) carry no rank (no distributedInfo, no rank in the name); "
                    "numbered in order: " + ", ".join(f"{Path(f.path).name}→{f.rank}" for f in unordered)
                )
            files.extend(unordered)
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
    return out
