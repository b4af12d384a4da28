//! Repair of an event that is not valid JSON, so that serde_json can read it: raw control
//! characters inside strings escaped, bare words that are not JSON literals (`N/A`, `NaN`,
//! `inf`) quoted, invalid UTF-8 replaced. The decoder counts repaired events.

/// Make an event parseable: escape raw control characters inside strings, quote bare words that
/// are not JSON literals (`N/A`, `NaN`, `inf`), and replace invalid UTF-8.
pub fn sanitize(span: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(span);
    let b = text.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(b.len() + 16);
    let mut i = 0;
    let mut in_str = false;
    while i < b.len() {
        let c = b[i];
        if in_str {
            if c == b'\\' && i + 1 < b.len() {
                out.push(c);
                out.push(b[i + 1]);
                i += 2;
                continue;
            }
            if c == b'"' {
                in_str = false;
                out.push(c);
            } else if c < 0x20 {
                out.extend_from_slice(format!("\\u{:04x}", c).as_bytes());
            } else {
                out.push(c);
            }
            i += 1;
            continue;
        }
        if c == b'"' {
            in_str = true;
            out.push(c);
            i += 1;
            continue;
        }
        // the exponent of a number (1e+300) is not a bare word
        let in_number = matches!(out.last(), Some(p) if p.is_ascii_digit() || *p == b'.');
        if !in_number && (c.is_ascii_alphabetic() || c == b'/' || (c == b'-' && i + 1 < b.len() && b[i + 1].is_ascii_alphabetic())) {
            let start = i;
            i += 1;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'/' || b[i] == b'_') {
                i += 1;
            }
            let word = &b[start..i];
            match word {
                b"true" | b"false" | b"null" => out.extend_from_slice(word),
                _ => {
                    out.push(b'"');
                    out.extend_from_slice(word);
                    out.push(b'"');
                }
            }
            continue;
        }
        out.push(c);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::sanitize;

    #[test]
    fn repairs_what_serde_rejects() {
        let fixed = sanitize(b"{\"a\":\"x\x01y\",\"b\":N/A,\"c\":[NaN,-inf],\"d\":1e+300,\"e\":true}");
        assert_eq!(String::from_utf8(fixed).unwrap(), r#"{"a":"x\u0001y","b":"N/A","c":["NaN","-inf"],"d":1e+300,"e":true}"#);
        let fixed = sanitize(b"{\"a\":\"\xff\"}");
        assert!(serde_json::from_slice::<serde_json::Value>(&fixed).is_ok());
    }
}
