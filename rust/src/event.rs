//! Parsing of single trace events into column parts, and merging parts into the trace's columns.

use crate::columns::*;
use crate::numbers::{float_text, int_text, us_text_to_ns};
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::fmt;

#[derive(Deserialize)]
pub struct RawEvent<'a> {
    #[serde(borrow, default)]
    ph: Option<&'a RawValue>,
    #[serde(borrow, default)]
    cat: Option<&'a RawValue>,
    #[serde(borrow, default)]
    name: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pid: Option<&'a RawValue>,
    #[serde(borrow, default)]
    tid: Option<&'a RawValue>,
    #[serde(borrow, default)]
    ts: Option<&'a RawValue>,
    #[serde(borrow, default)]
    dur: Option<&'a RawValue>,
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    bp: Option<&'a RawValue>,
    #[serde(borrow, default)]
    args: Option<Args<'a>>,
}

struct Args<'a> {
    v: [Option<&'a RawValue>; NKEYS],
}

struct KeyIdx(Option<usize>);

impl<'de> Deserialize<'de> for KeyIdx {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = KeyIdx;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<KeyIdx, E> {
                Ok(KeyIdx(key_index(s)))
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Args<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Args<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an args object")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut m: M) -> Result<Args<'a>, M::Error> {
                let mut a = Args { v: [None; NKEYS] };
                while let Some(KeyIdx(k)) = m.next_key::<KeyIdx>()? {
                    match k {
                        Some(i) => a.v[i] = Some(m.next_value::<&'de RawValue>()?),
                        None => {
                            m.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(a)
            }
            // args that are not an object are ignored
            fn visit_seq<S: de::SeqAccess<'de>>(self, mut s: S) -> Result<Args<'a>, S::Error> {
                while s.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Args { v: [None; NKEYS] })
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Args<'a>, E> {
                Ok(Args { v: [None; NKEYS] })
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Args<'a>, E> {
                Ok(Args { v: [None; NKEYS] })
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Args<'a>, E> {
                Ok(Args { v: [None; NKEYS] })
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Args<'a>, E> {
                Ok(Args { v: [None; NKEYS] })
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Args<'a>, E> {
                Ok(Args { v: [None; NKEYS] })
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

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
    pub args: [Option<&'a [u8]>; NKEYS],
    /// bit k set when args key k is present
    pub present: u64,
    pub has_args: bool,
}

impl<'a> Fields<'a> {
    fn empty() -> Self {
        Fields { ph: None, cat: None, name: None, pid: None, tid: None, ts: None, dur: None, id: None, bp: None, args: [None; NKEYS], present: 0, has_args: false }
    }
    fn from_serde(ev: &RawEvent<'a>) -> Self {
        let b = |r: Option<&'a RawValue>| r.map(|v| v.get().as_bytes());
        let mut f = Fields::empty();
        f.ph = b(ev.ph);
        f.cat = b(ev.cat);
        f.name = b(ev.name);
        f.pid = b(ev.pid);
        f.tid = b(ev.tid);
        f.ts = b(ev.ts);
        f.dur = b(ev.dur);
        f.id = b(ev.id);
        f.bp = b(ev.bp);
        if let Some(a) = &ev.args {
            f.has_args = true;
            for (i, v) in a.v.iter().enumerate() {
                if let Some(v) = v {
                    f.args[i] = Some(v.get().as_bytes());
                    f.present |= 1u64 << i;
                }
            }
        }
        f
    }
}

#[inline]
fn ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\n' | b'\r' | b'\t') {
        i += 1;
    }
    i
}

#[inline]
fn str_end(b: &[u8], mut i: usize) -> Option<usize> {
    // i is just after the opening quote; short strings (keys, phases) are faster byte by byte
    let lim = (i + 24).min(b.len());
    while i < lim {
        match b[i] {
            b'"' => return Some(i + 1),
            b'\\' => {
                i += 2;
                if i > b.len() {
                    return None;
                }
            }
            _ => i += 1,
        }
    }
    if i >= b.len() {
        return None;
    }
    loop {
        let k = memchr::memchr2(b'"', b'\\', &b[i..])?;
        let j = i + k;
        if b[j] == b'"' {
            return Some(j + 1);
        }
        i = j + 2;
        if i > b.len() {
            return None;
        }
    }
}

/// End of a value starting at `i` inside a complete object span. None on anything unexpected.
#[inline]
fn val_end(b: &[u8], i: usize) -> Option<usize> {
    match *b.get(i)? {
        b'"' => str_end(b, i + 1),
        open @ (b'{' | b'[') => {
            // balanced within valid JSON: count only this kind of bracket, skipping strings
            let close = if open == b'{' { b'}' } else { b']' };
            let mut depth = 0usize;
            let mut j = i;
            loop {
                let k = memchr::memchr3(b'"', open, close, &b[j..])?;
                let p = j + k;
                let c = b[p];
                if c == b'"' {
                    j = str_end(b, p + 1)?;
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

/// Iterate `"key": value` pairs of the object starting at `i`; calls `f(key, value)` with raw
/// slices. Returns the index after the closing brace, or None when the text is not a plain
/// object (the caller then falls back to serde_json, which validates and repairs).
#[inline]
fn each_pair<'a>(b: &'a [u8], i: usize, mut f: impl FnMut(&'a [u8], &'a [u8], usize) -> Option<()>) -> Option<usize> {
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
        let ke = str_end(b, j + 1)?;
        let key = &b[j + 1..ke - 1];
        if key.contains(&b'\\') {
            return None;
        }
        j = ws(b, ke);
        if b.get(j) != Some(&b':') {
            return None;
        }
        j = ws(b, j + 1);
        let ve = val_end(b, j)?;
        f(key, &b[j..ve], j)?;
        j = ws(b, ve);
        match b.get(j)? {
            b',' => j = ws(b, j + 1),
            b'}' => return Some(j + 1),
            _ => return None,
        }
    }
}

impl<'a> Fields<'a> {
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

    pub fn new() -> Self {
        Fields::empty()
    }
}

/// Fast path: pick the typed fields out of an event into `f` without building anything.
/// Returns false when the event needs the validating (serde_json) path.
pub fn fast_fields<'a>(span: &'a [u8], f: &mut Fields<'a>) -> bool {
    f.reset();
    if std::str::from_utf8(span).is_err() {
        return false;
    }
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
        let Some(ke) = str_end(b, j + 1) else { return false };
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
            let end = each_pair(b, j, |k, v, _| {
                // keys are valid UTF-8 (the span was checked)
                if let Some(i) = key_index(unsafe { std::str::from_utf8_unchecked(k) }) {
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
            let Some(ve) = val_end(b, j) else { return false };
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

/// The text of a JSON string value (unescaped), or the raw text of any other value.
/// The bytes are valid UTF-8 (checked on the fast path, guaranteed by serde_json otherwise).
#[inline]
fn str_of(raw: &[u8]) -> Cow<'_, str> {
    let t = unsafe { std::str::from_utf8_unchecked(raw) };
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
fn compact_of(raw: &[u8]) -> Cow<'_, str> {
    if !raw.is_empty() && raw[0] == b'"' {
        return str_of(raw);
    }
    let t = unsafe { std::str::from_utf8_unchecked(raw) };
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

fn dim_of(t: &[u8], k: usize) -> Option<i32> {
    if t.first() != Some(&b'[') {
        return None;
    }
    let inner = &t[1..t.len().saturating_sub(1)];
    let item = inner.split(|&c| c == b',').nth(k)?;
    let item = item.trim_ascii();
    int_text(item).and_then(|v| i32::try_from(v).ok())
}

/// The columns every row of the event table and of the flow table has.
pub struct Head {
    /// event index (position in traceEvents) of each row
    pub rows: Vec<u32>,
    pub ph: Vec<u8>,
    pub cat: Vec<u32>,
    pub name: Vec<u32>,
    pub pid: Vec<i32>,
    pub tid: Vec<i32>,
    /// (position, local string code) of pids/tids that were strings (in a part; they get their
    /// synthetic ids when the part is appended)
    pub pid_str: Vec<(u32, u32)>,
    pub tid_str: Vec<(u32, u32)>,
    pub ts: Col,
}

impl Head {
    fn new() -> Self {
        Head {
            rows: Vec::new(),
            ph: Vec::new(),
            cat: Vec::new(),
            name: Vec::new(),
            pid: Vec::new(),
            tid: Vec::new(),
            pid_str: Vec::new(),
            tid_str: Vec::new(),
            ts: Col::new(Ty::I64),
        }
    }

    fn reserve(&mut self, n: usize) {
        self.rows.reserve(n);
        self.ph.reserve(n);
        self.cat.reserve(n);
        self.name.reserve(n);
        self.pid.reserve(n);
        self.tid.reserve(n);
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    #[allow(clippy::too_many_arguments)]
    fn push(&mut self, row: u32, ph: u8, cat: u32, name: u32, pid: (i32, Option<u32>), tid: (i32, Option<u32>), ts: Option<i64>) {
        if let Some(c) = pid.1 {
            self.pid_str.push((self.pid.len() as u32, c));
        }
        if let Some(c) = tid.1 {
            self.tid_str.push((self.tid.len() as u32, c));
        }
        self.rows.push(row);
        self.ph.push(ph);
        self.cat.push(cat);
        self.name.push(name);
        self.pid.push(pid.0);
        self.tid.push(tid.0);
        self.ts.push_i64(ts);
    }

    /// Append a part's rows: rows shifted by `base`, strings through `remap`, string ids through
    /// `synth` (global string code → synthetic id).
    fn extend(&mut self, src: &Head, base: u32, remap: &[u32], mut synth: impl FnMut(u32) -> i32) {
        let p0 = self.pid.len();
        self.rows.extend(src.rows.iter().map(|&r| r + base));
        self.ph.extend_from_slice(&src.ph);
        self.cat.extend(src.cat.iter().map(|&c| remap[c as usize]));
        self.name.extend(src.name.iter().map(|&c| remap[c as usize]));
        self.pid.extend_from_slice(&src.pid);
        self.tid.extend_from_slice(&src.tid);
        self.ts.extend_from(&src.ts, remap);
        for &(r, c) in &src.pid_str {
            self.pid[p0 + r as usize] = synth(remap[c as usize]);
        }
        for &(r, c) in &src.tid_str {
            self.tid[p0 + r as usize] = synth(remap[c as usize]);
        }
    }
}

/// The flow table's columns: every flow event (`ph` `s`, `t`, `f`, which are not rows of the
/// event columns) and every other event with an `id` or `bp`.
pub struct Flows {
    pub head: Head,
    pub id: Col,
    pub bp: Col,
}

impl Flows {
    fn new() -> Self {
        Flows { head: Head::new(), id: Col::new(Ty::I64), bp: Col::new(Ty::Str) }
    }
}

/// Phase codes of flow events (`s`, `t`, `f` in `PHASES`).
const FLOW_PHASES: [u8; 3] = [9, 10, 11];

/// Columns of a run of consecutive events, with local string codes.
pub struct Part {
    pub strings: Interner,
    /// raw JSON text of arg values → code of their compact form (most repeat)
    raw_json: rustc_hash::FxHashMap<Box<[u8]>, u32>,
    /// every event counted (flow events included)
    pub n: usize,
    /// rows of the event columns (local event indices)
    pub head: Head,
    pub dur: Col,
    pub correlation: Col,
    pub external_id: Col,
    pub stream: Col,
    pub device: Col,
    pub offset: Vec<u64>,
    pub len: Vec<u32>,
    pub tables: Vec<(Vec<u32>, Vec<Col>)>,
    pub flows: Flows,
    pub repaired: usize,
    pub error: Option<(usize, String)>,
    pub bad_numbers: usize,
}

impl Part {
    pub fn new() -> Self {
        Part {
            strings: Interner::default(),
            raw_json: Default::default(),
            n: 0,
            head: Head::new(),
            dur: Col::new(Ty::I64),
            correlation: Col::new(Ty::I64),
            external_id: Col::new(Ty::I64),
            stream: Col::new(Ty::I64),
            device: Col::new(Ty::I32),
            offset: Vec::new(),
            len: Vec::new(),
            tables: TABLES.iter().map(|t| (Vec::new(), t.cols.iter().map(|c| Col::new(c.ty)).collect())).collect(),
            flows: Flows::new(),
            repaired: 0,
            error: None,
            bad_numbers: 0,
        }
    }

    fn with_capacity(n: usize) -> Self {
        let mut p = Part::new();
        p.head.reserve(n);
        p.offset.reserve(n);
        p.len.reserve(n);
        p
    }

    /// A pid/tid as i32, or (0, local string code) for ids that are strings or outside the
    /// plain range (they get a synthetic id when the part is appended).
    fn id_value(&mut self, raw: Option<&[u8]>) -> (i32, Option<u32>) {
        let Some(raw) = raw else { return (0, None) };
        if let Some(v) = int_text(raw) {
            // ids are stored as i32: ids outside the plain range keep their text (a synthetic id)
            if (-(1i64 << 29)..=i32::MAX as i64).contains(&v) {
                return (v as i32, None);
            }
        }
        let s = str_of(raw);
        // 2021 traces: "stream 7"
        if let Some(rest) = s.strip_prefix("stream ") {
            if let Ok(v) = rest.trim().parse::<i32>() {
                return (v, None);
            }
        }
        (0, Some(self.strings.intern(&s)))
    }

    fn add_event(&mut self, ev: &Fields, offset: u64, len: u32) {
        let row = self.n as u32;
        self.n += 1;
        self.offset.push(offset);
        self.len.push(len);
        let ph = ev.ph.map(phase_of).unwrap_or(PHASE_UNKNOWN);
        let cat = ev.cat.map(str_of).unwrap_or(Cow::Borrowed(""));
        let cat = self.strings.intern(&cat);
        let name = ev.name.map(str_of).unwrap_or(Cow::Borrowed(""));
        let name = self.strings.intern(&name);
        let pid = self.id_value(ev.pid);
        let tid = self.id_value(ev.tid);
        let ts = ev.ts.and_then(num_ns);
        if ts.is_none() && ev.ts.is_some_and(|t| t != b"null") {
            self.bad_numbers += 1;
        }
        let dur = ev.dur.and_then(num_ns);
        if dur.is_none() && ev.dur.is_some_and(|t| t != b"null") {
            self.bad_numbers += 1;
        }
        let is_flow = FLOW_PHASES.contains(&ph);
        if is_flow || ev.id.is_some() || ev.bp.is_some() {
            self.flows.head.push(row, ph, cat, name, pid, tid, ts);
            self.flows.id.push_i64(ev.id.and_then(int_text));
            let bp = ev.bp.map(|r| self.strings.intern(&str_of(r)));
            self.flows.bp.push_str(bp);
        }
        let a = &ev.args;
        // flow events are rows of the flow table only (their typed args, if any, still go to
        // the side tables, keyed by row)
        if !is_flow {
            self.head.push(row, ph, cat, name, pid, tid, ts);
            self.dur.push_i64(dur);
            self.correlation.push_i64(a[K_CORRELATION].and_then(int_text));
            let ext = a[K_EXTERNAL_ID].or(a[K_EXTERNAL_ID_OLD]);
            self.external_id.push_i64(ext.and_then(int_text));
            self.stream.push_i64(a[K_STREAM].and_then(int_text));
            self.device.push_i32(a[K_DEVICE].and_then(int_text).and_then(|v| i32::try_from(v).ok()));
        }
        if ev.present == 0 {
            return;
        }
        for (ti, spec) in TABLES.iter().enumerate() {
            if ev.present & table_mask(ti) == 0 {
                continue;
            }
            let (rows, cols) = &mut self.tables[ti];
            rows.push(row);
            for (ci, cs) in spec.cols.iter().enumerate() {
                let v = a[cs.key];
                let col = &mut cols[ci];
                match cs.ty {
                    Ty::I64 => col.push_i64(v.and_then(int_text)),
                    Ty::I32 => col.push_i32(v.and_then(int_text).and_then(|x| i32::try_from(x).ok())),
                    Ty::F64 => col.push_f64(v.and_then(float_text)),
                    Ty::Dim(k) => col.push_i32(v.and_then(|r| dim_of(r, k))),
                    Ty::Str => {
                        let code = v.map(|r| self.strings.intern(&str_of(r)));
                        col.push_str(code)
                    }
                    Ty::Json => {
                        let code = v.map(|r| match self.raw_json.get(r) {
                            Some(&c) => c,
                            None => {
                                let c = self.strings.intern(&compact_of(r));
                                self.raw_json.insert(r.into(), c);
                                c
                            }
                        });
                        col.push_str(code)
                    }
                }
            }
        }
    }
}

/// Bit mask of the arg keys of side table `ti`.
#[inline]
fn table_mask(ti: usize) -> u64 {
    static MASKS: std::sync::OnceLock<Vec<u64>> = std::sync::OnceLock::new();
    MASKS.get_or_init(|| TABLES.iter().map(|t| t.cols.iter().fold(0u64, |m, c| m | (1u64 << c.key))).collect())[ti]
}

#[inline]
fn phase_of(raw: &[u8]) -> u8 {
    if raw.len() == 3 && raw[0] == b'"' && raw[2] == b'"' {
        let c = [raw[1]];
        return phase_code(unsafe { std::str::from_utf8_unchecked(&c) });
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

#[inline]
fn num_ns(t: &[u8]) -> Option<i64> {
    if let Some(v) = fast_us_ns(t) {
        return Some(v);
    }
    if t.first() == Some(&b'"') {
        return us_text_to_ns(t[1..t.len() - 1].trim_ascii());
    }
    us_text_to_ns(t)
}

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

/// Parse the events at `spans` (offsets into `buf`, whose first byte is at `base` in the stream).
pub fn parse_part(buf: &[u8], spans: &[(usize, usize)], base: u64) -> Part {
    let mut part = Part::with_capacity(spans.len());
    let mut fields = Fields::new();
    for (i, &(a, b)) in spans.iter().enumerate() {
        let span = &buf[a..b];
        if fast_fields(span, &mut fields) {
            part.add_event(&fields, base + a as u64, (b - a) as u32);
            continue;
        }
        match serde_json::from_slice::<RawEvent>(span) {
            Ok(ev) => part.add_event(&Fields::from_serde(&ev), base + a as u64, (b - a) as u32),
            Err(first) => {
                let fixed = sanitize(span);
                match serde_json::from_slice::<RawEvent>(&fixed) {
                    Ok(ev) => {
                        part.repaired += 1;
                        part.add_event(&Fields::from_serde(&ev), base + a as u64, (b - a) as u32)
                    }
                    Err(_) => {
                        part.error = Some((i, format!("{first}")));
                        return part;
                    }
                }
            }
        }
    }
    part
}

/// The trace's columns, built by appending parts in order.
pub struct Columns {
    pub strings: Interner,
    pub n: usize,
    pub head: Head,
    pub dur: Col,
    pub correlation: Col,
    pub external_id: Col,
    pub stream: Col,
    pub device: Col,
    pub offset: Vec<u64>,
    pub len: Vec<u32>,
    pub tables: Vec<(Vec<u32>, Vec<Col>)>,
    pub flows: Flows,
    /// synthetic id -> original string, for pids/tids that were strings
    pub id_names: Vec<(i64, String)>,
    id_codes: rustc_hash::FxHashMap<u32, i64>,
    pub repaired: usize,
    pub bad_numbers: usize,
}

/// Synthetic ids for string pids/tids (and ids outside the i32 range): far below any real id.
const SYNTH_BASE: i64 = -(1 << 30);

impl Columns {
    pub fn new() -> Self {
        let p = Part::new();
        Columns {
            strings: Interner::default(),
            n: 0,
            head: p.head,
            dur: p.dur,
            correlation: p.correlation,
            external_id: p.external_id,
            stream: p.stream,
            device: p.device,
            offset: p.offset,
            len: p.len,
            tables: p.tables,
            flows: p.flows,
            id_names: Vec::new(),
            id_codes: Default::default(),
            repaired: 0,
            bad_numbers: 0,
        }
    }

    pub fn append(&mut self, part: &Part) {
        let remap: Vec<u32> = part.strings.strings().iter().map(|s| self.strings.intern(s)).collect();
        let base = self.n as u32;
        let (codes, names, strings) = (&mut self.id_codes, &mut self.id_names, &self.strings);
        let mut synth = |code: u32| -> i32 {
            let v = *codes.entry(code).or_insert_with(|| {
                let v = (SYNTH_BASE - names.len() as i64).max(i32::MIN as i64);
                names.push((v, strings.strings()[code as usize].to_string()));
                v
            });
            v as i32
        };
        self.head.extend(&part.head, base, &remap, &mut synth);
        self.flows.head.extend(&part.flows.head, base, &remap, &mut synth);
        self.flows.id.extend_from(&part.flows.id, &remap);
        self.flows.bp.extend_from(&part.flows.bp, &remap);
        self.dur.extend_from(&part.dur, &remap);
        self.correlation.extend_from(&part.correlation, &remap);
        self.external_id.extend_from(&part.external_id, &remap);
        self.stream.extend_from(&part.stream, &remap);
        self.device.extend_from(&part.device, &remap);
        self.offset.extend_from_slice(&part.offset);
        self.len.extend_from_slice(&part.len);
        for (t, (rows, cols)) in self.tables.iter_mut().zip(part.tables.iter()) {
            t.0.extend(rows.iter().map(|&r| r + base));
            for (a, b) in t.1.iter_mut().zip(cols.iter()) {
                a.extend_from(b, &remap);
            }
        }
        self.repaired += part.repaired;
        self.bad_numbers += part.bad_numbers;
        self.n += part.n;
    }

    /// Add `base_ns` to every timestamp (baseTimeNanoseconds).
    pub fn shift_time(&mut self, base_ns: i64) {
        for col in [&mut self.head.ts, &mut self.flows.head.ts] {
            if let Vals::I64(v) = &mut col.vals {
                for (x, ok) in v.iter_mut().zip(col.valid.iter()) {
                    if *ok {
                        *x = x.saturating_add(base_ns);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn parse_one() {
        let buf = br#"{"ph":"X","cat":"kernel","name":"k\"1","pid":0,"tid":"stream 7","ts":689.047,"dur":1.5,"args":{"correlation":5,"stream":7,"grid":[2,3,1],"Input Dims":[[1, 2], []],"other":{"x":[1]}}}"#;
        let p = parse_part(buf, &[(0, buf.len())], 100);
        assert!(p.error.is_none());
        assert_eq!(p.n, 1);
        assert_eq!(p.head.tid[0], 7);
        if let Vals::I64(v) = &p.head.ts.vals {
            assert_eq!(v[0], 689047);
        }
        assert_eq!(p.strings.strings()[p.head.name[0] as usize].as_ref(), "k\"1");
        assert_eq!(p.tables[0].0, vec![0]);
        assert_eq!(p.offset[0], 100);
        let op = &p.tables[2].1[0];
        if let Vals::Str(v) = &op.vals {
            assert_eq!(p.strings.strings()[v[0] as usize].as_ref(), "[[1,2],[]]");
        }
    }
    #[test]
    fn repairs() {
        let buf = b"{\"ph\":\"X\",\"name\":\"a\x01b\",\"ts\":1,\"dur\":N/A,\"args\":{\"x\":N/A,\"y\":NaN}}";
        let p = parse_part(buf, &[(0, buf.len())], 0);
        assert!(p.error.is_none());
        assert_eq!(p.repaired, 1);
        assert_eq!(p.strings.strings()[p.head.name[0] as usize].as_ref(), "a\u{1}b");
    }
}
