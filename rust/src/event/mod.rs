//! Trace events, from the JSON text of one event to rows of the trace's columns. One job per
//! module:
//!
//! - `fields`: the fast path: pick the typed fields' raw text out of an event with the shared
//!   lexer (`crate::json`), building nothing;
//! - `raw`: the validating path: the same fields through serde_json, for events the fast path
//!   does not take;
//! - `repair`: make an event that is not valid JSON parseable (control characters, bare `N/A`,
//!   invalid UTF-8);
//! - `values`: a field's raw text as a typed value (unescaped string, compact JSON, exact ns,
//!   phase code, array element);
//! - `part`: the rows of a run of consecutive events (`parse_part`, one per parser thread), and
//!   `merge`: parts appended in order into the trace's `Columns`.

mod fields;
mod merge;
mod part;
mod raw;
mod repair;
mod values;

pub use fields::{fast_fields, Fields};
pub use merge::Columns;
pub use part::{parse_part, parse_part_capped, Dropped, Flows, Head, Part};
pub use raw::RawEvent;
pub use repair::sanitize;
