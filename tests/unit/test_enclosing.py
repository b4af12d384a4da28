"""views/enclosing on hand-built spans with missing times, exact: a span without both times
encloses nothing, a point without a time gets no answer, and the index is null where none encloses."""

from __future__ import annotations

import polars as pl

from ranksight.views.enclosing import innermost_enclosing, parent_spans

_S = {"tid": pl.Int32, "ts_ns": pl.Int64, "end_ns": pl.Int64}


def test_innermost_enclosing_with_missing_times_exact() -> None:
    spans = pl.DataFrame({"tid": [1, 1, 1, 2], "ts_ns": [0, 10, 12, 0], "end_ns": [100, 50, None, 100]}, schema=_S)
    points = pl.DataFrame(
        {"tid": [1, 1, 1, 2, 3], "ts_ns": [5, 20, None, 30, 30]}, schema={"tid": pl.Int32, "ts_ns": pl.Int64}
    )
    got = innermost_enclosing(spans, points)
    assert got.dtype == pl.UInt32
    # 5 in span 0; 20 in span 1 (span 2 has no end: encloses nothing); no time; tid 2's span 3; tid 3 none
    assert got.to_list() == [0, 1, None, 3, None]


def test_innermost_enclosing_every_point_enclosed_exact() -> None:
    spans = pl.DataFrame({"tid": [1, 1], "ts_ns": [0, 10], "end_ns": [100, 50]}, schema=_S)
    points = pl.DataFrame({"tid": [1, 1], "ts_ns": [60, 20]}, schema={"tid": pl.Int64, "ts_ns": pl.Int32})
    got = innermost_enclosing(spans, points)
    assert got.dtype == pl.UInt32 and got.null_count() == 0 and got.to_list() == [0, 1]


def test_parent_spans_with_missing_times_exact() -> None:
    spans = pl.DataFrame({"tid": [1, 1, 1, 1], "ts_ns": [0, 10, None, 20], "end_ns": [100, 50, 30, 30]}, schema=_S)
    # span 1's parent is 0, span 3's is 1; span 0 is a root; span 2 has no start: no parent
    assert parent_spans(spans).to_list() == [None, 0, None, 1]
