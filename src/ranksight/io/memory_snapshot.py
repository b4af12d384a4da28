"""PyTorch CUDA memory snapshots (``torch.cuda.memory._snapshot()`` pickled, as
``torch.cuda.memory._dump_snapshot(path)`` writes), read safely into typed tables.

Safety: the file is a pickle, and unpickling normally runs code. :class:`SafeUnpickler` refuses
every global (``find_class``) and persistent id, so only the pickle's built-in containers and
scalars can be built (dict, list, tuple, str, int, float, bool, None; sets and bytes as protocol 4+
writes them, which is what ``_dump_snapshot`` uses); a pickle that
names any callable (``os.system``, ``builtins.eval``, a class) is refused with a
:class:`~ranksight.errors.TraceFormatError` before anything is called (``copyreg`` extension codes,
which CPython can resolve without ``find_class``, are refused too). A snapshot from PyTorch holds
nothing else. gzip-compressed files are accepted (detected from the content); inputs above
``max_bytes`` (compressed or not) are refused.

Structure (PyTorch's documented ``Snapshot``): ``segments`` (one per ``cudaMalloc``: ``device,
address, total_size, allocated_size, active_size, requested_size, stream, segment_type`` (``small``
/ ``large``), ``blocks`` (``address, size, requested_size, state`` (``active_allocated``,
``active_pending_free`` / ``active_awaiting_free``, ``inactive``), ``frames``)) and
``device_traces`` (one list per device of ``{action, addr, size, stream, time_us, frames}`` with
``action`` one of ``alloc, free_requested, free_completed, segment_alloc, segment_free,
segment_map, segment_unmap, snapshot, oom``). Frames are ``{filename, line, name}``, innermost
first. Older snapshots keep block frames in ``history[-1].frames``; a bare list is read as the
``segments`` of ``torch.cuda.memory_snapshot()``.
"""

from __future__ import annotations

import copyreg
import gzip
import io
import os
import pickle
import pickletools
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from ranksight.errors import InputTooLargeError, TraceFormatError, TraceNotFoundError

if TYPE_CHECKING:
    from polars.datatypes import DataTypeClass

__all__ = ["SafeUnpickler", "RefusedPickle", "safe_load", "MemorySnapshot", "read_snapshot", "FRAME", "BLOCK_STATES"]

#: Refuse snapshot files (after decompression) above this many bytes unless told otherwise.
DEFAULT_MAX_BYTES = 4 << 30

FRAME = pl.Struct({"filename": pl.String, "line": pl.Int64, "name": pl.String})
#: Block states as PyTorch writes them; ``active_awaiting_free`` (the TypedDict's spelling) is read
#: as ``active_pending_free``.
BLOCK_STATES = ("active_allocated", "active_pending_free", "inactive")


class RefusedPickle(pickle.UnpicklingError):
    """The pickle names a Python object (or a persistent id): refused, nothing was called."""


class SafeUnpickler(pickle.Unpickler):
    """An unpickler that builds plain containers and scalars only: every global is refused."""

    def find_class(self, module: str, name: str) -> Any:  # noqa: D401
        raise RefusedPickle(
            f"the pickle asks for the Python object {module}.{name}; a memory snapshot holds only plain containers"
        )

    def persistent_load(self, pid: Any) -> Any:
        raise RefusedPickle("the pickle uses persistent ids; a memory snapshot holds only plain containers")


def _read_bytes(path: str, max_bytes: int) -> bytes:
    if not os.path.exists(path):
        raise TraceNotFoundError("no such file", path=path)
    size = os.path.getsize(path)
    if max_bytes and size > max_bytes:
        raise InputTooLargeError(f"the snapshot is {size} bytes, above the limit of {max_bytes}", path=path)
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] != b"\x1f\x8b":
        return raw
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(raw)) as g:
            data = g.read(max_bytes + 1 if max_bytes else -1)
    except (OSError, EOFError) as err:
        raise TraceFormatError(f"a gzip file that cannot be decompressed: {err}", path=path) from None
    if max_bytes and len(data) > max_bytes:
        raise InputTooLargeError(f"the snapshot decompresses to more than {max_bytes} bytes", path=path)
    return data


def _refuse_extensions(data: bytes, path: str) -> None:
    """``EXT1/2/4`` opcodes name objects through ``copyreg``'s extension registry, and CPython
    serves them from its extension cache without calling ``find_class``. The registry is empty
    unless some library filled it; then the opcodes are scanned and any extension is refused."""
    if not copyreg._extension_registry:  # type: ignore[attr-defined]
        return
    try:
        for op, _arg, _pos in pickletools.genops(data):
            if op.name in ("EXT1", "EXT2", "EXT4"):
                raise TraceFormatError("refused to unpickle: the pickle uses a copyreg extension code", path=path)
    except ValueError as err:
        raise TraceFormatError(f"not a readable pickle: {err}", path=path) from None


def safe_load(path: str | Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Any:
    """Unpickle ``path`` with :class:`SafeUnpickler` (no code runs; any global is refused)."""
    p = str(path)
    data = _read_bytes(p, max_bytes)
    if not data:
        raise TraceFormatError("the file is empty", path=p)
    _refuse_extensions(data, p)
    try:
        return SafeUnpickler(io.BytesIO(data)).load()
    except RefusedPickle as err:
        raise TraceFormatError(f"refused to unpickle: {err}", path=p) from None
    except (
        pickle.UnpicklingError,
        EOFError,
        ValueError,
        TypeError,
        KeyError,
        IndexError,
        AttributeError,
        OverflowError,
        MemoryError,
        RecursionError,
    ) as err:
        raise TraceFormatError(f"not a readable pickle: {type(err).__name__}: {err}", path=p) from None


@dataclass
class MemorySnapshot:
    """The tables of one snapshot file.

    - ``segments``: ``device, address, total_size, allocated_size, active_size, requested_size,
      stream, segment_type, is_expandable, blocks`` (block count);
    - ``blocks``: ``device, segment_address, segment_type, stream, address, size, requested_size,
      state, frames`` (list of ``{filename, line, name}``, innermost first);
    - ``trace``: ``device, idx, action, addr, size, stream, time_us, device_free, frames`` in
      recorded order per device.
    """

    path: str
    segments: pl.DataFrame
    blocks: pl.DataFrame
    trace: pl.DataFrame
    allocator_settings: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


_BLOCK_SCHEMA: dict[str, pl.DataType | DataTypeClass] = {
    "address": pl.Int64,
    "size": pl.Int64,
    "requested_size": pl.Int64,
    "state": pl.String,
    "frames": pl.List(FRAME),
}
_HISTORY = pl.List(pl.Struct({"frames": pl.List(FRAME)}))
_SEGMENT_SCHEMA = {
    "device": pl.Int64,
    "address": pl.Int64,
    "total_size": pl.Int64,
    "allocated_size": pl.Int64,
    "active_size": pl.Int64,
    "requested_size": pl.Int64,
    "stream": pl.Int64,
    "segment_type": pl.String,
    "is_expandable": pl.Boolean,
    "blocks": pl.List(pl.Struct({**_BLOCK_SCHEMA, "history": _HISTORY})),
}
_TRACE_SCHEMA: dict[str, pl.DataType | DataTypeClass] = {
    "action": pl.String,
    "addr": pl.Int64,
    "size": pl.Int64,
    "stream": pl.Int64,
    "time_us": pl.Int64,
    "device_free": pl.Int64,
    "frames": pl.List(FRAME),
}


def _frame(rows: Any, schema: dict[str, Any], path: str, what: str) -> pl.DataFrame:
    """Dicts to a typed frame in polars (no Python object per row); keys outside ``schema`` are
    ignored, missing ones are null."""
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise TraceFormatError(f"not a memory snapshot: {what} is not a list of dicts", path=path)
    try:
        return pl.DataFrame(rows, schema=schema, strict=False)
    except (TypeError, ValueError, pl.exceptions.PolarsError) as err:
        msg = str(err).splitlines()[0][:200]
        raise TraceFormatError(
            f"not a memory snapshot: {what} has entries of the wrong type ({msg})", path=path
        ) from None


def read_snapshot(path: str | Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> MemorySnapshot:
    """Read a snapshot file into :class:`MemorySnapshot` tables (see the module docstring)."""
    p = str(path)
    obj = safe_load(p, max_bytes=max_bytes)
    if isinstance(obj, list):
        obj = {"segments": obj, "device_traces": []}
    if not isinstance(obj, dict) or "segments" not in obj:
        keys = ", ".join(sorted(map(str, obj))[:8]) if isinstance(obj, dict) else type(obj).__name__
        raise TraceFormatError(f"not a memory snapshot: no 'segments' (found {keys or 'nothing'})", path=p)
    seg = _frame(obj["segments"], _SEGMENT_SCHEMA, p, "'segments'")
    given = pl.Series([s.get("blocks") is not None for s in obj["segments"]], dtype=pl.Boolean)  # one check per segment
    bad = (given & seg["blocks"].is_null()) | seg["blocks"].list.eval(pl.element().is_null()).list.any().fill_null(
        False
    )
    if seg.height and bad.any():
        raise TraceFormatError(
            "not a memory snapshot: a segment's 'blocks' has entries of the wrong type (not dicts)", path=p
        )
    blocks = (
        seg.select("device", pl.col("address").alias("segment_address"), "segment_type", "stream", "blocks")
        .explode("blocks")
        .filter(pl.col("blocks").is_not_null())
        .unnest("blocks")
        .with_columns(
            pl.coalesce(
                pl.col("frames"), pl.col("history").list.last().struct.field("frames"), pl.lit([], pl.List(FRAME))
            ).alias("frames"),
            pl.col("state").replace({"active_awaiting_free": "active_pending_free"}),
        )
        .drop("history")
    )
    segments = seg.with_columns(pl.col("blocks").list.len().fill_null(0).cast(pl.Int64))
    trace = _trace(obj.get("device_traces") or [], p)
    warnings = []
    unknown = sorted(set(blocks["state"].drop_nulls().unique().to_list()) - set(BLOCK_STATES))
    if unknown:
        warnings.append(f"unknown block states {unknown}: counted as neither allocated nor free")
    settings = obj.get("allocator_settings")
    if not isinstance(settings, dict):
        settings = {}
    return MemorySnapshot(p, segments, blocks, trace, settings, warnings)


def _trace(device_traces: Any, path: str) -> pl.DataFrame:
    if not isinstance(device_traces, list):
        raise TraceFormatError("not a memory snapshot: 'device_traces' is not a list", path=path)
    frames = []
    for dev, entries in enumerate(device_traces):  # one loop per device
        df = _frame(entries, _TRACE_SCHEMA, path, "a device trace")
        if df.height:
            frames.append(
                df.with_columns(
                    pl.lit(dev, dtype=pl.Int64).alias("device"), pl.int_range(0, df.height, dtype=pl.Int64).alias("idx")
                )
            )
    if not frames:
        return pl.DataFrame(schema={**_TRACE_SCHEMA, "device": pl.Int64, "idx": pl.Int64})
    return pl.concat(frames)
