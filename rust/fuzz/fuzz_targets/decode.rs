//! libFuzzer target: the decoder's pure-Rust core on arbitrary bytes, in memory.
//!
//! The first input byte picks a chunk size; the rest is the document. The target runs the
//! decoder's own reader loop (`decode::read_events`, the loop the reader thread runs: chunked
//! reads, gzip detection, the scanner, the carried tail) over an in-memory source, parses each
//! batch of event spans with `event::parse_part`, and checks:
//!
//! - no panic, no overflow (build with `-a` for overflow checks), no unbounded allocation
//!   (libFuzzer's `-rss_limit_mb`);
//! - every event span lies inside its buffer and is a `{...}` object;
//! - `parse_part` yields one row per span (or counts it dropped: no usable time) unless it
//!   reports an error, and its columns agree;
//! - chunked reading finds exactly the spans (as stream offsets), metadata, completeness and
//!   errors that reading the whole document at once finds;
//! - the number parsers accept or reject the raw bytes without panicking.
#![no_main]

use _core::decode::{read_events, ErrorKind, Source};
use _core::event::parse_part;
use _core::numbers::{float_text, int_text, us_text_to_ns};
use libfuzzer_sys::fuzz_target;
use std::io::Cursor;

#[derive(Debug, PartialEq)]
struct Outcome {
    spans: Vec<(u64, u64)>,
    meta: Vec<(String, Vec<u8>)>,
    /// the error's kind, and its stream offset for format errors (a gzip error's offset is in
    /// the compressed stream, which the decompressor reads ahead of the chunks)
    error: Option<(ErrorKind, Option<u64>)>,
    done: bool,
    rows: usize,
}

/// Read `doc` in chunks of `chunk` bytes (0 = all at once) with the decoder's reader loop, and
/// parse each batch of spans when `parse`.
fn run(doc: &[u8], chunk: usize, parse: bool) -> Outcome {
    let chunk = if chunk == 0 { doc.len().max(1) } else { chunk };
    let mut out = Outcome { spans: Vec::new(), meta: Vec::new(), error: None, done: false, rows: 0 };
    let mut src = Source::new(Cursor::new(doc.to_vec()), doc.len() as u64).expect("an in-memory read does not fail");
    let end = read_events(&mut src, chunk, 0, false, |batch| {
        let buf = &batch.buf;
        for &(a, b) in &batch.spans {
            assert!(a < b && b <= buf.len(), "span {a}..{b} outside buffer of {}", buf.len());
            assert_eq!(buf[a], b'{');
            assert_eq!(buf[b - 1], b'}');
            out.spans.push((batch.base + a as u64, batch.base + b as u64));
        }
        if parse {
            let part = parse_part(buf, &batch.spans, batch.base);
            match &part.error {
                None => assert_eq!(part.n, batch.spans.len()),
                Some((i, _)) => {
                    assert!(*i < batch.spans.len());
                    assert_eq!(part.n, *i);
                }
            }
            // flow events are rows of the flow table only; an event without a usable time is
            // dropped (counted, no row); every event has a span
            let (h, f) = (&part.head, &part.flows.head);
            let rows = h.len();
            assert_eq!(part.dropped, part.dropped_ts + part.dropped_dur);
            assert!(part.drops.len() <= part.dropped);
            assert!(rows + part.dropped <= part.n && rows + f.len() + part.dropped >= part.n);
            assert_eq!(h.ph.len(), rows);
            assert_eq!(h.name.len(), rows);
            assert_eq!(h.pid.len(), rows);
            assert_eq!(h.ts.len(), rows);
            assert_eq!(f.ts.len(), f.len());
            assert_eq!(part.offset.len(), part.n);
            out.rows += part.n;
        }
        true
    });
    match end {
        Ok(Some(e)) => {
            assert!(e.consumed_to <= e.json_bytes, "consumed {} of {} bytes", e.consumed_to, e.json_bytes);
            out.done = e.complete;
            out.meta = e.meta;
        }
        Ok(None) => unreachable!("the sink never stops the reader"),
        Err(e) => out.error = Some((e.kind, if e.kind == ErrorKind::Format { e.offset } else { None })),
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, doc)) = data.split_first() else { return };
    // number parsers on the raw bytes (they see arbitrary arg text in real traces)
    let _ = us_text_to_ns(doc);
    let _ = int_text(doc);
    let _ = float_text(doc);
    let chunk = 64 + (mode as usize) * 16;
    let whole = run(doc, 0, true);
    let chunked = run(doc, chunk, false);
    // A BOM is only recognised at stream byte 0 when the first buffer holds it; whitespace
    // before a BOM is a (harmless) difference between the two feeds, so skip the comparison.
    let has_bom = doc.windows(3).any(|w| w == [0xEF, 0xBB, 0xBF]);
    if !has_bom {
        assert_eq!(whole.error, chunked.error, "chunked read failed otherwise (chunk {chunk})");
        // events found before an error are handed over in chunks but not in one piece
        if whole.error.is_none() {
            assert_eq!(whole.spans, chunked.spans, "chunked read found other events (chunk {chunk})");
            assert_eq!(whole.meta, chunked.meta, "chunked read found other metadata (chunk {chunk})");
            assert_eq!(whole.done, chunked.done);
        }
    }
});
