//! The decode pipeline: a reader thread (file or gzip), the structural scanner, and parallel
//! event parsing into columns.

pub use crate::error::{DecodeError, ErrorKind};
use crate::event::{parse_part_capped, Columns, Part};
use crate::limits::{cap_text, Shifts, StringCap};
use crate::scan::{Progress, Scanner};
use flate2::read::MultiGzDecoder;
use rayon::prelude::*;
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::sync_channel;
use std::sync::Arc;
use std::thread::JoinHandle;

pub struct Options {
    pub chunk_bytes: usize,
    /// refuse inputs whose decompressed size exceeds this (0 = no cap); every decompressed
    /// byte counts, the skipped bytes of cut strings included
    pub max_bytes: u64,
    /// cut strings longer than this many bytes (as in the file, escapes included) to a
    /// prefix and a marker (0 = no cap; see `limits`)
    pub max_string_bytes: usize,
    /// refuse an event (or a top-level key and value) longer than this once its strings are
    /// cut (0 = no cap; never less than twice `max_string_bytes`)
    pub max_event_bytes: usize,
    /// refuse a trace whose distinct strings exceed this many bytes in all (at most
    /// `MAX_STRINGS_TOTAL`: the Arrow string arrays have 32-bit offsets)
    pub max_strings_total: usize,
    pub strict: bool,
    /// stop at the start of traceEvents (header read)
    pub header_only: bool,
    /// only record each event's byte span (offset, length), without parsing it
    pub spans_only: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            chunk_bytes: 32 << 20,
            max_bytes: 0,
            max_string_bytes: DEFAULT_MAX_STRING_BYTES,
            max_event_bytes: DEFAULT_MAX_EVENT_BYTES,
            max_strings_total: MAX_STRINGS_TOTAL,
            strict: false,
            header_only: false,
            spans_only: false,
        }
    }
}

/// The default per-string cap (1 MiB).
pub const DEFAULT_MAX_STRING_BYTES: usize = 1 << 20;
/// The default per-event cap (64 MiB; real events are a few KB).
pub const DEFAULT_MAX_EVENT_BYTES: usize = 64 << 20;
/// The distinct strings a trace may hold in all (names, categories, string args): the Arrow
/// string arrays they become have 32-bit offsets.
pub const MAX_STRINGS_TOTAL: usize = 1 << 30;
/// Events longer than this are not read back (`extract`) unless told otherwise.
pub const DEFAULT_MAX_READ_BACK: u64 = DEFAULT_MAX_EVENT_BYTES as u64;

pub struct Decoded {
    pub columns: Columns,
    pub meta: Vec<(String, Vec<u8>)>,
    pub gzip: bool,
    pub file_bytes: u64,
    pub json_bytes: u64,
    pub events_seen: bool,
    pub reached_events: bool,
    pub document_complete: bool,
    pub lost_bytes: u64,
    pub truncated_gzip: bool,
    pub skipped_non_objects: usize,
    pub base_time_ns: Option<i64>,
    /// strings cut by the per-string cap
    pub cuts: Vec<CutString>,
    /// how many strings were cut (`cuts` keeps the first `MAX_CUTS_LISTED`)
    pub cut_count: u64,
}

/// A string cut by the per-string cap: the event it is in and that event's byte offset in the
/// file (None, None: a top-level key or value), and the string's length in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CutString {
    pub event_index: Option<u64>,
    pub offset: Option<u64>,
    pub len: u64,
}

/// Cut strings listed by name in the result (the others are counted).
pub const MAX_CUTS_LISTED: usize = 20;

struct Counting<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// The input: a reader of the (decompressed) JSON text.
pub struct Source {
    pub reader: Box<dyn Read + Send>,
    pub gzip: bool,
    pub file_bytes: u64,
    /// bytes taken from the underlying file so far (where a gzip error is)
    pub consumed: Arc<AtomicU64>,
}

impl Source {
    /// The JSON text of `raw` (`file_bytes` long): gunzipped when it starts with the gzip magic.
    pub fn new(mut raw: impl Read + Send + 'static, file_bytes: u64) -> Result<Source, DecodeError> {
        let mut magic = [0u8; 2];
        let mut got = 0;
        while got < 2 {
            let n = raw.read(&mut magic[got..]).map_err(|e| DecodeError::new(ErrorKind::Io, format!("cannot read: {e}")))?;
            if n == 0 {
                break;
            }
            got += n;
        }
        let consumed = Arc::new(AtomicU64::new(got as u64));
        let head = std::io::Cursor::new(magic[..got].to_vec());
        let counted = Counting { inner: raw, count: consumed.clone() };
        let chained = head.chain(counted);
        let gzip = got == 2 && magic == [0x1f, 0x8b];
        let reader: Box<dyn Read + Send> = if gzip {
            Box::new(MultiGzDecoder::new(BufReader::with_capacity(1 << 20, chained)))
        } else {
            Box::new(chained)
        };
        Ok(Source { reader, gzip, file_bytes, consumed })
    }
}

pub fn open(path: &str) -> Result<Source, DecodeError> {
    let f = File::open(path).map_err(|e| DecodeError::new(ErrorKind::Io, format!("cannot open: {e}")))?;
    let md = f.metadata().map_err(|e| DecodeError::new(ErrorKind::Io, format!("cannot stat: {e}")))?;
    if md.is_dir() {
        return Err(DecodeError::new(ErrorKind::Io, "is a directory"));
    }
    Source::new(f, md.len())
}

/// A buffer of the input, the spans of the complete events in it (relative to the buffer), the
/// stream offset of its first byte and the index (in `traceEvents`) of its first event.
pub struct Batch {
    pub buf: Vec<u8>,
    pub spans: Vec<(usize, usize)>,
    pub base: u64,
    pub first_index: u64,
    /// after a cut string, the spans' (offset, length) in the original text (the buffer holds
    /// the filtered text, whose positions differ); None when they are `base + a`, `b - a`
    pub orig: Option<Vec<(u64, u64)>>,
}

impl Batch {
    /// Original (offset, length) of span `k`.
    pub fn orig_span(&self, k: usize) -> (u64, u64) {
        match &self.orig {
            Some(o) => o[k],
            None => {
                let (a, b) = self.spans[k];
                (self.base + a as u64, (b - a) as u64)
            }
        }
    }
}

/// What the reader found besides the events, once the input is read.
pub struct ReadEnd {
    /// top-level keys other than `traceEvents`, with their raw JSON text
    pub meta: Vec<(String, Vec<u8>)>,
    /// decompressed bytes read
    pub json_bytes: u64,
    /// stream offset up to which the document was consumed (after the last complete item)
    pub consumed_to: u64,
    /// the document is complete (closed)
    pub complete: bool,
    pub events_seen: bool,
    pub reached_events: bool,
    /// the gzip stream ends early (the message says where)
    pub truncated_gzip: Option<String>,
    pub skipped_non_objects: usize,
    /// events found
    pub index: u64,
    /// strings cut by the per-string cap (the first `MAX_CUTS_LISTED`) and their number
    pub cuts: Vec<CutString>,
    pub cut_count: u64,
}

/// What the reader loop is told: the chunk size and the caps.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub chunk: usize,
    /// decompressed bytes (0 = no cap)
    pub max_bytes: u64,
    /// bytes of one string (0 = no cap)
    pub max_string: usize,
    /// bytes of one item (an event, or a top-level key and value) once its strings are cut
    /// (0 = no cap)
    pub max_item: usize,
    pub header_only: bool,
}

impl Limits {
    /// Limits without string or item caps (only `max_bytes`).
    pub fn plain(chunk: usize, max_bytes: u64, header_only: bool) -> Self {
        Limits { chunk, max_bytes, max_string: 0, max_item: 0, header_only }
    }

    /// The item cap in force: never less than twice the string cap.
    fn item_cap(&self) -> usize {
        if self.max_item == 0 {
            0
        } else if self.max_string == 0 {
            self.max_item
        } else {
            self.max_item.max(self.max_string.max(crate::limits::MIN_STRING_CAP).saturating_mul(2))
        }
    }

    /// An item this long is filtered through the string cap.
    fn filter_at(&self) -> usize {
        self.max_string.max(crate::limits::MIN_STRING_CAP).saturating_mul(2).saturating_add(1 << 16)
    }
}

/// Bytes as a short size (`64 MiB`, `1.5 KiB`, `100 bytes`).
pub fn size_text(n: u64) -> String {
    const UNITS: [(u64, &str); 4] = [(1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (u, name) in UNITS {
        if n >= u {
            let v = n as f64 / u as f64;
            return if n.is_multiple_of(u) { format!("{} {name}", n / u) } else { format!("{v:.1} {name}") };
        }
    }
    format!("{n} bytes")
}

/// The reader loop without string or item caps: see [`read_events_limited`].
pub fn read_events(
    src: &mut Source,
    chunk: usize,
    max_bytes: u64,
    header_only: bool,
    sink: impl FnMut(Batch) -> bool,
) -> Result<Option<ReadEnd>, DecodeError> {
    read_events_limited(src, &Limits::plain(chunk, max_bytes, header_only), sink)
}

/// A read error: a gzip stream that ends early is the end of the input (`truncated` says
/// where); anything else is an error.
fn on_read_error(src: &Source, e: io::Error, truncated: &mut Option<String>) -> Result<(), DecodeError> {
    let at = src.consumed.load(Ordering::Relaxed);
    if src.gzip && e.kind() == io::ErrorKind::UnexpectedEof {
        *truncated = Some(format!("gzip stream ends early (compressed byte {at})"));
        return Ok(());
    }
    Err(if src.gzip {
        DecodeError::new(ErrorKind::Gzip, format!("corrupt gzip data: {e}")).at(Some(at), None)
    } else {
        DecodeError::new(ErrorKind::Io, format!("read failed: {e}"))
    })
}

/// Hand the first `k` events of a buffer to the sink, then give back `err` (the events before
/// an error are parsed first: an invalid one among them is the first error).
#[allow(clippy::too_many_arguments)]
fn fail_after(sink: &mut impl FnMut(Batch) -> bool, buf: Vec<u8>, mut spans: Vec<(usize, usize)>, k: usize, base: u64, index: u64, shifts: &Shifts, err: DecodeError) -> DecodeError {
    spans.truncate(k);
    if !spans.is_empty() {
        let orig = (!shifts.is_empty()).then(|| orig_spans(shifts, base, &spans));
        sink(Batch { buf, spans, base, first_index: index, orig });
    }
    err
}

/// The original (offset, length) of spans of a buffer at stream position `base`.
fn orig_spans(shifts: &Shifts, base: u64, spans: &[(usize, usize)]) -> Vec<(u64, u64)> {
    spans
        .iter()
        .map(|&(a, b)| {
            let o = shifts.orig(base + a as u64);
            (o, shifts.orig(base + b as u64) - o)
        })
        .collect()
}

/// An event (`event_index`) or a top-level key and value (None) longer than the item cap.
fn item_too_large(lim: &Limits, item_cap: usize, event_index: Option<u64>, at: u64) -> DecodeError {
    let what = if event_index.is_some() { "the event" } else { "a top-level key and value" };
    let strings = if lim.max_string > 0 { format!(" once its strings are cut to {}", size_text(lim.max_string as u64)) } else { String::new() };
    DecodeError::new(ErrorKind::TooLarge, format!("{what} is longer than the per-event cap of {}{strings}", size_text(item_cap as u64)))
        .at(Some(at), event_index)
}

fn too_large(max_bytes: u64) -> DecodeError {
    DecodeError::new(ErrorKind::TooLarge, format!("decompressed size exceeds the cap of {max_bytes} bytes"))
}

/// The reader loop: read (and gunzip) the input in chunks of `lim.chunk` bytes, find the event
/// boundaries with the scanner, and hand each buffer with the spans of its complete events to
/// `sink`, which returns false to stop (the result is then None). An item cut by the end of a
/// buffer is carried into the next one. `lim.header_only` stops at the start of `traceEvents`;
/// `lim.max_bytes` (0 = none) caps the decompressed size, counting every byte read and never
/// reading more than one byte past it. An item that grows past twice the string cap is passed
/// through the string cap (`limits::StringCap`) from its start, so that memory stays
/// proportional to what is kept; an item still longer than the item cap is an error.
pub fn read_events_limited(src: &mut Source, lim: &Limits, mut sink: impl FnMut(Batch) -> bool) -> Result<Option<ReadEnd>, DecodeError> {
    let chunk = lim.chunk.max(1);
    let mut scanner = Scanner::new();
    scanner.stop_at_events = lim.header_only;
    scanner.string_cap = lim.max_string;
    let mut meta: Vec<(String, Vec<u8>)> = Vec::new();
    let mut carry: Vec<u8> = Vec::new();
    // stream position of the buffer's first byte (the filtered text's, see `limits`)
    let mut base: u64 = 0;
    // decompressed bytes read
    let mut total: u64 = 0;
    let mut index: u64 = 0;
    let mut truncated = None;
    let mut reached_events = false;
    let item_cap = lim.item_cap();
    let filter_at = lim.filter_at();
    let mut cap = (lim.max_string > 0).then(|| StringCap::new(lim.max_string));
    let mut filtering = false;
    let mut shifts = Shifts::default();
    let mut scratch: Vec<u8> = Vec::new();
    let mut cuts_done = 0usize;
    let mut cuts: Vec<CutString> = Vec::new();
    let mut cut_count: u64 = 0;
    loop {
        let mut buf = std::mem::take(&mut carry);
        if let Some(f) = cap.as_mut() {
            if !filtering && (buf.len() > filter_at || (item_cap > 0 && buf.len() > item_cap)) {
                // the carried item starts outside any string: filter it from its start (also
                // before it is measured against the item cap)
                f.reset();
                let mut out = Vec::with_capacity(filter_at);
                f.feed(&buf, &mut out, base, &mut shifts);
                buf = out;
                filtering = true;
            }
        }
        if item_cap > 0 && buf.len() > item_cap {
            return Err(item_too_large(lim, item_cap, scanner.in_events().then_some(index), shifts.orig(base)));
        }
        let start_len = buf.len();
        // an item longer than a chunk (one huge event or metadata value) is re-scanned from its
        // start each round: read at least as much again as is carried, so the rescans add up
        // to O(n) rather than O(n²/chunk)
        let mut want = start_len + chunk.max(start_len);
        // never read more than one byte past the size cap
        let room = |total: u64| if lim.max_bytes > 0 { (lim.max_bytes.saturating_sub(total) + 1).min(usize::MAX as u64) as usize } else { usize::MAX };
        want = want.min(start_len.saturating_add(room(total)));
        let mut eof = false;
        match cap.as_mut().filter(|_| filtering) {
            Some(f) => {
                // through the string cap: a cut string's skipped bytes are read, counted and
                // dropped, so this may read far more than it keeps
                scratch.resize(chunk.min(1 << 20), 0);
                while buf.len() < want {
                    let n = (want - buf.len()).min(scratch.len()).min(room(total));
                    match src.reader.read(&mut scratch[..n]) {
                        Ok(0) => {
                            eof = true;
                            break;
                        }
                        Ok(k) => {
                            total += k as u64;
                            f.feed(&scratch[..k], &mut buf, base, &mut shifts);
                            if lim.max_bytes > 0 && total > lim.max_bytes {
                                return Err(too_large(lim.max_bytes));
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(e) => {
                            on_read_error(src, e, &mut truncated)?;
                            eof = true;
                            break;
                        }
                    }
                }
            }
            None => {
                // the buffer grows with what is read: a small file never pays for a whole chunk
                // (zeroing a 32 MiB buffer per file was most of the cost of many small ranks)
                let n = (want - start_len) as u64;
                let left = if src.gzip { n } else { src.file_bytes.saturating_sub(src.consumed.load(Ordering::Relaxed)) + 1 };
                buf.reserve(n.min(left).min(usize::MAX as u64) as usize);
                if let Err(e) = Read::by_ref(&mut src.reader).take(n).read_to_end(&mut buf) {
                    // the bytes read before the error are in `buf`
                    on_read_error(src, e, &mut truncated)?;
                    eof = true;
                }
                if (buf.len() - start_len) as u64 != n {
                    eof = true;
                }
                total += (buf.len() - start_len) as u64;
            }
        }
        if lim.max_bytes > 0 && total > lim.max_bytes {
            return Err(too_large(lim.max_bytes));
        }
        let mut spans = Vec::new();
        let meta_before = meta.len();
        let scanned = scanner.scan(&buf, 0, eof, &mut spans, &mut meta);
        // the first error in the order of the document: a complete item over the item cap (an
        // event, or a top-level value), then a format error of the scanner after it, or an item
        // the input ends inside that is over the cap (the same errors as when items are carried
        // from earlier chunks); the events before it go to the sink first (an invalid one among
        // them comes first) and count in its event index
        let mut too_big: Option<(usize, DecodeError)> = None;
        if item_cap > 0 {
            if let Some(k) = spans.iter().position(|&(a, b)| b - a > item_cap && cap_text(&buf[a..b], lim.max_string).map_or(b - a, |(t, _)| t.len()) > item_cap) {
                too_big = Some((k, item_too_large(lim, item_cap, Some(index + k as u64), shifts.orig(base + spans[k].0 as u64))));
            } else if scanner.meta_lens[meta_before..].iter().any(|&n| n > item_cap) {
                too_big = Some((spans.len(), item_too_large(lim, item_cap, None, shifts.orig(base))));
            }
        }
        let progress = match (scanned, too_big) {
            (_, Some((k, err))) => return Err(fail_after(&mut sink, buf, spans, k, base, index, &shifts, err)),
            (Err(e), None) => {
                let at = Some(shifts.orig(base + e.offset as u64));
                let err = DecodeError::new(ErrorKind::Format, e.message).at(at, Some(index + spans.len() as u64));
                let k = spans.len();
                return Err(fail_after(&mut sink, buf, spans, k, base, index, &shifts, err));
            }
            (Ok(p), None) => p,
        };
        let (pos, stop) = match progress {
            Progress::NeedMore(p) | Progress::Finished(p) => (p, eof),
            Progress::ReachedEvents(p) => {
                reached_events = true;
                (p, true)
            }
        };
        if let Progress::NeedMore(_) = progress {
            if eof && item_cap > 0 && buf.len() - pos > item_cap && cap_text(&buf[pos..], lim.max_string).map_or(buf.len() - pos, |(t, _)| t.len()) > item_cap {
                let err = item_too_large(lim, item_cap, scanner.in_events().then_some(index + spans.len() as u64), shifts.orig(base + pos as u64));
                let k = spans.len();
                return Err(fail_after(&mut sink, buf, spans, k, base, index, &shifts, err));
            }
        }
        let consumed_to = shifts.orig(base + pos as u64);
        let n = spans.len() as u64;
        // the strings cut in what the scanner consumed: in an event of this batch, or top-level
        if let Some(f) = cap.as_ref() {
            let done_to = base + pos as u64;
            while cuts_done < f.cuts.len() && f.cuts[cuts_done].at < done_to {
                let c = f.cuts[cuts_done];
                let rel = (c.at.saturating_sub(base)) as usize;
                let k = spans.partition_point(|s| s.0 <= rel);
                let in_event = k > 0 && spans[k - 1].1 > rel;
                if cuts.len() < MAX_CUTS_LISTED {
                    cuts.push(if in_event {
                        let event_index = Some(index + (k - 1) as u64);
                        CutString { event_index, offset: Some(shifts.orig(base + spans[k - 1].0 as u64)), len: c.len }
                    } else {
                        CutString { event_index: None, offset: None, len: c.len }
                    });
                }
                cut_count += 1;
                cuts_done += 1;
            }
        }
        if !stop && pos < buf.len() {
            carry = buf[pos..].to_vec();
        }
        if let Some(f) = cap.as_ref() {
            if filtering && !f.in_string() && carry.len() <= filter_at / 2 {
                filtering = false;
            }
        }
        let orig = (!shifts.is_empty()).then(|| orig_spans(&shifts, base, &spans));
        if !spans.is_empty() && !sink(Batch { buf, spans, base, first_index: index, orig }) {
            return Ok(None);
        }
        index += n;
        if stop {
            for &len in &scanner.meta_cuts {
                if cuts.len() < MAX_CUTS_LISTED {
                    cuts.push(CutString { event_index: None, offset: None, len });
                }
                cut_count += 1;
            }
            return Ok(Some(ReadEnd {
                meta,
                json_bytes: total,
                consumed_to,
                complete: scanner.is_done(),
                events_seen: scanner.events_seen,
                reached_events,
                truncated_gzip: truncated,
                skipped_non_objects: scanner.skipped_non_objects,
                index,
                cuts,
                cut_count,
            }));
        }
        base += pos as u64;
    }
}

/// What the reader thread hands over.
enum Msg {
    Batch(Batch),
    End(ReadEnd),
    Fail(DecodeError),
}

/// Run the reader loop on its own thread, one chunk ahead of the parsers.
fn spawn_reader(mut src: Source, opts: &Options) -> (std::sync::mpsc::Receiver<Msg>, JoinHandle<()>) {
    let (tx, rx) = sync_channel::<Msg>(2);
    let lim = opts.limits();
    let handle = std::thread::spawn(move || {
        let end = read_events_limited(&mut src, &lim, |b| tx.send(Msg::Batch(b)).is_ok());
        let _ = match end {
            Ok(Some(e)) => tx.send(Msg::End(e)),
            Ok(None) => Ok(()),
            Err(e) => tx.send(Msg::Fail(e)),
        };
    });
    (rx, handle)
}

impl Options {
    /// What the reader loop is told.
    pub fn limits(&self) -> Limits {
        Limits {
            // the keys before traceEvents are small: a header read takes 64 KiB at a time (a
            // 1 MiB read per file was most of the rank discovery of many small files)
            chunk: if self.header_only { 64 << 10 } else { self.chunk_bytes },
            max_bytes: self.max_bytes,
            max_string: self.max_string_bytes,
            max_item: self.max_event_bytes,
            header_only: self.header_only,
        }
    }
}

/// Parse a batch's events into `cols` (in parallel), with their original spans.
fn parse_batch(b: &Batch, string_cap: usize, strings_total: usize, cols: &mut Columns) -> Result<(), DecodeError> {
    let spans = &b.spans;
    if spans.is_empty() {
        return Ok(());
    }
    let threads = rayon::current_num_threads().max(1);
    let per = (spans.len() / (threads * 4)).max(2048);
    let parts: Vec<Part> = spans.par_chunks(per).map(|c| parse_part_capped(&b.buf, c, b.base, string_cap)).collect();
    let n0 = cols.offset.len();
    for (pi, part) in parts.iter().enumerate() {
        if let Some((i, msg)) = &part.error {
            let k = pi * per + i;
            return Err(DecodeError::new(ErrorKind::Format, format!("invalid event: {msg}"))
                .at(Some(b.orig_span(k).0), Some(b.first_index + k as u64)));
        }
        cols.append(part);
    }
    if let Some(orig) = &b.orig {
        set_spans(cols, n0, orig);
    }
    if cols.strings.bytes() > strings_total {
        return Err(DecodeError::new(
            ErrorKind::TooLarge,
            format!("the distinct strings of the trace (names, categories, string args) exceed {} in all", size_text(strings_total as u64)),
        )
        .at(Some(b.orig_span(spans.len() - 1).0), Some(b.first_index + spans.len() as u64 - 1)));
    }
    Ok(())
}

/// The original (offset, length) of the events from `n0` on.
fn set_spans(cols: &mut Columns, n0: usize, orig: &[(u64, u64)]) {
    for (k, &(o, l)) in orig.iter().enumerate() {
        if let (Some(off), Some(len)) = (cols.offset.get_mut(n0 + k), cols.len.get_mut(n0 + k)) {
            *off = o;
            *len = u32::try_from(l).unwrap_or(u32::MAX);
        }
    }
}

/// Decode the trace file at `path`.
pub fn decode(path: &str, opts: &Options) -> Result<Decoded, DecodeError> {
    decode_source(open(path)?, opts)
}

/// Decode a trace from any source (`decode` opens a file). A panic of the reader thread or of a
/// parser thread is resumed on the calling thread.
pub fn decode_source(src: Source, opts: &Options) -> Result<Decoded, DecodeError> {
    let gzip = src.gzip;
    let file_bytes = src.file_bytes;
    if file_bytes == 0 {
        return Err(DecodeError::new(ErrorKind::Empty, "the file is empty"));
    }
    let (rx, reader) = spawn_reader(src, opts);
    let mut cols = Columns::new();
    let end = loop {
        match rx.recv() {
            Ok(Msg::Batch(b)) if opts.spans_only => {
                let n0 = cols.offset.len();
                cols.offset.extend(b.spans.iter().map(|&(a, _)| b.base + a as u64));
                cols.len.extend(b.spans.iter().map(|&(a, e)| u32::try_from(e - a).unwrap_or(u32::MAX)));
                cols.n += b.spans.len();
                if let Some(orig) = &b.orig {
                    set_spans(&mut cols, n0, orig);
                }
            }
            Ok(Msg::Batch(b)) => parse_batch(&b, opts.max_string_bytes, opts.max_strings_total.min(MAX_STRINGS_TOTAL), &mut cols)?,
            Ok(Msg::End(e)) => break e,
            Ok(Msg::Fail(e)) => return Err(e),
            Err(_) => {
                // the reader hung up without a word: it panicked; carry the panic over to this
                // thread (the Python binding turns it into an internal error)
                if let Err(panic) = reader.join() {
                    std::panic::resume_unwind(panic);
                }
                return Err(DecodeError::new(ErrorKind::Io, "the reader stopped unexpectedly"));
            }
        }
    };
    if let Some(m) = &end.truncated_gzip {
        if opts.strict {
            return Err(DecodeError::new(ErrorKind::Truncated, m.clone()));
        }
    }
    let complete = end.complete;
    if !opts.header_only && !complete && (opts.strict || !end.events_seen) {
        let what = if end.json_bytes == 0 { "no data".to_string() } else { format!("the document ends early at byte {}", end.json_bytes) };
        return Err(DecodeError::new(ErrorKind::Truncated, format!("truncated JSON: {what}")).at(Some(end.consumed_to), Some(end.index)));
    }
    let lost = if complete { 0 } else { end.json_bytes.saturating_sub(end.consumed_to) };
    let mut base_time_ns = None;
    for (k, v) in &end.meta {
        if k == "baseTimeNanoseconds" {
            base_time_ns = crate::numbers::int_text(v);
        }
    }
    if let Some(b) = base_time_ns {
        cols.shift_time(b);
    }
    // the strings cut by the reader (long items) and by the parsers (the others), by event
    let mut cuts = end.cuts;
    cuts.extend(cols.cuts.iter().map(|&(e, len)| CutString { event_index: Some(e), offset: cols.offset.get(e as usize).copied(), len }));
    cuts.sort_by_key(|c| (c.event_index.map_or(0, |e| e + 1), c.offset));
    cuts.truncate(MAX_CUTS_LISTED);
    let cut_count = end.cut_count + cols.cut_count as u64;
    Ok(Decoded {
        columns: cols,
        meta: end.meta,
        gzip,
        file_bytes,
        json_bytes: end.json_bytes,
        events_seen: end.events_seen,
        reached_events: end.reached_events,
        document_complete: complete,
        lost_bytes: lost,
        truncated_gzip: end.truncated_gzip.is_some(),
        skipped_non_objects: end.skipped_non_objects,
        base_time_ns,
        cuts,
        cut_count,
    })
}

/// An error reading events back: data that is not there or not readable any more means the
/// file is not the one that was loaded.
fn read_back_error(e: io::Error, offset: u64) -> DecodeError {
    match e.kind() {
        io::ErrorKind::UnexpectedEof | io::ErrorKind::InvalidData | io::ErrorKind::InvalidInput => {
            DecodeError::new(ErrorKind::Changed, format!("file changed since it was loaded ({e})")).at(Some(offset), None)
        }
        _ => DecodeError::new(ErrorKind::Io, format!("read failed: {e}")),
    }
}

/// Raw text of the events at the given stream offsets (sorted or not).
pub fn extract(path: &str, offsets: &[u64], lengths: &[u32]) -> Result<Vec<Vec<u8>>, DecodeError> {
    extract_capped(path, offsets, lengths, 0)
}

/// `extract`, refusing events longer than `max_len` bytes (0 = no cap; a length of `u32::MAX`
/// stands for an event of 4 GiB or more, always refused) before reading anything.
pub fn extract_capped(path: &str, offsets: &[u64], lengths: &[u32], max_len: u64) -> Result<Vec<Vec<u8>>, DecodeError> {
    for (&o, &l) in offsets.iter().zip(lengths) {
        if l == u32::MAX || (max_len > 0 && l as u64 > max_len) {
            let n = if l == u32::MAX { "4 GiB or more".to_string() } else { size_text(l as u64) };
            let cap = if max_len > 0 { size_text(max_len) } else { "4 GiB".to_string() };
            return Err(DecodeError::new(ErrorKind::TooLarge, format!("the event is {n} long, more than the {cap} an event is read back at most")).at(Some(o), None));
        }
    }
    let mut order: Vec<usize> = (0..offsets.len()).collect();
    order.sort_by_key(|&i| offsets[i]);
    let mut out: Vec<Vec<u8>> = vec![Vec::new(); offsets.len()];
    let mut src = open(path)?;
    let mut pos: u64 = 0;
    let mut scratch = vec![0u8; 1 << 20];
    for &i in &order {
        let (o, l) = (offsets[i], lengths[i] as usize);
        // skip forward to o
        while pos < o {
            let want = ((o - pos) as usize).min(scratch.len());
            let n = src.reader.read(&mut scratch[..want]).map_err(|e| read_back_error(e, o))?;
            if n == 0 {
                return Err(DecodeError::new(ErrorKind::Changed, "file changed since it was loaded (it ends before the event)").at(Some(o), None));
            }
            pos += n as u64;
        }
        if pos > o {
            // overlapping request (same event twice): copy from an earlier result
            let prev = order.iter().find(|&&j| offsets[j] == o && !out[j].is_empty()).copied();
            if let Some(j) = prev {
                out[i] = out[j].clone();
                continue;
            }
            return Err(DecodeError::new(ErrorKind::Request, "overlapping event spans").at(Some(o), None));
        }
        let mut v = vec![0u8; l];
        src.reader.read_exact(&mut v).map_err(|e| read_back_error(e, o))?;
        pos += l as u64;
        out[i] = v;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn source(doc: &[u8]) -> Source {
        Source::new(std::io::Cursor::new(doc.to_vec()), doc.len() as u64).unwrap()
    }

    /// Every event span the reader loop hands over (as stream ranges), and its end.
    fn read_all(doc: &[u8], chunk: usize) -> (Vec<(u64, u64)>, Result<ReadEnd, DecodeError>) {
        let mut spans = Vec::new();
        let end = read_events(&mut source(doc), chunk, 0, false, |b| {
            spans.extend(b.spans.iter().map(|&(a, e)| (b.base + a as u64, b.base + e as u64)));
            true
        });
        (spans, end.map(|e| e.expect("the sink never stops")))
    }

    #[test]
    fn reader_loop_finds_the_same_events_in_any_chunking() {
        let doc = br#"{"schemaVersion": 1, "traceEvents": [{"ph":"X","name":"a{"}, 3, {"ph":"i"}], "baseTimeNanoseconds": 5}"#;
        let (whole, end) = read_all(doc, 1 << 20);
        let end = end.unwrap();
        assert_eq!(whole.len(), 2);
        assert!(end.complete && end.events_seen);
        assert_eq!(end.skipped_non_objects, 1);
        assert_eq!(end.meta.len(), 2);
        for chunk in [1, 2, 5, 17] {
            let (spans, end) = read_all(doc, chunk);
            assert_eq!(spans, whole, "chunk {chunk}");
            assert_eq!(end.unwrap().index, 2);
        }
        // a gzip stream reads the same
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(doc).unwrap();
        let mut src = source(&gz.finish().unwrap());
        assert!(src.gzip);
        let mut n = 0;
        read_events(&mut src, 7, 0, false, |b| {
            n += b.spans.len();
            true
        })
        .unwrap();
        assert_eq!(n, 2);
    }

    #[test]
    fn reader_errors_have_their_kinds() {
        let (_, end) = read_all(b"  nope", 4);
        let e = end.err().unwrap();
        assert_eq!((e.kind, e.offset), (ErrorKind::Format, Some(2)));
        let e = read_events(&mut source(&[b' '; 100]), 10, 50, false, |_| true).err().unwrap();
        assert_eq!(e.kind, ErrorKind::TooLarge);
        // a sink that stops ends the loop
        let doc = br#"[{"a":1},{"b":2}]"#;
        assert!(read_events(&mut source(doc), 9, 0, false, |_| false).unwrap().is_none());
    }

    #[test]
    fn decode_and_extract_errors_have_their_kinds() {
        let dir = std::env::temp_dir().join(format!("ranksight-core-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = |name: &str| dir.join(name).to_str().unwrap().to_string();
        let kind = |r: Result<Decoded, DecodeError>| r.err().map(|e| e.kind);
        let opts = Options::default();
        assert_eq!(kind(decode(&path("missing.json"), &opts)), Some(ErrorKind::Io));
        assert_eq!(kind(decode(dir.to_str().unwrap(), &opts)), Some(ErrorKind::Io));
        std::fs::write(path("empty.json"), b"").unwrap();
        assert_eq!(kind(decode(&path("empty.json"), &opts)), Some(ErrorKind::Empty));
        std::fs::write(path("cut.json"), br#"{"traceEvents": [{"ph":"X"}"#).unwrap();
        assert_eq!(kind(decode(&path("cut.json"), &Options { strict: true, ..Options::default() })), Some(ErrorKind::Truncated));
        std::fs::write(path("bad.json"), br#"{"traceEvents": [{"ph":"X",,}]}"#).unwrap();
        let e = decode(&path("bad.json"), &opts).err().unwrap();
        assert_eq!((e.kind, e.event_index), (ErrorKind::Format, Some(0)));
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&[b' '; 4096]).unwrap();
        let mut bytes = gz.finish().unwrap();
        let n = bytes.len();
        bytes[n - 8] ^= 0xff; // the CRC
        std::fs::write(path("bad.json.gz"), &bytes).unwrap();
        assert_eq!(kind(decode(&path("bad.json.gz"), &opts)), Some(ErrorKind::Gzip));

        let doc = br#"{"traceEvents": [{"ph":"X","name":"a"}, {"ph":"X","name":"b"}]}"#;
        std::fs::write(path("t.json"), doc).unwrap();
        let d = decode(&path("t.json"), &opts).unwrap();
        let (off, len) = (d.columns.offset.clone(), d.columns.len.clone());
        let texts = extract(&path("t.json"), &off, &len).unwrap();
        assert_eq!(texts[1], br#"{"ph":"X","name":"b"}"#);
        let e = extract(&path("t.json"), &[off[0], off[0] + 1], &[len[0], 1]).err().unwrap();
        assert_eq!(e.kind, ErrorKind::Request);
        std::fs::write(path("t.json"), &doc[..40]).unwrap();
        let e = extract(&path("t.json"), &off, &len).err().unwrap();
        assert_eq!((e.kind, e.offset), (ErrorKind::Changed, Some(off[1])));
        std::fs::remove_file(path("t.json")).unwrap();
        assert_eq!(extract(&path("t.json"), &off, &len).err().map(|e| e.kind), Some(ErrorKind::Io));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Decode `doc` (gzipped when `gz`) with `opts` from a temporary file.
    fn decode_doc(doc: &[u8], gz: bool, opts: &Options, name: &str) -> Result<Decoded, DecodeError> {
        let dir = std::env::temp_dir().join(format!("ranksight-core-caps-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.json");
        let bytes = if gz {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(doc).unwrap();
            e.finish().unwrap()
        } else {
            doc.to_vec()
        };
        std::fs::write(&path, bytes).unwrap();
        let r = decode(path.to_str().unwrap(), opts);
        let _ = std::fs::remove_dir_all(&dir);
        r
    }

    fn names(d: &Decoded) -> Vec<String> {
        d.columns.head.name.iter().map(|&c| d.columns.strings.strings()[c as usize].to_string()).collect()
    }

    #[test]
    fn long_strings_are_cut_alike_in_any_chunking_and_spans_stay_original() {
        let long = "n".repeat(20_000);
        let doc = format!(
            r#"{{"k{long}": 1, "traceEvents": [{{"ph":"X","name":"a","ts":1,"dur":1}}, {{"ph":"X","name":"{long}","ts":2,"dur":1,"args":{{"x":"{long}"}}}}, {{"ph":"X","name":"c","ts":3,"dur":1}}], "v": "{long}"}}"#
        );
        let plain = decode_doc(doc.as_bytes(), false, &Options { max_string_bytes: 0, ..Options::default() }, "plain").unwrap();
        assert_eq!(plain.cut_count, 0);
        let want_name = format!("{}{}", &long[..1000 - 64], crate::limits::marker(20_000));
        for (chunk, gz) in [(4096, false), (1 << 13, true), (1 << 20, false), (5000, true)] {
            let opts = Options { chunk_bytes: chunk, max_string_bytes: 1000, max_event_bytes: 4000, ..Options::default() };
            let d = decode_doc(doc.as_bytes(), gz, &opts, "cut").unwrap();
            assert_eq!(names(&d), ["a", want_name.as_str(), "c"], "chunk {chunk}");
            // spans are the file's, as without the cap
            assert_eq!((&d.columns.offset, &d.columns.len), (&plain.columns.offset, &plain.columns.len), "chunk {chunk}");
            assert_eq!(d.json_bytes, doc.len() as u64);
            // two strings in event 1, the top-level key and value
            assert_eq!(d.cut_count, 4, "chunk {chunk}");
            let mut by_event: Vec<Option<u64>> = d.cuts.iter().map(|c| c.event_index).collect();
            by_event.sort();
            assert_eq!(by_event, [None, None, Some(1), Some(1)]);
            assert!(d.cuts.iter().all(|c| c.len == 20_000 || c.len == 20_001));
            assert_eq!(d.meta.len(), 2);
            assert!(d.meta[0].0.ends_with(&crate::limits::marker(20_001)));
        }
    }

    #[test]
    fn an_item_over_the_event_cap_is_an_error_and_the_size_cap_reads_no_further() {
        let doc = format!(r#"{{"traceEvents": [{{"ph":"X","ts":1,"dur":1}}, {{"ph":"X","ts":2,"dur":1,"args":[{}]}}]}}"#, "1,".repeat(100_000) + "1");
        // carried across chunks, or complete in one
        for chunk in [4096, 1 << 20] {
            let opts = Options { chunk_bytes: chunk, max_string_bytes: 1000, max_event_bytes: 50_000, ..Options::default() };
            let e = decode_doc(doc.as_bytes(), true, &opts, "item").err().unwrap();
            assert_eq!((e.kind, e.event_index, e.offset), (ErrorKind::TooLarge, Some(1), Some(44)), "chunk {chunk}");
            assert!(e.message.starts_with("the event is longer than the per-event cap of 48.8 KiB"), "{}", e.message);
        }
        // an event that is long only until its strings are cut is no error
        let doc = format!(r#"{{"traceEvents": [{{"ph":"X","ts":1,"dur":1,"name":"{}"}}]}}"#, "y".repeat(200_000));
        for chunk in [4096, 1 << 20] {
            let opts = Options { chunk_bytes: chunk, max_string_bytes: 1000, max_event_bytes: 50_000, ..Options::default() };
            assert_eq!(decode_doc(doc.as_bytes(), false, &opts, "item-cut").unwrap().cut_count, 1, "chunk {chunk}");
        }
        // the distinct strings in all
        let doc = format!(r#"{{"traceEvents": [{}]}}"#, (0..50).map(|i| format!(r#"{{"ph":"i","ts":1,"name":"{i}{}"}}"#, "z".repeat(900))).collect::<Vec<_>>().join(","));
        let e = decode_doc(doc.as_bytes(), false, &Options { max_strings_total: 20_000, ..Options::default() }, "total").err().unwrap();
        assert_eq!((e.kind, e.message.as_str()), (ErrorKind::TooLarge, "the distinct strings of the trace (names, categories, string args) exceed 19.5 KiB in all"));
        // the size cap counts the skipped bytes of a cut string, and stops one byte past it
        let doc = format!(r#"{{"traceEvents": [{{"ph":"X","ts":1,"dur":1,"name":"{}"}}]}}"#, "z".repeat(300_000));
        for max_bytes in [100_000, 250_000] {
            let mut src = Source::new(std::io::Cursor::new(doc.as_bytes().to_vec()), doc.len() as u64).unwrap();
            let lim = Limits { chunk: 1 << 12, max_bytes, max_string: 1000, max_item: 0, header_only: false };
            let e = read_events_limited(&mut src, &lim, |_| true).err().unwrap();
            assert_eq!(e.kind, ErrorKind::TooLarge);
            assert_eq!(src.consumed.load(Ordering::Relaxed), max_bytes + 1);
        }
    }

    #[test]
    fn events_without_a_usable_time_are_dropped_and_counted() {
        let doc = br#"{"traceEvents": [{"ph":"M","name":"process_name"}, {"ph":"X","name":"a","ts":1,"dur":2},
            {"ph":"X","name":"b","ts":"soon","dur":2}, {"ph":"X","name":"c","ts":3}, {"ph":"i","name":"d","ts":4,"dur":"x"},
            {"ph":"i","name":"e"}, {"ph":"X","name":"f","ts":1e400,"dur":1}]}"#;
        let d = decode_doc(doc, false, &Options::default(), "drop").unwrap();
        let c = &d.columns;
        assert_eq!(names(&d), ["process_name", "a", "d"]);
        assert_eq!(c.head.rows, [0, 1, 4]);
        assert_eq!((c.n, c.dropped, c.dropped_ts, c.dropped_dur, c.bad_numbers), (7, 4, 3, 1, 1));
        let drops: Vec<(u64, &str, &str)> = c.drops.iter().map(|x| (x.event, x.field, x.text.as_str())).collect();
        assert_eq!(drops, [(2, "ts", "\"soon\""), (3, "dur", "missing"), (5, "ts", "missing"), (6, "ts", "1e400")]);
        // every event keeps its span
        assert_eq!(c.offset.len(), 7);
    }

    #[test]
    fn a_reader_panic_reaches_the_caller() {
        struct Panics;
        impl Read for Panics {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                if buf.len() == 2 {
                    buf.copy_from_slice(b"[{");
                    return Ok(2); // the magic bytes
                }
                panic!("reader bug");
            }
        }
        let src = Source::new(Panics, 10).unwrap();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| decode_source(src, &Options::default())));
        let payload = r.err().expect("the panic is resumed, not reported as an I/O error");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"reader bug"));
    }
}
