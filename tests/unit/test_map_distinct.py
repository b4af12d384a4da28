"""views/comm_extract._map_distinct: the Python path (few values) equals the polars path."""

from __future__ import annotations

import polars as pl
import pytest

import ranksight.views.comm_extract as ce


@pytest.mark.parametrize("limit", [0, 4096])  # 0: every series takes the polars path
def test_map_distinct_once_per_value_nulls_kept(monkeypatch: pytest.MonkeyPatch, limit: int) -> None:
    monkeypatch.setattr(ce, "_MAP_IN_PYTHON_MAX", limit)
    calls: list[str] = []

    def fn(v: str) -> int:
        calls.append(v)
        return len(v)

    s = pl.Series("dims", ["[[2, 3]]", None, "[[4]]", "[[2, 3]]", ""])
    out = ce._map_distinct(s, fn, pl.Int64)
    assert out.name == "dims" and out.dtype == pl.Int64
    assert out.to_list() == [8, None, 5, 8, 0]
    assert sorted(calls) == sorted({"[[2, 3]]", "[[4]]", ""})  # once per distinct non-null value
    empty = ce._map_distinct(pl.Series("x", [None, None], dtype=pl.String), fn, pl.String)
    assert empty.to_list() == [None, None] and empty.dtype == pl.String
