//! The JSON lexer shared by the structural scanner (`scan`) and the event fast path
//! (`event::fields`): whitespace, string ends and value ends, found without building anything.
//!
//! Positions are byte indices into a buffer. A function returns None when the buffer ends before
//! the token does (the scanner then waits for more input; the event fast path, which only sees
//! complete events, falls back to serde_json).

use memchr::{memchr2, memchr3};

#[inline]
pub fn is_ws(c: u8) -> bool {
    matches!(c, b' ' | b'\n' | b'\r' | b'\t')
}

/// The first index at or after `i` that is not JSON whitespace (or `buf.len()`).
#[inline]
pub fn skip_ws(buf: &[u8], mut i: usize) -> usize {
    while i < buf.len() && is_ws(buf[i]) {
        i += 1;
    }
    i
}

/// Index just after the closing quote of a string whose opening quote is at `i - 1`. A backslash
/// escapes the byte after it; the string's contents are not validated.
#[inline]
pub fn string_end(buf: &[u8], mut i: usize) -> Option<usize> {
    // short strings (keys, phases, most values) are faster byte by byte than with memchr
    let lim = (i + 24).min(buf.len());
    while i < lim {
        match buf[i] {
            b'"' => return Some(i + 1),
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
    if i >= buf.len() {
        return None;
    }
    loop {
        let k = memchr2(b'"', b'\\', &buf[i..])?;
        let j = i + k;
        if buf[j] == b'"' {
            return Some(j + 1);
        }
        i = j + 2;
        if i > buf.len() {
            return None;
        }
    }
}

/// End of the `open`…`close` group starting at `i` (`buf[i] == open`), counting only that kind
/// of bracket and skipping strings: exact for valid JSON, where the other kind of bracket can
/// only appear nested and balanced inside it.
#[inline]
pub fn bracketed_end(buf: &[u8], i: usize, open: u8, close: u8) -> Option<usize> {
    let mut depth = 0usize;
    let mut j = i;
    loop {
        let k = memchr3(b'"', open, close, &buf[j..])?;
        let p = j + k;
        let c = buf[p];
        if c == b'"' {
            j = string_end(buf, p + 1)?;
        } else if c == open {
            depth += 1;
            j = p + 1;
        } else {
            depth -= 1;
            j = p + 1;
            if depth == 0 {
                return Some(j);
            }
        }
    }
}

/// End of a JSON object starting at `i` (`buf[i] == b'{'`).
#[inline]
pub fn object_end(buf: &[u8], i: usize) -> Option<usize> {
    bracketed_end(buf, i, b'{', b'}')
}

/// End of any JSON value starting at `i`, in a stream: objects and arrays count both kinds of
/// bracket; a bare scalar ends at a delimiter, or at the end of the buffer when `eof`.
pub fn value_end(buf: &[u8], i: usize, eof: bool) -> Option<usize> {
    match buf[i] {
        b'"' => string_end(buf, i + 1),
        b'{' | b'[' => {
            let mut depth: usize = 0;
            let mut j = i;
            while j < buf.len() {
                match buf[j] {
                    b'"' => {
                        j = string_end(buf, j + 1)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            None
        }
        _ => {
            let mut j = i;
            while j < buf.len() {
                let c = buf[j];
                if c == b',' || c == b'}' || c == b']' || is_ws(c) {
                    return Some(j);
                }
                j += 1;
            }
            if eof {
                Some(j)
            } else {
                None
            }
        }
    }
}

/// End of a value starting at `i` inside one complete event: objects and arrays by
/// `bracketed_end`, a scalar at the next delimiter (None when it is empty or the value is cut).
#[inline]
pub fn member_value_end(b: &[u8], i: usize) -> Option<usize> {
    match *b.get(i)? {
        b'"' => string_end(b, i + 1),
        b'{' => bracketed_end(b, i, b'{', b'}'),
        b'[' => bracketed_end(b, i, b'[', b']'),
        _ => {
            let mut j = i;
            while j < b.len() && !matches!(b[j], b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t') {
                j += 1;
            }
            if j == i {
                None
            } else {
                Some(j)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings() {
        // (text, index after the opening quote, expected end)
        let cases: &[(&[u8], usize, Option<usize>)] = &[
            (br#""abc" x"#, 1, Some(5)),
            (br#""""#, 1, Some(2)),
            (br#""a\"b""#, 1, Some(6)),
            (br#""a\\"b"#, 1, Some(5)),
            (br#""abc"#, 1, None),
            (br#""ab\"#, 1, None),
            // past the 24-byte byte-by-byte stretch: the memchr loop, escapes included
            (br#""0123456789012345678901234567\"89" "#, 1, Some(34)),
            (br#""0123456789012345678901234567\\"#, 1, None),
            (br#""01234567890123456789012345678"#, 1, None),
        ];
        for &(text, i, want) in cases {
            assert_eq!(string_end(text, i), want, "{}", String::from_utf8_lossy(text));
        }
    }

    #[test]
    fn whitespace() {
        assert_eq!(skip_ws(b" \t\r\n x", 0), 5);
        assert_eq!(skip_ws(b"   ", 1), 3);
        assert_eq!(skip_ws(b"x", 0), 0);
    }

    #[test]
    fn values() {
        let doc = br#"{"a":[1,{"b":"]}"}],"c":"}"} tail"#;
        assert_eq!(object_end(doc, 0), Some(28));
        assert_eq!(value_end(doc, 0, false), Some(28));
        assert_eq!(member_value_end(doc, 0), Some(28));
        assert_eq!(member_value_end(doc, 5), Some(19)); // the array
        assert_eq!(value_end(doc, 5, false), Some(19));
        assert_eq!(object_end(&doc[..20], 0), None);
        assert_eq!(value_end(&doc[..20], 0, true), None);
        // scalars: a delimiter ends them; the end of the buffer only at eof
        assert_eq!(value_end(b"123", 0, false), None);
        assert_eq!(value_end(b"123", 0, true), Some(3));
        assert_eq!(value_end(b"12 ,", 0, false), Some(2));
        assert_eq!(member_value_end(b"true}", 0), Some(4));
        assert_eq!(member_value_end(b",", 0), None);
        assert_eq!(member_value_end(b"", 0), None);
        assert_eq!(member_value_end(br#""x"}"#, 0), Some(3));
    }
}
