"""The events a view reads: one trace's, or several small ranks' stacked with a ``rank`` column.

A view written over an :class:`EventSource` runs the same queries for one rank (``by`` ``[]``)
and for many ranks at once (``by`` ``["rank"]``, issue 19): every key it groups, joins or sweeps
by starts with ``by``, and the side tables are joined on ``(*by, row)``. Where the work is
interval arithmetic in numpy, :meth:`EventSource.lanes` moves each rank's times into a stretch of
its own, so one pass over every rank sees each rank alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from ranksight.views.names import trace_values_matching, values_matching
from ranksight.views.rank_slices import rank_column

if TYPE_CHECKING:
    from ranksight.model.trace import Trace

__all__ = ["EventSource", "CannotStack", "LANE_LIMIT", "thread_key", "THREAD_KEY_TIDS"]

#: Lane times stay below this (int64 with room to spare); longer runs are not laid out in lanes.
LANE_LIMIT = 1 << 62


#: Thread id types :func:`thread_key` folds with a rank into one int64.
THREAD_KEY_TIDS = (pl.Int8, pl.Int16, pl.Int32, pl.UInt8, pl.UInt16)


def thread_key(by: list[str]) -> pl.Expr:
    """One int64 per thread: the ``tid`` (one rank, ``by`` ``[]``), or rank × 2³³ + tid + 2³¹
    (stacked ranks, a 32-bit ``tid``: see :data:`THREAD_KEY_TIDS`), so a sweep keyed by thread sees
    each rank's threads apart; a null tid is one thread of its rank."""
    tid = pl.col("tid").cast(pl.Int64)
    if not by:
        return tid
    return pl.col("rank").cast(pl.Int64) * (1 << 33) + (tid.fill_null(-1) + (1 << 31))


class CannotStack(Exception):
    """The ranks' side tables do not stack (a column typed differently on two ranks), or their
    times do not fit in lanes."""


class EventSource:
    """``ev``: one trace's events (``by`` ``[]``, ``traces`` that one trace) or the stacked events
    of ``traces`` (``by`` ``["rank"]``, a ``rank`` column), as a lazy frame."""

    def __init__(self, traces: list[Trace], ev: pl.LazyFrame, by: list[str]) -> None:
        self.traces, self.ev, self.by = traces, ev, by
        self._tables: dict[str, pl.DataFrame] = {}
        self._names: pl.Series | None = None

    @classmethod
    def one(cls, trace: Trace) -> EventSource:
        return cls([trace], trace.scan(), [])

    @classmethod
    def stacked(cls, traces: list[Trace], stacked: pl.DataFrame) -> EventSource:
        """The ranks of ``traces`` in ``stacked`` (:meth:`Session.stacked_events
        <ranksight.analyses.Session.stacked_events>`)."""
        ranks = pl.Series("rank", [t.rank for t in traces], dtype=pl.Int32)
        return cls(traces, stacked.lazy().filter(pl.col("rank").is_in(ranks.implode())), ["rank"])

    def names(self) -> pl.Series:
        """The distinct event names of every rank (strings)."""
        if self._names is None:
            if not self.by:
                self._names = pl.Series(self.traces[0].distinct_names(), dtype=pl.String)
            else:  # every rank's distinct names, once
                self._names = pl.Series(sorted({n for t in self.traces for n in t.distinct_names()}), dtype=pl.String)
        return self._names

    def check_thread_key(self) -> None:
        """Raise :class:`CannotStack` when the stacked ranks' thread ids do not fold into
        :func:`thread_key` (wider than 32 bits)."""
        if self.by and self.ev.collect_schema().get("tid") not in THREAD_KEY_TIDS:
            raise CannotStack("tid")

    def names_matching(self, pattern: str, col: str = "name") -> list[str]:
        """The distinct values of ``col`` that match ``pattern``, over every rank."""
        if not self.by:
            return trace_values_matching(self.traces[0], pattern, col)
        if col == "name":
            return values_matching(self.names(), pattern)
        return values_matching(self.ev.select(pl.col(col).unique()).collect().to_series(), pattern)

    def table(self, name: str) -> pl.DataFrame:
        """The side table ``name`` (:meth:`Trace.table <ranksight.model.trace.Trace.table>`), with
        a ``rank`` column when stacked (made once)."""
        if not self.by:
            return self.traces[0].table(name)
        if name not in self._tables:
            frames = [t.table(name) for t in self.traces]
            frames = [f.with_columns(rank_column(t.rank, f.height)) for t, f in zip(self.traces, frames, strict=True)]
            try:
                self._tables[name] = pl.concat(frames, how="diagonal_relaxed")
            except (pl.exceptions.SchemaError, pl.exceptions.InvalidOperationError, pl.exceptions.ComputeError) as e:
                raise CannotStack(name) from e
        return self._tables[name]

    def with_args(self, df: pl.DataFrame, *names: str) -> pl.DataFrame:
        """:meth:`Trace.with_args <ranksight.model.trace.Trace.with_args>` over the source."""
        if not self.by:
            return self.traces[0].with_args(df, *names)
        out = df
        for n in names:
            t = self.table(n)
            dup = [c for c in t.columns if c not in ("row", "rank") and c in out.columns]
            t = t.rename({c: f"{n}_{c}" for c in dup}).with_columns(pl.col("row").cast(out.schema["row"]))
            out = out.join(t, on=["rank", "row"], how="left", maintain_order="left")
        return out

    def lanes(self) -> pl.DataFrame:
        """``rank, shift``: what to add to each rank's times to lay the ranks in lanes, in the
        order of ``traces`` — rank ``i``'s ranges (events with a duration) go to
        ``[i × stride, i × stride + span]`` with ``stride`` longer than every rank's span, so no
        interval of one rank meets or touches another's. One rank: shift 0. Raises
        :class:`CannotStack` past :data:`LANE_LIMIT`."""
        if not self.by:
            return pl.DataFrame(
                {"rank": [self.traces[0].rank], "shift": [0]}, schema={"rank": pl.Int32, "shift": pl.Int64}
            )
        ext = (  # over the ranges (an instant's or a metadata event's time may be 0: no lane would fit)
            self.ev.filter(pl.col("ts_ns").is_not_null() & pl.col("dur_ns").is_not_null())
            .group_by("rank")
            .agg(
                pl.col("ts_ns").min().alias("lo"),
                pl.max_horizontal(pl.col("ts_ns").max(), pl.col("end_ns").max()).alias("hi"),
            )
            .collect()
        )
        order = pl.DataFrame({"rank": [t.rank for t in self.traces]}, schema={"rank": pl.Int32}).with_row_index("lane")
        ext = order.join(ext, on="rank", how="left", maintain_order="left").with_columns(
            pl.col("lo").fill_null(0), pl.col("hi").fill_null(0)
        )
        stride = int((ext["hi"] - ext["lo"]).max() or 0) + 1
        if ext.height * stride >= LANE_LIMIT:
            raise CannotStack("lanes")
        return ext.select("rank", (pl.col("lane").cast(pl.Int64) * stride - pl.col("lo")).alias("shift"))
