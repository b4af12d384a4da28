"""Nsight Systems SQLite exports (``nsys export --type sqlite``) read into the trace model.

The result is a :class:`~ranksight.io.kineto.DecodedTrace` with the same ``events`` columns and
side tables as a Kineto trace, so :class:`~ranksight.model.trace.Trace` derives ``kind``,
``kernel_class``, ``launch_row`` and ``step`` the same way and every analysis runs unchanged.

Mapping (each table read with one ``SELECT`` of named columns; see docs/nsys.md):

=====================================  =================  =============================================
SQLite table                           ``cat``            ``name``
=====================================  =================  =============================================
``CUPTI_ACTIVITY_KIND_KERNEL``         ``kernel``         ``demangledName`` (else ``shortName``)
``CUPTI_ACTIVITY_KIND_MEMCPY``         ``gpu_memcpy``     ``Memcpy HtoD (Pinned -> Device)`` (enums)
``CUPTI_ACTIVITY_KIND_MEMSET``         ``gpu_memset``     ``Memset (Device)``
``CUPTI_ACTIVITY_KIND_SYNCHRONIZATION`` ``cuda_sync``     ``Stream Sync``, ``Event Sync``, ...
``CUPTI_ACTIVITY_KIND_RUNTIME``        ``cuda_runtime``   ``nameId`` without the ``_v7000`` suffix
``CUPTI_ACTIVITY_KIND_DRIVER``         ``cuda_driver``    same
``NVTX_EVENTS`` (push/pop, start/end)  ``user_annotation`` ``text`` or ``textId``
=====================================  =================  =============================================

GPU rows have ``pid`` = CUDA device id and ``tid`` = stream id, CPU rows the OS pid and tid
unpacked from ``globalTid`` (``pid = (globalTid >> 24) & 0xFFFFFF``, ``tid = globalTid &
0xFFFFFF``). CUPTI's ids are unsigned 32-bit: 0xFFFFFFFF ("no id") is -1 in ``pid`` / ``tid`` /
``stream`` (as Kineto writes it) and empty in ``device``; any other id the Int32 columns cannot
hold gets a synthetic id named in ``id_names`` (docs/nsys.md, "Ids"). Times are the export's
integer ns plus ``TARGET_INFO_SESSION_START_TIME.utcEpochNs`` when present, so ranks from several
exports share one time base.

A rank is an :class:`NsysUnit`: by default one per (process, CUDA device) that ran GPU work;
``rank_by="process"`` gives one per process (all its devices), ``rank_by="device"`` one per device
(all processes on it). ``trace.raw_events(rows)`` returns every column of each event's SQLite row.
"""

from __future__ import annotations

import os
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from ranksight.errors import InputTooLargeError, TraceFormatError, TraceNotFoundError, UsageError
from ranksight.io._sqlite import columns, connect, is_sqlite, placeholders, read_table, tables
from ranksight.io.kineto import DEFAULT_MAX_BYTES, PHASE_DTYPE, DecodedTrace

__all__ = ["NsysUnit", "RANK_BY", "is_sqlite", "os_pid", "rank_units", "decode_nsys", "extract_rows", "SIDE_SCHEMAS"]

RANK_BY = ("process", "device")

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
SYNC = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
CUDA_EVENT = "CUPTI_ACTIVITY_KIND_CUDA_EVENT"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
DRIVER = "CUPTI_ACTIVITY_KIND_DRIVER"
NVTX = "NVTX_EVENTS"
GPU_TABLES = (KERNEL, MEMCPY, MEMSET)
#: Tables whose absence is reported (nsys creates a table only when it collected such data).
EXPECTED = (KERNEL, MEMCPY, MEMSET, SYNC, RUNTIME, NVTX)

#: NVTX event types read as ranges: push/pop, start/end (and their NVTXt variants).
NVTX_RANGE_TYPES = (59, 60, 70, 71)
#: PyTorch's operator ranges (``emit_nvtx`` / ``nsys --pytorch=autograd-nvtx``):
#: ``aten::mm, seq = 12, op_id = 345, sizes = [[64, 128], [128, 256]]``.
_OP_RANGE = r"^[^,]+, (?:seq = -?\d+, )?op_id = \d+(?:,|$)"
#: CUPTI uses 0xFFFFFFFF for "no id".
NO_ID = 0xFFFFFFFF

_MEMCPY_KINDS = {
    0: "Unknown",
    1: "HtoD",
    2: "DtoH",
    3: "HtoA",
    4: "AtoH",
    5: "AtoA",
    6: "AtoD",
    7: "DtoA",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
}
_MEM_KINDS = {
    0: "Pageable",
    1: "Pinned",
    2: "Device",
    3: "Array",
    4: "Managed",
    5: "Device Static",
    6: "Managed Static",
    7: "Unknown",
}
_SYNC_KINDS = {0: "Unknown Sync", 1: "Event Sync", 2: "Stream Wait Event", 3: "Stream Sync", 4: "Context Sync"}
_SYNC_SUFFIX = {
    "EVENT_SYNCHRONIZE": "Event Sync",
    "STREAM_WAIT_EVENT": "Stream Wait Event",
    "STREAM_SYNCHRONIZE": "Stream Sync",
    "CONTEXT_SYNCHRONIZE": "Context Sync",
}
_VERSION_SUFFIX = r"_v\d+$"

# Side tables as the Rust decoder types them (a test compares them with a decoded Kineto trace).
_CAT = pl.Categorical()
SIDE_SCHEMAS: dict[str, dict[str, pl.DataType]] = {
    "kernel": {
        "row": pl.UInt32(),
        "grid_x": pl.Int32(),
        "grid_y": pl.Int32(),
        "grid_z": pl.Int32(),
        "block_x": pl.Int32(),
        "block_y": pl.Int32(),
        "block_z": pl.Int32(),
        "registers_per_thread": pl.Int32(),
        "shared_memory_bytes": pl.Int64(),
        "blocks_per_sm": pl.Float64(),
        "warps_per_sm": pl.Float64(),
        "est_occupancy_pct": pl.Float64(),
        "theoretical_occupancy_pct": pl.Float64(),
        "graph_id": pl.Int64(),
        "graph_node_id": pl.Int64(),
        "queued": pl.Int64(),
        "context": pl.Int64(),
    },
    "transfer": {
        "row": pl.UInt32(),
        "bytes": pl.Int64(),
        "mem_bw_gbps": pl.Float64(),
        "size_bytes": pl.Int64(),
        "copy_kind": _CAT,
        "src": _CAT,
        "dst": _CAT,
    },
    "op": {
        "row": pl.UInt32(),
        "input_dims": _CAT,
        "input_type": _CAT,
        "concrete_inputs": _CAT,
        "kernel_backend": _CAT,
        "kernel_hash": _CAT,
        "sequence_number": pl.Int64(),
        "fwd_thread_id": pl.Int64(),
        "python_id": pl.Int64(),
        "python_parent_id": pl.Int64(),
        "python_module_id": pl.Int64(),
        "flops": pl.Float64(),
    },
    "collective": {
        "row": pl.UInt32(),
        "collective_name": _CAT,
        "in_msg_nelems": pl.Int64(),
        "out_msg_nelems": pl.Int64(),
        "dtype": _CAT,
        "group_size": pl.Int32(),
        "pg_name": _CAT,
        "pg_desc": _CAT,
        "pg_ranks": _CAT,
        "seq": pl.Int64(),
        "process_rank": pl.Int64(),
        "in_split_size": _CAT,
        "out_split_size": _CAT,
        "src_rank": pl.Int64(),
        "dst_rank": pl.Int64(),
    },
    "memory": {
        "row": pl.UInt32(),
        "addr": pl.Int64(),
        "bytes": pl.Int64(),
        "total_allocated": pl.Int64(),
        "total_reserved": pl.Int64(),
        "device_type": pl.Int32(),
        "device_id": pl.Int32(),
    },
    "sync": {
        "row": pl.UInt32(),
        "sync_kind": _CAT,
        "wait_on_stream": pl.Int64(),
        "wait_on_event_correlation": pl.Int64(),
        "wait_on_event_id": pl.Int64(),
    },
    "meta": {"row": pl.UInt32(), "label": _CAT, "labels": _CAT, "sort_index": pl.Int64()},
    "flow": {
        "row": pl.UInt32(),
        "ph": PHASE_DTYPE,
        "cat": _CAT,
        "name": _CAT,
        "pid": pl.Int32(),
        "tid": pl.Int32(),
        "ts_ns": pl.Int64(),
        "flow_id": pl.Int64(),
        "flow_bp": _CAT,
    },
}

_I64 = pl.Int64()
_STR = pl.String()
_F64 = pl.Float64()


@dataclass(frozen=True)
class NsysUnit:
    """What one rank holds of an export.

    ``global_pids`` are nsys' serialized process ids (``globalPid``: VM id << 48 | pid << 24);
    ``devices`` the CUDA device ids kept (None: every device of those processes). ``shared_cpu``
    says that a process also drives devices of other units: its CPU rows that launched nothing on
    another unit's device (NVTX ranges, syncs, other runtime calls) are in each of those ranks.
    """

    global_pids: tuple[int, ...]
    devices: tuple[int, ...] | None
    label: str
    step_range: str | None = None
    shared_cpu: bool = False

    def cache_tag(self) -> str:
        """Distinguishes the cache entries of several ranks read from one file."""
        return f"nsys:{self.global_pids}:{self.devices}:{self.step_range}"


def os_pid(global_pid: int) -> int:
    """The OS pid packed in a ``globalPid`` / ``globalTid``."""
    return (int(global_pid) >> 24) & 0xFFFFFF


# ---- units (ranks) ---------------------------------------------------------------------------


def _check_export(have: set[str], path: str) -> None:
    if not any(t.startswith(("CUPTI_ACTIVITY_KIND_", "NVTX_")) for t in have):
        raise TraceFormatError(
            "an SQLite database but not an Nsight Systems export (no CUPTI_ACTIVITY_KIND_* or NVTX_EVENTS table)",
            path=path,
        )


def rank_units(path: str | Path, *, rank_by: str | None = None, step_range: str | None = None) -> list[NsysUnit]:
    """The ranks an export holds, in (process, device) order (see the module docstring)."""
    if rank_by is not None and rank_by not in RANK_BY:
        raise UsageError(f"--rank-by must be one of {', '.join(RANK_BY)}, not {rank_by!r}")
    p = str(path)
    con = connect(p)
    try:
        have = tables(con)
        _check_export(have, p)
        pairs: set[tuple[int, int]] = set()
        for t in GPU_TABLES:
            cols = columns(con, t) or []
            if "deviceId" in cols:
                gp = "COALESCE(globalPid, 0)" if "globalPid" in cols else "0"
                pairs |= {(int(g), int(d)) for g, d in con.execute(f'SELECT DISTINCT {gp}, deviceId FROM "{t}"')}
        if not pairs:
            return [NsysUnit((g,), None, f"pid {os_pid(g)}", step_range) for g in sorted(_cpu_processes(con, have))]
    finally:
        con.close()
    devs_of: dict[int, list[int]] = {}
    for g, d in sorted(pairs):
        devs_of.setdefault(g, []).append(d)
    if rank_by == "process":
        return [
            NsysUnit((g,), None, f"pid {os_pid(g)} GPU {','.join(map(str, ds))}", step_range)
            for g, ds in devs_of.items()
        ]
    if rank_by == "device":
        out = []
        for d in sorted({d for _, d in pairs}):
            gs = tuple(sorted(g for g, ds in devs_of.items() if d in ds))
            shared = any(len(devs_of[g]) > 1 for g in gs)
            out.append(NsysUnit(gs, (d,), f"GPU {d} pid {','.join(str(os_pid(g)) for g in gs)}", step_range, shared))
        return out
    return [NsysUnit((g,), (d,), f"pid {os_pid(g)} GPU {d}", step_range, len(devs_of[g]) > 1) for g, d in sorted(pairs)]


def _cpu_processes(con: sqlite3.Connection, have: set[str]) -> set[int]:
    """``globalPid``s of processes with runtime or NVTX events (an export without GPU work)."""
    out: set[int] = set()
    for t in (RUNTIME, DRIVER, NVTX):
        if t in have and "globalTid" in (columns(con, t) or []):
            out |= {
                int(r[0]) << 24
                for r in con.execute(f'SELECT DISTINCT globalTid >> 24 FROM "{t}" WHERE globalTid IS NOT NULL')
            }
    return out


# ---- decoding --------------------------------------------------------------------------------


@dataclass
class _Ctx:
    con: sqlite3.Connection
    have: set[str]
    unit: NsysUnit
    strings: pl.DataFrame
    base_ns: int
    warnings: list[str]


def decode_nsys(path: str | Path, unit: NsysUnit | None = None, *, max_bytes: int = DEFAULT_MAX_BYTES) -> DecodedTrace:
    """Decode one rank (``unit``; None: the whole export as one trace) of an nsys SQLite export."""
    p = str(path)
    if not Path(p).exists():
        raise TraceNotFoundError("no such file", path=p)
    size = os.path.getsize(p)
    if max_bytes and size > max_bytes:
        raise InputTooLargeError(
            f"the export is {size} bytes, above the limit of {max_bytes}; raise it with --max-size (or max_bytes=) if "
            "the file is trusted",
            path=p,
        )
    if unit is None:
        units = rank_units(p)
        pids = tuple(sorted({g for u in units for g in u.global_pids}))
        unit = NsysUnit(pids, None, "whole export")
    con = connect(p)
    try:
        return _decode(con, p, unit, size)
    except sqlite3.DatabaseError as err:
        raise TraceFormatError(f"cannot read the export: {err}", path=p) from None
    finally:
        con.close()


def _decode(con: sqlite3.Connection, path: str, unit: NsysUnit, size: int) -> DecodedTrace:
    have = tables(con)
    _check_export(have, path)
    warnings: list[str] = []
    absent = [t for t in EXPECTED if t not in have]
    if absent:
        warnings.append("tables absent from the export (data not collected): " + ", ".join(absent))
    session = _session_start(con, have)
    if session is None:
        warnings.append(
            "no TARGET_INFO_SESSION_START_TIME: times are relative to the capture start and cannot be aligned with "
            "other exports"
        )
    ctx = _Ctx(con, have, unit, _strings(con, have), session or 0, warnings)
    props = _device_properties(con, have, unit)
    if props and not any("numSms" in d for d in props):
        warnings.append("no TARGET_INFO_GPU / TARGET_INFO_CUDA_DEVICE SM counts: blocks and warps per SM are unknown")
    elif not props:
        warnings.append("no TARGET_INFO_GPU: GPU model, memory and SM count unknown")
    sms = {int(d["id"]): int(d["numSms"]) for d in props if d.get("numSms")}
    gpu = [_kernels(ctx, sms), _memcpy(ctx), _memset(ctx), _syncs(ctx)]
    cpu = [_runtime(ctx, RUNTIME, "cuda_runtime"), _runtime(ctx, DRIVER, "cuda_driver")]
    nvtx = _nvtx(ctx)
    parts = [f for f in [*gpu, *cpu, nvtx, _step_ranges(ctx, nvtx)] if f is not None and f.height]
    events, spans, side, id_names = _assemble(parts)
    if unit.shared_cpu:
        pids = ", ".join(str(os_pid(g)) for g in unit.global_pids)
        warnings.append(
            f"process {pids} drives several GPUs: its CPU rows not tied to another GPU's work are in each of its ranks "
            "(--rank-by process gives one rank per process)"
        )
    meta = _meta(con, have, unit, props, session)
    stats = {
        "events": events.height,
        "strings": ctx.strings.height,
        "gzip": 0,
        "file_bytes": size,
        "json_bytes": size,
        "events_seen": 1,
        "document_complete": 1,
        "lost_bytes": 0,
        "truncated_gzip": 0,
        "skipped_non_objects": 0,
        "repaired_events": 0,
        "bad_numbers": 0,
        "base_time_ns": session or 0,
        "has_base_time": int(session is not None),
    }
    events = events.select(pl.int_range(0, events.height, dtype=pl.UInt32).alias("row"), pl.all())
    return DecodedTrace(
        path=path, events=events, spans=spans, tables=side, meta=meta, id_names=id_names, stats=stats, warnings=warnings
    )


def _strings(con: sqlite3.Connection, have: set[str]) -> pl.DataFrame:
    if "StringIds" not in have:
        return pl.DataFrame(schema={"id": _I64, "value": _STR})
    return read_table(con, "StringIds", {"id": ("id", _I64), "value": ("value", _STR)}, rowid=False)


def _lookup(ctx: _Ctx, col: str) -> pl.Expr:
    """A StringIds id column replaced by its text."""
    s = ctx.strings
    return pl.col(col).replace_strict(s["id"], s["value"], default=None, return_dtype=_STR)


def _session_start(con: sqlite3.Connection, have: set[str]) -> int | None:
    t = "TARGET_INFO_SESSION_START_TIME"
    if t not in have or "utcEpochNs" not in (columns(con, t) or []):
        return None
    row = con.execute(f'SELECT utcEpochNs FROM "{t}" WHERE utcEpochNs IS NOT NULL LIMIT 1').fetchone()
    return int(row[0]) if row else None


def _enum(con: sqlite3.Connection, have: set[str], table: str) -> dict[int, tuple[str, str]]:
    """``id -> (name, label)`` of an ``ENUM_*`` table (empty when absent)."""
    if table not in have:
        return {}
    cols = columns(con, table) or []
    if not {"id", "name"} <= set(cols):
        return {}
    lab = "label" if "label" in cols else "name"
    return {int(i): (str(n), str(lb)) for i, n, lb in con.execute(f'SELECT id, name, {lab} FROM "{table}"')}


def _memcpy_kind_names(ctx: _Ctx) -> dict[int, str]:
    """Copy kinds as Kineto writes them (``HtoD``, ``DtoD``, ``PtoP``) from ``ENUM_CUDA_MEMCPY_OPER``."""
    out = dict(_MEMCPY_KINDS)
    for i, (name, _label) in _enum(ctx.con, ctx.have, "ENUM_CUDA_MEMCPY_OPER").items():
        m = re.search(r"KIND_(?:UVM_)?([A-Z])TO([A-Z])$", name)
        if m:
            out[i] = f"{m.group(1)}to{m.group(2)}"
    return out


def _mem_kind_names(ctx: _Ctx) -> dict[int, str]:
    out = dict(_MEM_KINDS)
    out.update({i: lb for i, (_n, lb) in _enum(ctx.con, ctx.have, "ENUM_CUDA_MEM_KIND").items()})
    return out


def _sync_kind_names(ctx: _Ctx) -> dict[int, str]:
    out = dict(_SYNC_KINDS)
    for i, (name, _lb) in _enum(ctx.con, ctx.have, "ENUM_CUPTI_SYNC_TYPE").items():
        for suffix, kineto in _SYNC_SUFFIX.items():
            if name.endswith(suffix):
                out[i] = kineto
    return out


def _map(col: str, mapping: dict[int, str]) -> pl.Expr:
    return pl.col(col).replace_strict(
        list(mapping), list(mapping.values()), default=pl.lit("Unknown"), return_dtype=_STR
    )


# ---- per-table frames ------------------------------------------------------------------------

_GPU_COMMON = {
    "start": ("start", _I64),
    "end": ("end", _I64),
    "device": ("deviceId", _I64),
    "context": ("contextId", _I64),
    "stream": ("streamId", _I64),
    "correlation": ("correlationId", _I64),
    "gpid": ("globalPid", _I64),
}


def _context_devices(ctx: _Ctx) -> pl.DataFrame:
    """``(gpid, context) -> __dev``: the device of each CUDA context of the unit's processes, from
    their kernels, copies and memsets."""
    frames = []
    for t in GPU_TABLES:
        w = _gpu_where(ctx, t, all_devices=True)
        cols = columns(ctx.con, t) or []
        if w is None or not {"contextId", "deviceId", "globalPid"} <= set(cols):
            continue
        sql = f'SELECT DISTINCT globalPid, contextId, deviceId FROM "{t}"' + (f" WHERE {w[0]}" if w[0] else "")
        frames.append(
            pl.DataFrame(
                ctx.con.execute(sql, w[1]).fetchall(),
                schema={"gpid": _I64, "context": _I64, "__dev": _I64},
                orient="row",
            )
        )
    if not frames:
        return pl.DataFrame(schema={"gpid": _I64, "context": _I64, "__dev": _I64})
    return pl.concat(frames).unique(["gpid", "context"], keep="first", maintain_order=True)


def _gpu_where(ctx: _Ctx, table: str, *, all_devices: bool = False) -> tuple[str, list[object]] | None:
    """SQL filter of a GPU table to the unit's processes and devices; None when the table is absent."""
    cols = columns(ctx.con, table)
    if cols is None:
        return None
    conds: list[str] = []
    params: list[object] = []
    u = ctx.unit
    if "globalPid" in cols:
        conds.append(f"COALESCE(globalPid, 0) IN ({placeholders(len(u.global_pids))})")
        params += list(u.global_pids)
    if u.devices is not None and "deviceId" in cols and not all_devices:
        conds.append(f"deviceId IN ({placeholders(len(u.devices))})")
        params += list(u.devices)
    return " AND ".join(conds), params


def _corr_offset(ctx: _Ctx, pid_key: pl.Expr) -> pl.Expr:
    """Correlation ids are unique per process: with several processes in a rank, the process'
    index in the unit is put above bit 32 so that launches never link across processes."""
    gp = ctx.unit.global_pids
    if len(gp) <= 1:
        return pl.lit(0, dtype=_I64)
    keys = [g >> 24 for g in gp]
    return pid_key.replace_strict(keys, list(range(len(keys))), default=0, return_dtype=_I64) * (1 << 32)


def _gpu_frame(ctx: _Ctx, df: pl.DataFrame, table: str, cat: str, name: pl.Expr) -> pl.DataFrame:
    """GPU rows: ``pid`` = CUDA device, ``tid`` = ``stream`` = stream id; CUPTI's 0xFFFFFFFF ("no
    stream" of a context sync, "no device") is -1 as Kineto writes it, and an empty ``device``
    (ids the Int32 columns cannot hold get synthetic ids in :func:`_assemble`)."""
    device = pl.when(pl.col("device") != NO_ID).then(pl.col("device"))
    stream = pl.when(pl.col("stream") == NO_ID).then(-1).otherwise(pl.col("stream"))
    return df.with_columns(
        pl.lit(table).alias("__src"),
        pl.lit("X").alias("ph"),
        pl.lit(cat).alias("cat"),
        name.alias("name"),
        device.fill_null(-1).alias("pid"),
        stream.fill_null(-1).alias("tid"),
        stream.alias("stream"),
        device.alias("device"),
        (pl.col("start") + ctx.base_ns).alias("ts_ns"),
        (pl.col("end") - pl.col("start")).alias("dur_ns"),
        (pl.col("correlation") + _corr_offset(ctx, pl.col("gpid").fill_null(0) // (1 << 24))).alias("correlation"),
    )


def _kernels(ctx: _Ctx, sms: dict[int, int]) -> pl.DataFrame | None:
    w = _gpu_where(ctx, KERNEL)
    if w is None:
        return None
    spec = {
        **_GPU_COMMON,
        "demangled": ("demangledName", _I64),
        "short": ("shortName", _I64),
        "mangled": ("mangledName", _I64),
        "grid_x": ("gridX", _I64),
        "grid_y": ("gridY", _I64),
        "grid_z": ("gridZ", _I64),
        "block_x": ("blockX", _I64),
        "block_y": ("blockY", _I64),
        "block_z": ("blockZ", _I64),
        "registers_per_thread": ("registersPerThread", _I64),
        "smem_static": ("staticSharedMemory", _I64),
        "smem_dynamic": ("dynamicSharedMemory", _I64),
        "graph_id": ("graphId", _I64),
        "graph_node_id": ("graphNodeId", _I64),
    }
    df = read_table(ctx.con, KERNEL, spec, where=w[0], params=w[1])
    name = pl.coalesce(
        _lookup(ctx, "demangled"), _lookup(ctx, "short"), _lookup(ctx, "mangled"), pl.lit("<unknown kernel>")
    )
    blocks = pl.col("grid_x") * pl.col("grid_y") * pl.col("grid_z")
    n_sm = (
        pl.col("device").replace_strict(list(sms), list(sms.values()), default=None, return_dtype=_F64)
        if sms
        else pl.lit(None, _F64)
    )
    bps = blocks / n_sm
    return _gpu_frame(ctx, df, KERNEL, "kernel", name).with_columns(
        (pl.col("smem_static").fill_null(0) + pl.col("smem_dynamic").fill_null(0)).alias("shared_memory_bytes"),
        bps.alias("blocks_per_sm"),
        (bps * pl.col("block_x") * pl.col("block_y") * pl.col("block_z") / 32).alias("warps_per_sm"),
        # 0: not in a graph. graphNodeId is unsigned 64-bit: ids above 2^63 - 1 are stored as
        # negative int64 (the same bits) and kept, distinct, as such
        pl.when(pl.col("graph_id") != 0).then(pl.col("graph_id")).alias("graph_id"),
        pl.when(pl.col("graph_node_id") != 0).then(pl.col("graph_node_id")).alias("graph_node_id"),
    )


def _bandwidth() -> pl.Expr:
    """bytes / ns = GB/s (Kineto's ``memory bandwidth (GB/s)``); null for zero-length copies."""
    dur = pl.col("end") - pl.col("start")
    return pl.when(dur > 0).then(pl.col("bytes") / dur).alias("mem_bw_gbps")


def _memcpy(ctx: _Ctx) -> pl.DataFrame | None:
    w = _gpu_where(ctx, MEMCPY)
    if w is None:
        return None
    spec = {
        **_GPU_COMMON,
        "bytes": ("bytes", _I64),
        "copy": ("copyKind", _I64),
        "srck": ("srcKind", _I64),
        "dstk": ("dstKind", _I64),
    }
    df = read_table(ctx.con, MEMCPY, spec, where=w[0], params=w[1])
    mk = _mem_kind_names(ctx)
    name = pl.format("Memcpy {} ({} -> {})", _map("copy", _memcpy_kind_names(ctx)), _map("srck", mk), _map("dstk", mk))
    return _gpu_frame(ctx, df, MEMCPY, "gpu_memcpy", name).with_columns(_bandwidth())


def _memset(ctx: _Ctx) -> pl.DataFrame | None:
    w = _gpu_where(ctx, MEMSET)
    if w is None:
        return None
    spec = {**_GPU_COMMON, "bytes": ("bytes", _I64), "memk": ("memKind", _I64)}
    df = read_table(ctx.con, MEMSET, spec, where=w[0], params=w[1])
    name = pl.format("Memset ({})", _map("memk", _mem_kind_names(ctx)))
    return _gpu_frame(ctx, df, MEMSET, "gpu_memset", name).with_columns(_bandwidth())


def _syncs(ctx: _Ctx) -> pl.DataFrame | None:
    """Sync records carry a context but no reliable device (nsys writes 0): the device is the one
    the process' GPU work ran on in that context, else ``deviceId``."""
    u = ctx.unit
    w = _gpu_where(ctx, SYNC, all_devices=True)
    if w is None:
        return None
    spec = {
        **_GPU_COMMON,
        "sync_type": ("syncType", _I64),
        "event_id": ("eventId", _I64),
        "event_sync_id": ("eventSyncId", _I64),
    }
    df = read_table(ctx.con, SYNC, spec, where=w[0], params=w[1])
    ctx_dev = _context_devices(ctx)
    if ctx_dev.height:
        df = (
            df.join(ctx_dev, on=["gpid", "context"], how="left", maintain_order="left")
            .with_columns(pl.coalesce("__dev", "device").alias("device"))
            .drop("__dev")
        )
    if u.devices is not None:
        df = df.filter(pl.col("device").is_in(list(u.devices)) | pl.col("device").is_null())
    df = _join_event_records(ctx, df)
    ev_id = pl.col("event_id")
    return _gpu_frame(ctx, df, SYNC, "cuda_sync", _map("sync_type", _sync_kind_names(ctx))).with_columns(
        pl.col("name").alias("sync_kind"),
        pl.when((ev_id != NO_ID) & (ev_id >= 0)).then(ev_id).alias("wait_on_event_id"),
    )


def _join_event_records(ctx: _Ctx, df: pl.DataFrame) -> pl.DataFrame:
    """``wait_on_stream`` / ``wait_on_event_correlation``: the stream and correlation of the CUDA
    event record a sync waits on, joined on ``eventSyncId`` when ``CUPTI_ACTIVITY_KIND_CUDA_EVENT``
    was collected (null otherwise)."""
    empty = df.with_columns(
        pl.lit(None, _I64).alias("wait_on_stream"), pl.lit(None, _I64).alias("wait_on_event_correlation")
    )
    cols = columns(ctx.con, CUDA_EVENT) or []
    if df.height == 0 or not {"eventSyncId", "streamId"} <= set(cols):
        return empty
    rec = (
        read_table(
            ctx.con,
            CUDA_EVENT,
            {
                "event_sync_id": ("eventSyncId", _I64),
                "wait_on_stream": ("streamId", _I64),
                "wait_on_event_correlation": ("correlationId", _I64),
            },
            rowid=False,
        )
        .filter(pl.col("event_sync_id").is_not_null() & (pl.col("event_sync_id") != NO_ID))
        .unique("event_sync_id", keep="last")
        .with_columns(pl.when(pl.col("wait_on_stream") != NO_ID).then(pl.col("wait_on_stream")).alias("wait_on_stream"))
    )
    return df.join(rec, on="event_sync_id", how="left", maintain_order="left")


def _process_where(ctx: _Ctx, cols: list[str]) -> tuple[str, list[object]]:
    keys = [g >> 24 for g in ctx.unit.global_pids]
    if "globalTid" not in cols:
        return "", []
    return f"(globalTid >> 24) IN ({placeholders(len(keys))})", list(keys)


def _cpu_frame(ctx: _Ctx, df: pl.DataFrame, table: str, cat: str, name: pl.Expr) -> pl.DataFrame:
    gt = pl.col("gtid").fill_null(0)
    return df.with_columns(
        pl.lit(table).alias("__src"),
        pl.lit("X").alias("ph"),
        pl.lit(cat).alias("cat"),
        name.alias("name"),
        ((gt // (1 << 24)) % (1 << 24)).alias("pid"),
        (gt % (1 << 24)).alias("tid"),
        (pl.col("start") + ctx.base_ns).alias("ts_ns"),
        (pl.col("end") - pl.col("start")).alias("dur_ns"),
    )


def _runtime(ctx: _Ctx, table: str, cat: str) -> pl.DataFrame | None:
    cols = columns(ctx.con, table)
    if cols is None:
        return None
    where, params = _process_where(ctx, cols)
    spec = {
        "start": ("start", _I64),
        "end": ("end", _I64),
        "gtid": ("globalTid", _I64),
        "correlation": ("correlationId", _I64),
        "name_id": ("nameId", _I64),
    }
    df = read_table(ctx.con, table, spec, where=where, params=params)
    foreign = _foreign_correlations(ctx)
    if foreign is not None and foreign.height:
        df = (
            df.with_columns((pl.col("gtid") // (1 << 24)).alias("__k"))
            .join(foreign, left_on=["__k", "correlation"], right_on=["k", "c"], how="anti", maintain_order="left")
            .drop("__k")
        )
    name = _lookup(ctx, "name_id").str.replace(_VERSION_SUFFIX, "")
    out = _cpu_frame(ctx, df, table, cat, name.fill_null("<unknown API>"))
    return out.with_columns(
        (pl.col("correlation") + _corr_offset(ctx, pl.col("gtid").fill_null(0) // (1 << 24))).alias("correlation")
    )


def _foreign_correlations(ctx: _Ctx) -> pl.DataFrame | None:
    """``(globalPid >> 24, correlationId)`` of GPU work the unit's processes ran on devices of
    other units: the runtime calls that launched it belong to those ranks."""
    u = ctx.unit
    if u.devices is None or not u.shared_cpu:
        return None
    frames = []
    for t in GPU_TABLES:
        cols = columns(ctx.con, t) or []
        if not {"globalPid", "deviceId", "correlationId"} <= set(cols):
            continue
        sql = (
            f'SELECT DISTINCT globalPid >> 24, correlationId FROM "{t}" WHERE globalPid IN '
            f"({placeholders(len(u.global_pids))}) "
            f"AND deviceId NOT IN ({placeholders(len(u.devices))}) AND correlationId IS NOT NULL"
        )
        rows = ctx.con.execute(sql, (*u.global_pids, *u.devices)).fetchall()
        frames.append(pl.DataFrame(rows, schema={"k": _I64, "c": _I64}, orient="row"))
    return pl.concat(frames).unique() if frames else None


def _nvtx(ctx: _Ctx) -> pl.DataFrame | None:
    cols = columns(ctx.con, NVTX)
    if cols is None:
        return None
    where, params = _process_where(ctx, cols)
    types = f"eventType IN ({placeholders(len(NVTX_RANGE_TYPES))})"
    where = f"{types} AND {where}" if where else types
    spec = {
        "start": ("start", _I64),
        "end": ("end", _I64),
        "gtid": ("globalTid", _I64),
        "text": ("text", _STR),
        "text_id": ("textId", _I64),
    }
    df = read_table(ctx.con, NVTX, spec, where=where, params=[*NVTX_RANGE_TYPES, *params])
    open_ranges = df.filter(pl.col("end").is_null()).height
    if open_ranges:
        ctx.warnings.append(f"{open_ranges} NVTX ranges never ended in the capture and were dropped")
    df = df.filter(pl.col("end").is_not_null())
    text = pl.coalesce(pl.col("text"), _lookup(ctx, "text_id"), pl.lit("<unnamed range>"))
    df = df.with_columns(text.alias("__text"))
    is_op = pl.col("__text").str.contains(_OP_RANGE)
    out = _cpu_frame(ctx, df, NVTX, "user_annotation", pl.col("__text"))
    return out.with_columns(
        pl.when(is_op).then(pl.lit("cpu_op")).otherwise(pl.col("cat")).alias("cat"),
        pl.when(is_op).then(pl.col("__text").str.extract(r"^([^,]*)", 1)).otherwise(pl.col("__text")).alias("name"),
        pl.when(is_op)
        .then(pl.col("__text").str.extract(r", sizes = (\[.*?\])(?:, input_op_ids = |$)", 1))
        .alias("input_dims"),
        pl.when(is_op).then(pl.col("__text").str.extract(r", seq = (-?\d+)", 1).cast(_I64)).alias("sequence_number"),
    ).drop("__text")


def _step_ranges(ctx: _Ctx, nvtx: pl.DataFrame | None) -> pl.DataFrame | None:
    """With ``step_range``: a ``ProfilerStep#N`` annotation over each NVTX range named
    ``NAME``, ``NAME N``, ``NAME#N``, ``NAME_N`` or ``NAME:N``. ``N`` is the number in the name
    when every matched range has a distinct one, else the range's position in time (from 0)."""
    name = ctx.unit.step_range
    if not name:
        return None
    pat = rf"^{re.escape(name)}(?:\s*[#:_\- ]?\s*(\d+))?$"
    got = nvtx.filter(pl.col("name").str.contains(pat)) if nvtx is not None else None
    if got is None or got.height == 0:
        ctx.warnings.append(f"no NVTX range named {name!r}: no steps from --step-range")
        return None
    got = got.sort("ts_ns", maintain_order=True).with_columns(
        pl.col("name").str.extract(pat, 1).cast(_I64).alias("__n")
    )
    nums = got["__n"]
    if nums.null_count() or nums.n_unique() != got.height:
        nums = pl.Series("__n", range(got.height), dtype=_I64)
    return got.with_columns(pl.format("ProfilerStep#{}", nums).alias("name"))


# ---- assembly --------------------------------------------------------------------------------

_EVENT_COLS = {
    "ph": PHASE_DTYPE,
    "cat": pl.Categorical(),
    "name": pl.Categorical(),
    "pid": pl.Int32(),
    "tid": pl.Int32(),
    "ts_ns": _I64,
    "dur_ns": _I64,
    "correlation": _I64,
    "external_id": _I64,
    "stream": _I64,
    "device": pl.Int32(),
}
_SIDE_CATS = {
    "kernel": ("kernel",),
    "transfer": ("gpu_memcpy", "gpu_memset"),
    "sync": ("cuda_sync",),
    "op": ("cpu_op",),
}


#: The id range the Int32 ``pid`` / ``tid`` / ``device`` columns hold as is, and the first synthetic
#: id below it: the Rust decoder's rule for Kineto ids (``rust/src/event/part.rs``, ``merge.rs``).
PLAIN_ID_MIN, PLAIN_ID_MAX = -(1 << 29), (1 << 31) - 1
SYNTH_BASE = -(1 << 30)
_ID_COLS = ("pid", "tid", "device")


def _synthetic_ids(allf: pl.DataFrame) -> tuple[pl.DataFrame, dict[int, str]]:
    """Ids the Int32 columns cannot hold (a stream or device id above 2^31 - 1: CUPTI ids are
    unsigned 32-bit) get synthetic ids ``SYNTH_BASE - k``, one per distinct value in increasing
    order, the same value the same id in ``pid``, ``tid`` and ``device``; ``id_names`` maps each
    back to the original number (as the Kineto decoder does for ids outside the Int32 range)."""
    cols = [c for c in _ID_COLS if c in allf.columns]
    out_of_range = (pl.col("v") < PLAIN_ID_MIN) | (pl.col("v") > PLAIN_ID_MAX)
    big = (
        pl.concat([allf.select(pl.col(c).cast(_I64).alias("v")) for c in cols])
        .filter(out_of_range)
        .unique()
        .sort("v")["v"]
        if cols
        else pl.Series("v", [], dtype=_I64)
    )
    if big.len() == 0:
        return allf, {}
    synth = [SYNTH_BASE - k for k in range(big.len())]
    originals = big.to_list()
    allf = allf.with_columns(pl.col(c).cast(_I64).replace(originals, synth).alias(c) for c in cols)
    return allf, {s: str(v) for s, v in zip(synth, originals, strict=True)}


def _assemble(
    parts: list[pl.DataFrame],
) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, pl.DataFrame], dict[int, str]]:
    """Concatenate the per-table frames in time order; split out events, spans and side tables."""
    side_cols = {c for cols in SIDE_SCHEMAS.values() for c in cols if c != "row"}
    keep = ["__src", "__rowid", *[c for c in _EVENT_COLS if c != "external_id"]]
    frames = []
    for i, f in enumerate(parts):
        cols = [c for c in keep if c in f.columns] + [c for c in f.columns if c in side_cols and c not in keep]
        frames.append(f.select(cols).with_columns(pl.lit(i, dtype=pl.Int32).alias("__part")))
    if frames:
        allf = pl.concat(frames, how="diagonal_relaxed").sort(["ts_ns", "__part", "__rowid"], maintain_order=True)
    else:
        allf = pl.DataFrame(schema={"__src": _STR, "__rowid": _I64, "ts_ns": _I64})
    allf = allf.with_columns(pl.int_range(0, allf.height, dtype=pl.UInt32).alias("row"))
    allf, id_names = _synthetic_ids(allf)
    events = allf.select(
        [(pl.col(c) if c in allf.columns else pl.lit(None)).cast(dt).alias(c) for c, dt in _EVENT_COLS.items()]
    )
    spans = allf.select(pl.col("__src").alias("source_table"), pl.col("__rowid").alias("source_rowid"))
    side: dict[str, pl.DataFrame] = {}
    for name, schema in SIDE_SCHEMAS.items():
        cats = _SIDE_CATS.get(name)
        sub = allf.filter(pl.col("cat").is_in(list(cats))) if cats and "cat" in allf.columns else allf.clear()
        side[name] = sub.select(
            [(pl.col(c) if c in sub.columns else pl.lit(None)).cast(dt).alias(c) for c, dt in schema.items()]
        )
    return events, spans, side, id_names


# ---- metadata --------------------------------------------------------------------------------


def _device_properties(con: sqlite3.Connection, have: set[str], unit: NsysUnit) -> list[dict[str, Any]]:
    """``deviceProperties``-like entries (Kineto's key names) for the CUDA devices of the unit,
    from ``TARGET_INFO_GPU`` (matched through ``TARGET_INFO_CUDA_DEVICE.gpuId/cudaId``) and
    ``TARGET_INFO_CUDA_DEVICE.numMultiprocessors``."""
    gpus: dict[int, dict[str, Any]] = {}
    if "TARGET_INFO_GPU" in have:
        cur = con.execute('SELECT * FROM "TARGET_INFO_GPU"')
        names = [d[0] for d in cur.description]
        for r in cur.fetchall():
            row = dict(zip(names, r, strict=True))
            if row.get("id") is not None:
                gpus[int(row["id"])] = row
    cuda: dict[int, dict[str, Any]] = {}
    if "TARGET_INFO_CUDA_DEVICE" in have:
        cur = con.execute('SELECT * FROM "TARGET_INFO_CUDA_DEVICE"')
        names = [d[0] for d in cur.description]
        pids = {os_pid(g) for g in unit.global_pids}
        for r in cur.fetchall():
            row = dict(zip(names, r, strict=True))
            if row.get("cudaId") is None or (row.get("pid") is not None and pids and int(row["pid"]) not in pids):
                continue
            cuda.setdefault(int(row["cudaId"]), row)
    ids = set(cuda) | set(gpus)
    if unit.devices is not None:
        ids = {i for i in ids if i in unit.devices} or set(unit.devices) & ids
    out = []
    for cid in sorted(ids):
        c = cuda.get(cid, {})
        g = gpus.get(int(c["gpuId"])) if c.get("gpuId") is not None else gpus.get(cid)
        out.append(_kineto_props(cid, g or {}, c))
    return [d for d in out if len(d) > 1]


_GPU_KEYS = {
    "name": "name",
    "totalMemory": "totalGlobalMem",
    "computeMajor": "computeMajor",
    "computeMinor": "computeMinor",
    "maxThreadsPerBlock": "maxThreadsPerBlock",
    "maxRegistersPerBlock": "regsPerBlock",
    "maxRegistersPerSm": "regsPerMultiprocessor",
    "threadsPerWarp": "warpSize",
    "maxShmemPerBlock": "sharedMemPerBlock",
    "maxShmemPerSm": "sharedMemPerMultiprocessor",
    "smCount": "numSms",
    "maxShmemPerBlockOptin": "sharedMemPerBlockOptin",
    "memoryBandwidth": "memoryBandwidthBytesPerSec",
    "clockRate": "clockRateHz",
    "l2CacheSize": "l2CacheSize",
    "uuid": "uuid",
    "busLocation": "busLocation",
    "chipName": "chipName",
}


def _kineto_props(cid: int, gpu: dict[str, Any], cuda: dict[str, Any]) -> dict[str, Any]:
    d: dict[str, Any] = {"id": cid}
    for k, v in _GPU_KEYS.items():
        if gpu.get(k) is not None:
            d[v] = gpu[k]
    if gpu.get("maxWarpsPerSm") and gpu.get("threadsPerWarp"):
        d["maxThreadsPerMultiprocessor"] = int(gpu["maxWarpsPerSm"]) * int(gpu["threadsPerWarp"])
    if not d.get("numSms") and cuda.get("numMultiprocessors"):
        d["numSms"] = int(cuda["numMultiprocessors"])
    return d


def _system_env(con: sqlite3.Connection, have: set[str], unit: NsysUnit) -> dict[str, str]:
    """``TARGET_INFO_SYSTEM_ENV`` name → value for the unit's machine (``globalVid``)."""
    t = "TARGET_INFO_SYSTEM_ENV"
    if t not in have or not {"name", "value"} <= set(columns(con, t) or []):
        return {}
    wanted = ("Hostname", "NvDriverVersion", "CudaDriverVersion", "OsDescription")
    rows = con.execute(
        f'SELECT globalVid, name, value FROM "{t}" WHERE name IN ({placeholders(len(wanted))})', wanted
    ).fetchall()
    vids = {(g >> 48) << 48 for g in unit.global_pids}
    mine = [(n, v) for vid, n, v in rows if vid is None or vid in vids] or [(n, v) for _vid, n, v in rows]
    return {n: v for n, v in mine}


def _export_info(con: sqlite3.Connection, have: set[str]) -> dict[str, str]:
    if "META_DATA_EXPORT" not in have:
        return {}
    wanted = ("EXPORT_SCHEMA_VERSION", "EXPORT_PRODUCT_VERSION", "EXPORT_PRODUCT_NAME")
    rows = con.execute(
        f'SELECT name, value FROM "META_DATA_EXPORT" WHERE name IN ({placeholders(len(wanted))})', wanted
    ).fetchall()
    return {str(n): str(v) for n, v in rows}


def _process_names(con: sqlite3.Connection, have: set[str], unit: NsysUnit) -> dict[int, str]:
    if "PROCESSES" not in have or not {"globalPid", "name"} <= set(columns(con, "PROCESSES") or []):
        return {}
    rows = con.execute(
        f'SELECT globalPid, name FROM "PROCESSES" WHERE globalPid IN ({placeholders(len(unit.global_pids))})',
        unit.global_pids,
    ).fetchall()
    return {os_pid(g): str(n) for g, n in rows if n is not None}


def _meta(
    con: sqlite3.Connection, have: set[str], unit: NsysUnit, props: list[dict[str, Any]], session: int | None
) -> dict[str, Any]:
    """Top-level metadata in Kineto's key names where one exists, the rest under ``nsys``."""
    env = _system_env(con, have, unit)
    export = _export_info(con, have)
    raw: dict[str, Any] = {"deviceProperties": props}
    if env.get("Hostname"):
        raw["host_name"] = env["Hostname"]
    if env.get("CudaDriverVersion"):
        raw["cuda_driver_version"] = env["CudaDriverVersion"]
    raw["nsys"] = {
        "unit": unit.label,
        "processes": {str(k): v for k, v in _process_names(con, have, unit).items()}
        or [os_pid(g) for g in unit.global_pids],
        "devices": list(unit.devices) if unit.devices is not None else None,
        "step_range": unit.step_range,
        "session_start_utc_ns": session,
        "export_schema_version": export.get("EXPORT_SCHEMA_VERSION"),
        "product_version": export.get("EXPORT_PRODUCT_VERSION"),
        "driver_version": env.get("NvDriverVersion"),
        "os": env.get("OsDescription"),
    }
    return raw


# ---- raw rows --------------------------------------------------------------------------------


def extract_rows(path: str, spans: pl.DataFrame) -> list[dict[str, Any]]:
    """Every column of the SQLite rows behind some events (``spans`` rows: ``source_table``,
    ``source_rowid``), as ``{"source_table", "source_rowid", "args": {column: value}}`` in the
    order given. Meant for small selections (one dict per event)."""
    con = connect(path)
    try:
        found: dict[tuple[str, int], dict[str, Any]] = {}
        for (table,), g in spans.group_by(["source_table"], maintain_order=True):
            t = str(table)
            if t not in tables(con):
                continue
            ids = [int(i) for i in g["source_rowid"].unique().to_list()]
            for k in range(0, len(ids), 900):
                chunk = ids[k : k + 900]
                cur = con.execute(
                    f'SELECT rowid AS __rowid, * FROM "{t}" WHERE rowid IN ({placeholders(len(chunk))})', chunk
                )
                names = [d[0] for d in cur.description]
                for r in cur.fetchall():
                    d = dict(zip(names, r, strict=True))
                    found[(t, int(d.pop("__rowid")))] = d
    finally:
        con.close()
    out = []
    for t, rid in spans.select("source_table", "source_rowid").iter_rows():
        out.append({"source_table": t, "source_rowid": rid, "args": found.get((str(t), int(rid)), {})})
    return out
