//! The fast path: the raw text of an event's typed fields, picked out with the shared lexer
//! (`crate::json`) without building anything. Anything unexpected sends the event to the
//! validating path (`raw`).

use crate::json::{member_value_end, skip_ws as ws, string_end};
use crate::schema::{key_index, NKEYS};

/// The raw JSON text of the fields of one event that the decoder types.
pub struct Fields<'a> {
    pub ph: Option<&'a [u8]>,
    pub cat: Option<&'a [u8]>,
    pub name: Option<&'a [u8]>,
    pub pid: Option<&'a [u8]>,
    pub tid: Option<&'a [u8]>,
    pub ts: Option<&'a [u8]>,
    pub dur: Option<&'a [u8]>,
    pub id: Option<&'a [u8]>,
    pub bp: Option<&'a [u8]>,
    /// raw text of each typed arg, indexed by `schema::Key`
    pub args: [Option<&'a [u8]>; NKEYS],
    /// bit k set when args key k is present
    pub present: u64,
    pub has_args: bool,
}

impl Default for Fields<'_> {
    fn default() -> Self {
        Self::new()
    }
}

impl<'a> Fields<'a> {
    pub fn new() -> Self {
        Fields { ph: None, cat: None, name: None, pid: None, tid: None, ts: None, dur: None, id: None, bp: None, args: [None; NKEYS], present: 0, has_args: false }
    }

    /// Clear for reuse (only what the last event set).
    #[inline]
    pub fn reset(&mut self) {
        self.ph = None;
        self.cat = None;
        self.name = None;
        self.pid = None;
        self.tid = None;
        self.ts = None;
        self.dur = None;
        self.id = None;
        self.bp = None;
        let mut p = self.present;
        while p != 0 {
            let k = p.trailing_zeros() as usize;
            self.args[k] = None;
            p &= p - 1;
        }
        self.present = 0;
        self.has_args = false;
    }
}

/// Iterate `"key": value` pairs of the object starting at `i`; calls `f(key, value)` with raw
/// slices. Returns the index after the closing brace, or None when the text is not a plain
/// object (the caller then falls back to serde_json, which validates and repairs).
#[inline]
fn each_pair<'a>(b: &'a [u8], i: usize, mut f: impl FnMut(&'a [u8], &'a [u8]) -> Option<()>) -> Option<usize> {
    if b.get(i) != Some(&b'{') {
        return None;
    }
    let mut j = ws(b, i + 1);
    if b.get(j) == Some(&b'}') {
        return Some(j + 1);
    }
    loop {
        if b.get(j) != Some(&b'"') {
            return None;
        }
        let ke = string_end(b, j + 1)?;
        let key = &b[j + 1..ke - 1];
        if key.contains(&b'\\') {
            return None;
        }
        j = ws(b, ke);
        if b.get(j) != Some(&b':') {
            return None;
        }
        j = ws(b, j + 1);
        let ve = member_value_end(b, j)?;
        f(key, &b[j..ve])?;
        j = ws(b, ve);
        match b.get(j)? {
            b',' => j = ws(b, j + 1),
            b'}' => return Some(j + 1),
            _ => return None,
        }
    }
}

/// Fast path: pick the typed fields out of an event into `f` without building anything.
/// Returns false when the event needs the validating (serde_json) path.
pub fn fast_fields<'a>(span: &'a [u8], f: &mut Fields<'a>) -> bool {
    f.reset();
    let Ok(text) = std::str::from_utf8(span) else { return false };
    // top-level pairs; the args object is walked in place (not skipped and re-read)
    let b = span;
    let mut j = ws(b, 0);
    if b.get(j) != Some(&b'{') {
        return false;
    }
    j = ws(b, j + 1);
    if b.get(j) == Some(&b'}') {
        return ws(b, j + 1) == b.len();
    }
    loop {
        if b.get(j) != Some(&b'"') {
            return false;
        }
        let Some(ke) = string_end(b, j + 1) else { return false };
        let key = &b[j + 1..ke - 1];
        j = ws(b, ke);
        if b.get(j) != Some(&b':') {
            return false;
        }
        j = ws(b, j + 1);
        let ve = if key == b"args" && b.get(j) == Some(&b'{') {
            f.has_args = true;
            let args = &mut f.args;
            let present = &mut f.present;
            let end = each_pair(b, j, |k, v| {
                // `k` lies between two quotes of the span, which is valid UTF-8: its bounds are
                // character boundaries, so this slice of `text` is the same bytes as a &str
                let start = k.as_ptr() as usize - b.as_ptr() as usize;
                if let Some(i) = key_index(&text[start..start + k.len()]) {
                    if !plain_value(v) {
                        return None;
                    }
                    args[i] = Some(v);
                    *present |= 1u64 << i;
                }
                Some(())
            });
            match end {
                Some(e) => e,
                None => return false,
            }
        } else {
            let Some(ve) = member_value_end(b, j) else { return false };
            let v = &b[j..ve];
            let slot = match key {
                b"ph" => &mut f.ph,
                b"cat" => &mut f.cat,
                b"name" => &mut f.name,
                b"pid" => &mut f.pid,
                b"tid" => &mut f.tid,
                b"ts" => &mut f.ts,
                b"dur" => &mut f.dur,
                b"id" => &mut f.id,
                b"bp" => &mut f.bp,
                _ => {
                    j = ws(b, ve);
                    match b.get(j) {
                        Some(b',') => {
                            j = ws(b, j + 1);
                            continue;
                        }
                        Some(b'}') => break,
                        _ => return false,
                    }
                }
            };
            if !plain_value(v) {
                return false;
            }
            *slot = Some(v);
            ve
        };
        j = ws(b, ve);
        match b.get(j) {
            Some(b',') => j = ws(b, j + 1),
            Some(b'}') => break,
            _ => return false,
        }
    }
    if ws(b, j + 1) != b.len() {
        return false;
    }
    true
}

#[inline]
fn plain_value(v: &[u8]) -> bool {
    match v[0] {
        b'"' | b'{' | b'[' | b'-' | b'0'..=b'9' => true,
        _ => v == b"true" || v == b"false" || v == b"null",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Key;

    #[test]
    fn picks_typed_fields_and_args() {
        let ev = br#" {"ph": "X", "name":"a\"b", "other": [1, {"x": "}"}], "ts": 1.5,
            "args": {"External id": 7, "skip": {"a": [1]}, "grid": [1, 2, 3]}} "#;
        let mut f = Fields::new();
        assert!(fast_fields(ev, &mut f));
        assert_eq!(f.ph, Some(&br#""X""#[..]));
        assert_eq!(f.name, Some(&br#""a\"b""#[..]));
        assert_eq!(f.ts, Some(&b"1.5"[..]));
        assert_eq!(f.dur, None);
        assert!(f.has_args);
        assert_eq!(f.args[Key::ExternalId.index()], Some(&b"7"[..]));
        assert_eq!(f.args[Key::Grid.index()], Some(&b"[1, 2, 3]"[..]));
        assert_eq!(f.present, (1 << Key::ExternalId.index()) | (1 << Key::Grid.index()));
        // reuse clears what the last event set
        assert!(fast_fields(br#"{"ph":"i"}"#, &mut f));
        assert_eq!(f.name, None);
        assert_eq!(f.args[Key::Grid.index()], None);
        assert_eq!(f.present, 0);
        assert!(!f.has_args);
    }

    #[test]
    fn sends_the_unexpected_to_the_validating_path() {
        let mut f = Fields::new();
        for ev in [
            &br#"{"ph":"X","dur":N/A}"#[..],
            br#"{"ph":"X","args":{"stream":NaN}}"#,
            br#"{"ph":"X",}"#,
            br#"{"ph":"X"} x"#,
            br#"{"ph" "X"}"#,
            b"{\"name\":\"\xff\"}",
        ] {
            assert!(!fast_fields(ev, &mut f), "{}", String::from_utf8_lossy(ev));
        }
        assert!(fast_fields(b"{}", &mut f));
        assert!(fast_fields(b" { } ", &mut f));
    }
}
