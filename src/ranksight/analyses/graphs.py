"""``graphs``: CUDA/HIP graphs per rank — what each graph replays, how long it runs, what it saves on the CPU,
and which operators its kernels come from (``docs/graphs.md`` has every definition).

Per rank (:func:`rank_graphs`, on the run's engine), from :mod:`ranksight.views.graph_replays` (replays,
graphs), :mod:`ranksight.views.graph_capture` (captures recorded in a trace) and
:mod:`ranksight.views.graph_attribution` (replayed kernels matched to a capture trace's operators).

Tables:

- ``graphs``: one row per graph: ``replays``, ``activities_per_replay`` / ``kernels_per_replay`` (of its first
  replay), ``gpu_us`` (Σ activity durations over all replays), ``busy_us_per_replay`` (mean union of a
  replay's activities), ``gap_inside_us_per_replay`` (mean span − busy: the GPU idle inside a replay),
  ``gap_between_us`` (mean time from one replay's last activity end to the next replay's first start, same
  graph) and ``idle_between_us`` (the part of it with no GPU activity of any kind), ``cpu_launch_us`` (mean
  duration of the graph launch call), ``eager_launch_us`` (the CPU cost of one eager launch call, see
  ``launch_cost_from``), ``replaced_launch_us`` (= ``activities_per_replay`` × ``eager_launch_us``: the eager
  launch calls one replay stands for), ``saved_us_per_replay`` (= replaced − ``cpu_launch_us``),
  ``attributed_pct`` (share of the graph's GPU time matched to a capture trace's operators), ``match``,
  ``capture`` (the capture graph used for its first replay, ``source:capture``);
- ``captures``: every capture graph seen — recorded in this trace (``source`` ``this trace``: its launches
  were captured, not executed) or in a capture source — with ``launches``, ``named`` (with a kernel name),
  ``replays`` matched to it; and sources that could not be used, with why;
- ``kernels``: one row per graph and position (the activities of its first replay, in position order):
  ``match``, ``confidence``, ``attributed_as``, ``op``, ``input_dims``, ``module``, ``call_stack`` (the
  innermost four Python frames), ``gpu_us`` over all replays;
- ``unmatched``: what did not match (a graph, a replayed kernel, a captured launch, a capture graph) and why.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, Option, register
from ranksight.analyses._session import Session
from ranksight.model.kinds import GPU_KINDS, LAUNCH_KINDS
from ranksight.views.graph_attribution import graph_attribution
from ranksight.views.graph_capture import LAUNCH_CALL_RE, capture_graphs
from ranksight.views.graph_replays import GRAPH_LAUNCH_RE, graph_ids_without_launch, graph_replays
from ranksight.views.intervals import union

if TYPE_CHECKING:
    from ranksight.model.run import Run
    from ranksight.model.trace import Trace

__all__ = ["graphs", "rank_graphs", "eager_launch_cost", "CALL_STACK_FRAMES"]

#: Python frames shown in the ``kernels`` table's ``call_stack`` (innermost last)
CALL_STACK_FRAMES = 4

GRAPH_SCHEMA = {
    "rank": pl.Int32,
    "graph": pl.Int64,
    "graph_id": pl.Int64,
    "api": pl.String,
    "streams": pl.String,
    "replays": pl.Int64,
    "activities_per_replay": pl.Int64,
    "kernels_per_replay": pl.Int64,
    "gpu_us": pl.Float64,
    "busy_us_per_replay": pl.Float64,
    "gap_inside_us_per_replay": pl.Float64,
    "gap_between_us": pl.Float64,
    "idle_between_us": pl.Float64,
    "cpu_launch_us": pl.Float64,
    "eager_launch_us": pl.Float64,
    "replaced_launch_us": pl.Float64,
    "saved_us_per_replay": pl.Float64,
    "launch_cost_from": pl.String,
    "attributed_pct": pl.Float64,
    "match": pl.String,
    "capture": pl.String,
}
CAPTURE_SCHEMA = {
    "rank": pl.Int32,
    "source": pl.String,
    "how": pl.String,
    "batch_size": pl.Int64,
    "mode": pl.String,
    "capture": pl.Int64,
    "launches": pl.Int64,
    "named": pl.Int64,
    "replays": pl.Int64,
    "graph": pl.Int64,
    "problem": pl.String,
}
KERNEL_SCHEMA = {
    "rank": pl.Int32,
    "graph": pl.Int64,
    "pos": pl.Int64,
    "stream": pl.Int64,
    "name": pl.String,
    "match": pl.String,
    "confidence": pl.Float64,
    "attributed_as": pl.String,
    "op": pl.String,
    "input_dims": pl.String,
    "module": pl.String,
    "call_stack": pl.String,
    "replays": pl.Int64,
    "gpu_us": pl.Float64,
}
UNMATCHED_SCHEMA = {
    "rank": pl.Int32,
    "what": pl.String,
    "graph": pl.Int64,
    "source": pl.String,
    "capture": pl.Int64,
    "pos": pl.Int64,
    "name": pl.String,
    "why": pl.String,
}


def eager_launch_cost(trace: Trace, captured: pl.DataFrame | None = None) -> tuple[float | None, str]:
    """The CPU cost of one eager launch call (µs) and where it comes from: the median duration of the
    trace's launch calls (``*LaunchKernel*``, ``*Memcpy*``, ``*Memset*``, graph launches excluded) that ran
    GPU work; else the median of the capture-time launch calls ``captured`` (``row``-less frame with
    ``dur_ns``); else None."""
    names = [n for n in trace.runtime_names if LAUNCH_CALL_RE.search(n) and not GRAPH_LAUNCH_RE.match(n)]
    d = (
        trace.scan()
        .filter(pl.col("kind").is_in(list(LAUNCH_KINDS)) & pl.col("name").is_in(names) & (pl.col("gpu_count") > 0))
        .select("dur_ns")
        .collect()["dur_ns"]
        .drop_nulls()
    )
    if d.len():
        return float(d.median()) / 1e3, f"median of {d.len():,} eager launch calls in this trace"  # type: ignore[arg-type]
    if captured is not None and captured.height:
        c = captured["dur_ns"].drop_nulls()
        if c.len():
            return (
                float(c.median()) / 1e3,  # type: ignore[arg-type]
                f"median of {c.len():,} launch calls recorded while capturing (no eager launch in this trace)",
            )
    return None, "no eager launch call in this trace or its capture: not measurable"


def _covered_before(s: np.ndarray, e: np.ndarray, t: np.ndarray) -> np.ndarray:
    """GPU-busy ns before each instant ``t`` (``s``, ``e``: disjoint sorted intervals)."""
    if not s.size:
        return np.zeros(t.size, dtype=np.int64)
    cum = np.concatenate([[0], np.cumsum(e - s)])
    k = np.searchsorted(s, t, side="right") - 1
    kk = np.clip(k, 0, s.size - 1)
    part = np.clip(t - s[kk], 0, e[kk] - s[kk])
    return np.where(k >= 0, cum[kk] + part, 0)


def _between(trace: Trace, reps: pl.DataFrame) -> pl.DataFrame:
    """Per graph: mean gap between consecutive replays and the GPU-idle part of it (ns)."""
    nxt = reps.sort("graph", "gpu_start_ns").with_columns(
        pl.col("gpu_start_ns").shift(-1).over("graph").alias("next_start")
    )
    pairs = nxt.filter(pl.col("next_start").is_not_null())
    if not pairs.height:
        return pl.DataFrame(schema={"graph": pl.Int64, "gap_ns": pl.Float64, "idle_ns": pl.Float64})
    g = trace.kind(*GPU_KINDS, columns=["ts_ns", "end_ns"]).drop_nulls()
    s, e = union(g["ts_ns"].to_numpy(), g["end_ns"].to_numpy())
    a = pairs["gpu_end_ns"].to_numpy()
    b = np.maximum(pairs["next_start"].to_numpy(), a)
    idle = (b - a) - (_covered_before(s, e, b) - _covered_before(s, e, a))
    return (
        pairs.select("graph", (pl.col("next_start") - pl.col("gpu_end_ns")).alias("gap"))
        .with_columns(pl.Series("idle", idle))
        .group_by("graph")
        .agg(pl.col("gap").mean().alias("gap_ns"), pl.col("idle").mean().alias("idle_ns"))
    )


def _short_stack(stack: pl.Expr) -> pl.Expr:
    parts = stack.str.split(" > ")
    tail = parts.list.tail(CALL_STACK_FRAMES).list.join(" > ")
    return pl.when(parts.list.len() > CALL_STACK_FRAMES).then(pl.lit("… > ") + tail).otherwise(tail)


def rank_graphs(trace: Trace, capture: str | None = None) -> dict[str, Any]:
    """One rank's tables (module doc) and facts for the notes."""
    rank = pl.lit(trace.rank, pl.Int32).alias("rank")
    reps = graph_replays(trace)
    own = capture_graphs(trace)
    att = graph_attribution(trace, capture)
    facts: dict[str, Any] = {
        "replays": reps.height,
        "captured": int(own.windows["launches"].sum()) if not own.empty else 0,
        "captures": own.windows.height,
        "graph_id_only": graph_ids_without_launch(trace),
        "notes": list(att.notes),
        "sources": len(att.sources),
        "usable": len(att.graphs),
    }
    # captures: this trace's own, then every source's
    cap_rows = []
    if not own.empty:
        cap_rows.append(
            own.windows.select(
                rank,
                pl.lit("this trace").alias("source"),
                pl.lit("recorded here (captured, not executed)").alias("how"),
                pl.lit(None, pl.Int64).alias("batch_size"),
                pl.lit(None, pl.String).alias("mode"),
                pl.col("cgraph").alias("capture"),
                "launches",
                "named",
            )
        )
    src_label = {
        i: ("this trace" if s.how == "this trace" else os.path.basename(s.path)) for i, s in enumerate(att.sources)
    }
    for i, s in enumerate(att.sources):
        if s.how == "this trace":
            continue
        c = att.captures.filter(pl.col("source") == i)
        base = [rank, pl.lit(src_label[i]).alias("source"), pl.lit(s.how).alias("how")]
        meta = [pl.lit(s.batch_size, pl.Int64).alias("batch_size"), pl.lit(s.mode, pl.String).alias("mode")]
        if c.height:
            cap_rows.append(
                c.select(*base, *meta, pl.col("cgraph").alias("capture"), "launches", "named", "replays", "graph")
            )
        else:
            cap_rows.append(pl.DataFrame({"x": [0]}).select(*base, *meta, pl.lit(s.problem).alias("problem")))
    own_matched = att.captures.filter(
        pl.col("source").is_in([i for i, s in enumerate(att.sources) if s.how == "this trace"])
    )
    captures = pl.concat(cap_rows, how="diagonal_relaxed") if cap_rows else pl.DataFrame(schema=CAPTURE_SCHEMA)
    for col, dtype in CAPTURE_SCHEMA.items():
        if col not in captures.columns:
            captures = captures.with_columns(pl.lit(None, dtype).alias(col))
    if own_matched.height:  # replays of this trace's own captures
        captures = (
            captures.join(
                own_matched.select(
                    pl.col("cgraph").alias("capture"), pl.col("replays").alias("__r"), pl.col("graph").alias("__g")
                ),
                on="capture",
                how="left",
            )
            .with_columns(
                pl.when(pl.col("source") == "this trace")
                .then(pl.col("__r"))
                .otherwise(pl.col("replays"))
                .alias("replays"),
                pl.when(pl.col("source") == "this trace").then(pl.col("__g")).otherwise(pl.col("graph")).alias("graph"),
            )
            .drop("__r", "__g")
        )
    captures = captures.select(list(CAPTURE_SCHEMA)).cast(CAPTURE_SCHEMA)  # type: ignore[arg-type]
    if not reps.height:
        return {
            "graphs": pl.DataFrame(schema=GRAPH_SCHEMA),
            "captures": captures,
            "kernels": pl.DataFrame(schema=KERNEL_SCHEMA),
            "unmatched": pl.DataFrame(schema=UNMATCHED_SCHEMA),
            "facts": facts,
        }
    captured_calls = None
    if att.graphs:
        frames = []
        for cg in att.graphs.values():
            frames.append(cg.template.filter(pl.col("row").is_in(cg.launches["row"].implode())).select("dur_ns"))
        captured_calls = pl.concat(frames)
    eager_us, cost_from = eager_launch_cost(trace, captured_calls)
    first = reps.filter(pl.col("replay") == 0)
    kinds = (
        att.kernels.filter(pl.col("replay") == 0)
        .group_by("graph")
        .agg((pl.col("kind") == "kernel").sum().cast(pl.Int64).alias("kernels_per_replay"))
    )
    attributed = att.kernels.group_by("graph").agg(
        pl.col("dur_ns").filter(pl.col("capture_row").is_not_null()).sum().alias("__att"),
        pl.col("dur_ns").sum().alias("__all"),
    )
    first_assign = att.assignments.filter(pl.col("replay") == 0).select(
        "graph",
        pl.col("method").alias("match"),
        pl.when(pl.col("source").is_not_null())
        .then(pl.col("source").replace_strict(src_label, default=None) + ":" + pl.col("cgraph").cast(pl.String))
        .otherwise(None)
        .alias("capture"),
    )
    per = reps.group_by("graph").agg(
        pl.len().cast(pl.Int64).alias("replays"),
        (pl.col("gpu_ns").sum() / 1e3).alias("gpu_us"),
        (pl.col("busy_ns").mean() / 1e3).alias("busy_us_per_replay"),
        ((pl.col("gpu_end_ns") - pl.col("gpu_start_ns") - pl.col("busy_ns")).mean() / 1e3).alias(
            "gap_inside_us_per_replay"
        ),
        (pl.col("cpu_dur_ns").mean() / 1e3).alias("cpu_launch_us"),
    )
    eager = pl.lit(eager_us, pl.Float64)
    g = (
        first.select("graph", "graph_id", "api", "streams", pl.col("n").alias("activities_per_replay"))
        .join(per, on="graph")
        .join(kinds, on="graph", how="left")
        .join(_between(trace, reps), on="graph", how="left")
        .join(attributed, on="graph", how="left")
        .join(first_assign, on="graph", how="left")
        .with_columns(
            rank,
            (pl.col("gap_ns") / 1e3).alias("gap_between_us"),
            (pl.col("idle_ns") / 1e3).alias("idle_between_us"),
            eager.alias("eager_launch_us"),
            (pl.col("activities_per_replay") * eager).alias("replaced_launch_us"),
            (pl.col("activities_per_replay") * eager - pl.col("cpu_launch_us")).alias("saved_us_per_replay"),
            pl.lit(cost_from).alias("launch_cost_from"),
            pl.when(pl.col("__all") > 0)
            .then(100 * pl.col("__att") / pl.col("__all"))
            .otherwise(None)
            .alias("attributed_pct"),
            pl.col("match").fill_null("none"),
        )
        .sort("gpu_us", "graph", descending=[True, False])
    )
    graphs_t = g.select(list(GRAPH_SCHEMA)).cast(GRAPH_SCHEMA)  # type: ignore[arg-type]
    graphs_t = graphs_t.with_columns(pl.col(pl.Float64).round(3))  # µs to the ns
    k = att.kernels
    per_pos = k.group_by("graph", "pos").agg(
        pl.len().cast(pl.Int64).alias("replays"), (pl.col("dur_ns").sum() / 1e3).alias("gpu_us")
    )
    kernels_t = (
        k.filter(pl.col("replay") == 0)
        .join(per_pos, on=["graph", "pos"])
        .with_columns(rank, _short_stack(pl.col("call_stack")).alias("call_stack"))
        .sort("graph", "pos")
        .select(list(KERNEL_SCHEMA))
        .cast(KERNEL_SCHEMA)  # type: ignore[arg-type]
        .with_columns(pl.col("gpu_us").round(3), pl.col("confidence").round(4))
    )
    um = att.unmatched.with_columns(
        rank,
        pl.col("source").replace_strict(src_label, default=None, return_dtype=pl.String).alias("source"),
        pl.col("cgraph").alias("capture"),
    )
    unmatched_t = um.select(list(UNMATCHED_SCHEMA)).cast(UNMATCHED_SCHEMA)  # type: ignore[arg-type]
    facts.update(
        {
            "replayed_ns": att.replayed_ns,
            "matched_ns": att.matched_ns,
            "eager_us": eager_us,
            "cost_from": cost_from,
        }
    )
    return {"graphs": graphs_t, "captures": captures, "kernels": kernels_t, "unmatched": unmatched_t, "facts": facts}


def graphs(run: Run, *, ranks: Sequence[int] | None = None, capture: str | None = None) -> AnalysisResult:
    """CUDA/HIP graphs per rank: replays, GPU time, gaps, launch savings, capture attribution (module doc)."""
    sess = Session.of(run, ranks)
    per = sess.map(rank_graphs, capture=capture)
    tables: dict[str, pl.DataFrame] = {}
    for name, schema in (
        ("graphs", GRAPH_SCHEMA),
        ("captures", CAPTURE_SCHEMA),
        ("kernels", KERNEL_SCHEMA),
        ("unmatched", UNMATCHED_SCHEMA),
    ):
        parts = [per[r][name] for r in sess.ranks]
        tables[name] = pl.concat(parts) if parts else pl.DataFrame(schema=schema)
    notes: list[str] = []
    for r in sess.ranks:
        f = per[r]["facts"]
        if f["captured"]:
            notes.append(
                f"rank {r}: this trace records {f['captures']} graph capture(s): {f['captured']:,} launches were "
                "recorded into graphs, not executed (no other analysis counts them as GPU work); to see the "
                "operators of the replayed kernels, profile the replay and pass this trace with --capture"
            )
        if not f["replays"]:
            if f["graph_id_only"]:
                notes.append(
                    f"rank {r}: {f['graph_id_only']:,} kernels carry a graph id but no graph launch call is recorded: "
                    "replays cannot be told apart"
                )
            elif not f["captured"]:
                notes.append(f"rank {r}: no CUDA/HIP graph launch in this trace")
            continue
        rep, mat = f["replayed_ns"], f["matched_ns"]
        share = 100 * mat / rep if rep else 0.0
        if f["usable"]:
            notes.append(
                f"rank {r}: {share:.2f} % of the replayed GPU time ({rep / 1e3:,.1f} µs) attributed to capture-side "
                f"operators ({f['usable']} capture source(s))"
            )
        elif f["sources"]:
            notes.append(f"rank {r}: no usable capture source (see the captures table): kernels named by taxonomy only")
        else:
            notes.append(
                f"rank {r}: no capture trace (pass --capture PATH, or put capture_traces/ beside the trace): "
                "replayed kernels are named by graph node where recorded, else by the kernel taxonomy only"
            )
        notes.append(f"rank {r}: eager launch cost: {f['cost_from']}")
        notes.extend(f"rank {r}: {n}" for n in f["notes"])
    return AnalysisResult(tables, notes)


register(
    AnalysisSpec(
        name="graphs",
        func=graphs,
        help="CUDA/HIP graphs: replays, kernels per replay, GPU time, gaps inside and between replays, launch "
        "time saved, and the capture-side operators of replayed kernels (--capture)",
        options=(
            Option(
                "capture",
                str,
                None,
                "capture trace, or folder (TraceLens capture_traces/ with execution_details.json); default: "
                "capture_traces/ beside the trace; 'none' for no capture",
            ),
        ),
    )
)
