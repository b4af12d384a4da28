"""views/rank_slices.RankSlices: each rank's rows as slices of one stable sort (exact values)."""

from __future__ import annotations

import polars as pl

from ranksight.views.rank_slices import RankSlices


def _df() -> pl.DataFrame:
    return pl.DataFrame(
        {"rank": [2, 0, 2, None, 0, 1, 2], "v": [10, 20, 11, 99, 21, 30, 12]},
        schema={"rank": pl.Int32, "v": pl.Int64},
    )


def test_each_rank_gets_its_rows_in_their_order() -> None:
    s = RankSlices(_df())
    assert s[0]["v"].to_list() == [20, 21]
    assert s[1]["v"].to_list() == [30]
    assert s[2]["v"].to_list() == [10, 11, 12]
    assert list(s) == [0, 1, 2]
    assert len(s) == 3


def test_null_ranks_belong_to_no_rank_and_a_missing_rank_is_empty_with_the_schema() -> None:
    s = RankSlices(_df())
    assert s.frame.height == 6  # the null-rank row is not in any slice
    assert 99 not in s.frame["v"].to_list()
    empty = s[7]
    assert empty.height == 0
    assert empty.schema == _df().schema
    assert 7 not in s and 2 in s


def test_equals_a_filter_per_rank_and_drop_removes_the_column() -> None:
    df = _df()
    s = RankSlices(df)
    d = RankSlices(df, drop=True)
    for r in (0, 1, 2, 5):
        want = df.filter(pl.col("rank") == r)
        assert s[r].equals(want)
        assert d[r].equals(want.drop("rank"))


def test_ranks_already_in_order_are_not_reordered() -> None:
    df = pl.DataFrame({"rank": [0, 0, 1, 3, 3], "v": [5, 4, 3, 2, 1]})
    s = RankSlices(df)
    assert s[0]["v"].to_list() == [5, 4]
    assert s[3]["v"].to_list() == [2, 1]
    assert s[2].height == 0


def test_rank_rows_reads_slices_or_filters_the_same_rows() -> None:
    from ranksight.views.rank_slices import rank_rows

    df = _df()
    for r in (0, 2, 9):
        assert rank_rows(RankSlices(df), r).equals(rank_rows(df, r))
    assert rank_rows(df, 2)["v"].to_list() == [10, 11, 12]


def test_rank_column_exact() -> None:
    from ranksight.views.rank_slices import rank_column

    c = rank_column(7, 3)
    assert (c.name, c.dtype, c.to_list()) == ("rank", pl.Int32, [7, 7, 7])
    assert rank_column(2, 0).to_list() == []
