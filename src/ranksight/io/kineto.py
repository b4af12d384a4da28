"""Kineto (PyTorch profiler) JSON / JSON.gz reader, backed by the Rust decoder."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import polars as pl

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
    "decode_many",
    "read_header",
    "scan_spans",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_STRING_BYTES",
    "DEFAULT_MAX_EVENT_BYTES",
    "TIME_LIMIT_NS",
    "limits",
    "TABLES",
    "SCHEMA",
    "polars_schema",
]

#: Refuse inputs that decompress to more than this many bytes unless told otherwise.
DEFAULT_MAX_BYTES = 64 << 30

#: Strings (names, args, top-level keys and values) longer than this, in bytes as the file holds
#: them (escapes included), are cut to it: a prefix and the marker ``…[truncated: N bytes]``
#: (environment: ``RANKSIGHT_MAX_STRING``; load option ``max_string_bytes``; 0 = no cap).
DEFAULT_MAX_STRING_BYTES = 1 << 20

#: An event (or a top-level key and value) still longer than this once its strings are cut is an
#: error (environment: ``RANKSIGHT_MAX_EVENT``; load option ``max_event_bytes``; 0 = no cap; never
#: less than twice the string cap). Also the longest event read back by ``raw_events``.
DEFAULT_MAX_EVENT_BYTES = 64 << 20

#: A ``ts`` or ``dur`` beyond ±2**62 ns (±146 years) is out of range: ``ts + dur`` must fit in int64.
TIME_LIMIT_NS = 1 << 62

_ENV_CAPS = {"max_string_bytes": "RANKSIGHT_MAX_STRING", "max_event_bytes": "RANKSIGHT_MAX_EVENT"}

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


def _parse_size(text: str, what: str) -> int:
    """``500MB``, ``2GiB``, ``1e6``, ``0`` → bytes (a :class:`UsageError` otherwise)."""
    t = text.strip().upper().replace("IB", "B")
    mult = 1
    for suffix, m in (("KB", 1 << 10), ("MB", 1 << 20), ("GB", 1 << 30), ("TB", 1 << 40), ("B", 1)):
        if t.endswith(suffix):
            mult, t = m, t[: -len(suffix)]
            break
    try:
        v = float(t) * mult
    except ValueError:
        v = -1.0
    if not (0 <= v < 1 << 62):
        raise UsageError(f"{what}: not a size: {text!r} (e.g. 4MB, 1GiB, 0 for no cap)")
    return int(v)


def limits(max_string_bytes: int | None = None, max_event_bytes: int | None = None) -> tuple[int, int]:
    """The per-string and per-event caps in force: the arguments, else the environment
    (``RANKSIGHT_MAX_STRING``, ``RANKSIGHT_MAX_EVENT``, sizes like ``4MB``), else the defaults."""
    out = []
    for name, given, default in (
        ("max_string_bytes", max_string_bytes, DEFAULT_MAX_STRING_BYTES),
        ("max_event_bytes", max_event_bytes, DEFAULT_MAX_EVENT_BYTES),
    ):
        if given is None:
            env = os.environ.get(_ENV_CAPS[name], "").strip()
            given = _parse_size(env, _ENV_CAPS[name]) if env else default
        if given < 0:
            raise UsageError(f"{name} must be 0 (no cap) or a number of bytes, not {given}")
        out.append(int(given))
    return out[0], out[1]


def _size(n: int) -> str:
    """Bytes as a short size (``1 MiB``, ``2.0 GiB``, ``200 bytes``)."""
    for unit, name in ((1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if n >= unit:
            return f"{n // unit} {name}" if n % unit == 0 else f"{n / unit:.1f} {name}"
    return f"{n} bytes"


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
    # polars imports the core's Arrow array itself (Arrow PyCapsule interface): no copy, no pyarrow
    return pl.Series(decoded.column(name, i)).alias(col)


#: A trace with fewer events than this imports each table in one call (a struct array); a larger
#: one column by column, so that each column's Rust buffers are freed as soon as it is imported.
WHOLE_TABLE_EVENTS = 1 << 20


def _table(decoded: Any, name: str, whole: bool = False) -> pl.DataFrame:
    """One decoded table, imported without copying (except dictionary columns, which polars turns
    into categoricals): column by column (each column's Rust buffers live only as long as it), or
    ``whole``, in one call. The columns are those of :data:`SCHEMA`, in its order (the decoder
    builds them so)."""
    if whole:
        df = pl.DataFrame(decoded.table(name))
        if df.columns == list(SCHEMA[name]):
            return df
        raise AssertionError(f"table {name}: columns {df.columns}, declared {list(SCHEMA[name])}")
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
        if message.startswith("decompressed size"):
            hint = "; raise it with --max-size (or max_bytes=) if the file is trusted"
        elif "per-event cap" in message:
            hint = "; raise it with RANKSIGHT_MAX_EVENT=SIZE (or max_event_bytes=) if the file is trusted"
        elif "read back at most" in message:
            hint = "; raise RANKSIGHT_MAX_EVENT=SIZE to read it back anyway"
        else:
            hint = ""
        raise InputTooLargeError(message + hint, path=path, offset=offset, event_index=index) from None
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


def decode(
    path: str | Path,
    *,
    strict: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_string_bytes: int | None = None,
    max_event_bytes: int | None = None,
) -> DecodedTrace:
    """Decode one Kineto trace file into typed columns.

    Times are int64 nanoseconds parsed from the decimal text, with ``baseTimeNanoseconds``
    added when the trace has it. A trace truncated inside ``traceEvents`` keeps every complete
    event before the cut and carries a warning, unless ``strict``. An event whose ``ts`` (any
    event but metadata) or ``dur`` (complete events, ``ph`` X) is missing, not a number, or
    beyond ±2**62 ns is dropped, with a warning and the count in ``stats["dropped_events"]``.
    Strings longer than ``max_string_bytes`` are cut, with a warning (:func:`limits` gives the
    caps: the arguments, the environment, the defaults).
    """
    p = str(path)
    if not Path(p).exists():
        raise TraceNotFoundError("no such file", path=p)
    max_string, max_event = limits(max_string_bytes, max_event_bytes)
    try:
        d = _core.decode_file(
            p, max_bytes=max_bytes, strict=strict, max_string_bytes=max_string, max_event_bytes=max_event
        )
    except _core.DecodeError as err:
        _raise(p, err)
    return _finish(p, d, max_string, max_event)


def decode_many(
    paths: list[str],
    *,
    strict: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_string_bytes: int | None = None,
    max_event_bytes: int | None = None,
) -> list[DecodedTrace]:
    """:func:`decode` of many files in one native call (issue 19): the core decodes the files in
    parallel, without the GIL and without Python work between files; the columns are then
    imported per file. The same tables, warnings and errors as :func:`decode` file by file; the
    first file (in the order given) that cannot be decoded raises its error."""
    ps = [str(p) for p in paths]
    for p in ps:
        if not Path(p).exists():
            raise TraceNotFoundError("no such file", path=p)
    max_string, max_event = limits(max_string_bytes, max_event_bytes)
    results = _core.decode_files(
        ps, max_bytes=max_bytes, strict=strict, max_string_bytes=max_string, max_event_bytes=max_event
    )
    for p, d in zip(ps, results, strict=True):
        if isinstance(d, _core.DecodeError):
            _raise(p, d)
    return [_finish(p, d, max_string, max_event) for p, d in zip(ps, results, strict=True)]


def _finish(p: str, d: Any, max_string: int, max_event: int) -> DecodedTrace:
    """The :class:`DecodedTrace` of a file the core decoded: tables imported, metadata parsed,
    the checks and warnings of :func:`decode`."""
    stats = dict(d.stats())
    stats["max_string_bytes"], stats["max_event_bytes"] = max_string, max_event
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
    whole = stats["events"] < WHOLE_TABLE_EVENTS
    events = _table(d, "events", whole).with_columns(pl.col("ph").cast(PHASE_DTYPE))
    tables = {name: _table(d, name, whole) for name in TABLES}
    tables["flow"] = tables["flow"].with_columns(pl.col("ph").cast(PHASE_DTYPE))
    spans = _table(d, "spans", whole)
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
    dropped = list(d.dropped_events())
    events, tables, n_range, out_of_range = _drop_out_of_range(events, tables)
    dropped.extend(out_of_range[: max(0, 20 - len(dropped))])
    stats["dropped_range"] = n_range
    stats["dropped_events"] += n_range
    if stats["dropped_events"]:
        warnings.append(_dropped_warning(stats["dropped_events"], dropped, events.height))
    if stats["bad_numbers"]:
        warnings.append(
            f"{stats['bad_numbers']} ts/dur values were not numbers and were left empty "
            "(on events that do not need them: metadata ts, dur of instant events)"
        )
    if stats["cut_strings"]:
        warnings.append(_cut_warning(stats["cut_strings"], d.cut_strings(), events, max_string))
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


def _drop_out_of_range(
    events: pl.DataFrame, tables: dict[str, pl.DataFrame]
) -> tuple[pl.DataFrame, dict[str, pl.DataFrame], int, list[tuple[int, str, str, str, str]]]:
    """Events whose ``ts`` or ``dur`` (after the time base is added) is beyond ±2**62 ns, out of
    the events table, the flow table and the side tables (the decoder has already dropped those
    whose values are missing or not numbers). Returns the tables, how many events were dropped
    and the first 20 as ``(event index, field, value, name, cat)``."""

    def out(c: str) -> pl.Expr:
        return pl.col(c).is_not_null() & ((pl.col(c) > TIME_LIMIT_NS) | (pl.col(c) < -TIME_LIMIT_NS))

    def beyond(col: pl.Series) -> bool:  # min/max of a column: no query (most traces have none)
        lo, hi = col.min(), col.max()
        if lo is None or hi is None:
            return False
        return bool(int(hi) > TIME_LIMIT_NS or int(lo) < -TIME_LIMIT_NS)  # type: ignore[arg-type]

    flow = tables["flow"]
    if not beyond(events["ts_ns"]) and not beyond(events["dur_ns"]) and not beyond(flow["ts_ns"]):
        return events, tables, 0, []
    bad_ev = out("ts_ns") | out("dur_ns")
    cols: list[pl.Expr] = [
        pl.col("row"),
        pl.col("name").cast(pl.String),
        pl.col("cat").cast(pl.String),
        pl.col("ts_ns"),
    ]
    gone = pl.concat(
        [
            events.filter(bad_ev).select(*cols, "dur_ns"),
            flow.filter(out("ts_ns")).select(*cols, pl.lit(None, pl.Int64).alias("dur_ns")),
        ]
    ).unique("row", keep="first", maintain_order=True)
    listed = []
    for r, name, cat, ts, dur in gone.head(20).iter_rows():
        bad_ts = ts is not None and abs(ts) > TIME_LIMIT_NS
        listed.append((int(r), "ts" if bad_ts else "dur", f"{ts if bad_ts else dur} ns", name or "", cat or ""))
    rows = gone["row"].implode()
    tables = {name: t.filter(~pl.col("row").is_in(rows)) if t.height else t for name, t in tables.items()}
    return events.filter(~bad_ev), tables, gone.height, listed


def _short(text: str, n: int = 40) -> str:
    return text if len(text) <= n else text[:n] + "\u2026"


def _dropped_warning(count: int, listed: list[tuple[int, str, str, str, str]], kept: int) -> str:
    """One line for the events dropped for an unusable time, naming the first few."""
    shown = [
        f"event {i} {_short(name)!r} ({cat or 'no cat'}): {field} {_short(text, 24)}"
        for i, field, text, name, cat in listed[:3]
    ]
    more = f"; and {count - len(shown)} more" if count > len(shown) else ""
    s = "s" if count > 1 else ""
    return (
        f"{count} event{s} dropped: ts or dur missing, not a number or out of range ({'; '.join(shown)}{more}); "
        f"the analyses use the other {kept} events"
    )


def _cut_warning(count: int, cuts: list[tuple[int | None, int | None, int]], events: pl.DataFrame, cap: int) -> str:
    """One line for the strings cut by the per-string cap, naming the events they are in."""
    names: dict[int, str] = {}
    idx = [i for i, _, _ in cuts[:3] if i is not None]
    if idx:
        hit = events.filter(pl.col("row").is_in(idx)).select("row", pl.col("name").cast(pl.String))
        names = {int(r): str(n) for r, n in hit.iter_rows()}
    shown = []
    for i, _off, n in cuts[:3]:
        if i is None:
            where = "a top-level key or value"
        elif i in names:
            where = f"event {i} ({_short(names[i], 24)!r})"
        else:
            where = f"event {i}"
        shown.append(f"{where}: {n:,} bytes")
    more = f"; and {count - len(shown)} more" if count > len(shown) else ""
    s = "s" if count > 1 else ""
    return (
        f"{count} string{s} longer than {_size(cap)} cut to that, ending in '\u2026[truncated: N bytes]' "
        f"({'; '.join(shown)}{more}); raise the cap with RANKSIGHT_MAX_STRING=SIZE (or max_string_bytes=) "
        "if the file is trusted"
    )


def read_header(path: str | Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> tuple[dict[str, Any], bool]:
    """The top-level keys before ``traceEvents`` (where Kineto writes ``distributedInfo``),
    read without decoding the events. Returns ``(meta, is_trace_like)``."""
    p = str(path)
    max_string, max_event = limits()
    try:
        items, reached, _gzip = _core.read_header(
            p, max_bytes=max_bytes, max_string_bytes=max_string, max_event_bytes=max_event
        )
    except _core.DecodeError as err:
        _raise(p, err)
    meta = {k: _parse_meta_value(v) for k, v in items}
    return meta, bool(reached) or "traceEvents" in meta


def scan_spans(path: str | Path) -> pl.DataFrame:
    """The ``spans`` table (``offset``, ``length`` of each event in the decompressed JSON) again,
    by scanning the file without parsing the events (for a trace whose spans were not kept)."""
    p = str(path)
    max_string, max_event = limits()
    try:
        off, length = _core.scan_spans(p, max_string_bytes=max_string, max_event_bytes=max_event)
    except _core.DecodeError as err:
        _raise(p, err)
    return pl.DataFrame(
        {
            "offset": pl.Series(np.frombuffer(off, dtype=np.uint64)),
            "length": pl.Series(np.frombuffer(length, dtype=np.uint32)),
        }
    )


def extract_events(path: str, offsets: list[int], lengths: list[int]) -> list[dict[str, Any]]:
    """The full JSON objects of the given events (every arg, not only the typed ones). An event
    longer than the per-event cap (:func:`limits`) is refused (:class:`InputTooLargeError`)."""
    try:
        texts = _core.extract_events(path, offsets, lengths, max_event_bytes=limits()[1])
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
