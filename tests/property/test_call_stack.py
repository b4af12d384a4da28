"""HTA's call stack (``_stacks.nest``, a merge of two sorted marker lists in the Rust core) equals
the definition written out: all 2n open/close markers in one lexicographic sort, a running stack
size, and each event's parent = the last open on its thread at depth − 1."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from ranksight.views.hta_call_stack import nest


def reference(ev: pl.DataFrame) -> dict[int, tuple[int | None, int]]:
    """``row -> (parent_row, depth)`` for events of positive duration, by the marker definition."""
    ev = ev.filter(pl.col("end_ns") > pl.col("ts_ns"))
    n = ev.height
    thread = ev.select(pl.struct("pid", "tid").rank("dense")).to_series().to_numpy().astype(np.int64)
    ts, end, row = (ev[c].to_numpy().astype(np.int64) for c in ("ts_ns", "end_ns", "row"))
    dur = end - ts
    markers = sorted(
        [(thread[i], ts[i], 1, -dur[i], row[i], i) for i in range(n)]
        + [(thread[i], end[i], 0, dur[i], -row[i], i) for i in range(n)]
    )
    out: dict[int, tuple[int | None, int]] = {}
    size = 0
    last_open: dict[tuple[int, int], int] = {}
    for th, _t, kind, _k1, _k2, i in markers:
        if kind == 0:
            size -= 1
            continue
        parent = last_open.get((th, size - 1)) if size > 0 else None
        out[int(row[i])] = (int(row[parent]) if parent is not None else None, size)
        last_open[(th, size)] = i
        size += 1
    return out


@st.composite
def events(draw):  # noqa: ANN001, ANN201
    k = draw(st.integers(1, 40))
    rows = []
    for r in range(k):
        ts = draw(st.integers(0, 30))
        rows.append(
            {
                "row": r,
                "pid": draw(st.integers(0, 1)),
                "tid": draw(st.integers(0, 2)),
                "ts_ns": ts,
                "end_ns": ts + draw(st.integers(1, 20)),
            }
        )
    return pl.DataFrame(
        rows, schema={"row": pl.UInt32, "pid": pl.Int32, "tid": pl.Int32, "ts_ns": pl.Int64, "end_ns": pl.Int64}
    )


@settings(max_examples=300, deadline=None)
@given(ev=events())
def test_call_stack_matches_the_marker_definition(ev: pl.DataFrame) -> None:
    got = nest(ev)
    want = reference(ev)
    assert {r: (p, d) for r, p, d in got.select("row", "parent_row", "depth").iter_rows()} == want


def test_crossing_event_is_a_child_of_the_open_one() -> None:
    # A[0,10) holds B[2,5) and C[5,8); D[8,12) crosses A and still opens inside it (depth 1)
    ev = pl.DataFrame(
        {"row": [0, 1, 2, 3], "pid": [1] * 4, "tid": [1] * 4, "ts_ns": [0, 2, 5, 8], "end_ns": [10, 5, 8, 12]},
        schema={"row": pl.UInt32, "pid": pl.Int32, "tid": pl.Int32, "ts_ns": pl.Int64, "end_ns": pl.Int64},
    )
    got = nest(ev).sort("row")
    assert got["parent_row"].to_list() == [None, 0, 0, 0]
    assert got["depth"].to_list() == [0, 1, 1, 1]
