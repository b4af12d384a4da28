"""CUDA/HIP graph replays of one rank: each graph launch, the GPU activities it owns, and which graph it replays.

Definitions (``docs/graphs.md``):

- a **replay** is one graph launch call (``cudaGraphLaunch`` / ``hipGraphLaunch`` / ``cuGraphLaunch``, any
  version suffix) that owns GPU activities (kernels, memcpys, memsets) through its correlation (the trace
  model's ``launch_row``). A launch whose activities were all dropped by the profiler is no replay.
- the **position** of an activity in its replay is its index when the replay's activities are ordered by
  (stream, GPU start, row): the GPU order on each stream, streams one after the other.
- the **matching key** of an activity is its name for kernels, ``<memcpy>`` / ``<memset>`` for copies and
  sets (the capture side records a copy as its API call, never as the copy's own name).
- the **signature** of a replay is a hash of its (stream, matching key) sequence in position order.
- a **graph** is the ``graph id`` the profiler recorded on the replay's kernels (newer CUPTI builds), else
  one (launch API, streams, signature): replays of one graph run the same activities in the same order.
  Graphs are numbered 0, 1, ... in order of first replay; ``replay`` numbers each graph's replays in time.

Every table is built with polars expressions (no Python per event); the only per-replay work is in
:mod:`ranksight.views.graph_attribution`, per distinct graph.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import polars as pl

from ranksight.model.kinds import GPU_KINDS, LAUNCH_KINDS

if TYPE_CHECKING:
    from ranksight.model.trace import Trace

__all__ = [
    "GRAPH_LAUNCH_RE",
    "MEMCPY_KEY",
    "MEMSET_KEY",
    "graph_launch_names",
    "replay_activities",
    "graph_replays",
    "graph_ids_without_launch",
]

#: graph launch calls (runtime or driver API, any version suffix such as ``cudaGraphLaunch_v10000``)
GRAPH_LAUNCH_RE = re.compile(r"^(?:cuda|hip|cu)GraphLaunch(?:_v\d+|_ptsz|_spt)?$")
MEMCPY_KEY = "<memcpy>"
MEMSET_KEY = "<memset>"

_ACT_SCHEMA = {
    "row": pl.UInt32,
    "launch_row": pl.UInt32,
    "kind": pl.String,
    "name": pl.String,
    "stream": pl.Int64,
    "device": pl.Int32,
    "ts_ns": pl.Int64,
    "end_ns": pl.Int64,
    "dur_ns": pl.Int64,
    "graph_id": pl.Int64,
    "graph_node_id": pl.Int64,
    "key": pl.String,
    "pos": pl.Int64,
}


def graph_launch_names(trace: Trace) -> list[str]:
    """Names of the graph launch calls recorded in the trace (tested once per distinct name)."""
    return sorted(n for n in trace.runtime_names if GRAPH_LAUNCH_RE.match(n))


def _side_ids(trace: Trace) -> pl.DataFrame:
    k = trace.table("kernel")
    cols = [c for c in ("graph_id", "graph_node_id") if c in k.columns]
    if not cols or not k.height:
        return pl.DataFrame(schema={"row": pl.UInt32, "graph_id": pl.Int64, "graph_node_id": pl.Int64})
    out = k.select("row", *[pl.col(c).cast(pl.Int64) for c in cols])
    for c in ("graph_id", "graph_node_id"):
        if c not in out.columns:
            out = out.with_columns(pl.lit(None, pl.Int64).alias(c))
    return out.filter(pl.col("graph_id").is_not_null() | pl.col("graph_node_id").is_not_null())


def _compute_activities(trace: Trace) -> pl.DataFrame:
    names = graph_launch_names(trace)
    if not names:
        return pl.DataFrame(schema=_ACT_SCHEMA)
    ev = trace.scan()
    launches = (
        ev.filter(pl.col("kind").is_in(list(LAUNCH_KINDS)) & (pl.col("gpu_count") > 0) & pl.col("name").is_in(names))
        .select(pl.col("row").alias("launch_row"))
        .collect()
    )
    if not launches.height:
        return pl.DataFrame(schema=_ACT_SCHEMA)
    acts = (
        ev.filter(pl.col("kind").is_in(list(GPU_KINDS)) & pl.col("launch_row").is_in(launches["launch_row"].implode()))
        .select("row", "launch_row", "kind", "name", "stream", "device", "ts_ns", "end_ns", "dur_ns")
        .collect()
    )
    acts = acts.join(_side_ids(trace), on="row", how="left")
    kind = pl.col("kind").cast(pl.String)
    key = (
        pl.when(kind == "memcpy")
        .then(pl.lit(MEMCPY_KEY))
        .when(kind == "memset")
        .then(pl.lit(MEMSET_KEY))
        .otherwise(pl.col("name").cast(pl.String))
    )
    return (
        acts.with_columns(kind, pl.col("name").cast(pl.String), key.alias("key"))
        .sort(["launch_row", "stream", "ts_ns", "row"], nulls_last=True)
        .with_columns(pl.int_range(0, pl.len(), dtype=pl.Int64).over("launch_row").alias("pos"))
        .select(list(_ACT_SCHEMA))
        .cast(_ACT_SCHEMA)  # type: ignore[arg-type]
    )


def replay_activities(trace: Trace) -> pl.DataFrame:
    """One row per GPU activity owned by a graph launch: ``row, launch_row, kind, name, stream, device, ts_ns,
    end_ns, dur_ns, graph_id, graph_node_id, key, pos`` (names as strings), sorted by launch and position.
    Memoised per trace."""
    out: pl.DataFrame = trace.memo("graph_replays:activities", lambda: _compute_activities(trace))
    return out


_REPLAY_SCHEMA = {
    "launch_row": pl.UInt32,
    "api": pl.String,
    "pid": pl.Int32,
    "tid": pl.Int32,
    "cpu_ts_ns": pl.Int64,
    "cpu_dur_ns": pl.Int64,
    "cpu_end_ns": pl.Int64,
    "step": pl.Int32,
    "n": pl.Int64,
    "streams": pl.String,
    "gpu_start_ns": pl.Int64,
    "gpu_end_ns": pl.Int64,
    "gpu_ns": pl.Int64,
    "busy_ns": pl.Int64,
    "signature": pl.UInt64,
    "graph_id": pl.Int64,
    "graph": pl.Int64,
    "replay": pl.Int64,
}


def _compute_replays(trace: Trace) -> pl.DataFrame:
    acts = replay_activities(trace)
    if not acts.height:
        return pl.DataFrame(schema=_REPLAY_SCHEMA)
    # busy time of each replay: the union of its activities (merge within the launch's rows)
    a = acts.select("launch_row", "ts_ns", "end_ns").sort("launch_row", "ts_ns", "end_ns")
    prev_end = pl.col("end_ns").cum_max().shift(1).over("launch_row")
    a = a.with_columns((prev_end.is_null() | (pl.col("ts_ns") > prev_end)).cum_sum().over("launch_row").alias("blk"))
    busy = (
        a.group_by("launch_row", "blk")
        .agg(pl.col("ts_ns").min(), pl.col("end_ns").max())
        .group_by("launch_row")
        .agg((pl.col("end_ns") - pl.col("ts_ns")).sum().alias("busy_ns"))
    )
    per = acts.group_by("launch_row").agg(
        pl.len().cast(pl.Int64).alias("n"),
        pl.col("stream").unique().sort().cast(pl.String).str.join(",").alias("streams"),
        pl.col("ts_ns").min().alias("gpu_start_ns"),
        pl.col("end_ns").max().alias("gpu_end_ns"),
        pl.col("dur_ns").fill_null(0).sum().alias("gpu_ns"),
        pl.struct(pl.col("stream").fill_null(-1), "key").hash().alias("__h"),  # in position order (acts sorted)
        pl.col("graph_id").first().alias("__gid0"),
        pl.col("graph_id").null_count().alias("__gid_nulls"),
    )
    per = per.with_columns(
        pl.col("__h").hash().alias("signature"),
        pl.when(pl.col("__gid_nulls") == 0).then(pl.col("__gid0")).otherwise(None).alias("graph_id"),
    ).drop("__h", "__gid0", "__gid_nulls")
    launches = (
        trace.scan()
        .filter(pl.col("row").is_in(per["launch_row"].implode()))
        .select(
            pl.col("row").alias("launch_row"),
            pl.col("name").cast(pl.String).alias("api"),
            "pid",
            "tid",
            pl.col("ts_ns").alias("cpu_ts_ns"),
            pl.col("dur_ns").alias("cpu_dur_ns"),
            pl.col("end_ns").alias("cpu_end_ns"),
            "step",
        )
        .collect()
    )
    r = launches.join(per, on="launch_row").join(busy, on="launch_row").sort("gpu_start_ns", "launch_row")
    gkey = (
        pl.when(pl.col("graph_id").is_not_null())
        .then(pl.lit("id:") + pl.col("graph_id").cast(pl.String))
        .otherwise(pl.lit("sig:") + pl.col("api") + "|" + pl.col("streams") + "|" + pl.col("signature").cast(pl.String))
    )
    r = r.with_columns(gkey.alias("__gkey"))
    first = r.group_by("__gkey", maintain_order=True).agg().with_row_index("graph")
    r = r.join(first.with_columns(pl.col("graph").cast(pl.Int64)), on="__gkey").drop("__gkey")
    r = r.with_columns(pl.int_range(0, pl.len(), dtype=pl.Int64).over("graph").alias("replay"))
    return r.select(list(_REPLAY_SCHEMA)).cast(_REPLAY_SCHEMA)  # type: ignore[arg-type]


def graph_replays(trace: Trace) -> pl.DataFrame:
    """One row per replay (see the module doc): ``launch_row, api, pid, tid, cpu_ts_ns, cpu_dur_ns,
    cpu_end_ns, step, n`` (activities), ``streams`` (sorted, comma-separated), ``gpu_start_ns, gpu_end_ns,
    gpu_ns`` (Σ durations), ``busy_ns`` (union of the activities), ``signature, graph_id, graph, replay``;
    sorted by GPU start. Memoised per trace."""
    out: pl.DataFrame = trace.memo("graph_replays:replays", lambda: _compute_replays(trace))
    return out


def graph_ids_without_launch(trace: Trace) -> int:
    """Kernels that carry a ``graph id`` but are owned by no graph launch (the runtime calls were not
    recorded): replays cannot be told apart there."""
    ids = _side_ids(trace)
    if not ids.height:
        return 0
    owned = replay_activities(trace).select("row")
    return int(ids.filter(pl.col("graph_id").is_not_null()).join(owned, on="row", how="anti").height)
