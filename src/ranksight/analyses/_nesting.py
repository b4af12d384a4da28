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
        return col.cast(pl.Int64).fill_null(-1).to_numpy()
    return col.rank("dense").cast(pl.Int64).fill_null(-1).to_numpy()


def _sweep(key: np.ndarray, start: np.ndarray, end: np.ndarray, is_point: np.ndarray) -> np.ndarray:
    """Innermost enclosing span (its index in the inputs, −1 none) of every item: sorted and swept
    in the Rust core (an index sort: no sorted copies of the columns)."""
    k, s, e = (np.ascontiguousarray(a, dtype=np.int64).tobytes() for a in (key, start, end))
    return np.frombuffer(_core.enclosing(k, s, e, is_point.astype(np.uint8).tobytes()), dtype=np.int64).copy()


def _as_index(v: np.ndarray) -> pl.Series:
    s = pl.Series(_I, v)
    return pl.select(pl.when(s >= 0).then(s).otherwise(None).cast(pl.UInt32)).to_series().alias(_I)


def innermost_enclosing(spans: pl.DataFrame, points: pl.DataFrame, *, key: str = "tid") -> pl.Series:
    """Index (row position in ``spans``) of the innermost span enclosing each point; null if none.

    ``spans`` needs ``key, ts_ns, end_ns``; ``points`` needs ``key, ts_ns``. The result has one
    value per row of ``points``, in the same order.
    """
    if points.height == 0 or spans.height == 0:
        return pl.Series(_I, [None] * points.height, dtype=pl.UInt32)
    ns, npts = spans.height, points.height
    kt = pl.Int64 if spans[key].dtype.is_integer() and points[key].dtype.is_integer() else pl.String
    both = pl.concat([
        spans.select(pl.col(key).cast(kt), pl.col("ts_ns").cast(pl.Int64), pl.col("end_ns").cast(pl.Int64)),
        points.select(pl.col(key).cast(kt), pl.col("ts_ns").cast(pl.Int64), pl.col("ts_ns").cast(pl.Int64).alias("end_ns")),
    ])
    ok = both["ts_ns"].is_not_null() & both["end_ns"].is_not_null()
    is_point = np.zeros(ns + npts, dtype=bool)
    is_point[ns:] = True
    key_a = _codes(both[key])
    ts = both["ts_ns"].fill_null(0).to_numpy()
    end = both["end_ns"].fill_null(0).to_numpy()
    # spans without times enclose nothing; points without a time get no answer
    okn = ok.to_numpy()
    end = np.where(okn, end, ts)
    res = _sweep(key_a, ts, end, is_point)[ns:]
    res[~okn[ns:]] = -1
    return _as_index(res)


def parent_spans(spans: pl.DataFrame, *, key: str = "tid") -> pl.Series:
    """Index of each span's innermost enclosing span (its parent) in ``spans``; null for roots.
    A zero-length span's parent is the innermost span enclosing its instant."""
    if spans.height == 0:
        return pl.Series(_I, [], dtype=pl.UInt32)
    ok = (spans["ts_ns"].is_not_null() & spans["end_ns"].is_not_null()).to_numpy()
    ts = spans["ts_ns"].fill_null(0).to_numpy()
    end = np.where(ok, spans["end_ns"].fill_null(0).to_numpy(), ts)
    res = _sweep(_codes(spans[key]), ts, end, np.zeros(spans.height, dtype=bool))
    res[~ok] = -1
    return _as_index(res)
