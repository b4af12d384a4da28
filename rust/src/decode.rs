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
}

impl Default for Options {
    fn default() -> Self {
        Options { chunk_bytes: 32 << 20, max_bytes: 0, strict: false, header_only: false }
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

enum Msg {
    Data(Vec<u8>),
    Eof,
    Truncated(String),
    Fail(DecodeError),
}

fn spawn_reader(mut src: Source, chunk: usize, max_bytes: u64) -> std::sync::mpsc::Receiver<Msg> {
    let (tx, rx) = sync_channel::<Msg>(2);
    std::thread::spawn(move || {
        let mut total: u64 = 0;
        loop {
            let mut v = vec![0u8; chunk];
            let mut filled = 0;
            let mut end = None;
            while filled < chunk {
                match src.reader.read(&mut v[filled..]) {
                    Ok(0) => {
                        end = Some(Msg::Eof);
                        break;
                    }
                    Ok(n) => filled += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        let at = src.consumed.load(Ordering::Relaxed);
                        end = Some(if src.gzip && e.kind() == io::ErrorKind::UnexpectedEof {
                            Msg::Truncated(format!("gzip stream ends early (compressed byte {at})"))
                        } else if src.gzip {
                            Msg::Fail(DecodeError {
                                kind: "gzip",
                                message: format!("corrupt gzip data: {e}"),
                                offset: Some(at),
                                event_index: None,
                            })
                        } else {
                            Msg::Fail(DecodeError::new("io", format!("read failed: {e}")))
                        });
                        break;
                    }
                }
            }
            v.truncate(filled);
            total += filled as u64;
            if max_bytes > 0 && total > max_bytes {
                let _ = tx.send(Msg::Fail(DecodeError::new(
                    "too_large",
                    format!("decompressed size exceeds the cap of {max_bytes} bytes"),
                )));
                return;
            }
            if filled > 0 && tx.send(Msg::Data(v)).is_err() {
                return;
            }
            if let Some(m) = end {
                let _ = tx.send(m);
                return;
            }
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
    let rx = spawn_reader(src, if opts.header_only { 1 << 20 } else { opts.chunk_bytes }, opts.max_bytes);
    let mut scanner = Scanner::new();
    scanner.stop_at_events = opts.header_only;
    let mut cols = Columns::new();
    let mut meta: Vec<(String, Vec<u8>)> = Vec::new();
    let mut buf: Vec<u8> = Vec::new();
    let mut base: u64 = 0;
    let mut index: u64 = 0;
    let mut truncated_gzip = false;
    let mut reached_events = false;
    let mut spans: Vec<(usize, usize)> = Vec::new();
    let mut consumed_to: u64;
    loop {
        let eof = match rx.recv() {
            Ok(Msg::Data(d)) => {
                if buf.is_empty() {
                    buf = d;
                } else {
                    buf.extend_from_slice(&d);
                }
                false
            }
            Ok(Msg::Eof) => true,
            Ok(Msg::Truncated(m)) => {
                if opts.strict {
                    return Err(DecodeError::new("truncated", m));
                }
                truncated_gzip = true;
                true
            }
            Ok(Msg::Fail(e)) => return Err(e),
            Err(_) => true,
        };
        spans.clear();
        let progress = scanner.scan(&buf, 0, eof, &mut spans, &mut meta).map_err(|e| DecodeError {
            kind: "format",
            message: e.message,
            offset: Some(base + e.offset as u64),
            event_index: Some(index),
        })?;
        parse_spans(&buf, &spans, base, index, &mut cols)?;
        index += spans.len() as u64;
        let pos = match progress {
            Progress::NeedMore(p) | Progress::Finished(p) => p,
            Progress::ReachedEvents(p) => {
                reached_events = true;
                consumed_to = base + p as u64;
                break;
            }
        };
        consumed_to = base + pos as u64;
        if eof {
            break;
        }
        if pos > 0 {
            buf.drain(..pos);
            base += pos as u64;
        }
    }
    drop(rx);
    let json_bytes = base + buf.len() as u64;
    let complete = scanner.is_done();
    if !opts.header_only && !complete {
        if opts.strict || !scanner.events_seen {
            let what = if json_bytes == 0 { "no data".to_string() } else { format!("the document ends early at byte {json_bytes}") };
            return Err(DecodeError {
                kind: "truncated",
                message: format!("truncated JSON: {what}"),
                offset: Some(consumed_to),
                event_index: Some(index),
            });
        }
    }
    let lost = if complete { 0 } else { json_bytes.saturating_sub(consumed_to) };
    let mut base_time_ns = None;
    for (k, v) in &meta {
        if k == "baseTimeNanoseconds" {
            base_time_ns = crate::numbers::int_text(v);
        }
    }
    if let Some(b) = base_time_ns {
        cols.shift_time(b);
    }
    Ok(Decoded {
        columns: cols,
        meta,
        gzip,
        file_bytes,
        json_bytes,
        events_seen: scanner.events_seen,
        reached_events,
        document_complete: complete,
        lost_bytes: lost,
        truncated_gzip,
        skipped_non_objects: scanner.skipped_non_objects,
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
