//! Bounded memory on any input: the per-string cap, applied while the text streams in.
//!
//! The reader loop holds an item (one event, or one top-level key and value) whole before the
//! scanner can hand it over, so one 2 GiB string would be 2 GiB (and more, as the buffer grows)
//! in memory. [`StringCap`] is a streaming filter the reader switches on for an item that grows
//! past a threshold: every JSON string longer than the cap is cut to a prefix that ends on a
//! character (never inside an escape or a UTF-8 sequence) followed by a marker that says how
//! long it was, and the rest of the string is skipped as it is read, never kept. The output is
//! still valid JSON, so the scanner and the event parsers need no change.
//!
//! Cutting shifts every later position of the filtered text ("stream" positions, what the
//! scanner sees) against the original text (what the file holds, where events are read back
//! from). [`Shifts`] records the cumulative number of bytes removed at each cut, so that a
//! stream position maps back to its original position.

use memchr::{memchr, memchr2};

/// Room left for the marker after the kept prefix: a cut string is at most `cap` bytes.
const MARKER_ROOM: usize = 64;

/// The smallest per-string cap accepted (a smaller one is raised to this).
pub const MIN_STRING_CAP: usize = 256;

/// The text that ends a cut string (`len`: the original length of its contents, in bytes as
/// they are in the file, escapes included).
pub fn marker(len: u64) -> String {
    format!("\u{2026}[truncated: {len} bytes]")
}

/// Positions of the filtered text mapped back to the original text.
#[derive(Clone, Debug, Default)]
pub struct Shifts {
    /// (stream position, bytes removed before it in all): from that position on, original =
    /// stream + removed. Sorted by position.
    points: Vec<(u64, u64)>,
}

impl Shifts {
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// The original position of stream position `s`.
    #[inline]
    pub fn orig(&self, s: u64) -> u64 {
        match self.points.partition_point(|p| p.0 <= s) {
            0 => s,
            k => s + self.points[k - 1].1,
        }
    }

    /// Bytes removed in all.
    pub fn removed(&self) -> u64 {
        self.points.last().map_or(0, |p| p.1)
    }

    fn push(&mut self, at: u64, removed: u64) {
        let total = self.removed() + removed;
        self.points.push((at, total));
    }
}

/// A string that was cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cut {
    /// stream position of its opening quote
    pub at: u64,
    /// original position of its opening quote
    pub orig_at: u64,
    /// length of its contents in the file (bytes, escapes included)
    pub len: u64,
}

/// The streaming per-string cap (see the module doc).
#[derive(Debug)]
pub struct StringCap {
    cap: usize,
    keep: usize,
    in_str: bool,
    /// the next input byte is escaped (the previous one was a backslash inside a string)
    esc: bool,
    /// the current string's content bytes so far (the skipped ones included)
    len: u64,
    /// stream position of the current string's first content byte
    start: u64,
    /// the current string is being skipped: its kept prefix ends at stream position `cut_at`
    cutting: bool,
    cut_at: u64,
    /// strings cut so far, in stream order
    pub cuts: Vec<Cut>,
}

impl StringCap {
    /// A filter that cuts strings longer than `cap` bytes (raised to [`MIN_STRING_CAP`]).
    pub fn new(cap: usize) -> Self {
        let cap = cap.max(MIN_STRING_CAP);
        StringCap { cap, keep: cap - MARKER_ROOM, in_str: false, esc: false, len: 0, start: 0, cutting: false, cut_at: 0, cuts: Vec::new() }
    }

    /// Start over outside any string (the reader restarts the filter at an item's start).
    pub fn reset(&mut self) {
        self.in_str = false;
        self.esc = false;
        self.cutting = false;
        self.len = 0;
    }

    /// Whether the text fed so far ends inside a string.
    pub fn in_string(&self) -> bool {
        self.in_str
    }

    /// Filter `input` onto the end of `out`, whose first byte is at stream position `out_base`.
    /// The current string (if any) must have started inside `out`: the reader feeds an item
    /// from its start and keeps it in its buffer until it is complete.
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<u8>, out_base: u64, shifts: &mut Shifts) {
        let mut i = 0;
        while i < input.len() {
            if !self.in_str {
                match memchr(b'"', &input[i..]) {
                    None => {
                        out.extend_from_slice(&input[i..]);
                        return;
                    }
                    Some(k) => {
                        out.extend_from_slice(&input[i..=i + k]);
                        i += k + 1;
                        self.in_str = true;
                        self.esc = false;
                        self.cutting = false;
                        self.len = 0;
                        self.start = out_base + out.len() as u64;
                    }
                }
                continue;
            }
            // inside a string: up to its closing quote, at most to one byte past the cap
            let lim = if self.cutting { input.len() } else { input.len().min(i + (self.cap as u64 + 1 - self.len) as usize) };
            let mut j = i;
            let mut closed = false;
            while j < lim {
                if self.esc {
                    self.esc = false;
                    j += 1;
                    continue;
                }
                match memchr2(b'"', b'\\', &input[j..lim]) {
                    None => j = lim,
                    Some(k) => {
                        let p = j + k;
                        if input[p] == b'"' {
                            j = p;
                            closed = true;
                            break;
                        }
                        self.esc = true;
                        j = p + 1;
                    }
                }
            }
            if !self.cutting {
                out.extend_from_slice(&input[i..j]);
            }
            self.len += (j - i) as u64;
            i = j;
            if closed {
                if self.cutting {
                    self.close_cut(out, out_base, shifts);
                }
                out.push(b'"');
                i += 1;
                self.in_str = false;
                self.cutting = false;
            } else if !self.cutting && self.len > self.cap as u64 {
                self.cut(out, out_base);
            }
        }
    }

    /// The current string is longer than the cap: cut what was kept back to a safe point.
    fn cut(&mut self, out: &mut Vec<u8>, out_base: u64) {
        let from = match self.start.checked_sub(out_base) {
            Some(k) if (k as usize) <= out.len() => k as usize,
            // the string started before this buffer (not expected: the reader keeps an item
            // whole): keep what is there and skip the rest
            _ => out.len(),
        };
        let keep = safe_prefix(&out[from..], self.keep);
        out.truncate(from + keep);
        self.cut_at = out_base + out.len() as u64;
        self.cutting = true;
    }

    /// The cut string closes: its marker goes after the kept prefix, and the bytes removed
    /// are recorded from the closing quote on.
    fn close_cut(&mut self, out: &mut Vec<u8>, out_base: u64, shifts: &mut Shifts) {
        let m = marker(self.len);
        out.extend_from_slice(m.as_bytes());
        let kept = self.cut_at.saturating_sub(self.start) + m.len() as u64;
        let quote = self.start.saturating_sub(1);
        let orig_at = shifts.orig(quote);
        shifts.push(out_base + out.len() as u64, self.len.saturating_sub(kept));
        self.cuts.push(Cut { at: quote, orig_at, len: self.len });
    }
}

/// `text` (a complete JSON value or event, starting outside any string) with its strings longer
/// than `cap` cut, and the cuts; None when nothing is cut. The cut text is the same as the
/// reader's filter makes (a cut depends only on the string), so a string is cut alike whether
/// or not its item was long enough for the reader to filter it.
pub fn cap_text(text: &[u8], cap: usize) -> Option<(Vec<u8>, Vec<Cut>)> {
    if cap == 0 || text.len() <= cap.max(MIN_STRING_CAP) {
        return None;
    }
    let mut f = StringCap::new(cap);
    let mut out = Vec::with_capacity(text.len().min(2 * cap));
    let mut shifts = Shifts::default();
    f.feed(text, &mut out, 0, &mut shifts);
    // (a text that ends inside a string being cut has no cut recorded, but is shorter)
    if f.cuts.is_empty() && out.len() == text.len() {
        None
    } else {
        Some((out, f.cuts))
    }
}

/// The longest prefix of the string contents `c` of at most `keep` bytes that ends on a whole
/// character: not inside an escape (`\n`, `\u00e9`), not inside a UTF-8 sequence, not after
/// the first half of an escaped surrogate pair (`\ud83d` alone is an error for a JSON parser).
fn safe_prefix(c: &[u8], keep: usize) -> usize {
    let mut i = 0;
    let mut ok = 0;
    // the unit before position i is an escaped high surrogate
    let mut after_high = false;
    while i <= keep {
        if i >= c.len() {
            if i == c.len() && !after_high {
                ok = i;
            }
            break;
        }
        if c[i] & 0xC0 != 0x80 && !after_high {
            ok = i;
        }
        if c[i] == b'\\' {
            if c.get(i + 1) == Some(&b'u') {
                let hex = c.get(i + 2..i + 6).and_then(|h| std::str::from_utf8(h).ok()).and_then(|h| u16::from_str_radix(h, 16).ok());
                after_high = hex.is_some_and(|v| (0xD800..0xDC00).contains(&v));
                i += 6;
            } else {
                after_high = false;
                i += 2;
            }
        } else {
            after_high = false;
            i += 1;
        }
    }
    ok
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Filter `doc` fed in pieces of `piece` bytes; returns the text, the cuts and the shifts.
    fn run(doc: &[u8], cap: usize, piece: usize) -> (Vec<u8>, Vec<Cut>, Shifts) {
        let mut f = StringCap::new(cap);
        let mut out = Vec::new();
        let mut shifts = Shifts::default();
        for p in doc.chunks(piece.max(1)) {
            f.feed(p, &mut out, 0, &mut shifts);
        }
        (out, f.cuts, shifts)
    }

    #[test]
    fn short_strings_pass_unchanged_in_any_pieces() {
        let doc = br#"{"a":"x\"y","b":[1,"\\"],"c":"0123456789"}"#;
        for piece in [1, 2, 3, 7, 100] {
            let (out, cuts, shifts) = run(doc, 256, piece);
            assert_eq!(out, doc.to_vec(), "piece {piece}");
            assert!(cuts.is_empty() && shifts.is_empty());
        }
    }

    #[test]
    fn a_long_string_is_cut_with_its_length_and_positions_map_back() {
        let body = "é".repeat(500); // 1000 bytes, 2-byte characters
        let doc = format!(r#"{{"name":"{body}","ts":1}} {{"x":2}}"#);
        for piece in [1, 5, 64, 4096] {
            let (out, cuts, shifts) = run(doc.as_bytes(), 256, piece);
            let v: serde_json::Value = serde_json::from_slice(&out[..out.iter().position(|&c| c == b'}').unwrap() + 1]).unwrap();
            let name = v["name"].as_str().unwrap();
            assert!(name.ends_with(&marker(1000)), "piece {piece}: {name}");
            assert!(name.len() <= 256 && name.starts_with("éé"));
            assert_eq!(v["ts"], 1);
            assert_eq!(cuts, vec![Cut { at: 8, orig_at: 8, len: 1000 }]);
            // the second object's position maps back to the original text
            let s = out.windows(5).position(|w| w == br#"{"x":"#).unwrap() as u64;
            let o = doc.find(r#"{"x":"#).unwrap() as u64;
            assert_eq!(shifts.orig(s), o);
            assert_eq!(shifts.orig(5), 5);
            assert_eq!(shifts.removed(), doc.len() as u64 - out.len() as u64);
        }
    }

    #[test]
    fn cuts_never_split_an_escape_or_a_surrogate_pair() {
        for pad in 0..12 {
            let body = format!("{}{}", "a".repeat(185 + pad), r"\n\u00e9\ud83d\ude00\\".repeat(40));
            let doc = format!(r#"["{body}"]"#);
            let (out, cuts, _) = run(doc.as_bytes(), 256, 3);
            assert_eq!(cuts.len(), 1);
            let v: Vec<String> = serde_json::from_slice(&out).unwrap_or_else(|e| panic!("pad {pad}: {e}: {}", String::from_utf8_lossy(&out)));
            assert!(v[0].ends_with(&marker(body.len() as u64)));
        }
    }

    #[test]
    fn a_cut_string_is_never_cut_again() {
        let doc = format!(r#"["{}"]"#, "z".repeat(5000));
        let (once, _, _) = run(doc.as_bytes(), 300, 10);
        let (twice, cuts, shifts) = run(&once, 300, 10);
        assert_eq!(once, twice);
        assert!(cuts.is_empty() && shifts.is_empty());
    }

    #[test]
    fn cap_text_cuts_like_the_filter() {
        let doc = format!(r#"{{"name":"{}","x":"short"}}"#, "q\\\"".repeat(300));
        assert_eq!(cap_text(doc.as_bytes(), 0), None);
        assert_eq!(cap_text(br#"{"a":"b"}"#, 256), None);
        // a text that ends inside a long string (an item cut by the end of the input) is cut too
        let open = format!(r#"{{"a":"{}"#, "y".repeat(1000));
        let (cut, cuts) = cap_text(open.as_bytes(), 256).unwrap();
        assert!(cuts.is_empty() && cut.len() == 6 + 256 - 64, "{}", cut.len());
        let (whole, cuts) = cap_text(doc.as_bytes(), 256).unwrap();
        assert_eq!(cuts.len(), 1);
        let (streamed, _, _) = run(doc.as_bytes(), 256, 7);
        assert_eq!(whole, streamed);
        let v: serde_json::Value = serde_json::from_slice(&whole).unwrap();
        assert_eq!(v["x"], "short");
    }

    #[test]
    fn safe_prefixes() {
        assert_eq!(safe_prefix(b"abcdef", 3), 3);
        assert_eq!(safe_prefix(b"ab", 3), 2);
        assert_eq!(safe_prefix(br"ab\ncd", 3), 2);
        assert_eq!(safe_prefix(br"ab\u00e9cd", 5), 2);
        assert_eq!(safe_prefix("aé".as_bytes(), 2), 1);
        assert_eq!(safe_prefix(br"a\ud83d\ude00b", 8), 1);
        assert_eq!(safe_prefix(br"a\ud83d\ude00b", 13), 13);
    }
}
