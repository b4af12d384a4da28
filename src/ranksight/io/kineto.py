"""Kineto (PyTorch profiler) JSON / JSON.gz reader, backed by the Rust decoder."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import polars as pl
import pyarrow as pa

from ranksight import _core
from ranksight.errors import (
    InputTooLargeError,
    RanksightError,
    TraceChangedError,
    TraceFormatError,
    TraceNotFoundError,
    UsageError,
)

__all__ = [
    "DecodedTrace",
    "decode",
    "read_header",
    "scan_spans",
    "DEFAULT_MAX_BYTES",
    "TABLES",
    "SCHEMA",
    "polars_schema",
]

#: Refuse inputs that decompress to more than this many bytes unless told otherwise.
DEFAULT_MAX_BYTES = 64 << 30

#: Kineto's relative timestamps stay below one 7,889,238 s period (~7.9e15 ns); epoch ns are ~1.7e18.
RELATIVE_TS_LIMIT_NS = 10**17

# The decoder's output is declared once, in the Rust core (rust/src/schema.rs); these read it.

#: Trace event phases (one byte per event), in code order; anything else is "?".
PHASES: list[str] = list(_core.phases())
PHASE_DTYPE = pl.Enum(PHASES)

#: Every table the decoder produces, in order, with its columns in order and their types
#: (``u32``, ``u64``, ``i32``, ``i64``, ``f64``, ``dict``: dictionary-encoded strings, ``phase``).
SCHEMA: dict[str, dict[str, str]] = {table: dict(columns) for table, columns in _core.schema()}

#: Side tables the decoder produces, keyed by event row.
TABLES: tuple[str, ...] = tuple(t for t in SCHEMA if t not in ("events", "spans"))

#: The polars type each schema type becomes on import (dictionary columns are categoricals; the
#: phase columns are cast to :data:`PHASE_DTYPE`).
POLARS_TYPES: dict[str, pl.DataType] = {
    "u32": pl.UInt32(),
    "u64": pl.UInt64(),
    "i32": pl.Int32(),
    "i64": pl.Int64(),
    "f64": pl.Float64(),
    "dict": pl.Categorical(),
    "phase": PHASE_DTYPE,
}


def polars_schema(table: str) -> dict[str, pl.DataType]:
    """The columns of decoded table ``table`` with their polars types, in order."""
    return {name: POLARS_TYPES[ty] for name, ty in SCHEMA[table].items()}


@dataclass
class DecodedTrace:
    """The columns and metadata of one decoded trace file."""

    path: str
    events: pl.DataFrame
    spans: pl.DataFrame
    tables: dict[str, pl.DataFrame]
    meta: dict[str, Any]
    id_names: dict[int, str]
    stats: dict[str, int]
    warnings: list[str] = field(default_factory=list)


def _column(decoded: Any, name: str, i: int, col: str) -> pl.Series:
    return pl.from_arrow(pa.array(decoded.column(name, i))).alias(col)  # type: ignore[union-attr]


def _table(decoded: Any, name: str) -> pl.DataFrame:
    """One decoded table, imported column by column without copying (except dictionary columns,
    which polars turns into categoricals): each column's Rust buffers live only as long as it.
    The columns are those of :data:`SCHEMA`, in its order (the decoder builds them so)."""
    return pl.DataFrame([_column(decoded, name, i, col) for i, col in enumerate(SCHEMA[name])])


def _parse_meta_value(text: str) -> Any:
    """A top-level value as Python data; the raw text when it is not JSON or nests too deeply."""
    try:
        return json.loads(text)
    except RecursionError:
        return text
    except ValueError:
        try:
            return json.loads(text, strict=False)
        except (ValueError, RecursionError):
            return text


#: The error ranksight raises for each error kind of the decoder (an exception class of the
#: extension; ``_core.error_kinds()`` lists them, a test checks that each is mapped).
ERRORS: dict[type[Exception], type[RanksightError]] = {
    _core.ReadError: TraceNotFoundError,
    _core.ChangedError: TraceChangedError,
    _core.RequestError: UsageError,
    _core.EmptyError: TraceFormatError,
    _core.TooLargeError: InputTooLargeError,
    _core.GzipError: TraceFormatError,
    _core.FormatError: TraceFormatError,
    _core.TruncatedError: TraceFormatError,
}


def _raise(path: str, err: Exception) -> NoReturn:
    """Raise the :class:`RanksightError` for a decoder error (``_core.DecodeError``)."""
    _kind, message, offset, index = err.args if len(err.args) == 4 else ("format", str(err), None, None)
    cls = ERRORS.get(type(err), TraceFormatError)
    if cls is TraceNotFoundError:
        raise TraceNotFoundError(message, path=path) from None
    if cls is InputTooLargeError:
        raise InputTooLargeError(
            f"{message}; raise it with --max-size (or max_bytes=) if the file is trusted", path=path
        ) from None
    if cls is TraceChangedError:
        raise TraceChangedError(message, path=path, offset=offset) from None
    if cls is UsageError:
        raise UsageError(message, path=path) from None
    if isinstance(err, _core.EmptyError):
        raise TraceFormatError("the file is empty", path=path) from None
    if offset == 0 and message.startswith("not a JSON trace") and "0x80" in message:
        # pickle protocol 2+ starts with 0x80: what torch.cuda.memory._dump_snapshot writes
        message += (
            "; it looks like a pickle (a PyTorch memory snapshot?): read it with "
            "`ranksight analyze memory --snapshot FILE` or `ranksight report TRACES --snapshot FILE`"
        )
    raise TraceFormatError(message, path=path, offset=offset, event_index=index) from None


def decode(path: str | Path, *, strict: bool = False, max_bytes: int = DEFAULT_MAX_BYTES) -> DecodedTrace:
    """Decode one Kineto trace file into typed columns.

    Times are int64 nanoseconds parsed from the decimal text, with ``baseTimeNanoseconds``
    added when the trace has it. A trace truncated inside ``traceEvents`` keeps every complete
    event before the cut and carries a warning, unless ``strict``.
    """
    p = str(path)
    if not Path(p).exists():
        raise TraceNotFoundError("no such file", path=p)
    try:
        d = _core.decode_file(p, max_bytes=max_bytes, strict=strict)
    except _core.DecodeError as err:
        _raise(p, err)
    stats = dict(d.stats())
    meta = {k: _parse_meta_value(v) for k, v in d.meta()}
    if not stats["events_seen"]:
        if "traceEvents" in meta:
            kind = type(meta["traceEvents"]).__name__
            kind = {
                "dict": "an object",
                "str": "a string",
                "NoneType": "null",
                "int": "a number",
                "float": "a number",
            }.get(kind, kind)
            raise TraceFormatError(f"not a trace: 'traceEvents' is {kind}, not a list of events", path=p)
        raise TraceFormatError(
            "not a trace: the JSON has no 'traceEvents' list (top-level keys: "
            + (", ".join(sorted(meta)[:8]) or "none")
            + ")",
            path=p,
        )
    events = _table(d, "events").with_columns(pl.col("ph").cast(PHASE_DTYPE))
    tables = {name: _table(d, name) for name in TABLES}
    tables["flow"] = tables["flow"].with_columns(pl.col("ph").cast(PHASE_DTYPE))
    spans = _table(d, "spans")
    warnings: list[str] = []
    if not stats["document_complete"] and stats["events"] == 0:
        raise TraceFormatError(
            f"truncated JSON: the file ends inside the first event ({stats['json_bytes']} bytes, no complete event)",
            path=p,
            offset=stats["json_bytes"],
        )
    if not stats["document_complete"]:
        last_ts: int | None = events["ts_ns"].max() if events.height else None  # type: ignore[assignment]
        lost = stats["lost_bytes"]
        where = "a truncated gzip stream" if stats["truncated_gzip"] else "a truncated file"
        warnings.append(
            f"{where}: kept {stats['events']} complete events, lost {lost} bytes after the last one"
            + (f" (last complete event at ts {last_ts} ns)" if last_ts is not None else "")
        )
        if not stats["has_base_time"] and last_ts is not None and last_ts < RELATIVE_TS_LIMIT_NS:
            warnings.append(
                "no baseTimeNanoseconds before the cut (current Kineto writes it after the events): "
                "times are relative to an unknown base and cannot be aligned with other ranks"
            )
    if stats["repaired_events"]:
        warnings.append(
            f"{stats['repaired_events']} events had invalid JSON (control characters, bare N/A or NaN, "
            "bad UTF-8) and were repaired"
        )
    if stats["bad_numbers"]:
        warnings.append(f"{stats['bad_numbers']} ts/dur values were not numbers and were left empty")
    if stats["skipped_non_objects"]:
        warnings.append(f"{stats['skipped_non_objects']} elements of traceEvents were not objects and were skipped")
    gz_name = p.endswith(".gz")
    if gz_name != bool(stats["gzip"]):
        warnings.append(
            "the file name says gzip but the content is plain JSON"
            if gz_name
            else "the content is gzip-compressed although the name does not end in .gz"
        )
    return DecodedTrace(
        path=p,
        events=events,
        spans=spans,
        tables=tables,
        meta=meta,
        id_names=dict(d.id_names()),
        stats=stats,
        warnings=warnings,
    )


def read_header(path: str | Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> tuple[dict[str, Any], bool]:
    """The top-level keys before ``traceEvents`` (where Kineto writes ``distributedInfo``),
    read without decoding the events. Returns ``(meta, is_trace_like)``."""
    p = str(path)
    try:
        items, reached, _gzip = _core.read_header(p, max_bytes=max_bytes)
    except _core.DecodeError as err:
        _raise(p, err)
    meta = {k: _parse_meta_value(v) for k, v in items}
    return meta, bool(reached) or "traceEvents" in meta


def scan_spans(path: str | Path) -> pl.DataFrame:
    """The ``spans`` table (``offset``, ``length`` of each event in the decompressed JSON) again,
    by scanning the file without parsing the events (for a trace whose spans were not kept)."""
    p = str(path)
    try:
        off, length = _core.scan_spans(p)
    except _core.DecodeError as err:
        _raise(p, err)
    return pl.DataFrame(
        {
            "offset": pl.Series(np.frombuffer(off, dtype=np.uint64)),
            "length": pl.Series(np.frombuffer(length, dtype=np.uint32)),
        }
    )


def extract_events(path: str, offsets: list[int], lengths: list[int]) -> list[dict[str, Any]]:
    """The full JSON objects of the given events (every arg, not only the typed ones)."""
    try:
        texts = _core.extract_events(path, offsets, lengths)
    except _core.DecodeError as err:
        _raise(path, err)
    return [_event_json(path, t, o) for t, o in zip(texts, offsets, strict=True)]


#: Bare words that are not JSON (``N/A`` and friends, trap 16) outside strings.
_BARE_WORD = re.compile(r'("(?:[^"\\]|\\.)*")|\b(N/A|nan|inf|-inf|undefined)\b')


def _event_json(path: str, text: str, offset: int) -> dict[str, Any]:
    """One event's JSON text as a dict, leniently (control characters, bare ``N/A``)."""
    for attempt in (text, _BARE_WORD.sub(lambda m: m.group(1) or f'"{m.group(2)}"', text)):
        try:
            v = json.loads(attempt, strict=False)
        except RecursionError:
            raise TraceFormatError("the event nests too deeply to read its args", path=path, offset=offset) from None
        except ValueError:
            continue
        if isinstance(v, dict):
            return v
    raise TraceFormatError("the event's JSON cannot be read back", path=path, offset=offset)
