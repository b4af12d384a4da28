"""HTA facade: ``critical_path_analysis`` and ``overlay_critical_path_analysis``.

HTA v0.6 returns ``(CPGraph, success)``: a networkx graph whose ``get_critical_path_breakdown()``
and ``summary()`` give the results. ranksight builds no networkx graph; it returns a
:class:`CriticalPath` with the same two methods (HTA's columns, pandas) and the ranksight tables,
and the same ``(object, success)`` tuple, or None where HTA returns None (no event name contains
the annotation). The differences are listed in ``docs/hta-differences.md#critical-path``.
``overlay_critical_path_analysis`` writes HTA's overlaid trace from that object (docs/hta.md).
"""

from __future__ import annotations

import gzip
import json
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

from ranksight.analyses.critical_path import DATA_LOAD_PATTERNS, rank_breakdown
from ranksight.errors import MissingDataError, RanksightWarning, UsageError
from ranksight.hta import _deps
from ranksight.io.output import atomic_path, check_output
from ranksight.io.rewrite import read_text
from ranksight.views.critical_graph import EDGE_TYPES, critical_graph, hta_window, longest_path
from ranksight.views.names import hta_short_name

if TYPE_CHECKING:
    from collections.abc import Callable

    import pandas as pd

    from ranksight.analyses import Session
    from ranksight.model.run import Run
    from ranksight.model.trace import Trace

__all__ = ["CriticalPath", "CriticalPathMixin"]

#: The edge types HTA's overlay draws as flow arrows by default (``DEFAULT_EDGE_TYPES_IN_VIZ``).
OVERLAY_EDGE_TYPES = ("critical_path_dependency", "critical_path_kernel_launch_delay", "critical_path_sync_dependency")

#: HTA's breakdown columns, in its order.
BREAKDOWN_COLUMNS = ("event_idx", "duration", "type", "s_name", "cat", "pid", "tid", "stream", "index", "bound_by")


def _pd() -> Any:
    return _deps.pandas()


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
    #: the options the path was found with (``overlay_critical_path_analysis`` walks it again)
    hta_compat: bool = False
    data_load: Sequence[str] | None = None

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
    _hta_run: Callable[[], Run]

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
            cp = CriticalPath(
                rank,
                annotation,
                instance_id,
                empty,
                [*notes, why or "no critical path"],
                self.hta_compat,
                data_load_events,
            )
            return cp, False
        return (
            CriticalPath(rank, annotation, instance_id, bd, notes, self.hta_compat, data_load_events),
            True,
        )

    def overlay_critical_path_analysis(
        self,
        rank: int,
        critical_path_graph: CriticalPath,
        output_dir: str,
        only_show_critical_events: bool = True,
        show_all_edges: bool = False,
    ) -> str:
        """HTA's overlaid trace: ``output_dir/overlaid_critical_path_<trace file name>``, the rank's
        trace with ``args.critical = 1`` on every event with a node on the path and one flow arrow
        (``cat``/``name`` ``critical_path``, ``args`` ``weight``, ``critical``, ``type``) per path
        edge of HTA's default types (dependency, kernel launch delay, sync dependency), from the
        edge's source node to its destination node at their times. ``only_show_critical_events``
        (HTA's default) keeps, of the complete events, only the critical ones and the
        ``user_annotation``/``python_function`` ranges. Returns the path. ranksight keeps only the
        path, not HTA's whole graph, so ``show_all_edges=True`` (HTA: every graph edge) draws the
        path's edges of every type, with a warning. An existing output is replaced; an input never."""
        cp = critical_path_graph
        if not isinstance(cp, CriticalPath):
            raise UsageError("critical_path_graph must be the CriticalPath that critical_path_analysis returned")
        sess = self._session()
        if rank not in sess.ranks or cp.rank != rank:
            raise UsageError(f"rank {rank} is not the critical path's rank ({cp.rank}) or is not loaded: {sess.ranks}")
        if os.path.exists(output_dir) and not os.path.isdir(output_dir):
            raise UsageError(f"{output_dir} is not a directory")
        run = self._hta_run()
        trace = run[rank]
        if "offset" not in trace.spans.columns:
            raise UsageError(f"{os.path.basename(trace.path)} is not a Kineto JSON trace: nothing to overlay")
        if show_all_edges and not only_show_critical_events:
            warnings.warn(
                "show_all_edges: ranksight keeps the critical path, not HTA's whole graph; the path's edges of every "
                "type are drawn",
                RanksightWarning,
                stacklevel=2,
            )
        kinds = None if (show_all_edges and not only_show_critical_events) else OVERLAY_EDGE_TYPES
        edges = _path_edges(trace, cp) if cp.breakdown.height else pl.DataFrame()
        doc = json.loads(read_text(trace.path))
        events = doc.get("traceEvents")
        if not isinstance(events, list):
            raise UsageError(f"{trace.path}: no traceEvents list")
        on_path: set[int] = set()
        for col in ("src_row", "dst_row", "attr_row"):
            if edges.height:
                on_path.update(int(r) for r in edges[col].to_list() if r is not None and r >= 0)
        for r in on_path:
            ev = events[r]
            if isinstance(ev, dict):
                args = ev.get("args")
                ev["args"] = {**(args if isinstance(args, dict) else {}), "critical": 1}
        flows = []
        base = int(trace.meta.base_time_ns or 0)
        drawn = edges.filter(pl.col("type_name").is_in(kinds)) if kinds is not None and edges.height else edges
        for i, e in enumerate(drawn.iter_rows(named=True) if drawn.height else []):
            for end, row_col, ts_col in ((False, "src_row", "src_ts_ns"), (True, "dst_row", "dst_ts_ns")):
                ev = events[int(e[row_col])]
                flow: dict[str, object] = {
                    "ph": "f" if end else "s",
                    "id": i,
                    "pid": ev.get("pid"),
                    "tid": ev.get("tid"),
                    "ts": (int(e[ts_col]) - base) / 1000,
                    "cat": "critical_path",
                    "name": "critical_path",
                    "args": {"weight": round(e["weight_ns"] / 1000, 3), "critical": True, "type": e["type_name"]},
                }
                if end:
                    flow["bp"] = "e"
                flows.append(flow)
        if only_show_critical_events:
            keep = ("user_annotation", "python_function")
            events = [
                ev
                for ev in events
                if not isinstance(ev, dict)
                or ev.get("ph") != "X"
                or ev.get("cat") in keep
                or (isinstance(ev.get("args"), dict) and ev["args"].get("critical", 0) == 1)
            ]
        doc["traceEvents"] = events + flows
        os.makedirs(output_dir, exist_ok=True)
        out = os.path.join(output_dir, "overlaid_critical_path_" + os.path.basename(trace.path))
        check_output(out, inputs=[t.path for t in run], force=True)
        data = json.dumps(doc, separators=(",", ":")).encode()
        with atomic_path(out) as tmp, open(tmp, "wb") as fh:
            fh.write(gzip.compress(data, mtime=0) if out.endswith(".gz") else data)
        return out


def _path_edges(trace: Trace, cp: CriticalPath) -> pl.DataFrame:
    """The path's edges with their end nodes' event rows (``src_row``, ``dst_row``; the breakdown
    keeps only the attributed event): the same walk as :func:`rank_breakdown`, checked against it."""
    w = hta_window(trace, cp.annotation, cp.instance_id)
    if w is None:
        raise MissingDataError(f"rank {trace.rank}: no event name contains {cp.annotation!r}")
    data_load = cp.data_load
    if data_load is None and not cp.hta_compat:
        data_load = DATA_LOAD_PATTERNS
    p = longest_path(critical_graph(trace, w[0], w[1], hta_compat=cp.hta_compat, data_load=data_load))
    p = p.with_columns(pl.col("type").map_elements(lambda c: EDGE_TYPES[c], return_dtype=pl.String).alias("type_name"))
    if p.height != cp.breakdown.height or p["type_name"].to_list() != cp.breakdown["type"].to_list():
        raise MissingDataError(f"rank {trace.rank}: the critical path changed since it was computed")
    return p
