"""Hand-built Nsight Systems SQLite exports for tests: the real table and column names (from
``nsys export --type sqlite`` schema 3.24/3.25, as in tests/data/nsys_ai), only the columns the
reader uses plus a few it must ignore; strings are interned into ``StringIds``."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

COLUMNS: dict[str, list[str]] = {
    "CUPTI_ACTIVITY_KIND_KERNEL": [
        "start",
        "end",
        "deviceId",
        "contextId",
        "greenContextId",
        "streamId",
        "correlationId",
        "globalPid",
        "demangledName",
        "shortName",
        "mangledName",
        "launchType",
        "registersPerThread",
        "gridX",
        "gridY",
        "gridZ",
        "blockX",
        "blockY",
        "blockZ",
        "staticSharedMemory",
        "dynamicSharedMemory",
        "localMemoryPerThread",
        "graphNodeId",
        "graphId",
    ],
    "CUPTI_ACTIVITY_KIND_MEMCPY": [
        "start",
        "end",
        "deviceId",
        "contextId",
        "streamId",
        "correlationId",
        "globalPid",
        "bytes",
        "copyKind",
        "srcKind",
        "dstKind",
        "srcDeviceId",
        "dstDeviceId",
    ],
    "CUPTI_ACTIVITY_KIND_MEMSET": [
        "start",
        "end",
        "deviceId",
        "contextId",
        "streamId",
        "correlationId",
        "globalPid",
        "value",
        "bytes",
        "memKind",
    ],
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": [
        "start",
        "end",
        "deviceId",
        "contextId",
        "streamId",
        "correlationId",
        "globalPid",
        "syncType",
        "eventId",
        "eventSyncId",
    ],
    "CUPTI_ACTIVITY_KIND_CUDA_EVENT": [
        "timestamp",
        "deviceId",
        "contextId",
        "streamId",
        "correlationId",
        "globalPid",
        "eventId",
        "eventSyncId",
    ],
    "CUPTI_ACTIVITY_KIND_RUNTIME": [
        "start",
        "end",
        "eventClass",
        "globalTid",
        "correlationId",
        "nameId",
        "returnValue",
        "callchainId",
    ],
    "CUPTI_ACTIVITY_KIND_DRIVER": [
        "start",
        "end",
        "eventClass",
        "globalTid",
        "correlationId",
        "nameId",
        "returnValue",
        "callchainId",
    ],
    "NVTX_EVENTS": [
        "start",
        "end",
        "eventType",
        "rangeId",
        "category",
        "color",
        "text",
        "globalTid",
        "endGlobalTid",
        "textId",
        "domainId",
    ],
    "TARGET_INFO_SESSION_START_TIME": ["utcEpochNs", "utcTime", "localTime", "systemClockNs"],
    "TARGET_INFO_GPU": [
        "vmId",
        "id",
        "name",
        "totalMemory",
        "smCount",
        "computeMajor",
        "computeMinor",
        "maxWarpsPerSm",
        "threadsPerWarp",
    ],
    "TARGET_INFO_CUDA_DEVICE": ["gpuId", "cudaId", "pid", "uuid", "numMultiprocessors"],
    "PROCESSES": ["globalPid", "pid", "name"],
}
_TYPES = {c: "TEXT" for c in ("text", "name", "uuid", "utcTime", "localTime")}
#: Columns holding StringIds references (a str value is interned).
STRING_REFS = {"demangledName", "shortName", "mangledName", "nameId", "textId"}

EPOCH_NS = 1_700_000_000_000_000_000


def sql(path: Path, q: str, *args: Any) -> list[tuple]:
    """Rows of a read-only query on an export (the sums the tests compare with)."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute(q, args).fetchall()
    finally:
        con.close()


def signed64(v: int) -> int:
    """An unsigned 64-bit id as SQLite stores it (INTEGER is signed: ids above 2^63 - 1 are the
    same bits read as a negative number)."""
    assert 0 <= v < 1 << 64
    return v - (1 << 64) if v >= 1 << 63 else v


def gpid(pid: int, vm: int = 1, hw: int = 0) -> int:
    """nsys ``globalPid`` of an OS pid: hardware id (bits 56-63), VM id (48-55), pid (24-47)."""
    assert 0 <= pid < 1 << 24 and 0 <= vm < 1 << 8 and 0 <= hw < 1 << 8
    return signed64((hw << 56) | (vm << 48) | (pid << 24))


def gtid(pid: int, tid: int, vm: int = 1, hw: int = 0) -> int:
    """nsys ``globalTid`` of an OS pid and thread id (bits 0-23)."""
    assert 0 <= tid < 1 << 24
    return gpid(pid, vm, hw) | tid


def make_nsys(
    path: Path,
    tables: dict[str, Iterable[dict[str, Any]]],
    *,
    session_start: int | None = EPOCH_NS,
    reverse_columns: bool = False,
    enums: bool = True,
) -> Path:
    """Write an export with the given rows (dicts keyed by real column names)."""
    con = sqlite3.connect(path)
    strings: dict[str, int] = {}

    def sid(v: Any) -> Any:
        if isinstance(v, str):
            if v not in strings:
                strings[v] = len(strings) + 1
            return strings[v]
        return v

    all_tables = dict(tables)
    if session_start is not None:
        all_tables.setdefault(
            "TARGET_INFO_SESSION_START_TIME", [{"utcEpochNs": session_start, "utcTime": "2023-11-14T22:13:20"}]
        )
    for name, rows in all_tables.items():
        cols = list(COLUMNS[name])
        if reverse_columns:
            cols.reverse()
        decl = ", ".join(f"{c} {_TYPES.get(c, 'INTEGER')}" for c in cols)
        con.execute(f'CREATE TABLE "{name}" ({decl})')
        for r in rows:
            unknown = set(r) - set(cols)
            assert not unknown, f"{name}: unknown columns {unknown}"
            vals = [sid(r.get(c)) if c in STRING_REFS else r.get(c) for c in cols]
            con.execute(f'INSERT INTO "{name}" VALUES ({", ".join("?" * len(cols))})', vals)
    con.execute("CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL)")
    con.executemany("INSERT INTO StringIds VALUES (?, ?)", [(i, s) for s, i in strings.items()])
    if enums:
        for table, rows in ENUMS.items():
            con.execute(f'CREATE TABLE "{table}" (id INTEGER, name TEXT, label TEXT)')
            con.executemany(f'INSERT INTO "{table}" VALUES (?, ?, ?)', rows)
    con.commit()
    con.close()
    return path


#: As in the real exports (ids, names, labels).
ENUMS = {
    "ENUM_CUDA_MEMCPY_OPER": [
        (0, "CUDA_MEMCPY_KIND_UNKNOWN", "Unknown"),
        (1, "CUDA_MEMCPY_KIND_HTOD", "Host-to-Device"),
        (2, "CUDA_MEMCPY_KIND_DTOH", "Device-to-Host"),
        (8, "CUDA_MEMCPY_KIND_DTOD", "Device-to-Device"),
        (10, "CUDA_MEMCPY_KIND_PTOP", "Peer-to-Peer"),
    ],
    "ENUM_CUDA_MEM_KIND": [
        (0, "CUDA_MEMOPR_MEMORY_KIND_PAGEABLE", "Pageable"),
        (1, "CUDA_MEMOPR_MEMORY_KIND_PINNED", "Pinned"),
        (2, "CUDA_MEMOPR_MEMORY_KIND_DEVICE", "Device"),
    ],
    "ENUM_CUPTI_SYNC_TYPE": [
        (0, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN", "Unknown"),
        (1, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE", "Event sync"),
        (2, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT", "Stream wait sync"),
        (3, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE", "Stream sync"),
        (4, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE", "Context sync"),
    ],
}


def kernel(
    start: int,
    end: int,
    corr: int,
    name: str,
    *,
    pid: int = 100,
    device: int = 0,
    stream: int = 7,
    context: int = 1,
    **kw: Any,
) -> dict[str, Any]:
    row = {
        "start": start,
        "end": end,
        "deviceId": device,
        "contextId": context,
        "streamId": stream,
        "correlationId": corr,
        "globalPid": gpid(pid),
        "demangledName": name,
        "shortName": name.split("(")[0],
        "registersPerThread": 32,
        "gridX": 4,
        "gridY": 2,
        "gridZ": 1,
        "blockX": 128,
        "blockY": 1,
        "blockZ": 1,
        "staticSharedMemory": 1024,
        "dynamicSharedMemory": 2048,
        "localMemoryPerThread": 0,
        "launchType": 0,
        "graphNodeId": 0,
        "graphId": 0,
    }
    row.update(kw)
    return row


def runtime(start: int, end: int, corr: int, name: str, *, pid: int = 100, tid: int = 100) -> dict[str, Any]:
    return {
        "start": start,
        "end": end,
        "eventClass": 0,
        "globalTid": gtid(pid, tid),
        "correlationId": corr,
        "nameId": name,
        "returnValue": 0,
    }


def nvtx(
    start: int, end: int | None, text: str, *, pid: int = 100, tid: int = 100, event_type: int = 59
) -> dict[str, Any]:
    return {
        "start": start,
        "end": end,
        "eventType": event_type,
        "text": text,
        "globalTid": gtid(pid, tid),
        "domainId": 0,
    }
