//! Exact conversion of JSON number text into integers, without going through a float.
//!
//! Kineto writes `ts` and `dur` in microseconds with up to three decimals, at epoch scale
//! (e.g. `1711964646123456.789`). A float64 keeps only ~0.25 µs there, so we parse the decimal
//! text directly into nanoseconds.

/// Result of parsing a decimal number: `mantissa * 10^exp10`, with sign.
struct Decimal {
    negative: bool,
    mantissa: u128,
    exp10: i32,
}

fn parse_decimal(text: &[u8]) -> Option<Decimal> {
    let mut i = 0;
    let n = text.len();
    let mut negative = false;
    if i < n && (text[i] == b'-' || text[i] == b'+') {
        negative = text[i] == b'-';
        i += 1;
    }
    let mut mantissa: u128 = 0;
    let mut exp10: i32 = 0;
    let mut digits = 0usize;
    let mut significant = 0usize;
    // integer part
    while i < n && text[i].is_ascii_digit() {
        let d = (text[i] - b'0') as u128;
        if significant < 36 {
            mantissa = mantissa * 10 + d;
            if mantissa != 0 {
                significant += 1;
            }
        } else {
            exp10 += 1; // drop digits beyond precision, keep magnitude
        }
        digits += 1;
        i += 1;
    }
    if i < n && text[i] == b'.' {
        i += 1;
        while i < n && text[i].is_ascii_digit() {
            let d = (text[i] - b'0') as u128;
            if significant < 36 {
                mantissa = mantissa * 10 + d;
                if mantissa != 0 {
                    significant += 1;
                }
                exp10 -= 1;
            }
            digits += 1;
            i += 1;
        }
    }
    if digits == 0 {
        return None;
    }
    if i < n && (text[i] == b'e' || text[i] == b'E') {
        i += 1;
        let mut eneg = false;
        if i < n && (text[i] == b'-' || text[i] == b'+') {
            eneg = text[i] == b'-';
            i += 1;
        }
        let mut e: i32 = 0;
        let start = i;
        while i < n && text[i].is_ascii_digit() {
            e = e.saturating_mul(10).saturating_add((text[i] - b'0') as i32);
            i += 1;
        }
        if i == start {
            return None;
        }
        exp10 = exp10.saturating_add(if eneg { -e } else { e });
    }
    if i != n {
        return None;
    }
    Some(Decimal { negative, mantissa, exp10 })
}

/// Scale a decimal number by 10^shift and round half to even into an i64.
/// Returns None when the text is not a number or the result does not fit in i64.
pub fn decimal_to_i64_scaled(text: &[u8], shift: i32) -> Option<i64> {
    let d = parse_decimal(text)?;
    let e = d.exp10.checked_add(shift)?;
    let magnitude: u128 = if d.mantissa == 0 {
        0
    } else if e >= 0 {
        if e > 38 {
            return None;
        }
        d.mantissa.checked_mul(10u128.checked_pow(e as u32)?)?
    } else {
        let k = (-e) as u32;
        if k > 38 {
            0
        } else {
            let div = 10u128.pow(k);
            let q = d.mantissa / div;
            let r = d.mantissa % div;
            let twice = r * 2;
            if twice > div || (twice == div && q % 2 == 1) {
                q + 1
            } else {
                q
            }
        }
    };
    if d.negative {
        if magnitude > (i64::MAX as u128) + 1 {
            return None;
        }
        Some((magnitude as i128).wrapping_neg() as i64)
    } else {
        if magnitude > i64::MAX as u128 {
            return None;
        }
        Some(magnitude as i64)
    }
}

/// Microseconds (decimal text) to integer nanoseconds.
#[inline]
pub fn us_text_to_ns(text: &[u8]) -> Option<i64> {
    decimal_to_i64_scaled(text, 3)
}

/// An integer written as a JSON number (`12`, `12.0`, `1.2e1`), a decimal string (`"12"`),
/// or a hex string (`"0x1f"`).
pub fn int_text(text: &[u8]) -> Option<i64> {
    if let Some(v) = fast_int(text) {
        return Some(v);
    }
    let t = trim_quotes(text)?;
    let t = trim_ascii(t);
    // hex: digits only after the 0x (from_str_radix would also accept a sign there)
    let hex = |d: &[u8]| -> Option<u64> {
        if d.is_empty() || !d.iter().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        u64::from_str_radix(std::str::from_utf8(d).ok()?, 16).ok()
    };
    if t.len() > 2 && (t[0] == b'0') && (t[1] == b'x' || t[1] == b'X') {
        return hex(&t[2..]).map(|v| v as i64);
    }
    if t.len() > 3 && t[0] == b'-' && t[1] == b'0' && (t[2] == b'x' || t[2] == b'X') {
        return hex(&t[3..]).and_then(|v| i64::try_from(v).ok()).map(|v| -v);
    }
    // integral decimals only
    let d = parse_decimal(t)?;
    let v = decimal_to_i64_scaled(t, 0)?;
    if d.exp10 < 0 {
        // check that the fractional part is zero
        let back = decimal_to_i64_scaled(t, 3)?;
        if back != v.checked_mul(1000)? {
            return None;
        }
    }
    Some(v)
}

#[inline]
fn fast_int(text: &[u8]) -> Option<i64> {
    if text.is_empty() || text.len() > 18 {
        return None;
    }
    let (neg, digits) = if text[0] == b'-' { (true, &text[1..]) } else { (false, text) };
    if digits.is_empty() {
        return None;
    }
    let mut v: i64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + (c - b'0') as i64;
    }
    Some(if neg { -v } else { v })
}

pub fn float_text(text: &[u8]) -> Option<f64> {
    let t = trim_quotes(text)?;
    let s = std::str::from_utf8(trim_ascii(t)).ok()?;
    match s {
        "inf" | "Infinity" | "INF" => Some(f64::INFINITY),
        "-inf" | "-Infinity" => Some(f64::NEG_INFINITY),
        "nan" | "NaN" => None,
        _ => s.parse::<f64>().ok(),
    }
}

fn trim_quotes(text: &[u8]) -> Option<&[u8]> {
    if text.len() >= 2 && text[0] == b'"' && text[text.len() - 1] == b'"' {
        Some(&text[1..text.len() - 1])
    } else if !text.is_empty() && text[0] != b'"' {
        Some(text)
    } else {
        None
    }
}

fn trim_ascii(t: &[u8]) -> &[u8] {
    let mut a = 0;
    let mut b = t.len();
    while a < b && t[a].is_ascii_whitespace() {
        a += 1;
    }
    while b > a && t[b - 1].is_ascii_whitespace() {
        b -= 1;
    }
    &t[a..b]
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn exact_ns() {
        assert_eq!(us_text_to_ns(b"1711964646123456.789"), Some(1711964646123456789));
        assert_eq!(us_text_to_ns(b"689.047"), Some(689047));
        assert_eq!(us_text_to_ns(b"0.001"), Some(1));
        assert_eq!(us_text_to_ns(b"0.0005"), Some(0));
        assert_eq!(us_text_to_ns(b"0.0015"), Some(2));
        assert_eq!(us_text_to_ns(b"-3.5"), Some(-3500));
        assert_eq!(us_text_to_ns(b"1.5e3"), Some(1_500_000));
        assert_eq!(us_text_to_ns(b"1694128201426674"), Some(1694128201426674000));
        assert_eq!(us_text_to_ns(b"1e30"), None);
        assert_eq!(us_text_to_ns(b"abc"), None);
        assert_eq!(us_text_to_ns(b""), None);
    }
    #[test]
    fn ints() {
        assert_eq!(int_text(b"12"), Some(12));
        assert_eq!(int_text(b"\"0x0\""), Some(0));
        assert_eq!(int_text(b"\"0x1f\""), Some(31));
        assert_eq!(int_text(b"\"2560\""), Some(2560));
        assert_eq!(int_text(b"12.0"), Some(12));
        assert_eq!(int_text(b"12.5"), None);
        assert_eq!(int_text(b"4294967295"), Some(4294967295));
        assert_eq!(int_text(b"\"abc\""), None);
        assert_eq!(int_text(b"\"-0x-1\""), None);
        assert_eq!(int_text(b"\"0x+1f\""), None);
        assert_eq!(int_text(b"\"-0x8000000000000000\""), None);
    }
}
