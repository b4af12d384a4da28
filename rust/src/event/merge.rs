//! The trace's columns: the parts of `parse_part` appended in order (string codes remapped into
//! one interner, rows shifted, string pids/tids given synthetic ids), then shifted to the
//! trace's time base.

use super::part::{Dropped, Flows, Head, Part, MAX_LISTED};
use crate::columns::{Col, Interner, Vals};

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
    /// events dropped for an unusable `ts` / `dur` (see `Part`), the first `MAX_LISTED` by
    /// event index
    pub dropped: usize,
    pub dropped_ts: usize,
    pub dropped_dur: usize,
    pub drops: Vec<Dropped>,
    /// strings cut by the per-string cap while parsing: (event index, length), the first
    /// `MAX_LISTED`, and their number
    pub cuts: Vec<(u64, u64)>,
    pub cut_count: usize,
}

/// Synthetic ids for string pids/tids (and ids outside the i32 range): far below any real id.
const SYNTH_BASE: i64 = -(1 << 30);

impl Default for Columns {
    fn default() -> Self {
        Self::new()
    }
}

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
            dropped: 0,
            dropped_ts: 0,
            dropped_dur: 0,
            drops: Vec::new(),
            cuts: Vec::new(),
            cut_count: 0,
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
        // synthetic ids in order of first appearance in the document (by event, the pid before
        // the tid), whatever the parts: a part's flow rows and its tids come after its other
        // pids in the loops below, and where parts begin depends on the chunks and the cores
        let mut seen: Vec<(u32, u8, u32)> = Vec::new();
        for h in [&part.head, &part.flows.head] {
            seen.extend(h.pid_str.iter().map(|&(at, c)| (h.rows[at as usize], 0, c)));
            seen.extend(h.tid_str.iter().map(|&(at, c)| (h.rows[at as usize], 1, c)));
        }
        seen.sort_unstable();
        for &(_, _, c) in &seen {
            synth(remap[c as usize]);
        }
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
        self.dropped += part.dropped;
        self.dropped_ts += part.dropped_ts;
        self.dropped_dur += part.dropped_dur;
        let room = MAX_LISTED.saturating_sub(self.drops.len());
        self.drops.extend(part.drops.iter().take(room).map(|d| Dropped { event: d.event + base as u64, ..d.clone() }));
        let room = MAX_LISTED.saturating_sub(self.cuts.len());
        self.cuts.extend(part.cuts.iter().take(room).map(|&(e, len)| (e + base as u64, len)));
        self.cut_count += part.cut_count;
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
    use crate::event::parse_part;

    #[test]
    fn parts_append_in_order_with_one_string_table() {
        let a = br#"{"ph":"X","name":"a","pid":"Spans","tid":1,"ts":1,"dur":0}"#;
        let b = br#"{"ph":"X","name":"b","pid":"Spans","tid":2,"ts":2,"dur":0}{"ph":"X","name":"a","pid":3,"tid":"x","ts":3,"dur":0}"#;
        let mut cols = Columns::new();
        cols.append(&parse_part(a, &[(0, a.len())], 0));
        cols.append(&parse_part(b, &[(0, 58), (58, b.len())], a.len() as u64));
        assert_eq!(cols.n, 3);
        assert_eq!(cols.head.rows, vec![0, 1, 2]);
        let names: Vec<&str> = cols.head.name.iter().map(|&c| cols.strings.strings()[c as usize].as_ref()).collect();
        assert_eq!(names, ["a", "b", "a"]);
        // one synthetic id per distinct string id, across parts
        assert_eq!(cols.head.pid[0], cols.head.pid[1]);
        // numbered in order of first appearance, however the events are split into parts: a tid
        // before a pid, a flow event before another event
        let doc = br#"{"ph":"X","tid":"t","ts":1,"dur":0}{"ph":"s","pid":"f","ts":1}{"ph":"X","pid":"p","ts":1,"dur":0}"#;
        let spans = [(0, 35), (35, 62), (62, doc.len())];
        let mut one = Columns::new();
        one.append(&parse_part(doc, &spans, 0));
        let mut three = Columns::new();
        for s in spans {
            three.append(&parse_part(doc, &[s], 0));
        }
        let names = |c: &Columns| c.id_names.iter().map(|(_, n)| n.clone()).collect::<Vec<_>>();
        assert_eq!(names(&one), ["t", "f", "p"]);
        assert_eq!(names(&three), names(&one));
        assert_eq!(cols.head.pid[2], 3);
        assert_eq!(cols.id_names, vec![(-(1 << 30), "Spans".to_string()), (-(1 << 30) - 1, "x".to_string())]);
        assert_eq!(cols.offset, vec![0, a.len() as u64, a.len() as u64 + 58]);
        cols.shift_time(1000);
        let Vals::I64(ts) = &cols.head.ts.vals else { panic!("ts is i64") };
        assert_eq!(ts, &vec![2000, 3000, 4000]);
    }
}
