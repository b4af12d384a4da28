//! libFuzzer target: the whole decode pipeline (`_core::decode::decode`: reader thread, gzip,
//! scanner, parallel parse, salvage) on a temporary file, then `_core::decode::extract`.
//!
//! Mode byte: bit 0 gzip-compresses the document, bits 1-2 cut the compressed stream short
//! (0, 1, 9 or 40 % of it removed), bit 3 asks for a strict decode, bit 4 a header-only read,
//! bit 5 spans only, bit 6 a 300-byte string cap, bit 7 a 2 KiB event cap (bits 6 and 7 together
//! also cap the distinct strings at 1 KiB in all, so that the fuzzer reaches that refusal).
//! Checks: no panic; decoded rows, their offsets and the spans re-read by `extract` agree;
//! the decompressed-size cap is honoured.
#![no_main]

use _core::decode::{decode, extract, Options, MAX_STRINGS_TOTAL};
use flate2::write::GzEncoder;
use flate2::Compression;
use libfuzzer_sys::fuzz_target;
use std::io::Write;

const CAP: u64 = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, doc)) = data.split_first() else { return };
    let mut bytes = doc.to_vec();
    if mode & 1 == 1 {
        let mut e = GzEncoder::new(Vec::new(), Compression::fast());
        e.write_all(doc).unwrap();
        bytes = e.finish().unwrap();
        let cut = [0usize, 1, 9, 40][((mode >> 1) & 3) as usize];
        let keep = bytes.len() - bytes.len() * cut / 100;
        bytes.truncate(keep);
    }
    let path = std::env::temp_dir().join(format!("ranksight-fuzz-{}.bin", std::process::id()));
    std::fs::write(&path, &bytes).unwrap();
    let p = path.to_str().unwrap();
    // small string and event caps, so that the fuzzer reaches the string filter and the item cap
    let opts = Options {
        chunk_bytes: 4096,
        max_bytes: CAP,
        max_string_bytes: if mode & 64 != 0 { 300 } else { 0 },
        max_event_bytes: if mode & 128 != 0 { 2048 } else { 0 },
        max_strings_total: if mode & 0xC0 == 0xC0 { 1024 } else { MAX_STRINGS_TOTAL },
        strict: mode & 8 != 0,
        header_only: mode & 16 != 0,
        spans_only: mode & 32 != 0,
    };
    if let Ok(d) = decode(p, &opts) {
        assert!(d.json_bytes <= CAP + 4096 + 1, "cap not honoured: {} bytes", d.json_bytes);
        let cols = &d.columns;
        assert_eq!(cols.offset.len(), cols.n);
        assert_eq!(cols.len.len(), cols.n);
        if cols.n > 0 && !opts.header_only {
            let texts = extract(p, &cols.offset, &cols.len).expect("extract after a successful decode");
            assert_eq!(texts.len(), cols.n);
            for t in &texts {
                assert_eq!(t.first(), Some(&b'{'));
                assert_eq!(t.last(), Some(&b'}'));
            }
        }
    }
    let _ = std::fs::remove_file(&path);
});
