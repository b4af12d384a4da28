//! The decode pipeline: a reader thread (file or gzip), the structural scanner, and parallel
//! event parsing into columns.

pub use crate::error::{DecodeError, ErrorKind};
use crate::event::{parse_part, Columns, Part};
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
}

/// The reader loop: read (and gunzip) the input in chunks of `chunk` bytes, find the event
/// boundaries with the scanner, and hand each buffer with the spans of its complete events to
/// `sink`, which returns false to stop (the result is then None). An item cut by the end of a
/// buffer is carried into the next one. `header_only` stops at the start of `traceEvents`;
/// `max_bytes` (0 = none) caps the decompressed size.
pub fn read_events(
    src: &mut Source,
    chunk: usize,
    max_bytes: u64,
    header_only: bool,
    mut sink: impl FnMut(Batch) -> bool,
) -> Result<Option<ReadEnd>, DecodeError> {
    let mut scanner = Scanner::new();
    scanner.stop_at_events = header_only;
    let mut meta: Vec<(String, Vec<u8>)> = Vec::new();
    let mut carry: Vec<u8> = Vec::new();
    let mut base: u64 = 0;
    let mut total: u64 = 0;
    let mut index: u64 = 0;
    let mut truncated = None;
    let mut reached_events = false;
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
                    return Err(if src.gzip {
                        DecodeError::new(ErrorKind::Gzip, format!("corrupt gzip data: {e}")).at(Some(at), None)
                    } else {
                        DecodeError::new(ErrorKind::Io, format!("read failed: {e}"))
                    });
                }
            }
        }
        total += (filled - start_len) as u64;
        buf.truncate(filled);
        if max_bytes > 0 && total > max_bytes {
            return Err(DecodeError::new(ErrorKind::TooLarge, format!("decompressed size exceeds the cap of {max_bytes} bytes")));
        }
        let mut spans = Vec::new();
        let progress = scanner
            .scan(&buf, 0, eof, &mut spans, &mut meta)
            .map_err(|e| DecodeError::new(ErrorKind::Format, e.message).at(Some(base + e.offset as u64), Some(index)))?;
        let (pos, stop) = match progress {
            Progress::NeedMore(p) | Progress::Finished(p) => (p, eof),
            Progress::ReachedEvents(p) => {
                reached_events = true;
                (p, true)
            }
        };
        let consumed_to = base + pos as u64;
        let n = spans.len() as u64;
        if !stop && pos < buf.len() {
            carry = buf[pos..].to_vec();
        }
        let buf_len = buf.len() as u64;
        if !spans.is_empty() && !sink(Batch { buf, spans, base, first_index: index }) {
            return Ok(None);
        }
        index += n;
        if stop {
            return Ok(Some(ReadEnd {
                meta,
                json_bytes: base + buf_len,
                consumed_to,
                complete: scanner.is_done(),
                events_seen: scanner.events_seen,
                reached_events,
                truncated_gzip: truncated,
                skipped_non_objects: scanner.skipped_non_objects,
                index,
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
    let chunk = if opts.header_only { 1 << 20 } else { opts.chunk_bytes };
    let max_bytes = opts.max_bytes;
    let header_only = opts.header_only;
    let handle = std::thread::spawn(move || {
        let end = read_events(&mut src, chunk, max_bytes, header_only, |b| tx.send(Msg::Batch(b)).is_ok());
        let _ = match end {
            Ok(Some(e)) => tx.send(Msg::End(e)),
            Ok(None) => Ok(()),
            Err(e) => tx.send(Msg::Fail(e)),
        };
    });
    (rx, handle)
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
            return Err(DecodeError::new(ErrorKind::Format, format!("invalid event: {msg}"))
                .at(Some(base + a as u64), Some(first_index + k as u64)));
        }
        cols.append(part);
    }
    Ok(())
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
            Ok(Msg::Batch(Batch { spans, base, .. })) if opts.spans_only => {
                cols.offset.extend(spans.iter().map(|&(a, _)| base + a as u64));
                cols.len.extend(spans.iter().map(|&(a, b)| (b - a) as u32));
                cols.n += spans.len();
            }
            Ok(Msg::Batch(Batch { buf, spans, base, first_index })) => parse_spans(&buf, &spans, base, first_index, &mut cols)?,
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
