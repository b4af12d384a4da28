"""Time nesting on one thread, vectorised: "which span encloses this instant?".

CPU ops, annotations and Python frames on one thread nest in time. For an instant ``t`` on a
thread, the **innermost enclosing span** is the span on the same thread with
``ts_ns <= t < end_ns`` that started last (half-open intervals; spans of zero length enclose
nothing). No op tree is built: with properly nested spans sorted by (start, −end),

- ``open(t)`` = #spans with ``start <= t`` − #spans with ``end <= t`` is the number of spans that
  contain ``t`` (its depth);
- a span's own depth is the number of spans before it in that order that are still open at its
  start;
- the innermost span containing ``t`` is the last span (in order) with ``start <= t`` whose depth
  is ``open(t) − 1``.

Everything is a sort plus as-of joins (no Python loop over events). Spans that cross (trap 15 of
trace-format.md) give a best-effort answer instead of an error.
"""

from __future__ import annotations

import polars as pl

__all__ = ["innermost_enclosing", "parent_spans"]

_I = "__span_i"


def _counts_le(sorted_vals: pl.DataFrame, key: str, col: str, points: pl.DataFrame, at: str) -> pl.Series:
    """For each point, how many values of ``col`` (same ``key``) are ``<= points[at]``."""
    c = (
        sorted_vals.select(key, col)
        .sort([key, col])
        .with_columns(pl.int_range(1, pl.len() + 1).over(key).alias("__n"))
        .group_by([key, col])
        .agg(pl.col("__n").max())
        .sort(col)
    )
    p = points.select("__p", key, pl.col(at).alias(col)).sort(col)
    j = p.join_asof(c, on=col, by=key, strategy="backward", check_sortedness=False)
    return j.sort("__p")["__n"].fill_null(0)


def _prepare(spans: pl.DataFrame, key: str) -> pl.DataFrame:
    s = (
        spans.select(pl.col(key), pl.col("ts_ns"), pl.col("end_ns"))
        .with_row_index(_I)
        .filter(pl.col("end_ns") > pl.col("ts_ns"))
        .sort([key, "ts_ns", "end_ns"], descending=[False, False, True])
        .with_row_index("__p")
    )
    rank = s.select(pl.int_range(0, pl.len()).over(key).alias("r"))["r"]
    ends_le = _counts_le(s.select(key, pl.col("end_ns").alias("__v")), key, "__v", s, "ts_ns")
    return s.with_columns((rank - ends_le).cast(pl.Int64).alias("__depth"))


def _lookup(s: pl.DataFrame, key: str, pts: pl.DataFrame) -> pl.Series:
    """``pts`` has ``__p, key, ts_ns, __target`` (depth wanted); returns ``__span_i`` per point."""
    right = s.select(key, pl.col("__depth").alias("__target"), pl.col("ts_ns"), _I).sort("ts_ns")
    j = pts.sort("ts_ns").join_asof(right, on="ts_ns", by=[key, "__target"], strategy="backward", check_sortedness=False)
    return j.sort("__p")[_I]


def innermost_enclosing(spans: pl.DataFrame, points: pl.DataFrame, *, key: str = "tid") -> pl.Series:
    """Index (row position in ``spans``) of the innermost span enclosing each point; null if none.

    ``spans`` needs ``key, ts_ns, end_ns``; ``points`` needs ``key, ts_ns``. The result has one
    value per row of ``points``, in the same order.
    """
    if points.height == 0 or spans.height == 0:
        return pl.Series(_I, [None] * points.height, dtype=pl.UInt32)
    s = _prepare(spans, key)
    pts = points.select(pl.col(key), pl.col("ts_ns")).with_row_index("__p")
    starts_le = _counts_le(s.select(key, pl.col("ts_ns").alias("__v")), key, "__v", pts, "ts_ns")
    ends_le = _counts_le(s.select(key, pl.col("end_ns").alias("__v")), key, "__v", pts, "ts_ns")
    pts = pts.with_columns((starts_le - ends_le - 1).cast(pl.Int64).alias("__target"))
    out = _lookup(s, key, pts)
    return out.alias(_I)


def parent_spans(spans: pl.DataFrame, *, key: str = "tid") -> pl.Series:
    """Index of each span's innermost enclosing span (its parent) in ``spans``; null for roots
    and for zero-length spans' own parents when nothing encloses their start."""
    if spans.height == 0:
        return pl.Series(_I, [], dtype=pl.UInt32)
    s = _prepare(spans, key)
    # zero-length spans are not candidates but still get a parent: look them up as points
    pts = spans.select(pl.col(key), pl.col("ts_ns"), pl.col("end_ns")).with_row_index("__p")
    depth = s.select(_I, "__depth")
    pts = pts.join(depth, left_on="__p", right_on=_I, how="left", maintain_order="left")
    starts_le = _counts_le(s.select(key, pl.col("ts_ns").alias("__v")), key, "__v", pts, "ts_ns")
    ends_le = _counts_le(s.select(key, pl.col("end_ns").alias("__v")), key, "__v", pts, "ts_ns")
    # positive-length spans have their depth; a zero-length one is looked up as an instant
    pts = pts.with_columns((starts_le - ends_le).alias("__open")).with_columns(
        (pl.coalesce(pl.col("__depth"), pl.col("__open")) - 1).alias("__target")
    )
    # the parent is at depth d-1 and started at or before this span, excluding the span itself
    right = s.select(key, pl.col("__depth").alias("__target"), "ts_ns", _I, pl.col("__p").alias("__order"))
    order = s.select(_I, pl.col("__p").alias("__self_order"))
    pts = pts.join(order, left_on="__p", right_on=_I, how="left", maintain_order="left")
    j = pts.sort("ts_ns").join_asof(right.sort("ts_ns"), on="ts_ns", by=[key, "__target"], strategy="backward", check_sortedness=False)
    j = j.with_columns(
        pl.when(pl.col("__self_order").is_null() | (pl.col("__order") < pl.col("__self_order")))
        .then(pl.col(_I))
        .otherwise(None)
        .alias(_I)
    )
    return j.sort("__p")[_I]
