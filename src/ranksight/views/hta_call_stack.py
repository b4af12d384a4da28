"""CPU call nesting per thread, vectorised (no per-event Python loop).

Events on one CPU thread (same ``pid``, ``tid``) form a call tree by time containment. The tree is
built like HTA's call stack: the open and close markers of every event with a positive duration
are sorted (by time; at equal times closes before opens, longer events open first, shorter events
close first, then by row), a marker sweep gives each event its depth (the stack size before it is
pushed; top level = 0), and an event's parent is the last event opened before it at depth − 1.
This reproduces a stack whose closes pop the top, so partially overlapping events are nested the
way HTA nests them.

Events with zero duration cannot hold children; each is attached to the innermost event that
contains its instant with both ends inclusive (the one that starts later when an event ends and
another starts at that instant).

:func:`enclosing` answers "innermost tree event on my thread that contains this interval" for any
set of query intervals (launches, zero-length events) by an as-of join on the start time and a
walk up the parents, one vectorised step per tree level.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from ranksight import _core

__all__ = ["nest", "enclosing", "ancestor_at_depth"]

_NEST_SCHEMA = {"row": pl.UInt32, "parent_row": pl.Int64, "depth": pl.Int32}


def _thread_key(df: pl.DataFrame) -> np.ndarray:
    """A dense int64 id per (pid, tid)."""
    return df.select(pl.struct("pid", "tid").rank("dense")).to_series().to_numpy().astype(np.int64)


def nest(ev: pl.DataFrame) -> pl.DataFrame:
    """Parent and depth of each event.

    ``ev`` has ``row, pid, tid, ts_ns, end_ns``. Returns ``row, parent_row`` (null at top level)
    and ``depth`` (0 at top level) for every input row.
    """
    if ev.height == 0:
        return pl.DataFrame(schema=_NEST_SCHEMA)
    ev = ev.select("row", "pid", "tid", "ts_ns", "end_ns")
    pos = ev.filter(pl.col("end_ns") > pl.col("ts_ns"))
    zero = ev.filter(pl.col("end_ns") <= pl.col("ts_ns"))
    parts = [_nest_positive(pos)] if pos.height else []
    if zero.height:
        tree = (
            pos.join(parts[0], on="row")
            if parts
            else pos.with_columns(pl.lit(None, pl.Int64).alias("parent_row"), pl.lit(0, pl.Int32).alias("depth"))
        )
        par = enclosing(tree, zero)
        depth_of = tree.select(pl.col("row").cast(pl.Int64).alias("parent_row"), (pl.col("depth") + 1).alias("depth"))
        z = zero.select("row").with_columns(par.alias("parent_row")).join(depth_of, on="parent_row", how="left")
        parts.append(z.with_columns(pl.col("depth").fill_null(0).cast(pl.Int32)).select("row", "parent_row", "depth"))
    return pl.concat(parts).select(
        pl.col("row").cast(pl.UInt32), pl.col("parent_row").cast(pl.Int64), pl.col("depth").cast(pl.Int32)
    )


def _nest_positive(ev: pl.DataFrame) -> pl.DataFrame:
    # the marker sweep runs in the Rust core (``_core.call_stack``): two sorted index arrays and
    # one pass instead of 2n markers with five sort keys (memory on multi-million-op traces)
    cols = [_thread_key(ev), *(ev[c].to_numpy().astype(np.int64) for c in ("ts_ns", "end_ns", "row"))]
    p, d = _core.call_stack(*(np.ascontiguousarray(c).tobytes() for c in cols))
    row = cols[3]
    del cols
    parent_ev = np.frombuffer(p, np.int64)
    depth = np.frombuffer(d, np.int64)
    parent_row = np.where(parent_ev >= 0, row[np.maximum(parent_ev, 0)], -1)
    return pl.DataFrame(
        {
            "row": ev["row"],
            "parent_row": pl.Series(parent_row, dtype=pl.Int64),
            "depth": pl.Series(depth, dtype=pl.Int32),
        }
    ).with_columns(pl.when(pl.col("parent_row") >= 0).then(pl.col("parent_row")).otherwise(None).alias("parent_row"))


def enclosing(tree: pl.DataFrame, queries: pl.DataFrame) -> pl.Series:
    """For each query interval, the ``row`` of the innermost tree event on the same thread that
    contains it (``tree.ts_ns <= q.ts_ns`` and ``q.end_ns <= tree.end_ns``), or null.

    ``tree`` has ``row, pid, tid, ts_ns, end_ns, parent_row`` (a tree from :func:`nest`);
    ``queries`` has ``pid, tid, ts_ns, end_ns``. Returns an Int64 series aligned with ``queries``.
    """
    nq = queries.height
    if nq == 0 or tree.height == 0:
        return pl.Series("enclosing", [None] * nq, dtype=pl.Int64)
    t = tree.select(
        "pid",
        "tid",
        pl.col("ts_ns").alias("__ts"),
        "row",
        "end_ns",
        "parent_row",
    ).sort(["pid", "tid", "__ts", "end_ns", "row"], descending=[False, False, False, True, False])
    # at equal starts keep the innermost (shortest, i.e. the last in this order) as the as-of match
    q = queries.select("pid", "tid", "ts_ns", "end_ns").with_row_index("__q").sort(["pid", "tid", "ts_ns"])
    j = q.join_asof(
        t.select("pid", "tid", "__ts", pl.col("row").alias("__cand")),
        left_on="ts_ns",
        right_on="__ts",
        by=["pid", "tid"],
        strategy="backward",
        check_sortedness=False,
    )
    cand = j["__cand"].cast(pl.Int64).fill_null(-1).to_numpy()
    q_end = j["end_ns"].to_numpy()
    # dense lookups by row
    rows = t["row"].to_numpy().astype(np.int64)
    size = int(rows.max()) + 1
    end_of = np.full(size, np.iinfo(np.int64).min, np.int64)
    end_of[rows] = t["end_ns"].to_numpy()
    parent_of = np.full(size, -1, np.int64)
    parent_of[rows] = t["parent_row"].fill_null(-1).to_numpy()
    out = cand.copy()
    todo = np.flatnonzero(out >= 0)
    while todo.size:
        bad = end_of[out[todo]] < q_end[todo]
        todo = todo[bad]
        if not todo.size:
            break
        out[todo] = parent_of[out[todo]]
        todo = todo[out[todo] >= 0]
    res = np.empty(nq, np.int64)
    res[j["__q"].to_numpy()] = out
    return pl.Series("enclosing", res).replace(-1, None) if (res < 0).any() else pl.Series("enclosing", res)


def ancestor_at_depth(rows: np.ndarray, depth_of: np.ndarray, parent_of: np.ndarray, target: int) -> np.ndarray:
    """The ancestor at depth ``target`` of each row (the row itself at that depth; -1 when the row
    is shallower). ``depth_of``/``parent_of`` are dense arrays indexed by row (-1 = none)."""
    a = np.asarray(rows, dtype=np.int64).copy()
    valid = a >= 0
    valid[valid] = depth_of[a[valid]] >= target
    a[~valid] = -1
    while True:
        idx = np.flatnonzero(a >= 0)
        if not idx.size:
            break
        deeper = idx[depth_of[a[idx]] > target]
        if not deeper.size:
            break
        a[deeper] = parent_of[a[deeper]]
    return a
