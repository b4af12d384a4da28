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

``torch.profiler.tensorboard_trace_handler`` folders: the handler writes
``<worker>.<timestamp>.pt.trace.json[.gz]`` (``worker`` is ``<hostname>_<pid>`` unless set;
``timestamp`` is ``time.time_ns()``, milliseconds in PyTorch before 2.1), one file per profiling
cycle, every cycle of every worker in one folder. The files of one worker (same folder, same name
before the timestamp, same declared rank) are its cycles, ordered by the timestamp; one cycle per
worker is read: the latest by default, ``cycle=N`` (``--cycle N``) the N-th counting from the
oldest (0), or from the latest when negative (-1 the latest), with a note listing the cycles. A
folder that holds no trace file itself is searched recursively (hidden folders and symbolic links
to folders are not entered); traces in more than one of its subfolders are several runs, as
TensorBoard shows them: an error lists them.
"""

from __future__ import annotations

import datetime as _dt
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
    "handler_name",
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


#: ``torch.profiler.tensorboard_trace_handler``'s file name (the TensorBoard plugin's pattern):
#: ``<worker>.<timestamp>.pt.trace.json`` or ``.json.gz``
_HANDLER_RE = re.compile(r"^(?P<worker>.+)\.(?P<stamp>\d+)\.pt\.trace\.json(?:\.gz)?$")
#: the names PyTorch's profiler writes (``export_chrome_trace`` through the handler, or by hand)
_PT_TRACE_RE = re.compile(r"\.pt\.trace\.json(?:\.gz)?$")


def handler_name(path: str) -> tuple[str, int] | None:
    """``(worker, timestamp)`` when ``path`` is named as ``tensorboard_trace_handler`` names its
    files (``<worker>.<timestamp>.pt.trace.json[.gz]``), else None."""
    m = _HANDLER_RE.match(os.path.basename(path))
    return (m.group("worker"), int(m.group("stamp"))) if m else None


def _stamp_ns(stamp: int) -> int | None:
    """A handler timestamp as Unix ns: ``time.time_ns()`` (PyTorch >= 2.1) or ms (before); None
    when the number is neither (a name that only looks like the handler's)."""
    if stamp >= 10**17:
        return stamp
    if 10**11 <= stamp < 10**14:
        return stamp * 1_000_000
    return None


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
            found = _list_folder(s, skipped)
        except OSError as err:
            raise TraceNotFoundError(f"cannot list the directory: {err.strerror}", path=s) from None
        if not found:
            found = _search_subfolders(s, skipped)
        if not found:
            raise TraceNotFoundError(
                "the directory holds no .json or .json.gz file (nor an nsys .sqlite export), nor do its subfolders",
                path=s,
            )
        return found, True
    why = _why_not_file(s)
    if why is not None:
        cls = TraceFormatError if why.startswith("not a regular file") else TraceNotFoundError
        raise cls(why, path=s)
    return [s], False


def _list_folder(d: str, skipped: list[tuple[str, str]]) -> list[str]:
    """The files of one folder whose names allow a trace (nothing is opened); entries with such a
    name that are not regular files go to ``skipped``. Raises ``OSError`` when ``d`` cannot be listed."""
    entries = sorted((e.name, e) for e in os.scandir(d) if _is_trace_name(e.name))
    found = []
    for name, e in entries:
        p = os.path.join(d, name)
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
    return found


def _search_subfolders(top: str, skipped: list[tuple[str, str]]) -> list[str]:
    """The trace files of the one subfolder of ``top`` (at any depth) that holds them.

    Hidden folders (``.ipynb_checkpoints``, ``.git``) and symbolic links to folders are not
    entered. Folders holding PyTorch profiler names (``*.pt.trace.json[.gz]``) are preferred to
    folders with other ``.json`` files (a ``wandb/`` folder's summaries); several such folders are
    several runs (TensorBoard's profiler plugin shows one run per folder): :class:`MixedRunsError`
    naming them."""
    by_folder: dict[str, tuple[list[str], list[tuple[str, str]]]] = {}
    for dirpath, dirnames, _files in os.walk(top, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        if dirpath == top:
            continue
        local: list[tuple[str, str]] = []
        try:
            found = _list_folder(dirpath, local)
        except OSError:
            continue
        if found:
            by_folder[dirpath] = (found, local)
    if not by_folder:
        return []
    pt = {d: v for d, v in by_folder.items() if any(_PT_TRACE_RE.search(p) for p in v[0])}
    chosen = pt or by_folder
    if len(chosen) > 1:
        shown = sorted(chosen)
        parts = [f"{os.path.relpath(d, top)}/ ({len(chosen[d][0])} file(s))" for d in shown[:6]]
        more = f" and {len(shown) - 6} more" if len(shown) > 6 else ""
        raise MixedRunsError(
            f"no trace in the folder itself, and {len(shown)} of its subfolders hold traces (several runs, as "
            f"TensorBoard shows them): {', '.join(parts)}{more}; pass one of them, or several to read them as one run",
            path=top,
        )
    [(found, local)] = chosen.values()
    skipped.extend(local)
    return found


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
    cycle: int | None = None,
) -> list[TraceFile]:
    """Resolve paths (files, directories, globs, or a ``{rank: path}`` mapping) to trace files.

    ``rank_by`` (``process`` / ``device``) and ``step_range`` apply to Nsight Systems exports.
    ``late_headers`` maps a file's real path to top-level keys read after its ``traceEvents``
    (known once decoded; merged into the header). With ``notes``, the warning about ranks taken
    from the order of the files is appended there instead of issued. ``cycle`` picks the profiling
    cycle of ``tensorboard_trace_handler`` files (0 the oldest, -1 the latest; default: the latest,
    with a note when a worker has several; see the module docstring)."""
    late = late_headers or {}

    def header_of(p: str) -> dict[str, Any]:
        header, _ = read_header(p, max_bytes=max_bytes)
        extra = late.get(os.path.realpath(p))
        return {**dict(extra), **header} if extra else header

    if isinstance(paths, Mapping):
        if cycle is not None:
            raise UsageError(
                "a cycle selects among tensorboard_trace_handler files found in folders or globs; "
                "a {rank: path} mapping names each rank's file"
            )
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
        kineto: list[tuple[str, dict[str, Any], int | None]] = []  # (path, header, rank before traceEvents)
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
            kineto.append((p, header, _header_rank(header)))
        for p, header in _select_cycles(kineto, cycle, notes):
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
                "pass one run at a time or select files explicitly" + _workers_hint(other.path, f.path),
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


def _workers_hint(a: str, b: str) -> str:
    """A hint for two handler files of different workers that claim one rank: runs mixed in one
    folder (each run's processes have their own ``<hostname>_<pid>``)."""
    ha, hb = handler_name(a), handler_name(b)
    if ha is None or hb is None or ha[0] == hb[0]:
        return ""
    where = "the folder holds" if os.path.dirname(a) == os.path.dirname(b) else "these are"
    return (
        f" (tensorboard_trace_handler workers {ha[0]} and {hb[0]}: {where} the traces of several runs? "
        f"a glob such as '{os.path.join(os.path.dirname(b), hb[0])}.*' selects one worker's files)"
    )


def _select_cycles(
    kineto: list[tuple[str, dict[str, Any], int | None]], cycle: int | None, notes: list[str] | None
) -> list[tuple[str, dict[str, Any]]]:
    """One profiling cycle per ``tensorboard_trace_handler`` worker (see the module docstring).

    ``kineto``: ``(path, header, rank declared before traceEvents)`` in discovery order; the
    result keeps that order. A worker is (folder, name before the timestamp, declared rank): a
    ``worker_name`` shared by every rank does not make the ranks one worker's cycles."""
    groups: dict[tuple[str, str, int | None], list[tuple[int, float, str]]] = {}
    for p, _h, r in kineto:
        hn = handler_name(p)
        if hn is not None:
            key = (os.path.dirname(os.path.abspath(p)), hn[0], r)
            groups.setdefault(key, []).append((_stamp_ns(hn[1]) or hn[1], _mtime(p), p))
    for g in groups.values():
        g.sort()
    if cycle is not None and not groups:
        raise UsageError(
            f"cycle {cycle}: a cycle is a file of torch.profiler.tensorboard_trace_handler "
            "(<worker>.<timestamp>.pt.trace.json[.gz]); none of the traces is named so"
        )
    if not any(len(g) > 1 for g in groups.values()) and cycle in (None, 0, -1):
        return [(p, h) for p, h, _r in kineto]
    want = -1 if cycle is None else cycle
    counts = {key: len(g) for key, g in groups.items()}
    bad = [key for key, n in counts.items() if not -n <= want < n]
    if bad:
        raise UsageError(
            f"cycle {want} does not exist for every worker: {_cycle_listing(groups)}; "
            "N counts from 0 (the oldest) or back from -1 (the latest)"
        )
    keep = {g[want][2] for g in groups.values()}
    if cycle is None:
        n_max = max(counts.values())
        n_min = min(counts.values())
        same = "" if n_min == n_max else " (their counts differ: check that these cycles belong together)"
        msg = (
            f"tensorboard_trace_handler files: {_cycle_listing(groups)}; read the latest cycle of each worker{same} "
            "(choose another with --cycle N: 0 the oldest, -1 the latest)"
        )
        if notes is not None:
            notes.append(msg)
        else:
            warn(msg)
    return [(p, h) for p, h, _r in kineto if handler_name(p) is None or p in keep]


def _mtime(p: str) -> float:
    try:
        return os.stat(p).st_mtime
    except OSError:
        return 0.0


def _when(stamp: int) -> str:
    """A handler timestamp as a UTC time (to the ms), or the number itself when it is not a time."""
    ns = _stamp_ns(stamp)
    if ns is None:
        return str(stamp)
    t = _dt.datetime.fromtimestamp(ns / 1e9, tz=_dt.timezone.utc)
    return t.strftime("%Y-%m-%d %H:%M:%S.") + f"{t.microsecond // 1000:03d} UTC"


def _cycle_listing(groups: Mapping[tuple[str, str, int | None], list[tuple[int, float, str]]], shown: int = 4) -> str:
    """``N worker(s) with K cycle(s)`` and the cycles (index: time of the first worker's file)."""
    by_count: dict[int, list[str]] = {}
    for (_d, worker, _r), g in groups.items():
        by_count.setdefault(len(g), []).append(worker)
    parts = []
    for n, workers in sorted(by_count.items(), reverse=True):
        more = f" and {len(workers) - shown} more" if len(workers) > shown else ""
        names = ", ".join(sorted(workers)[:shown]) + more
        parts.append(f"{len(workers)} worker(s) with {n} cycle(s) ({names})")
    longest = max(groups.values(), key=len)
    listed = [f"{i}: {_when(_stamp_of(p))}" for i, (_s, _m, p) in enumerate(longest)]
    if len(listed) > 8:
        listed = [*listed[:3], "...", *listed[-3:]]
    return "; ".join(parts) + f"; cycles {', '.join(listed)}"


def _stamp_of(p: str) -> int:
    hn = handler_name(p)
    return hn[1] if hn is not None else 0


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
