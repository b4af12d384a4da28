"""Each rank's rows of a frame with a ``rank`` column, as zero-copy slices of one sort.

A loop over ranks that filters a table of every rank (``df.filter(pl.col("rank") == r)``) runs a
polars query per rank over all the rows: its cost grows with ranks × rows (issue 19). A
:class:`RankSlices` sorts once (stably: rows keep their order within a rank; no sort when the ranks
already come in order) and hands out slices, which cost no query.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

if TYPE_CHECKING:
    from ranksight.model.trace import Trace

__all__ = ["RankSlices", "rank_rows", "rank_column", "seed_memos"]


class RankSlices:
    """``slices[r]``: the rows of ``df`` whose ``col`` is ``r``, in their order (an empty frame
    with ``df``'s schema when there is none); rows whose ``col`` is null belong to no rank. With
    ``drop``, the slices lack ``col`` (dropped once, not per slice)."""

    def __init__(self, df: pl.DataFrame, col: str = "rank", *, drop: bool = False) -> None:
        if df[col].null_count():
            df = df.filter(pl.col(col).is_not_null())
        rk = df[col].to_numpy()
        if rk.size > 1 and (np.diff(rk) < 0).any():
            df = df.sort(col, maintain_order=True)
            rk = df[col].to_numpy()
        self._df = df.drop(col) if drop else df
        self._bounds: dict[int, tuple[int, int]] = {}
        if rk.size:
            starts = np.flatnonzero(np.r_[True, rk[1:] != rk[:-1]])
            ends = np.r_[starts[1:], rk.size]
            self._bounds = {int(rk[a]): (int(a), int(b)) for a, b in zip(starts, ends, strict=True)}

    @property
    def frame(self) -> pl.DataFrame:
        """The rows with a rank, sorted by rank (stably; without ``col`` with ``drop``)."""
        return self._df

    def __getitem__(self, rank: int) -> pl.DataFrame:
        a, b = self._bounds.get(int(rank), (0, 0))
        return self._df.slice(a, b - a)

    def __contains__(self, rank: object) -> bool:
        return isinstance(rank, int | np.integer) and int(rank) in self._bounds

    def __iter__(self) -> Iterator[int]:
        return iter(self._bounds)

    def __len__(self) -> int:
        return len(self._bounds)


def rank_rows(table: pl.DataFrame | RankSlices, rank: int, col: str = "rank") -> pl.DataFrame:
    """The rows of ``rank`` in ``table``: a slice when it is a :class:`RankSlices` (what a caller
    that maps over many ranks passes, made once), else a filter."""
    if isinstance(table, RankSlices):
        return table[rank]
    return table.filter(pl.col(col) == rank)


def rank_column(rank: int, n: int) -> pl.Series:
    """A ``rank`` column (Int32) of ``n`` rows, all ``rank`` (no query): what a per-trace frame
    gets before frames of several ranks are stacked."""
    return pl.Series("rank", [rank], dtype=pl.Int32).new_from_index(0, n)


def seed_memos(traces: Iterable[Trace], key: str, parts: RankSlices) -> None:
    """Give each trace its rows of ``parts`` as its memo ``key``: what a one-pass computation over
    stacked ranks hands each rank (the trace then reads them as if it had computed them)."""
    for t in traces:
        t.memo(key, functools.partial(_same, parts[t.rank]))


def _same(df: pl.DataFrame) -> pl.DataFrame:
    return df
