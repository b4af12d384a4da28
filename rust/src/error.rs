//! The decoder's errors: a kind from a closed set, a message, and where in the input.
//!
//! Each kind is a distinct Python exception class of the extension (`_core.ReadError`, ...,
//! all subclasses of `_core.DecodeError`, each with a `kind` class attribute), which
//! `ranksight.io.kineto` maps to a `RanksightError` subclass. The exception's args are
//! `(kind, message, offset, event_index)`.

use std::fmt;

/// What went wrong, as a closed set (`ErrorKind::ALL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// the file cannot be opened or read (missing, a directory, no permission, I/O failure)
    Io,
    /// the file is not what was loaded: reading events back found it shorter or different
    Changed,
    /// the request itself is inconsistent (overlapping event spans to read back)
    Request,
    /// the file is empty
    Empty,
    /// the decompressed input exceeds the size cap
    TooLarge,
    /// the gzip stream is corrupt
    Gzip,
    /// the document is not a JSON trace, or an event is not valid (even repaired) JSON
    Format,
    /// the document ends early (a strict decode, or no event before the cut)
    Truncated,
}

impl ErrorKind {
    pub const ALL: [ErrorKind; 8] = [
        ErrorKind::Io,
        ErrorKind::Changed,
        ErrorKind::Request,
        ErrorKind::Empty,
        ErrorKind::TooLarge,
        ErrorKind::Gzip,
        ErrorKind::Format,
        ErrorKind::Truncated,
    ];

    /// The stable name Python sees (first element of the exception's args and its `kind`).
    pub const fn name(self) -> &'static str {
        match self {
            ErrorKind::Io => "io",
            ErrorKind::Changed => "changed",
            ErrorKind::Request => "request",
            ErrorKind::Empty => "empty",
            ErrorKind::TooLarge => "too_large",
            ErrorKind::Gzip => "gzip",
            ErrorKind::Format => "format",
            ErrorKind::Truncated => "truncated",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, Clone)]
pub struct DecodeError {
    pub kind: ErrorKind,
    pub message: String,
    /// byte offset in the (decompressed) stream, or in the compressed file for gzip errors
    pub offset: Option<u64>,
    /// index of the event in `traceEvents`
    pub event_index: Option<u64>,
}

impl DecodeError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        DecodeError { kind, message: message.into(), offset: None, event_index: None }
    }

    pub fn at(mut self, offset: Option<u64>, event_index: Option<u64>) -> Self {
        self.offset = offset;
        self.event_index = event_index;
        self
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

impl std::error::Error for DecodeError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_have_distinct_stable_names() {
        let names: Vec<&str> = ErrorKind::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(names, ["io", "changed", "request", "empty", "too_large", "gzip", "format", "truncated"]);
        let e = DecodeError::new(ErrorKind::Changed, "x").at(Some(3), None);
        assert_eq!(e.to_string(), "changed: x");
        assert_eq!(e.offset, Some(3));
    }
}
