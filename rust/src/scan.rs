//! Streaming structural scanner for a Kineto trace document.
//!
//! The scanner never builds a DOM: it walks the top-level object (or a bare top-level array, the
//! 2021 format), records the raw text of every metadata key, and reports the byte span of every
//! element of `traceEvents`. Input arrives in chunks; when an item is cut by the end of the current
//! buffer the scanner stops at the item's start and resumes there once more bytes are appended.

use crate::json::{object_end, skip_ws, string_end, value_end};
use crate::limits::cap_text;

#[derive(Debug, Clone)]
pub struct ScanError {
    pub offset: usize,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq)]
enum State {
    Start,
    /// inside the top-level object, expecting a key or `}`
    ObjKey,
    /// after a value, expecting `,` or `}`
    ObjNext,
    /// inside the events array, expecting an element or `]`
    Events,
    /// inside the events array, after an element: `,` or `]`
    EventsNext,
    Done,
}

pub struct Scanner {
    state: State,
    bare_array: bool,
    pub events_seen: bool,
    pub events_closed: bool,
    pub skipped_non_objects: usize,
    /// stop before the first event (header-only reads)
    pub stop_at_events: bool,
    /// cut strings longer than this in top-level keys and values (0 = none; see `limits`)
    pub string_cap: usize,
    /// lengths of the strings cut in top-level keys and values
    pub meta_cuts: Vec<u64>,
    /// the length of each top-level key and value pushed to `meta`, from the key's opening
    /// quote to the value's end, once their strings are cut (what the item cap measures)
    pub meta_lens: Vec<usize>,
}

pub enum Progress {
    /// everything up to this position was consumed; more input is needed
    NeedMore(usize),
    /// the document is complete at this position
    Finished(usize),
    /// header-only read reached the events array
    ReachedEvents(usize),
}

impl Default for Scanner {
    fn default() -> Self {
        Self::new()
    }
}

impl Scanner {
    pub fn new() -> Self {
        Scanner {
            state: State::Start,
            bare_array: false,
            events_seen: false,
            events_closed: false,
            skipped_non_objects: 0,
            stop_at_events: false,
            string_cap: 0,
            meta_cuts: Vec::new(),
            meta_lens: Vec::new(),
        }
    }

    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    pub fn in_events(&self) -> bool {
        matches!(self.state, State::Events | State::EventsNext)
    }

    /// Scan `buf` from `pos`. Event spans go to `events`, metadata key/raw-value pairs to `meta`.
    pub fn scan(
        &mut self,
        buf: &[u8],
        mut pos: usize,
        eof: bool,
        events: &mut Vec<(usize, usize)>,
        meta: &mut Vec<(String, Vec<u8>)>,
    ) -> Result<Progress, ScanError> {
        let n = buf.len();
        loop {
            pos = skip_ws(buf, pos);
            if pos >= n {
                if self.state == State::Done {
                    return Ok(Progress::Finished(pos));
                }
                return Ok(Progress::NeedMore(pos));
            }
            let c = buf[pos];
            match self.state.clone() {
                State::Start => {
                    if pos == 0 && buf.len() >= 3 && buf[0] == 0xEF && buf[1] == 0xBB && buf[2] == 0xBF {
                        pos = 3;
                        continue;
                    }
                    match c {
                        b'{' => {
                            self.state = State::ObjKey;
                            pos += 1;
                        }
                        b'[' => {
                            self.bare_array = true;
                            self.events_seen = true;
                            self.state = State::Events;
                            pos += 1;
                            if self.stop_at_events {
                                return Ok(Progress::ReachedEvents(pos));
                            }
                        }
                        _ => {
                            return Err(ScanError {
                                offset: pos,
                                message: format!(
                                    "not a JSON trace: expected '{{' or '[' at the start, found {}",
                                    describe_byte(c)
                                ),
                            })
                        }
                    }
                }
                State::ObjKey => match c {
                    b'}' => {
                        self.state = State::Done;
                        pos += 1;
                    }
                    b',' => pos += 1,
                    b'"' => {
                        let Some(end) = string_end(buf, pos + 1) else {
                            return Ok(Progress::NeedMore(pos));
                        };
                        // (the cuts count once the key and its value are consumed: a key
                        // whose value is not all in the buffer is scanned again)
                        let (raw_key, key_cut) = match cap_text(&buf[pos..end], self.string_cap) {
                            Some((cut, cuts)) => (std::borrow::Cow::Owned(cut), cuts.first().map(|c| c.len)),
                            None => (std::borrow::Cow::Borrowed(&buf[pos..end]), None),
                        };
                        let key: String = serde_json::from_slice(&raw_key)
                            .unwrap_or_else(|_| String::from_utf8_lossy(&raw_key[1..raw_key.len() - 1]).into_owned());
                        // need the colon and the start of the value in this buffer too
                        let p = skip_ws(buf, end);
                        if p >= n {
                            return Ok(Progress::NeedMore(pos));
                        }
                        if buf[p] != b':' {
                            return Err(ScanError { offset: p, message: format!("expected ':' after key \"{key}\", found {}", describe_byte(buf[p])) });
                        }
                        let v = skip_ws(buf, p + 1);
                        if v >= n {
                            return Ok(Progress::NeedMore(pos));
                        }
                        if key == "traceEvents" && buf[v] == b'[' {
                            self.meta_cuts.extend(key_cut);
                            self.events_seen = true;
                            self.state = State::Events;
                            pos = v + 1;
                            if self.stop_at_events {
                                return Ok(Progress::ReachedEvents(pos));
                            }
                        } else {
                            match value_end(buf, v, eof) {
                                None => return Ok(Progress::NeedMore(pos)),
                                Some(e) => {
                                    self.meta_cuts.extend(key_cut);
                                    let value = match cap_text(&buf[v..e], self.string_cap) {
                                        Some((cut, cuts)) => {
                                            self.meta_cuts.extend(cuts.iter().map(|c| c.len));
                                            cut
                                        }
                                        None => buf[v..e].to_vec(),
                                    };
                                    self.meta_lens.push(raw_key.len() + (v - end) + value.len());
                                    meta.push((key, value));
                                    self.state = State::ObjNext;
                                    pos = e;
                                }
                            }
                        }
                    }
                    _ => {
                        return Err(ScanError {
                            offset: pos,
                            message: format!("expected a key in the top-level object, found {}", describe_byte(c)),
                        })
                    }
                },
                State::ObjNext => match c {
                    b',' => {
                        self.state = State::ObjKey;
                        pos += 1;
                    }
                    b'}' => {
                        self.state = State::Done;
                        pos += 1;
                    }
                    _ => {
                        return Err(ScanError {
                            offset: pos,
                            message: format!("expected ',' or '}}' in the top-level object, found {}", describe_byte(c)),
                        })
                    }
                },
                State::Events | State::EventsNext => match c {
                    b']' => {
                        self.events_closed = true;
                        self.state = if self.bare_array { State::Done } else { State::ObjNext };
                        pos += 1;
                    }
                    b',' => {
                        self.state = State::Events;
                        pos += 1;
                    }
                    b'{' => {
                        let Some(end) = object_end(buf, pos) else {
                            return Ok(Progress::NeedMore(pos));
                        };
                        events.push((pos, end));
                        self.state = State::EventsNext;
                        pos = end;
                    }
                    _ => match value_end(buf, pos, eof) {
                        None => return Ok(Progress::NeedMore(pos)),
                        Some(e) => {
                            self.skipped_non_objects += 1;
                            pos = e.max(pos + 1);
                        }
                    },
                },
                State::Done => {
                    return Err(ScanError {
                        offset: pos,
                        message: format!("unexpected data after the end of the trace document: {}", describe_byte(c)),
                    })
                }
            }
        }
    }
}

pub fn describe_byte(c: u8) -> String {
    if c.is_ascii_graphic() {
        format!("'{}'", c as char)
    } else {
        format!("byte 0x{c:02x}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(doc: &str, chunk: usize) -> (Vec<String>, Vec<(String, String)>) {
        let bytes = doc.as_bytes();
        let mut s = Scanner::new();
        let mut buf: Vec<u8> = Vec::new();
        let mut evs = Vec::new();
        let mut meta = Vec::new();
        let mut fed = 0;
        let mut out = Vec::new();
        loop {
            let end = (fed + chunk).min(bytes.len());
            buf.extend_from_slice(&bytes[fed..end]);
            fed = end;
            let eof = fed == bytes.len();
            let p = s.scan(&buf, 0, eof, &mut evs, &mut meta).unwrap();
            for (a, b) in evs.drain(..) {
                out.push(String::from_utf8(buf[a..b].to_vec()).unwrap());
            }
            let pos = match p {
                Progress::NeedMore(p) | Progress::Finished(p) | Progress::ReachedEvents(p) => p,
            };
            buf.drain(..pos);
            if eof {
                break;
            }
        }
        let meta = meta.into_iter().map(|(k, v)| (k, String::from_utf8(v).unwrap())).collect();
        (out, meta)
    }

    #[test]
    fn object_with_meta_and_events() {
        let doc = r#"{"schemaVersion": 1, "distributedInfo": {"rank": 3, "x": [1,{"a":"}"}]},
          "traceEvents": [ {"ph":"X","name":"a{b}\"c"}, {"ph":"i"} ], "baseTimeNanoseconds": 17}"#;
        for chunk in [1, 2, 3, 7, 1000] {
            let (ev, meta) = run(doc, chunk);
            assert_eq!(ev, vec![r#"{"ph":"X","name":"a{b}\"c"}"#.to_string(), r#"{"ph":"i"}"#.to_string()]);
            assert_eq!(meta[0], ("schemaVersion".into(), "1".into()));
            assert_eq!(meta[1].0, "distributedInfo");
            assert_eq!(meta[2], ("baseTimeNanoseconds".into(), "17".into()));
        }
    }

    #[test]
    fn long_keys_and_values_are_cut_and_counted_once_in_any_chunking() {
        let long = "k".repeat(1000);
        let doc = format!(r#"{{"{long}": "{long}", "traceEvents": [], "{long}": [1]}}"#);
        for chunk in [1, 7, 300, 5000] {
            let bytes = doc.as_bytes();
            let mut s = Scanner::new();
            s.string_cap = 256;
            let (mut buf, mut meta, mut evs, mut fed) = (Vec::new(), Vec::new(), Vec::new(), 0);
            loop {
                let end = (fed + chunk).min(bytes.len());
                buf.extend_from_slice(&bytes[fed..end]);
                fed = end;
                let p = match s.scan(&buf, 0, fed == bytes.len(), &mut evs, &mut meta).unwrap() {
                    Progress::NeedMore(p) | Progress::Finished(p) | Progress::ReachedEvents(p) => p,
                };
                buf.drain(..p);
                if fed == bytes.len() {
                    break;
                }
            }
            assert_eq!(s.meta_cuts, [1000, 1000, 1000], "chunk {chunk}");
            let cut = format!("{}{}", "k".repeat(256 - 64), crate::limits::marker(1000));
            assert_eq!(meta[0].0, cut);
            assert_eq!(meta[0].1, format!(r#""{cut}""#).into_bytes());
        }
    }

    #[test]
    fn bare_array() {
        let (ev, meta) = run(r#"[{"a":1},{"b":2}]"#, 3);
        assert_eq!(ev.len(), 2);
        assert!(meta.is_empty());
    }
}
