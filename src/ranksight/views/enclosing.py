"""Time nesting on one thread: "which span encloses this instant?".

CPU ops, annotations and Python frames on one thread nest in time. For an instant ``t`` on a
thread, the **innermost enclosing span** is the span on the same thread with
``ts_ns <= t < end_ns`` that started last (ties: the shorter one, then the later row; half-open
intervals; spans of zero length enclose nothing). A span's **parent** is the innermost span
enclosing its start among the spans before it in (start, −end, row) order.

One sorted sweep in the Rust core (``_core.enclosing``): spans and instants in (thread, start)
order, instants after the spans that start at the same time; a stack of spans, from which spans
that ended before the current start are popped; the top is the answer. Spans that cross (trap 15
of trace-format.md) are handled by the same definition: no error, no best-effort guess.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from ranksight import _core

__all__ = ["innermost_enclosing", "parent_spans"]

_I = "__span_i"


def _codes(col: pl.Series) -> np.ndarray:
    """The thread key as int64 (any dtype)."""
    if col.dtype.is_integer():
        return _int64(col, -1)
    return col.rank("dense").cast(pl.Int64).fill_null(-1).to_numpy()


def _sweep(key: np.ndarray, start: np.ndarray, end: np.ndarray, is_point: np.ndarray) -> np.ndarray:
    """Innermost enclosing span (its index in the inputs, −1 none) of every item: sorted and swept
    in the Rust core (an index sort: no sorted copies of the columns). Read-only result."""
    k, s, e = (np.ascontiguousarray(a, dtype=np.int64).tobytes() for a in (key, start, end))
    return np.frombuffer(_core.enclosing(k, s, e, is_point.astype(np.uint8).tobytes()), dtype=np.int64)


def _as_index(v: np.ndarray) -> pl.Series:
    if v.size and int(v.min()) >= 0:  # every item has one: no query
        return pl.Series(_I, v.astype(np.uint32))
    s = pl.Series(_I, v)
    return pl.select(pl.when(s >= 0).then(s).otherwise(None).cast(pl.UInt32)).to_series().alias(_I)


def _not_null(*cols: pl.Series) -> np.ndarray:
    """Whether every one of ``cols`` has a value, per row (no query when none has a null)."""
    if all(c.null_count() == 0 for c in cols):
        return np.ones(cols[0].len(), dtype=bool)
    ok = cols[0].is_not_null()
    for c in cols[1:]:
        ok = ok & c.is_not_null()
    return ok.to_numpy()


def _int64(col: pl.Series, fill: int) -> np.ndarray:
    fits = col.dtype.is_signed_integer() or col.dtype in (pl.UInt8, pl.UInt16, pl.UInt32)
    if fits and col.null_count() == 0:  # no query (a polars query costs ~0.2 ms); same values
        a = col.to_numpy()
        return a if a.dtype == np.int64 else a.astype(np.int64)
    return col.cast(pl.Int64).fill_null(fill).to_numpy()


def innermost_enclosing(spans: pl.DataFrame, points: pl.DataFrame, *, key: str = "tid") -> pl.Series:
    """Index (row position in ``spans``) of the innermost span enclosing each point; null if none.

    ``spans`` needs ``key, ts_ns, end_ns``; ``points`` needs ``key, ts_ns``. The result has one
    value per row of ``points``, in the same order.
    """
    if points.height == 0 or spans.height == 0:
        return pl.Series(_I, [None] * points.height, dtype=pl.UInt32)
    ns, npts = spans.height, points.height
    # each input array is made, handed to the core as bytes and dropped before the next one:
    # on millions of spans every full-length copy is tens of MB
    if spans[key].dtype.is_integer() and points[key].dtype.is_integer():
        key_a = np.concatenate([_int64(spans[key], -1), _int64(points[key], -1)])
    else:
        key_a = _codes(pl.concat([spans[key].cast(pl.String), points[key].cast(pl.String)]))
    kb = key_a.tobytes()
    del key_a
    s_ok = _not_null(spans["ts_ns"], spans["end_ns"])
    p_ok = _not_null(points["ts_ns"])
    ts = np.concatenate([_int64(spans["ts_ns"], 0), _int64(points["ts_ns"], 0)])
    # spans without times enclose nothing (end = start); points without a time get no answer
    end = np.concatenate([np.where(s_ok, _int64(spans["end_ns"], 0), ts[:ns]), ts[ns:]])
    tb = ts.tobytes()
    del ts
    eb = end.tobytes()
    del end
    is_point = np.zeros(ns + npts, dtype=np.uint8)
    is_point[ns:] = 1
    res = np.frombuffer(_core.enclosing(kb, tb, eb, is_point.tobytes()), dtype=np.int64)[ns:]
    return _as_index(np.where(p_ok, res, -1))


def parent_spans(spans: pl.DataFrame, *, key: str = "tid") -> pl.Series:
    """Index of each span's innermost enclosing span (its parent) in ``spans``; null for roots.
    A zero-length span's parent is the innermost span enclosing its instant."""
    if spans.height == 0:
        return pl.Series(_I, [], dtype=pl.UInt32)
    ok = _not_null(spans["ts_ns"], spans["end_ns"])
    ts = _int64(spans["ts_ns"], 0)
    end = np.where(ok, _int64(spans["end_ns"], 0), ts)
    res = _sweep(_codes(spans[key]), ts, end, np.zeros(spans.height, dtype=bool))
    return _as_index(np.where(ok, res, -1))
