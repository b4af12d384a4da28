"""``views/intervals.union_length_by``: the length each key's intervals cover, one query for every
key, equal to ``union_length`` of each key alone (hand-built exact values, and a Hypothesis
property against the per-key function)."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from ranksight.views.intervals import union_length, union_length_by


def test_exact_values_per_key():
    df = pl.DataFrame(
        {
            "rank": [0, 0, 0, 1, 1, 2],
            # rank 0: [0,10) [5,20) touch/overlap -> 20, plus [30,35) -> 25
            # rank 1: [0,10) and a negative interval [50,40) counting 0 -> 10 (it would bridge rank 0's gap
            #         if keys leaked into each other)
            # rank 2: one interval starting where rank 1's ends
            "ts_ns": [0, 5, 30, 0, 50, 10],
            "end_ns": [10, 20, 35, 10, 40, 12],
        }
    )
    out = union_length_by(df, "rank")
    assert out.to_dict(as_series=False) == {"rank": [0, 1, 2], "covered_ns": [25, 10, 2]}


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 1000), st.integers(-50, 200)),
        min_size=1,
        max_size=40,
    )
)
def test_equals_union_length_of_each_key(rows):
    key = [r[0] for r in rows]
    ts = [r[1] for r in rows]
    end = [r[1] + r[2] for r in rows]
    df = pl.DataFrame(
        {"k": key, "ts_ns": ts, "end_ns": end}, schema={"k": pl.Int32, "ts_ns": pl.Int64, "end_ns": pl.Int64}
    )
    got = dict(zip(*union_length_by(df, "k").to_dict(as_series=False).values(), strict=True))
    k = np.array(key)
    want = {int(x): union_length(np.array(ts)[k == x], np.array(end)[k == x]) for x in sorted(set(key))}
    assert got == want


def test_intervals_by_type_groups_in_row_order_and_misses_are_empty():
    """views/gpu_work.intervals_by_type: each (rank, type) its intervals in the work's row order
    (not sorted by time: merge sorts them itself), a key without work empty."""
    import numpy as np
    import polars as pl

    from ranksight.views.gpu_work import intervals_by_type, intervals_of

    work = pl.DataFrame(
        {
            "rank": [1, 0, 1, 0, 1],
            "kernel_type": ["COMPUTATION", "MEMORY", "COMPUTATION", "MEMORY", "COMMUNICATION"],
            "ts_ns": [50, 10, 20, 5, 7],
            "end_ns": [60, 12, 30, 6, 9],
        }
    )
    iv = intervals_by_type(work, ["rank"])
    assert sorted(iv) == [(0, "MEMORY"), (1, "COMMUNICATION"), (1, "COMPUTATION")]
    s, e = iv[(1, "COMPUTATION")]
    assert s.tolist() == [50, 20] and e.tolist() == [60, 30]
    assert iv[(0, "MEMORY")][0].tolist() == [10, 5]
    s, e = intervals_of(iv, (0, "COMPUTATION"))
    assert s.size == 0 and e.size == 0 and s.dtype == np.int64
    assert intervals_by_type(work.clear(), ["rank"]) == {}
