"""Invariants of the step views on random inputs.

- The vectorised nesting (open/close sweep + ``join_asof``, crossing nodes removed earliest first)
  gives the same parents and the same dropped nodes as the plugin's plain-Python stack.
- The overview's eight parts are non-negative and add up to each step exactly.
- ``weighted_cover`` equals a brute-force integral.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from ranksight.analyses.gpu_metrics import weighted_cover
from ranksight.analyses.overview import covered_in_windows
from ranksight.views import intervals as _intervals
from ranksight.views.tb_op_tree import _nest

intervals = st.lists(st.tuples(st.integers(0, 60), st.integers(0, 25), st.integers(0, 2)), min_size=0, max_size=40)


def reference_stack(tid: list[int], start: list[int], end: list[int]) -> tuple[list[int], list[bool]]:
    """The plugin's ``build_tree_relationship``: per thread, nodes sorted by (start, −end)."""
    n = len(tid)
    parent = [-1] * n
    kept = [True] * n
    order = sorted(range(n), key=lambda i: (tid[i], start[i], -end[i], i))
    stack: list[int] = []
    cur = None
    for i in order:
        if tid[i] != cur:
            stack, cur = [], tid[i]
        while True:
            if not stack:
                stack.append(i)
                break
            top = stack[-1]
            if start[i] < end[top]:
                if end[i] <= end[top]:
                    parent[i] = top
                    stack.append(i)
                else:
                    kept[i] = False
                break
            stack.pop()
    return parent, kept


@settings(max_examples=150, deadline=None)
@given(intervals)
def test_nesting_matches_the_plugin_stack(spec: list[tuple[int, int, int]]) -> None:
    tid = [t for _, _, t in spec]
    start = [s for s, _, _ in spec]
    end = [s + d for s, d, _ in spec]
    df = pl.DataFrame({"tid": tid, "start_ns": start, "end_ns": end, "row": list(range(len(spec)))}, schema={
        "tid": pl.Int64, "start_ns": pl.Int64, "end_ns": pl.Int64, "row": pl.Int64})  # fmt: skip
    df = df.sort(["tid", "start_ns", "end_ns", "row"], descending=[False, False, True, False])
    parent, _, kept = _nest(df)
    rows = df["row"].to_list()
    ref_parent, ref_kept = reference_stack(tid, start, end)
    got_parent = {rows[i]: (rows[parent[i]] if parent[i] >= 0 else -1) for i in range(len(rows)) if kept[i]}
    want_parent = {i: ref_parent[i] for i in range(len(spec)) if ref_kept[i]}
    assert got_parent == want_parent


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 100), st.integers(0, 30), st.floats(0, 3)), max_size=25),
    st.lists(st.integers(0, 140), min_size=1, max_size=6),
)
def test_weighted_cover_is_an_integral(spec: list[tuple[int, int, float]], xs: list[int]) -> None:
    s = np.array([a for a, _, _ in spec], dtype=np.int64)
    e = s + np.array([d for _, d, _ in spec], dtype=np.int64)
    w = np.array([v for _, _, v in spec], dtype=np.float64)
    x = np.array(xs, dtype=np.int64)
    brute = np.array([sum(wk * max(0, min(ek, xi) - sk) for sk, ek, wk in zip(s, e, w, strict=True)) for xi in x])
    assert np.allclose(weighted_cover(s, e, w, x), brute, atol=1e-9)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 200), st.integers(0, 40)), max_size=12), min_size=7, max_size=7),
       st.lists(st.tuples(st.integers(0, 150), st.integers(1, 60)), min_size=1, max_size=4))  # fmt: skip
def test_priority_cascade_parts_add_up(roles: list[list[tuple[int, int]]], steps: list[tuple[int, int]]) -> None:
    # steps as the plugin makes them: sorted and contiguous-or-disjoint
    steps = sorted(steps)
    ws, we, prev = [], [], 0
    for s, d in steps:
        s = max(s, prev)
        ws.append(s)
        we.append(s + d)
        prev = s + d
    ws_a, we_a = np.array(ws, np.int64), np.array(we, np.int64)
    slots = _intervals.union(ws_a, we_a)
    total = np.zeros(len(ws), np.int64)
    for r in roles:
        iv = _intervals.union(np.array([a for a, _ in r], np.int64), np.array([a + d for a, d in r], np.int64))
        cost = _intervals.intersect(slots, iv)
        slots = _intervals.subtract(slots, cost)
        part = covered_in_windows(cost, ws_a, we_a)
        assert (part >= 0).all()
        total += part
    total += covered_in_windows(slots, ws_a, we_a)
    assert (total == we_a - ws_a).all()


def test_nesting_of_a_long_staircase_is_the_plugins() -> None:
    # every node on thread 0 crosses the one before it (the vectorised version once needed a
    # round per crossing and gave up after 64); thread 1 nests normally
    k = 400
    tid = [0] * k + [1, 1]
    start = list(range(k)) + [0, 1]
    end = [s + 2 for s in range(k)] + [10, 5]
    df = pl.DataFrame(
        {"tid": tid, "start_ns": start, "end_ns": end},
        schema={"tid": pl.Int64, "start_ns": pl.Int64, "end_ns": pl.Int64},
    )
    parent, depth, kept = _nest(df)
    ref_parent, ref_kept = reference_stack(tid, start, end)
    assert list(kept) == ref_kept
    assert list(kept[:k]) == [i % 2 == 0 for i in range(k)]
    assert [int(p) for p in parent] == ref_parent
    assert kept[k] and kept[k + 1] and parent[k + 1] == k and depth[k + 1] == 2 and depth[k] == 1
    assert (depth[~kept] == 0).all()
