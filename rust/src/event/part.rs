//! The rows of a run of consecutive events: each event's fields typed into the event table,
//! the flow table and the side tables, with strings interned per part (`parse_part` runs on
//! one parser thread; `merge` appends the parts in order).

use super::fields::{fast_fields, Fields};
use super::raw::RawEvent;
use super::repair::sanitize;
use super::values::{compact_of, dim_of, num_ns, phase_of, str_of};
use crate::columns::{Col, Interner};
use crate::limits::cap_text;
use crate::numbers::{float_text, int_text};
use crate::schema::{phase_byte, table_mask, Key, Ty, FLOW_PHASES, PHASE_UNKNOWN, TABLES};
use std::borrow::Cow;

const PH_METADATA: u8 = phase_byte(b'M');
const PH_COMPLETE: u8 = phase_byte(b'X');

/// Dropped events and cut strings listed by event in a part (the others are counted).
pub const MAX_LISTED: usize = 20;

/// An event dropped because its time cannot be used: which field (`ts` or `dur`) and its
/// raw text (at most 40 bytes; `missing` when the event lacks it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dropped {
    pub event: u64,
    pub field: &'static str,
    pub text: String,
    /// the event's name and category (at most 40 bytes each)
    pub name: String,
    pub cat: String,
}

/// The raw text of a value for a message: at most 40 bytes, on a character boundary.
fn excerpt(raw: Option<&[u8]>) -> String {
    let Some(raw) = raw else { return "missing".to_string() };
    let t = String::from_utf8_lossy(&raw[..raw.len().min(40)]).into_owned();
    let t = t.trim_end_matches('\u{fffd}').to_string();
    if raw.len() > 40 {
        format!("{t}\u{2026}")
    } else {
        t
    }
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
    pub(super) fn new() -> Self {
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
    pub(super) fn extend(&mut self, src: &Head, base: u32, remap: &[u32], mut synth: impl FnMut(u32) -> i32) {
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
    pub(super) fn new() -> Self {
        Flows { head: Head::new(), id: Col::new(Ty::I64), bp: Col::new(Ty::Str) }
    }
}

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
    /// events dropped for a `ts` (any event but metadata) or a `dur` (complete events, `X`)
    /// that is missing or not a number in range; the first `MAX_LISTED` (local event indices)
    pub dropped: usize,
    pub dropped_ts: usize,
    pub dropped_dur: usize,
    pub drops: Vec<Dropped>,
    /// strings cut by the per-string cap: (local event index, length), the first `MAX_LISTED`
    pub cuts: Vec<(u64, u64)>,
    pub cut_count: usize,
}

impl Default for Part {
    fn default() -> Self {
        Self::new()
    }
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
            dropped: 0,
            dropped_ts: 0,
            dropped_dur: 0,
            drops: Vec::new(),
            cuts: Vec::new(),
            cut_count: 0,
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
        let ts = ev.ts.and_then(num_ns);
        let dur = ev.dur.and_then(num_ns);
        // an event without a usable time is dropped (its span stays: rows are event indices)
        let bad_ts = ph != PH_METADATA && ts.is_none();
        let bad_dur = ph == PH_COMPLETE && dur.is_none();
        if bad_ts || bad_dur {
            self.dropped += 1;
            self.dropped_ts += bad_ts as usize;
            self.dropped_dur += (bad_dur && !bad_ts) as usize;
            if self.drops.len() < MAX_LISTED {
                let (field, raw) = if bad_ts { ("ts", ev.ts) } else { ("dur", ev.dur) };
                let short = |v: Option<&[u8]>| v.map(|r| excerpt(Some(str_of(r).as_bytes()))).unwrap_or_default();
                self.drops.push(Dropped { event: row as u64, field, text: excerpt(raw), name: short(ev.name), cat: short(ev.cat) });
            }
            return;
        }
        if ts.is_none() && ev.ts.is_some_and(|t| t != b"null") {
            self.bad_numbers += 1;
        }
        if dur.is_none() && ev.dur.is_some_and(|t| t != b"null") {
            self.bad_numbers += 1;
        }
        let cat = ev.cat.map(str_of).unwrap_or(Cow::Borrowed(""));
        let cat = self.strings.intern(&cat);
        let name = ev.name.map(str_of).unwrap_or(Cow::Borrowed(""));
        let name = self.strings.intern(&name);
        let pid = self.id_value(ev.pid);
        let tid = self.id_value(ev.tid);
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
            self.correlation.push_i64(a[Key::Correlation.index()].and_then(int_text));
            let ext = a[Key::ExternalId.index()].or(a[Key::ExternalIdOld.index()]);
            self.external_id.push_i64(ext.and_then(int_text));
            self.stream.push_i64(a[Key::Stream.index()].and_then(int_text));
            self.device.push_i32(a[Key::Device.index()].and_then(int_text).and_then(|v| i32::try_from(v).ok()));
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
                let v = a[cs.key.index()];
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

/// Parse the events at `spans` (offsets into `buf`, whose first byte is at `base` in the stream).
pub fn parse_part(buf: &[u8], spans: &[(usize, usize)], base: u64) -> Part {
    parse_part_capped(buf, spans, base, 0)
}

/// `parse_part` with strings longer than `string_cap` bytes cut (0 = no cap; see `limits`):
/// an event long enough to hold one is parsed from a copy with its long strings cut.
pub fn parse_part_capped(buf: &[u8], spans: &[(usize, usize)], base: u64, string_cap: usize) -> Part {
    let mut part = Part::with_capacity(spans.len());
    let mut fields = Fields::new();
    for (i, &(a, b)) in spans.iter().enumerate() {
        let offset = base + a as u64;
        let len = u32::try_from(b - a).unwrap_or(u32::MAX);
        let ok = match cap_text(&buf[a..b], string_cap) {
            None => part.parse_event(&buf[a..b], &mut fields, offset, len),
            Some((text, cuts)) => {
                for c in cuts {
                    if part.cuts.len() < MAX_LISTED {
                        part.cuts.push((i as u64, c.len));
                    }
                    part.cut_count += 1;
                }
                part.parse_event(&text, &mut Fields::new(), offset, len)
            }
        };
        if let Err(msg) = ok {
            part.error = Some((i, msg));
            return part;
        }
    }
    part
}

impl Part {
    /// Parse one event's text into a row (fast path, else serde_json, else repaired).
    fn parse_event<'a>(&mut self, span: &'a [u8], fields: &mut Fields<'a>, offset: u64, len: u32) -> Result<(), String> {
        if fast_fields(span, fields) {
            self.add_event(fields, offset, len);
            return Ok(());
        }
        match serde_json::from_slice::<RawEvent>(span) {
            Ok(ev) => self.add_event(&Fields::from_serde(&ev), offset, len),
            Err(first) => {
                let fixed = sanitize(span);
                match serde_json::from_slice::<RawEvent>(&fixed) {
                    Ok(ev) => {
                        self.repaired += 1;
                        self.add_event(&Fields::from_serde(&ev), offset, len)
                    }
                    Err(_) => return Err(format!("{first}")),
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::columns::Vals;

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
        let buf = b"{\"ph\":\"i\",\"name\":\"a\x01b\",\"ts\":1,\"dur\":N/A,\"args\":{\"x\":N/A,\"y\":NaN}}";
        let p = parse_part(buf, &[(0, buf.len())], 0);
        assert!(p.error.is_none());
        assert_eq!(p.repaired, 1);
        assert_eq!(p.strings.strings()[p.head.name[0] as usize].as_ref(), "a\u{1}b");
    }

    #[test]
    fn flow_events_are_rows_of_the_flow_table_only() {
        let buf = br#"{"ph":"s","id":7,"cat":"ac2g","ts":1}{"ph":"X","name":"k","ts":2,"dur":1,"bp":"e"}{bad"#;
        let p = parse_part(buf, &[(0, 37), (37, 82)], 0);
        assert!(p.error.is_none());
        assert_eq!(p.n, 2);
        assert_eq!(p.head.rows, vec![1]);
        assert_eq!(p.flows.head.rows, vec![0, 1]);
        let bad = parse_part(buf, &[(0, 37), (82, buf.len())], 0);
        assert_eq!(bad.error.as_ref().map(|e| e.0), Some(1));
        assert_eq!(bad.n, 1);
    }
}
