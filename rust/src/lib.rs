//! ranksight's native core: a fast, exact decoder for PyTorch profiler (Kineto) traces, and the
//! sorted sweeps (operator nesting, call stacks, enclosing ranges) that the analyses run on it.
//!
//! Modules, from the bytes up: `json` (the lexer the scanner and the event fast path share),
//! `scan` (the document's structure: metadata and event spans), `event` (one event's fields
//! into column parts, merged into the trace's columns), `numbers` (exact number text),
//! `decode` (the pipeline: reader thread, parallel parsing, errors in `error`), `schema` (the
//! one declaration of arg keys, phases and output tables), `export` (the tables as Arrow
//! arrays), `nest`. This file is the Python binding (`ranksight._core`; its stub is
//! `src/ranksight/_core.pyi`).

#![warn(clippy::undocumented_unsafe_blocks)]

pub mod columns;
pub mod critical;
pub mod decode;
pub mod error;
pub mod event;
pub mod export;
pub mod json;
pub mod limits;
pub mod nest;
pub mod numbers;
pub mod scan;
pub mod schema;

use arrow_data::ArrayData;
use error::ErrorKind;
use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyCapsule, PyDict, PyTuple, PyType};
use std::ffi::CString;
use std::sync::Mutex;

create_exception!(ranksight._core, DecodeError, PyValueError, "A trace could not be decoded (args: kind, message, offset, event_index).");
create_exception!(ranksight._core, ReadError, DecodeError, "The file cannot be opened or read.");
create_exception!(ranksight._core, ChangedError, DecodeError, "The file changed since it was loaded: its events cannot be read back.");
create_exception!(ranksight._core, RequestError, DecodeError, "The request is inconsistent (overlapping event spans).");
create_exception!(ranksight._core, EmptyError, DecodeError, "The file is empty.");
create_exception!(ranksight._core, TooLargeError, DecodeError, "The decompressed input exceeds the size cap.");
create_exception!(ranksight._core, GzipError, DecodeError, "The gzip stream is corrupt.");
create_exception!(ranksight._core, FormatError, DecodeError, "Not a JSON trace, or an event that is not JSON.");
create_exception!(ranksight._core, TruncatedError, DecodeError, "The document ends early.");
create_exception!(ranksight._core, InternalError, PyRuntimeError, "A bug in the Rust core (a panic, caught at the boundary).");

/// The extension's exception class of each error kind.
fn error_type(py: Python<'_>, kind: ErrorKind) -> Bound<'_, PyType> {
    match kind {
        ErrorKind::Io => py.get_type::<ReadError>(),
        ErrorKind::Changed => py.get_type::<ChangedError>(),
        ErrorKind::Request => py.get_type::<RequestError>(),
        ErrorKind::Empty => py.get_type::<EmptyError>(),
        ErrorKind::TooLarge => py.get_type::<TooLargeError>(),
        ErrorKind::Gzip => py.get_type::<GzipError>(),
        ErrorKind::Format => py.get_type::<FormatError>(),
        ErrorKind::Truncated => py.get_type::<TruncatedError>(),
    }
}

fn to_py_err(e: error::DecodeError) -> PyErr {
    let args = (e.kind.name(), e.message, e.offset, e.event_index);
    match e.kind {
        ErrorKind::Io => ReadError::new_err(args),
        ErrorKind::Changed => ChangedError::new_err(args),
        ErrorKind::Request => RequestError::new_err(args),
        ErrorKind::Empty => EmptyError::new_err(args),
        ErrorKind::TooLarge => TooLargeError::new_err(args),
        ErrorKind::Gzip => GzipError::new_err(args),
        ErrorKind::Format => FormatError::new_err(args),
        ErrorKind::Truncated => TruncatedError::new_err(args),
    }
}

/// Where the last panic happened (set by the panic hook, read by `guard`).
static LAST_PANIC: Mutex<Option<String>> = Mutex::new(None);

/// A panic hook that records where a panic happened instead of printing it: the panic reaches
/// Python as one `InternalError` whose message says what and where. `RANKSIGHT_RUST_PANIC_TRACE`
/// set in the environment prints Rust's usual report as well.
fn install_panic_hook() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if let Some(l) = info.location() {
            if let Ok(mut last) = LAST_PANIC.lock() {
                *last = Some(format!("{}:{}", l.file(), l.line()));
            }
        }
        if std::env::var_os("RANKSIGHT_RUST_PANIC_TRACE").is_some() {
            default(info);
        }
    }));
}

/// Run `f`, turning a panic (on this thread, or a parser or reader thread's carried over) into
/// `InternalError`, an ordinary exception (pyo3 would raise `PanicException`, a
/// `BaseException` that `except Exception` misses and that does not pickle).
fn guard<T>(f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            let at = LAST_PANIC.lock().ok().and_then(|mut l| l.take()).map(|l| format!(" at {l}")).unwrap_or_default();
            let msg = format!("the Rust core panicked: {what}{at}").replace(['\n', '\r'], " ");
            Err(InternalError::new_err(msg))
        }
    }
}

/// One Arrow array (a struct array = a table), exportable through `__arrow_c_array__`.
#[pyclass(module = "ranksight._core", frozen)]
struct ArrowTable {
    data: ArrayData,
}

#[pymethods]
impl ArrowTable {
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_array__<'py>(&self, py: Python<'py>, requested_schema: Option<Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyTuple>> {
        let _ = requested_schema;
        let (array, schema) = arrow_array::ffi::to_ffi(&self.data).map_err(|e| PyValueError::new_err(e.to_string()))?;
        let schema_capsule = PyCapsule::new_with_destructor(py, schema, Some(CString::new("arrow_schema").unwrap()), |_, _| {})?;
        let array_capsule = PyCapsule::new_with_destructor(py, array, Some(CString::new("arrow_array").unwrap()), |_, _| {})?;
        PyTuple::new(py, [schema_capsule.into_any(), array_capsule.into_any()])
    }
    fn __len__(&self) -> usize {
        self.data.len()
    }
}

/// One decoded table: its column names and the columns not yet handed to Python.
struct Table {
    name: String,
    columns: Vec<String>,
    data: std::sync::Mutex<Vec<Option<ArrayData>>>,
}

/// (event index and its byte offset, or None, None for a top-level key or value; length in
/// bytes) of a cut string.
type CutInfo = (Option<u64>, Option<u64>, u64);
/// (event index, field, raw text, name, category) of a dropped event.
type DropInfo = (u64, &'static str, String, String, String);

/// The result of decoding one trace file.
#[pyclass(module = "ranksight._core")]
struct Decoded {
    tables: Vec<Table>,
    meta: Vec<(String, String)>,
    id_names: Vec<(i64, String)>,
    stats: Vec<(&'static str, i64)>,
    cuts: Vec<CutInfo>,
    drops: Vec<DropInfo>,
}

impl Decoded {
    fn new(tables: Vec<(String, ArrayData)>, meta: Vec<(String, String)>, id_names: Vec<(i64, String)>, stats: Vec<(&'static str, i64)>) -> Self {
        let tables = tables
            .into_iter()
            .map(|(name, d)| {
                let columns = match d.data_type() {
                    arrow_schema::DataType::Struct(fields) => fields.iter().map(|f| f.name().clone()).collect(),
                    _ => Vec::new(),
                };
                // the struct is dropped here: each child is then the only owner of its buffers
                let data = d.child_data().iter().cloned().map(Some).collect();
                Table { name, columns, data: std::sync::Mutex::new(data) }
            })
            .collect();
        Decoded { tables, meta, id_names, stats, cuts: Vec::new(), drops: Vec::new() }
    }

    fn find(&self, name: &str) -> PyResult<&Table> {
        self.tables.iter().find(|t| t.name == name).ok_or_else(|| PyValueError::new_err(format!("no table {name}")))
    }
}

#[pymethods]
impl Decoded {
    /// Names of the tables, in order.
    fn table_names(&self) -> Vec<String> {
        self.tables.iter().map(|t| t.name.clone()).collect()
    }
    /// Column names of table `name`.
    fn column_names(&self, name: &str) -> PyResult<Vec<String>> {
        Ok(self.find(name)?.columns.clone())
    }
    /// Column `index` of table `name`, handed over: the decoder keeps no reference to it, so its
    /// buffers are freed as soon as the importer drops that column (the import of a big trace
    /// then never holds the decoded columns and their imported copies at once). A column can be
    /// taken once.
    fn column(&self, name: &str, index: usize) -> PyResult<ArrowTable> {
        let t = self.find(name)?;
        let mut cols = t.data.lock().map_err(|_| PyValueError::new_err("decoder state poisoned"))?;
        match cols.get_mut(index) {
            None => Err(PyValueError::new_err(format!("table {name} has no column {index}"))),
            Some(slot) => slot
                .take()
                .map(|data| ArrowTable { data })
                .ok_or_else(|| PyValueError::new_err(format!("column {index} of table {name} was already taken"))),
        }
    }
    /// Table `name`, all its columns handed over at once as one struct array (what a small
    /// trace imports: one call per table instead of one per column). Its columns can be taken
    /// once, by this or by `column`.
    fn table(&self, name: &str) -> PyResult<ArrowTable> {
        let t = self.find(name)?;
        let mut cols = t.data.lock().map_err(|_| PyValueError::new_err("decoder state poisoned"))?;
        let mut children = Vec::with_capacity(cols.len());
        for (i, slot) in cols.iter_mut().enumerate() {
            children.push(slot.take().ok_or_else(|| PyValueError::new_err(format!("column {i} of table {name} was already taken")))?);
        }
        let fields: Vec<arrow_schema::Field> = t
            .columns
            .iter()
            .zip(&children)
            .map(|(c, d)| arrow_schema::Field::new(c, d.data_type().clone(), d.null_count() > 0))
            .collect();
        let len = children.first().map_or(0, |c| c.len());
        let data = ArrayData::builder(arrow_schema::DataType::Struct(fields.into()))
            .len(len)
            .child_data(children)
            .build()
            .map_err(|e| PyValueError::new_err(format!("table {name}: {e}")))?;
        Ok(ArrowTable { data })
    }
    /// Top-level keys other than traceEvents, with their raw JSON text.
    fn meta(&self) -> Vec<(String, String)> {
        self.meta.clone()
    }
    /// Synthetic ids given to string pids/tids, with the original strings.
    fn id_names(&self) -> Vec<(i64, String)> {
        self.id_names.clone()
    }
    /// Strings cut by the per-string cap (the first 20): `[(event index or None, byte offset or
    /// None, length)]`; `stats()["cut_strings"]` counts them all.
    fn cut_strings(&self) -> Vec<CutInfo> {
        self.cuts.clone()
    }
    /// Events dropped for an unusable `ts` / `dur` (the first 20): `[(event index, field, raw
    /// text or "missing", name, category)]`; `stats()["dropped_events"]` counts them all.
    fn dropped_events(&self) -> Vec<DropInfo> {
        self.drops.clone()
    }
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (k, v) in &self.stats {
            d.set_item(*k, *v)?;
        }
        Ok(d)
    }
}

fn stats_of(d: &decode::Decoded, nstrings: usize, events: usize) -> Vec<(&'static str, i64)> {
    vec![
        ("events", events as i64),
        ("strings", nstrings as i64),
        ("gzip", d.gzip as i64),
        ("file_bytes", d.file_bytes as i64),
        ("json_bytes", d.json_bytes as i64),
        ("events_seen", d.events_seen as i64),
        ("document_complete", d.document_complete as i64),
        ("lost_bytes", d.lost_bytes as i64),
        ("truncated_gzip", d.truncated_gzip as i64),
        ("skipped_non_objects", d.skipped_non_objects as i64),
        ("repaired_events", d.columns.repaired as i64),
        ("bad_numbers", d.columns.bad_numbers as i64),
        ("dropped_events", d.columns.dropped as i64),
        ("dropped_ts", d.columns.dropped_ts as i64),
        ("dropped_dur", d.columns.dropped_dur as i64),
        ("cut_strings", d.cut_count as i64),
        ("longest_string", d.columns.strings.strings().iter().map(|s| s.len()).max().unwrap_or(0) as i64),
        ("base_time_ns", d.base_time_ns.unwrap_or(0)),
        ("has_base_time", d.base_time_ns.is_some() as i64),
    ]
}

fn meta_strings(meta: Vec<(String, Vec<u8>)>) -> Vec<(String, String)> {
    meta.into_iter().map(|(k, v)| (k, String::from_utf8_lossy(&v).into_owned())).collect()
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
extern "C" {
    fn malloc_trim(pad: usize) -> i32;
    fn mallopt(param: i32, value: i32) -> i32;
}

/// glibc raises its mmap threshold each time a large block is freed (up to 32 MiB), after which
/// column-sized temporaries (numpy arrays, buffers) come from the heap and stay resident after
/// they are freed. A fixed threshold keeps every larger block in its own mapping, returned to the
/// system on free, at the cost of fresh page faults for each one (1 GB trace: 0.72 GB resident
/// after the op-tree analyses instead of 0.9; multi-rank loads up to ~20 % slower).
/// Returns whether the allocator took the setting (false where it is not glibc).
#[pyfunction]
fn set_mmap_threshold(bytes: i32) -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` is glibc's, declared above with its C signature; it takes two ints by
    // value, changes only the allocator's own (lock-protected) settings and is thread-safe.
    unsafe {
        const M_MMAP_THRESHOLD: i32 = -3;
        return mallopt(M_MMAP_THRESHOLD, bytes) == 1;
    }
    #[allow(unreachable_code)]
    {
        let _ = bytes;
        false
    }
}

/// Hand the memory glibc keeps in its per-thread arenas (the parse threads' freed parts) back to
/// the system, so that it does not count against the analyses that follow.
fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` is glibc's, declared above with its C signature; it takes the
    // allocator's locks and only returns free pages to the system, so any thread may call it at
    // any time.
    unsafe {
        malloc_trim(0);
    }
}

/// Decode one file into what Python receives (no GIL needed).
fn decode_one(path: &str, opts: &decode::Options) -> Result<Decoded, error::DecodeError> {
    decode::decode(path, opts).map(|mut d| {
        let events = d.columns.n;
        let nstrings = d.columns.strings.len();
        let stats = stats_of(&d, nstrings, events);
        let cuts = d.cuts.iter().map(|c| (c.event_index, c.offset, c.len)).collect();
        let drops = d.columns.drops.iter().map(|x| (x.event, x.field, x.text.clone(), x.name.clone(), x.cat.clone())).collect();
        let cols = std::mem::take(&mut d.columns);
        let (tables, id_names, _) = export::tables(cols);
        let mut out = Decoded::new(tables, meta_strings(d.meta), id_names, stats);
        out.cuts = cuts;
        out.drops = drops;
        out
    })
}

fn decode_options(max_bytes: u64, strict: bool, chunk_bytes: usize, max_string_bytes: usize, max_event_bytes: usize) -> decode::Options {
    decode::Options { chunk_bytes: chunk_bytes.max(1 << 12), max_bytes, max_string_bytes, max_event_bytes, strict, header_only: false, spans_only: false, ..Default::default() }
}

/// Decode a Kineto trace (`.json` or gzip, detected from the content).
#[pyfunction]
#[pyo3(signature = (path, *, max_bytes=0, strict=false, chunk_bytes=32 << 20, max_string_bytes=decode::DEFAULT_MAX_STRING_BYTES, max_event_bytes=decode::DEFAULT_MAX_EVENT_BYTES))]
fn decode_file(py: Python<'_>, path: String, max_bytes: u64, strict: bool, chunk_bytes: usize, max_string_bytes: usize, max_event_bytes: usize) -> PyResult<Decoded> {
    guard(|| {
        let opts = decode_options(max_bytes, strict, chunk_bytes, max_string_bytes, max_event_bytes);
        let result = py.detach(|| decode_one(&path, &opts));
        release_free_memory();
        result.map_err(to_py_err)
    })
}

/// Decode many Kineto traces in one call: the files in parallel (each large one also in
/// parallel within), with no Python work between them. One result per path, in order: a
/// `Decoded`, or the `DecodeError` instance of that file (returned, not raised).
#[pyfunction]
#[pyo3(signature = (paths, *, max_bytes=0, strict=false, chunk_bytes=32 << 20, max_string_bytes=decode::DEFAULT_MAX_STRING_BYTES, max_event_bytes=decode::DEFAULT_MAX_EVENT_BYTES))]
fn decode_files(py: Python<'_>, paths: Vec<String>, max_bytes: u64, strict: bool, chunk_bytes: usize, max_string_bytes: usize, max_event_bytes: usize) -> PyResult<Vec<Py<PyAny>>> {
    use rayon::prelude::*;
    guard(|| {
        let opts = decode_options(max_bytes, strict, chunk_bytes, max_string_bytes, max_event_bytes);
        let results: Vec<Result<Decoded, error::DecodeError>> = py.detach(|| paths.par_iter().map(|p| decode_one(p, &opts)).collect());
        release_free_memory();
        results
            .into_iter()
            .map(|r| match r {
                Ok(d) => Ok(Py::new(py, d)?.into_any()),
                Err(e) => Ok(to_py_err(e).into_value(py).into_any()),
            })
            .collect()
    })
}

/// (meta key/raw text pairs, reached_events, gzip)
type Header = (Vec<(String, String)>, bool, bool);

/// Read the top-level keys that precede `traceEvents`, without decoding events.
/// Returns (meta, reached_events, gzip).
#[pyfunction]
#[pyo3(signature = (path, *, max_bytes=0, max_string_bytes=decode::DEFAULT_MAX_STRING_BYTES, max_event_bytes=decode::DEFAULT_MAX_EVENT_BYTES))]
fn read_header(py: Python<'_>, path: String, max_bytes: u64, max_string_bytes: usize, max_event_bytes: usize) -> PyResult<Header> {
    guard(|| {
        let opts = decode::Options { chunk_bytes: 1 << 20, max_bytes, max_string_bytes, max_event_bytes, strict: false, header_only: true, spans_only: false, ..Default::default() };
        let r = py.detach(|| decode::decode(&path, &opts));
        let d = r.map_err(to_py_err)?;
        Ok((meta_strings(d.meta), d.reached_events, d.gzip))
    })
}

/// Byte offset and length of every event in the (decompressed) JSON text, without parsing the
/// events: the `spans` table again, for a trace whose spans were not kept. Returns (offsets as
/// uint64, lengths as uint32) buffers.
#[pyfunction]
#[pyo3(signature = (path, *, max_bytes=0, max_string_bytes=decode::DEFAULT_MAX_STRING_BYTES, max_event_bytes=decode::DEFAULT_MAX_EVENT_BYTES))]
fn scan_spans<'py>(py: Python<'py>, path: String, max_bytes: u64, max_string_bytes: usize, max_event_bytes: usize) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    guard(|| {
        let opts = decode::Options { chunk_bytes: 32 << 20, max_bytes, max_string_bytes, max_event_bytes, strict: false, header_only: false, spans_only: true, ..Default::default() };
        let d = py.detach(|| decode::decode(&path, &opts)).map_err(to_py_err)?;
        let off: Vec<u8> = d.columns.offset.iter().flat_map(|x| x.to_ne_bytes()).collect();
        let len: Vec<u8> = d.columns.len.iter().flat_map(|x| x.to_ne_bytes()).collect();
        Ok((PyBytes::new(py, &off), PyBytes::new(py, &len)))
    })
}

/// The raw JSON text of events, given their stream offsets and lengths (from the `spans` table);
/// an event longer than `max_event_bytes` is refused (`TooLargeError`).
#[pyfunction]
#[pyo3(signature = (path, offsets, lengths, *, max_event_bytes=decode::DEFAULT_MAX_READ_BACK))]
fn extract_events(py: Python<'_>, path: String, offsets: Vec<u64>, lengths: Vec<u32>, max_event_bytes: u64) -> PyResult<Vec<String>> {
    guard(|| {
        if offsets.len() != lengths.len() {
            return Err(PyValueError::new_err("offsets and lengths differ in length"));
        }
        let r = py.detach(|| decode::extract_capped(&path, &offsets, &lengths, max_event_bytes));
        let v = r.map_err(to_py_err)?;
        Ok(v.into_iter().map(|b| String::from_utf8_lossy(&b).into_owned()).collect())
    })
}

/// An int64 buffer (native byte order) read in place when it is 8-byte aligned (Python bytes
/// objects are), copied otherwise: multi-million-element inputs are not duplicated.
fn i64s<'a>(b: &'a [u8], what: &str) -> PyResult<std::borrow::Cow<'a, [i64]>> {
    if !b.len().is_multiple_of(8) {
        return Err(PyValueError::new_err(format!("{what}: length {} is not a multiple of 8", b.len())));
    }
    // SAFETY: i64 is plain data (every bit pattern valid, no drop), and `align_to` hands back as
    // `mid` only the part of `b` that is aligned for i64, borrowed for `b`'s lifetime
    let (pre, mid, post) = unsafe { b.align_to::<i64>() };
    if pre.is_empty() && post.is_empty() {
        return Ok(std::borrow::Cow::Borrowed(mid));
    }
    Ok(std::borrow::Cow::Owned(b.chunks_exact(8).map(|c| i64::from_ne_bytes(c.try_into().unwrap())).collect()))
}

/// An int64 result as a bytes object, written in place.
fn i64_bytes<'py>(py: Python<'py>, v: &[i64]) -> PyResult<Bound<'py, PyBytes>> {
    PyBytes::new_with(py, v.len() * 8, |buf| {
        for (c, x) in buf.chunks_exact_mut(8).zip(v) {
            c.copy_from_slice(&x.to_ne_bytes());
        }
        Ok(())
    })
}

/// The plugin's operator nesting over int64 buffers `tid`, `start`, `end` (nodes sorted by tid,
/// start, −end). Returns (parent, depth, kept) as int64, int64 and uint8 buffers.
#[pyfunction(name = "nest")]
fn nest_nodes<'py>(py: Python<'py>, tid: &[u8], start: &[u8], end: &[u8]) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    guard(|| {
        let (t, s, e) = (i64s(tid, "tid")?, i64s(start, "start")?, i64s(end, "end")?);
        if t.len() != s.len() || t.len() != e.len() {
            return Err(PyValueError::new_err("tid, start and end differ in length"));
        }
        let (p, d, k) = py.detach(|| nest::nest(&t, &s, &e));
        Ok((i64_bytes(py, &p)?, i64_bytes(py, &d)?, PyBytes::new(py, &k)))
    })
}

/// HTA's call stack over int64 buffers `thread`, `ts`, `end`, `row` (events of positive
/// duration, any order; see `nest::call_stack`). Returns (parent index, depth) as int64 buffers.
#[pyfunction]
fn call_stack<'py>(py: Python<'py>, thread: &[u8], ts: &[u8], end: &[u8], row: &[u8]) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    guard(|| {
        let (t, s, e, r) = (i64s(thread, "thread")?, i64s(ts, "ts")?, i64s(end, "end")?, i64s(row, "row")?);
        if t.len() != s.len() || t.len() != e.len() || t.len() != r.len() {
            return Err(PyValueError::new_err("thread, ts, end and row differ in length"));
        }
        if t.len() > u32::MAX as usize {
            return Err(PyValueError::new_err("more than 2^32 events"));
        }
        let (p, d) = py.detach(|| nest::call_stack(&t, &s, &e, &r));
        Ok((i64_bytes(py, &p)?, i64_bytes(py, &d)?))
    })
}

/// Innermost enclosing span of each item (see `nest::enclosing`): buffers of int64 `key`,
/// `start`, `end` and uint8 `is_point`, in any order. Returns an int64 buffer of item indices
/// (−1 = none).
#[pyfunction]
fn enclosing<'py>(py: Python<'py>, key: &[u8], start: &[u8], end: &[u8], is_point: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
    guard(|| {
        let (k, s, e) = (i64s(key, "key")?, i64s(start, "start")?, i64s(end, "end")?);
        if k.len() != s.len() || k.len() != e.len() || k.len() != is_point.len() {
            return Err(PyValueError::new_err("key, start, end and is_point differ in length"));
        }
        if k.len() > u32::MAX as usize {
            return Err(PyValueError::new_err("more than 2^32 items"));
        }
        let out = py.detach(|| nest::enclosing(&k, &s, &e, is_point));
        i64_bytes(py, &out)
    })
}

/// Every table the decoder outputs, in order, with its columns in order: `[(table, [(column,
/// type)])]`, types named by `schema::Out::name` (`u32`, `u64`, `i32`, `i64`, `f64`, `dict`:
/// dictionary<uint32, utf8>, `phase`: dictionary<uint8, utf8> over `phases()`).
#[pyfunction(name = "schema")]
fn table_schema() -> Vec<(&'static str, Vec<(&'static str, &'static str)>)> {
    schema::tables().iter().map(|t| (t.name, t.columns.iter().map(|c| (c.name, c.ty.name())).collect())).collect()
}

/// The trace event phases in code order (the values of a `phase` column); unknown phases are `?`.
#[pyfunction]
fn phases() -> Vec<&'static str> {
    schema::PHASES.to_vec()
}

/// Every decoder error kind with its exception class: `[(kind, class)]`.
#[pyfunction]
fn error_kinds(py: Python<'_>) -> Vec<(&'static str, Bound<'_, PyType>)> {
    ErrorKind::ALL.iter().map(|&k| (k.name(), error_type(py, k))).collect()
}

/// Test hook: panic with `message`, inside the boundary's guard (an `InternalError`), or with
/// `guarded=False` outside it (pyo3's `PanicException`, as from a path the guard misses).
#[pyfunction]
#[pyo3(signature = (message, *, guarded=true))]
fn _panic_for_tests(message: &str, guarded: bool) -> PyResult<()> {
    if guarded {
        guard(|| panic!("{message}"))
    } else {
        panic!("{message}")
    }
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    install_panic_hook();
    let py = m.py();
    m.add_class::<Decoded>()?;
    m.add_class::<ArrowTable>()?;
    m.add("DecodeError", py.get_type::<DecodeError>())?;
    for k in ErrorKind::ALL {
        let t = error_type(py, k);
        t.setattr("kind", k.name())?;
        m.add(t.name()?, t)?;
    }
    m.add("InternalError", py.get_type::<InternalError>())?;
    m.add_function(wrap_pyfunction!(decode_file, m)?)?;
    m.add_function(wrap_pyfunction!(decode_files, m)?)?;
    m.add_function(wrap_pyfunction!(read_header, m)?)?;
    m.add_function(wrap_pyfunction!(extract_events, m)?)?;
    m.add_function(wrap_pyfunction!(nest_nodes, m)?)?;
    m.add_function(wrap_pyfunction!(scan_spans, m)?)?;
    m.add_function(wrap_pyfunction!(enclosing, m)?)?;
    m.add_function(wrap_pyfunction!(call_stack, m)?)?;
    m.add_class::<critical::LongestPathGraph>()?;
    m.add_function(wrap_pyfunction!(critical::longest_path_edges, m)?)?;
    m.add_function(wrap_pyfunction!(critical::dedup_graph_edges, m)?)?;
    m.add_function(wrap_pyfunction!(critical::call_stack_edges, m)?)?;
    m.add_function(wrap_pyfunction!(set_mmap_threshold, m)?)?;
    m.add_function(wrap_pyfunction!(table_schema, m)?)?;
    m.add_function(wrap_pyfunction!(phases, m)?)?;
    m.add_function(wrap_pyfunction!(error_kinds, m)?)?;
    m.add_function(wrap_pyfunction!(_panic_for_tests, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
