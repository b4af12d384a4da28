"""Vectorised interval arithmetic on sorted numpy arrays (ns).

All functions take half-open intervals ``[start, end)`` as two int64 arrays.
"""

from __future__ import annotations

import numpy as np
import polars as pl

__all__ = ["union", "union_length", "union_length_by", "intersect", "subtract", "gaps", "with_outermost"]


def with_outermost(df: pl.DataFrame, by: str | list[str]) -> pl.DataFrame:
    """``df`` sorted by ``by`` (a column or several), start, longest first (ties in row order),
    with ``outer``: true for the ranges (``ts_ns``, ``end_ns``) that no earlier range of their
    group contains."""
    keys = [by] if isinstance(by, str) else list(by)
    prev_max_end = pl.col("end_ns").cum_max().shift(1).over(keys)
    return df.sort(
        [*keys, "ts_ns", "end_ns"], descending=[*(False for _ in keys), False, True], maintain_order=True
    ).with_columns((prev_max_end.is_null() | (pl.col("ts_ns") >= prev_max_end)).alias("outer"))


def union(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge overlapping or touching intervals. Returns sorted, disjoint intervals."""
    start = np.asarray(start, dtype=np.int64)
    end = np.asarray(end, dtype=np.int64)
    if start.size == 0:
        return start.copy(), end.copy()
    order = np.argsort(start, kind="stable")
    s = start[order]
    e = np.maximum(end[order], s)
    run_max = np.maximum.accumulate(e)
    # a new block starts where the start is beyond every earlier end
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    new[1:] = s[1:] > run_max[:-1]
    idx = np.flatnonzero(new)
    out_s = s[idx]
    ends_idx = np.append(idx[1:] - 1, s.size - 1)
    out_e = run_max[ends_idx]
    return out_s, out_e


def union_length(start: np.ndarray, end: np.ndarray) -> int:
    """Total length covered by the intervals."""
    s, e = union(start, end)
    return int((e - s).sum())


def union_length_by(df: pl.DataFrame, key: str) -> pl.DataFrame:
    """Per ``key`` of ``df`` (columns ``key, ts_ns, end_ns``), the length its intervals cover, as
    :func:`union_length` of each key's intervals (touching intervals merge, negative lengths count
    0): ``key, covered_ns``, sorted by key; one query for every key."""
    s, e = pl.col("ts_ns"), pl.max_horizontal("ts_ns", "end_ns")
    blocks = (
        df.select(key, s.alias("s"), e.alias("e"))
        .sort(key, "s", maintain_order=True)
        .with_columns(pl.col("e").cum_max().over(key).alias("run"))
        .with_columns(pl.col("run").shift(1).over(key).alias("prev"))
        .with_columns((pl.col("prev").is_null() | (pl.col("s") > pl.col("prev"))).cum_sum().alias("block"))
        .group_by(key, "block")
        .agg(pl.col("s").min(), pl.col("run").max())
    )
    return blocks.group_by(key).agg((pl.col("run") - pl.col("s")).sum().cast(pl.Int64).alias("covered_ns")).sort(key)


def intersect(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Intersection of two disjoint sorted interval sets."""
    a_s, a_e = a
    b_s, b_e = b
    if a_s.size == 0 or b_s.size == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    # boundary sweep: +1/-1 events of both sets; covered by both where depth == 2
    pts = np.concatenate([a_s, a_e, b_s, b_e])
    delta = np.concatenate([np.ones(a_s.size), -np.ones(a_e.size), np.ones(b_s.size), -np.ones(b_e.size)]).astype(
        np.int64
    )
    order = np.lexsort((delta, pts))  # ends before starts at equal points
    pts = pts[order]
    depth = np.cumsum(delta[order])
    inside = depth == 2
    starts = pts[:-1][inside[:-1]]
    ends = pts[1:][inside[:-1]]
    keep = ends > starts
    return starts[keep], ends[keep]


def subtract(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Parts of disjoint sorted set ``a`` not covered by disjoint sorted set ``b``."""
    a_s, a_e = a
    b_s, b_e = b
    if a_s.size == 0 or b_s.size == 0:
        return a_s.copy(), a_e.copy()
    pts = np.concatenate([a_s, a_e, b_s, b_e])
    da = np.concatenate([np.ones(a_s.size), -np.ones(a_e.size), np.zeros(b_s.size + b_e.size)]).astype(np.int64)
    db = np.concatenate([np.zeros(a_s.size + a_e.size), np.ones(b_s.size), -np.ones(b_e.size)]).astype(np.int64)
    order = np.argsort(pts, kind="stable")
    pts = pts[order]
    ca = np.cumsum(da[order])
    cb = np.cumsum(db[order])
    inside = (ca > 0) & (cb == 0)
    starts = pts[:-1][inside[:-1]]
    ends = pts[1:][inside[:-1]]
    keep = ends > starts
    s, e = starts[keep], ends[keep]
    return union(s, e)


def gaps(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Gaps between the merged intervals (inside their overall span)."""
    s, e = union(start, end)
    return e[:-1], s[1:]
