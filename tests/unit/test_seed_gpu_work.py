"""views/gpu_work.seed_gpu_work: each trace gets its own rows of the stacked GPU work, in their
order, whatever the order of the ranks in the stack; a rank without rows gets an empty frame."""

from __future__ import annotations

from typing import Any

import polars as pl

from ranksight.views.gpu_work import seed_gpu_work


class _Memo:
    """What seed_gpu_work needs of a trace: its rank and a memo."""

    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.store: dict[str, Any] = {}

    def memo(self, key: str, make: Any) -> Any:
        if key not in self.store:
            self.store[key] = make()
        return self.store[key]


def test_each_rank_gets_its_rows_in_order_exact() -> None:
    work = pl.DataFrame(
        {"rank": [2, 0, 2, 0, 2], "ts_ns": [50, 10, 30, 20, 40], "name": ["a", "b", "c", "d", "e"]},
        schema={"rank": pl.Int32, "ts_ns": pl.Int64, "name": pl.String},
    )
    traces = [_Memo(0), _Memo(1), _Memo(2)]
    seed_gpu_work(traces, work)  # type: ignore[arg-type]
    got = {t.rank: t.memo("gpu_work", lambda: None) for t in traces}
    assert got[0].to_dict(as_series=False) == {"ts_ns": [10, 20], "name": ["b", "d"]}
    assert got[2].to_dict(as_series=False) == {"ts_ns": [50, 30, 40], "name": ["a", "c", "e"]}
    assert got[1].height == 0 and got[1].schema == pl.Schema({"ts_ns": pl.Int64, "name": pl.String})


def test_empty_work_gives_empty_frames() -> None:
    work = pl.DataFrame(schema={"rank": pl.Int32, "ts_ns": pl.Int64})
    t = _Memo(0)
    seed_gpu_work([t], work)  # type: ignore[list-item]
    got = t.memo("gpu_work", lambda: None)
    assert got.height == 0 and got.columns == ["ts_ns"]
