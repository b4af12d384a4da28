//! The decode pipeline: a reader thread (file or gzip), the structural scanner, and parallel
//! event parsing into columns.

use crate::event::{parse_part, Columns, Part};
use crate::scan::{Progress, Scanner};
use flate2::read::MultiGzDecoder;
use rayon::prelude::*;
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::sync_channel;
use std::sync::Arc;

#[derive(Debug, Clone)]
pub struct DecodeError {
    pub kind: &'static str,
    pub message: String,
    pub offset: Option<u64>,
    pub event_index: Option<u64>,
}

impl DecodeError {
    fn new(kind: &'static str, message: String) -> Self {
        DecodeError { kind, message, offset: None, event_index: None }
    }
}

pub struct Options {
    pub chunk_bytes: usize,
    /// refuse inputs whose decompressed size exceeds this (0 = no cap)
    pub max_bytes: u64,
    pub strict: bool,
    /// stop at the start of traceEvents (header read)
    pub header_only: bool,
    /// only record each event's byte span (offset, length), without parsing it
    pub spans_only: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options { chunk_bytes: 32 << 20, max_bytes: 0, strict: false, header_only: false, spans_only: false }
    }
}

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
}

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

pub struct Source {
    pub reader: Box<dyn Read + Send>,
    pub gzip: bool,
    pub file_bytes: u64,
    pub consumed: Arc<AtomicU64>,
}

pub fn open(path: &str) -> Result<Source, DecodeError> {
    let mut f = File::open(path).map_err(|e| DecodeError::new("io", format!("cannot open: {e}")))?;
    let md = f.metadata().map_err(|e| DecodeError::new("io", format!("cannot stat: {e}")))?;
    if md.is_dir() {
        return Err(DecodeError::new("io", "is a directory".into()));
    }
    let mut magic = [0u8; 2];
    let mut got = 0;
    while got < 2 {
        let n = f.read(&mut magic[got..]).map_err(|e| DecodeError::new("io", format!("cannot read: {e}")))?;
        if n == 0 {
            break;
        }
        got += n;
    }
    let consumed = Arc::new(AtomicU64::new(got as u64));
    let head = std::io::Cursor::new(magic[..got].to_vec());
    let counted = Counting { inner: f, count: consumed.clone() };
    let chained = head.chain(counted);
    let gzip = got == 2 && magic == [0x1f, 0x8b];
    let reader: Box<dyn Read + Send> = if gzip {
        Box::new(MultiGzDecoder::new(BufReader::with_capacity(1 << 20, chained)))
    } else {
        Box::new(chained)
    };
    Ok(Source { reader, gzip, file_bytes: md.len(), consumed })
}

/// What the reader thread hands over: a buffer, the spans of the complete events in it (relative
/// to the buffer), and the stream offset of its first byte.
enum Msg {
    Batch { buf: Vec<u8>, spans: Vec<(usize, usize)>, base: u64, first_index: u64 },
    End(ReaderEnd),
    Fail(DecodeError),
}

struct ReaderEnd {
    meta: Vec<(String, Vec<u8>)>,
    json_bytes: u64,
    consumed_to: u64,
    complete: bool,
    events_seen: bool,
    reached_events: bool,
    truncated_gzip: Option<String>,
    skipped_non_objects: usize,
    index: u64,
}

/// Read (and gunzip) the input in chunks and find event boundaries, one chunk ahead of the
/// parsers.
fn spawn_reader(mut src: Source, opts: &Options) -> std::sync::mpsc::Receiver<Msg> {
    let (tx, rx) = sync_channel::<Msg>(2);
    let chunk = if opts.header_only { 1 << 20 } else { opts.chunk_bytes };
    let max_bytes = opts.max_bytes;
    let header_only = opts.header_only;
    std::thread::spawn(move || {
        let mut scanner = Scanner::new();
        scanner.stop_at_events = header_only;
        let mut meta: Vec<(String, Vec<u8>)> = Vec::new();
        let mut carry: Vec<u8> = Vec::new();
        let mut base: u64 = 0;
        let mut total: u64 = 0;
        let mut index: u64 = 0;
        let mut truncated = None;
        let mut reached_events = false;
        let mut consumed_to: u64;
        loop {
            let mut buf = std::mem::take(&mut carry);
            let start_len = buf.len();
            // an item longer than a chunk (one huge event or metadata value) is re-scanned from its
            // start each round: read at least as much again as is carried, so the rescans add up
            // to O(n) rather than O(n²/chunk)
            buf.resize(start_len + chunk.max(start_len), 0);
            let mut filled = start_len;
            let mut eof = false;
            while filled < buf.len() {
                match src.reader.read(&mut buf[filled..]) {
                    Ok(0) => {
                        eof = true;
                        break;
                    }
                    Ok(n) => filled += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        let at = src.consumed.load(Ordering::Relaxed);
                        if src.gzip && e.kind() == io::ErrorKind::UnexpectedEof {
                            truncated = Some(format!("gzip stream ends early (compressed byte {at})"));
                            eof = true;
                            break;
                        }
                        let err = if src.gzip {
                            DecodeError { kind: "gzip", message: format!("corrupt gzip data: {e}"), offset: Some(at), event_index: None }
                        } else {
                            DecodeError::new("io", format!("read failed: {e}"))
                        };
                        let _ = tx.send(Msg::Fail(err));
                        return;
                    }
                }
            }
            total += (filled - start_len) as u64;
            buf.truncate(filled);
            if max_bytes > 0 && total > max_bytes {
                let _ = tx.send(Msg::Fail(DecodeError::new(
                    "too_large",
                    format!("decompressed size exceeds the cap of {max_bytes} bytes"),
                )));
                return;
            }
            let mut spans = Vec::new();
            let progress = match scanner.scan(&buf, 0, eof, &mut spans, &mut meta) {
                Ok(p) => p,
                Err(e) => {
                    let _ = tx.send(Msg::Fail(DecodeError {
                        kind: "format",
                        message: e.message,
                        offset: Some(base + e.offset as u64),
                        event_index: Some(index),
                    }));
                    return;
                }
            };
            let (pos, stop) = match progress {
                Progress::NeedMore(p) | Progress::Finished(p) => (p, eof),
                Progress::ReachedEvents(p) => {
                    reached_events = true;
                    (p, true)
                }
            };
            consumed_to = base + pos as u64;
            let n = spans.len() as u64;
            if !stop && pos < buf.len() {
                carry = buf[pos..].to_vec();
            }
            let buf_len = buf.len() as u64;
            if !spans.is_empty() && tx.send(Msg::Batch { buf, spans, base, first_index: index }).is_err() {
                return;
            }
            index += n;
            if stop {
                let json_bytes = base + buf_len;
                let _ = tx.send(Msg::End(ReaderEnd {
                    meta,
                    json_bytes,
                    consumed_to,
                    complete: scanner.is_done(),
                    events_seen: scanner.events_seen,
                    reached_events,
                    truncated_gzip: truncated,
                    skipped_non_objects: scanner.skipped_non_objects,
                    index,
                }));
                return;
            }
            base += pos as u64;
        }
    });
    rx
}

fn parse_spans(buf: &[u8], spans: &[(usize, usize)], base: u64, first_index: u64, cols: &mut Columns) -> Result<(), DecodeError> {
    if spans.is_empty() {
        return Ok(());
    }
    let threads = rayon::current_num_threads().max(1);
    let per = (spans.len() / (threads * 4)).max(2048);
    let parts: Vec<Part> = spans.par_chunks(per).map(|c| parse_part(buf, c, base)).collect();
    for (pi, part) in parts.iter().enumerate() {
        if let Some((i, msg)) = &part.error {
            let k = pi * per + i;
            let (a, _) = spans[k];
            return Err(DecodeError {
                kind: "format",
                message: format!("invalid event: {msg}"),
                offset: Some(base + a as u64),
                event_index: Some(first_index + k as u64),
            });
        }
        cols.append(part);
    }
    Ok(())
}

pub fn decode(path: &str, opts: &Options) -> Result<Decoded, DecodeError> {
    let src = open(path)?;
    let gzip = src.gzip;
    let file_bytes = src.file_bytes;
    if file_bytes == 0 {
        return Err(DecodeError::new("empty", "the file is empty".into()));
    }
    let rx = spawn_reader(src, opts);
    let mut cols = Columns::new();
    let end = loop {
        match rx.recv() {
            Ok(Msg::Batch { spans, base, .. }) if opts.spans_only => {
                cols.offset.extend(spans.iter().map(|&(a, _)| base + a as u64));
                cols.len.extend(spans.iter().map(|&(a, b)| (b - a) as u32));
                cols.n += spans.len();
            }
            Ok(Msg::Batch { buf, spans, base, first_index }) => parse_spans(&buf, &spans, base, first_index, &mut cols)?,
            Ok(Msg::End(e)) => break e,
            Ok(Msg::Fail(e)) => return Err(e),
            Err(_) => return Err(DecodeError::new("io", "the reader stopped unexpectedly".into())),
        }
    };
    if let Some(m) = &end.truncated_gzip {
        if opts.strict {
            return Err(DecodeError::new("truncated", m.clone()));
        }
    }
    let complete = end.complete;
    if !opts.header_only && !complete && (opts.strict || !end.events_seen) {
        let what = if end.json_bytes == 0 { "no data".to_string() } else { format!("the document ends early at byte {}", end.json_bytes) };
        return Err(DecodeError {
            kind: "truncated",
            message: format!("truncated JSON: {what}"),
            offset: Some(end.consumed_to),
            event_index: Some(end.index),
        });
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
    })
}

/// Raw text of the events at the given stream offsets (sorted or not).
pub fn extract(path: &str, offsets: &[u64], lengths: &[u32]) -> Result<Vec<Vec<u8>>, DecodeError> {
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
            let n = src.reader.read(&mut scratch[..want]).map_err(|e| DecodeError::new("io", e.to_string()))?;
            if n == 0 {
                return Err(DecodeError::new("io", "file changed since it was loaded".into()));
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
            return Err(DecodeError::new("io", "overlapping event spans".into()));
        }
        let mut v = vec![0u8; l];
        src.reader.read_exact(&mut v).map_err(|e| DecodeError::new("io", e.to_string()))?;
        pos += l as u64;
        out[i] = v;
    }
    Ok(out)
}
