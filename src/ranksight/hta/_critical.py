"""HTA facade: ``critical_path_analysis``.

HTA v0.6 returns ``(CPGraph, success)``: a networkx graph whose ``get_critical_path_breakdown()``
and ``summary()`` give the results. ranksight builds no networkx graph; it returns a
:class:`CriticalPath` with the same two methods (HTA's columns, pandas) and the ranksight tables,
and the same ``(object, success)`` tuple, or None where HTA returns None (no event name contains
the annotation). The differences are listed in ``docs/hta-differences.md#critical-path``.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

from ranksight.analyses.critical_path import rank_breakdown
from ranksight.errors import MissingDataError, RanksightWarning, UsageError
from ranksight.views.names import hta_short_name

if TYPE_CHECKING:
    from collections.abc import Callable

    import pandas as pd

    from ranksight.analyses import Session
    from ranksight.model.trace import Trace

__all__ = ["CriticalPath", "CriticalPathMixin"]

#: HTA's breakdown columns, in its order.
BREAKDOWN_COLUMNS = ("event_idx", "duration", "type", "s_name", "cat", "pid", "tid", "stream", "index", "bound_by")


def _pd() -> Any:
    try:
        import pandas
    except ImportError:  # pragma: no cover - pandas is an HTA-facade requirement
        raise MissingDataError("the HTA facade returns pandas DataFrames: pip install pandas") from None
    return pandas


def _rank_path(
    trace: Trace,
    annotation: str,
    instance_id: int | tuple[int, int] | None,
    hta_compat: bool,
    data_load: Sequence[str] | None,
) -> tuple[pl.DataFrame | None, list[str], str | None, bool]:
    """(breakdown with ``cat`` and ``s_name``, notes, why there is none, annotation found)."""
    try:
        bd, notes = rank_breakdown(
            trace, annotation=annotation, instance_id=instance_id, hta_compat=hta_compat, data_load=data_load
        )
    except MissingDataError as err:
        found = annotation == "" or any(annotation in n for n in trace.distinct_names())
        return None, [], str(err), found
    cats = (
        trace.scan()
        .select(pl.col("row").cast(pl.Int64).alias("event_row"), pl.col("cat").cast(pl.String))
        .join(bd.select("event_row").drop_nulls().unique().lazy(), on="event_row", how="semi")
        .collect()
    )
    names = bd["name"].drop_nulls().unique()
    short = pl.DataFrame(
        {
            "name": names,
            "s_name": [hta_short_name(n, is_memory=n.startswith(("Memcpy", "Memset"))) for n in names.to_list()],
        },
        schema={"name": pl.String, "s_name": pl.String},
    )
    bd = bd.join(cats, on="event_row", how="left", maintain_order="left").join(
        short, on="name", how="left", maintain_order="left"
    )
    return bd, notes, None, True


@dataclass
class CriticalPath:
    """One rank's critical path, in place of HTA's ``CPGraph``.

    ``breakdown`` is ranksight's table (one row per path edge in path order, with the edge's times
    and ``category``; see docs/critical-path.md); ``notes`` what the model noticed."""

    rank: int
    annotation: str
    instance_id: int | tuple[int, int] | None
    breakdown: pl.DataFrame
    notes: list[str] = field(default_factory=list)

    def get_critical_path_breakdown(self) -> pd.DataFrame | None:
        """HTA's breakdown: one row per edge on the path (``event_idx`` the attributed event's row
        in ``traceEvents``, ``duration`` the edge's weight in µs, ``type``, ``s_name``, ``cat``,
        ``pid``, ``tid``, ``stream``, ``index``, ``bound_by``), in path order (HTA's comes from a
        set). None when the path is empty, as HTA."""
        if self.breakdown.height == 0:
            return None
        on_event = pl.col("event_row").is_not_null()
        df = self.breakdown.select(
            pl.col("event_row").alias("event_idx"),
            pl.col("weight_us").alias("duration"),
            "type",
            pl.when(on_event).then(pl.col("s_name")).alias("s_name"),
            pl.when(on_event).then(pl.col("cat")).alias("cat"),
            *(pl.when(on_event).then(pl.col(c)).alias(c) for c in ("pid", "tid", "stream")),
            pl.col("event_row").alias("index"),
            "bound_by",
        )
        return df.to_pandas()

    def summary(self) -> pd.Series:
        """HTA's ``summary()``: % of the path's duration per ``bound_by`` (a Series named
        ``duration`` indexed by ``bound_by``). HTA also prints a heading; this does not."""
        edf = self.get_critical_path_breakdown()
        if edf is None:
            raise MissingDataError(f"rank {self.rank}: the critical path is empty, so it has no summary")
        return edf.groupby("bound_by").duration.sum() / edf.duration.sum() * 100


class CriticalPathMixin:
    """HTA's ``critical_path_analysis`` on ranksight's per-rank critical path."""

    hta_compat: bool
    _session: Callable[[], Session]

    def critical_path_analysis(
        self,
        rank: int,
        annotation: str,
        instance_id: int | tuple[int, int] | None,
        data_load_events: list[str] | None = None,
    ) -> tuple[CriticalPath, bool] | None:
        """The critical path of ``rank`` over HTA's window: events starting within the
        ``instance_id``-th event whose name contains ``annotation`` (a ``(first, last)`` pair:
        those instances; ``""``: the whole trace) and the GPU work they launched.

        Returns ``(CriticalPath, success)`` like HTA's ``(CPGraph, success)``: ``success`` is
        False when no path could be found (the object then has an empty breakdown and the reason
        in ``notes``); None when no event name contains ``annotation`` (HTA logs an error and
        returns None). ``data_load_events``: regular expressions of data-loading event names
        (default: none with ``hta_compat``, else ``enumerate(DataLoader)#…``). ranksight's fixed
        model unless ``TraceAnalysis(..., hta_compat=True)`` (HTA v0.6's numbers)."""
        sess = self._session()
        if rank not in sess.ranks:
            raise UsageError(f"rank {rank} not loaded; ranks: {sess.ranks}")
        if instance_id is not None and not isinstance(instance_id, (int, tuple)):
            raise UsageError(f"instance_id must be an int, a (first, last) tuple or None, not {instance_id!r}")
        per = sess.map(
            _rank_path,
            [rank],
            annotation=annotation,
            instance_id=instance_id,
            hta_compat=self.hta_compat,
            data_load=data_load_events,
        )
        bd, notes, why, found = per[rank]
        if not found:
            warnings.warn(
                f"rank {rank}: could not find annotation {annotation!r} in the trace", RanksightWarning, stacklevel=2
            )
            return None
        if bd is None:
            empty = pl.DataFrame(schema={"event_row": pl.Int64, "weight_us": pl.Float64})
            return CriticalPath(rank, annotation, instance_id, empty, [*notes, why or "no critical path"]), False
        return CriticalPath(rank, annotation, instance_id, bd, notes), True
