//! A field's raw JSON text as a typed value: unescaped string, compact JSON, exact nanoseconds,
//! phase code, element of a `[x, y, z]` array.
//!
//! The raw text is a value slice of an event that is valid UTF-8 (checked on the fast path,
//! guaranteed by serde_json on the validating path, made so by `repair`), cut at ASCII
//! delimiters, so it is valid UTF-8 itself.

use crate::numbers::{int_text, us_text_to_ns};
use crate::schema::{phase_byte, phase_code};
use std::borrow::Cow;

/// The raw text as a &str.
#[inline]
fn text_of(raw: &[u8]) -> &str {
    debug_assert!(std::str::from_utf8(raw).is_ok());
    // SAFETY: every raw value handed to this module is valid UTF-8 (see the module doc: the
    // event was validated before its fields were picked, and a value starts and ends at ASCII
    // delimiters, so it is whole characters); the `debug_assert` checks it in tests and fuzzing.
    unsafe { std::str::from_utf8_unchecked(raw) }
}

/// The text of a JSON string value (unescaped), or the raw text of any other value.
#[inline]
pub fn str_of(raw: &[u8]) -> Cow<'_, str> {
    let t = text_of(raw);
    if raw.len() >= 2 && raw[0] == b'"' {
        let inner = &t[1..t.len() - 1];
        if !inner.as_bytes().contains(&b'\\') {
            return Cow::Borrowed(inner);
        }
        if let Ok(s) = serde_json::from_str::<String>(t) {
            return Cow::Owned(s);
        }
        return Cow::Borrowed(inner);
    }
    Cow::Borrowed(t)
}

/// JSON text without whitespace outside strings; a JSON string yields its contents.
pub fn compact_of(raw: &[u8]) -> Cow<'_, str> {
    if !raw.is_empty() && raw[0] == b'"' {
        return str_of(raw);
    }
    let t = text_of(raw);
    if !raw.iter().any(|&c| c == b' ' || c == b'\n' || c == b'\t' || c == b'\r') {
        return Cow::Borrowed(t);
    }
    let mut out = String::with_capacity(t.len());
    let mut in_str = false;
    let mut esc = false;
    for ch in t.chars() {
        if in_str {
            out.push(ch);
            if esc {
                esc = false;
            } else if ch == '\\' {
                esc = true;
            } else if ch == '"' {
                in_str = false;
            }
        } else if ch == '"' {
            in_str = true;
            out.push(ch);
        } else if !ch.is_ascii_whitespace() {
            out.push(ch);
        }
    }
    Cow::Owned(out)
}

/// Element `k` of a `[x, y, z]` array, as i32.
pub fn dim_of(t: &[u8], k: usize) -> Option<i32> {
    if t.first() != Some(&b'[') {
        return None;
    }
    let inner = &t[1..t.len().saturating_sub(1)];
    let item = inner.split(|&c| c == b',').nth(k)?;
    let item = item.trim_ascii();
    int_text(item).and_then(|v| i32::try_from(v).ok())
}

/// Phase code of a `ph` value.
#[inline]
pub fn phase_of(raw: &[u8]) -> u8 {
    if raw.len() == 3 && raw[0] == b'"' && raw[2] == b'"' {
        return phase_byte(raw[1]);
    }
    phase_code(&str_of(raw))
}

/// µs text with at most 3 decimals and at most 15 integer digits, the common case, in u64.
#[inline]
fn fast_us_ns(t: &[u8]) -> Option<i64> {
    let mut i = 0;
    let mut v: u64 = 0;
    while i < t.len() && t[i].is_ascii_digit() {
        if i == 16 {
            return None; // more than 16 integer digits: the general path decides
        }
        v = v * 10 + (t[i] - b'0') as u64;
        i += 1;
    }
    if i == 0 {
        return None;
    }
    let mut frac: u64 = 0;
    let mut nd = 0;
    if i < t.len() {
        if t[i] != b'.' {
            return None;
        }
        i += 1;
        while i < t.len() && t[i].is_ascii_digit() && nd < 3 {
            frac = frac * 10 + (t[i] - b'0') as u64;
            nd += 1;
            i += 1;
        }
        if i != t.len() || nd == 0 {
            return None;
        }
    }
    while nd < 3 {
        frac *= 10;
        nd += 1;
    }
    // beyond i64 ns: let the general path reject it
    if v > (i64::MAX as u64 - frac) / 1000 {
        return None;
    }
    Some((v * 1000 + frac) as i64)
}

/// A `ts` or `dur` value (µs, a number or a numeric string) as exact integer nanoseconds.
#[inline]
pub fn num_ns(t: &[u8]) -> Option<i64> {
    if let Some(v) = fast_us_ns(t) {
        return Some(v);
    }
    if t.first() == Some(&b'"') {
        return us_text_to_ns(t[1..t.len() - 1].trim_ascii());
    }
    us_text_to_ns(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::PHASE_UNKNOWN;

    #[test]
    fn strings_and_json() {
        assert_eq!(str_of(br#""a\"b""#), "a\"b");
        assert_eq!(str_of(br#""plain""#), "plain");
        assert_eq!(str_of(b"12"), "12");
        assert_eq!(compact_of(b"[[1, 2],\n []]"), "[[1,2],[]]");
        assert_eq!(compact_of(br#"["a b", 1]"#), r#"["a b",1]"#);
        assert_eq!(compact_of(br#""x y""#), "x y");
    }

    #[test]
    fn numbers_dims_phases() {
        assert_eq!(num_ns(b"689.047"), Some(689047));
        assert_eq!(num_ns(b"\" 1.5 \""), Some(1500));
        assert_eq!(num_ns(b"1e3"), Some(1_000_000));
        assert_eq!(num_ns(b"12345678901234567"), None); // beyond i64 ns
        assert_eq!(num_ns(b"x"), None);
        assert_eq!(dim_of(b"[2, 3, 1]", 1), Some(3));
        assert_eq!(dim_of(b"[2, 3, 1]", 3), None);
        assert_eq!(dim_of(b"7", 0), None);
        assert_eq!(phase_of(br#""X""#), 0);
        assert_eq!(phase_of(br#""f""#), 11);
        assert_eq!(phase_of(br#""XX""#), PHASE_UNKNOWN);
        assert_eq!(phase_of(b"1"), PHASE_UNKNOWN);
    }
}
