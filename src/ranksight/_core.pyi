"""Type stub of ``ranksight._core``, the Rust core (rust/src/lib.rs): the Kineto trace decoder and
the sorted sweeps (operator nesting, call stacks, enclosing ranges). Keep it in step with the
``#[pyfunction]``s and ``#[pyclass]``es registered in ``_core`` (tests/unit/test_core_errors.py
checks that every public name here exists in the extension and the other way round)."""

from typing import Literal

__version__: str

# --- errors ---------------------------------------------------------------------------------

class DecodeError(ValueError):
    """A trace could not be decoded. ``args`` = (kind, message, offset, event_index); each kind
    is a subclass with a ``kind`` class attribute (``error_kinds()`` lists them)."""

    kind: str

class ReadError(DecodeError):
    """``io``: the file cannot be opened or read."""

class ChangedError(DecodeError):
    """``changed``: the file changed since it was loaded (events cannot be read back)."""

class RequestError(DecodeError):
    """``request``: the request is inconsistent (overlapping event spans)."""

class EmptyError(DecodeError):
    """``empty``: the file is empty."""

class TooLargeError(DecodeError):
    """``too_large``: the decompressed input exceeds the size cap, an event the per-event cap,
    the distinct strings 1 GiB in all, or an event to read back its read-back cap."""

class GzipError(DecodeError):
    """``gzip``: the gzip stream is corrupt."""

class FormatError(DecodeError):
    """``format``: not a JSON trace, or an event that is not (even repaired) JSON."""

class TruncatedError(DecodeError):
    """``truncated``: the document ends early."""

class InternalError(RuntimeError):
    """A panic in the Rust core, caught at the boundary: a bug."""

def error_kinds() -> list[tuple[str, type[DecodeError]]]:
    """Every decoder error kind with its exception class."""

# --- the decoder ----------------------------------------------------------------------------

_SchemaType = Literal["u32", "u64", "i32", "i64", "f64", "dict", "phase"]

def schema() -> list[tuple[str, list[tuple[str, _SchemaType]]]]:
    """Every table the decoder outputs, in order, with its columns in order and their types
    (``dict``: dictionary<uint32, utf8>; ``phase``: dictionary<uint8, utf8> over ``phases()``)."""

def phases() -> list[str]:
    """Trace event phases in code order; unknown phases are ``?`` (the last)."""

class ArrowTable:
    """One Arrow array, exported through the Arrow PyCapsule interface."""

    def __arrow_c_array__(self, requested_schema: object | None = None) -> tuple[object, object]: ...
    def __len__(self) -> int: ...

class Decoded:
    """The result of decoding one trace file."""

    def table_names(self) -> list[str]: ...
    def column_names(self, name: str) -> list[str]: ...
    def table(self, name: str) -> ArrowTable:
        """Table ``name``, every column handed over at once as one struct array."""
    def column(self, name: str, index: int) -> ArrowTable:
        """Column ``index`` of table ``name``, handed over (a column can be taken once)."""
    def meta(self) -> list[tuple[str, str]]:
        """Top-level keys other than ``traceEvents``, with their raw JSON text."""
    def id_names(self) -> list[tuple[int, str]]:
        """Synthetic ids given to string pids/tids, with the original strings."""
    def cut_strings(self) -> list[tuple[int | None, int | None, int]]:
        """Strings cut by the per-string cap (the first 20): (event index and the event's byte
        offset, or None and None for a top-level key or value; the string's length in the file)."""
    def dropped_events(self) -> list[tuple[int, str, str, str, str]]:
        """Events dropped for a ``ts`` / ``dur`` that is missing or not a number in range (the
        first 20): (event index, ``"ts"`` or ``"dur"``, raw text or ``"missing"``, name, cat)."""
    def stats(self) -> dict[str, int]: ...

def decode_file(
    path: str,
    *,
    max_bytes: int = 0,
    strict: bool = False,
    chunk_bytes: int = 33554432,
    max_string_bytes: int = 1048576,
    max_event_bytes: int = 67108864,
) -> Decoded:
    """Decode a Kineto trace (``.json`` or gzip, detected from the content). Strings longer than
    ``max_string_bytes`` are cut (0: no cap); an event longer than ``max_event_bytes`` once its
    strings are cut is a ``TooLargeError`` (0: no cap)."""

def decode_files(
    paths: list[str],
    *,
    max_bytes: int = 0,
    strict: bool = False,
    chunk_bytes: int = 33554432,
    max_string_bytes: int = 1048576,
    max_event_bytes: int = 67108864,
) -> list[Decoded | DecodeError]:
    """:func:`decode_file` on many files in one call, the files decoded in parallel without the
    GIL: one result per path, in order, the ``DecodeError`` of a file returned (not raised)."""

def read_header(
    path: str, *, max_bytes: int = 0, max_string_bytes: int = 1048576, max_event_bytes: int = 67108864
) -> tuple[list[tuple[str, str]], bool, bool]:
    """The top-level keys before ``traceEvents``: (meta, reached_events, gzip)."""

def scan_spans(
    path: str, *, max_bytes: int = 0, max_string_bytes: int = 1048576, max_event_bytes: int = 67108864
) -> tuple[bytes, bytes]:
    """Offsets (uint64) and lengths (uint32) of every event, without parsing them."""

def extract_events(path: str, offsets: list[int], lengths: list[int], *, max_event_bytes: int = 67108864) -> list[str]:
    """The raw JSON text of the events at the given stream offsets and lengths; an event longer
    than ``max_event_bytes`` is refused (``TooLargeError``)."""

# --- sorted sweeps over int64 buffers (native byte order) ----------------------------------

def nest(tid: bytes, start: bytes, end: bytes) -> tuple[bytes, bytes, bytes]:
    """The TensorBoard plugin's operator nesting: (parent int64, depth int64, kept uint8)."""

def call_stack(thread: bytes, ts: bytes, end: bytes, row: bytes) -> tuple[bytes, bytes]:
    """HTA's call stack: (parent index int64, depth int64)."""

class LongestPathGraph:
    """A graph on nodes ``0..n`` (int64 ``src``/``dst`` buffers), ordered once; a cycle raises ValueError."""

    def __init__(self, n: int, src: bytes, dst: bytes) -> None: ...
    def length(self, weight: bytes) -> int:
        """The longest path's length (sum of its edges' weights) under int64 edge weights."""

def longest_path_edges(n: int, src: bytes, dst: bytes, weight: bytes) -> bytes:
    """Longest path of a critical-path graph (networkx's tie-breaking) as int64 indices of its
    edges, first to last."""

def dedup_graph_edges(
    n: int, src: bytes, dst: bytes, typ: bytes, weight: bytes, attr: bytes
) -> tuple[bytes, bytes, bytes, bytes, bytes]:
    """One edge per (src, dst) at its first position, type and weight of the last, the last attr >= 0."""

def call_stack_edges(
    thread: bytes,
    depth: bytes,
    ppos: bytes,
    row: bytes,
    parent_row: bytes,
    start_node: bytes,
    end_node: bytes,
    lock: bytes,
    blocking: bytes,
    n_ts: bytes,
) -> tuple[bytes, bytes, bytes, bytes, bytes]:
    """The critical-path graph's call-stack edges (src, dst, type, weight, attr) in marker order."""

def enclosing(key: bytes, start: bytes, end: bytes, is_point: bytes) -> bytes:
    """Innermost enclosing span of each item: int64 item indices (-1 = none)."""

# --- process ----------------------------------------------------------------------------------

def set_mmap_threshold(bytes: int) -> bool:
    """Fix glibc's mmap threshold; whether the allocator took it."""

def _panic_for_tests(message: str, *, guarded: bool = True) -> None:
    """Test hook: panic (``InternalError``; ``guarded=False``: pyo3's ``PanicException``)."""
