"""What ``ranksight diff`` measures on one side: per-step samples of every compared quantity.

Per rank (:func:`rank_profile`, a pure function of one :class:`Trace`, run through ``Run.map``):

- ``ops``: CPU range events (``cpu_op``, ``user_annotation``, ``python_function``,
  ``cuda_runtime``, ``cuda_driver``) per step and normalised name (:func:`normalize_op`): calls and
  inclusive time (sum of ``dur_ns``);
- ``kernels``: GPU work (kernels, memcpys, memsets) per step, normalised kernel name
  (:func:`normalize_kernel`) and **launching op**: the innermost ``cpu_op`` / ``user_annotation``
  on the launch's thread that encloses the launch call (null when the launch is outside every op);
- ``kernel_sigs``: for matching kernels whose names differ, how often each kernel key was
  launched with a given op input shape (``Input Dims`` of the launching op) and at a given
  position among the GPU activities of one op call (0 = first);
- ``exposed``: **exposed time** per step of each CPU op and runtime call: the time it is the
  innermost range on its thread (its self time) while no kernel, memcpy or memset of the rank runs.
  A DataLoader ``__next__`` span owns its whole span (its children are data loading), as in the
  TensorBoard plugin's DataLoader role. This is how CPU work can lengthen a step: exposed time is
  what the contributors table compares for CPU ops;
- ``memory``: per step, the largest allocated total of any GPU device (``[memory]`` events, read
  with :func:`ranksight.views.memory_records.memory_records`).

Steps: an event belongs to the ProfilerStep of its ``step`` column (CPU: the step containing its
start; GPU: its launch's step); events outside every step are ignored. A trace without
ProfilerSteps is one step numbered 0.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from ranksight.views.enclosing import innermost_enclosing
from ranksight.views.intervals import union
from ranksight.views.names import normalize_kernel, normalize_op, normalize_series

if TYPE_CHECKING:
    from ranksight.model.trace import Trace

__all__ = ["rank_profile", "step_windows", "CPU_RANGE_KINDS", "DATALOADER_RE"]

CPU_RANGE_KINDS = ("cpu_op", "user_annotation", "python_function", "cuda_runtime", "cuda_driver")
OWNER_KINDS = ("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver")
LAUNCHER_KINDS = ("cpu_op", "user_annotation")
DATALOADER_RE = r"^enumerate\(DataLoader\)#.*__next__$|^enumerate\(DataPipe\)#"


def covered_length(start: np.ndarray, end: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Length of each ``[a, b)`` covered by the disjoint sorted intervals ``[start, end)``."""
    if start.size == 0:
        return np.zeros(a.shape, dtype=np.int64)
    lengths = end - start
    cum = np.concatenate([[0], np.cumsum(lengths)])

    def before(t: np.ndarray) -> np.ndarray:
        last = np.searchsorted(start, t, side="right") - 1
        safe = np.maximum(last, 0)
        return np.where(last >= 0, cum[safe] + np.clip(t - start[safe], 0, lengths[safe]), 0)

    return before(b) - before(a)


def _with_step(trace: Trace, df: pl.DataFrame) -> pl.DataFrame:
    """Events with a usable ``step`` (0 for every event of a trace without ProfilerSteps)."""
    if trace.steps.height == 0:
        return df.with_columns(pl.lit(0, dtype=pl.Int32).alias("step"))
    return df.filter(pl.col("step").is_not_null())


def _ops(trace: Trace, norm: Callable[[str], str]) -> pl.DataFrame:
    ev = _with_step(trace, trace.kind(*CPU_RANGE_KINDS).filter(pl.col("dur_ns").is_not_null()))
    ev = ev.with_columns(normalize_series(ev["name"], norm).alias("name"), pl.col("kind").cast(pl.String))
    return ev.group_by("step", "kind", "name").agg(
        pl.len().cast(pl.Int64).alias("count"), pl.col("dur_ns").sum().alias("total_ns")
    )


def _launch_ops(trace: Trace, g: pl.DataFrame) -> pl.DataFrame:
    """``op_row`` (row of the launching op) for each GPU row of ``g``; null when none."""
    launches = (
        trace.scan()
        .filter(pl.col("row").is_in(g["launch_row"].drop_nulls().unique().implode()))
        .select(pl.col("row").alias("launch_row"), pl.col("tid").alias("ltid"), pl.col("ts_ns").alias("lts"))
        .collect()
    )
    g = g.join(launches, on="launch_row", how="left", maintain_order="left")
    spans = trace.kind(*LAUNCHER_KINDS).filter(pl.col("dur_ns").is_not_null()).select("row", "tid", "ts_ns", "end_ns")
    have = g.filter(pl.col("ltid").is_not_null())
    if have.height == 0 or spans.height == 0:
        return g.with_columns(pl.lit(None, dtype=pl.UInt32).alias("op_row"))
    idx = innermost_enclosing(spans, have.select(pl.col("ltid").alias("tid"), pl.col("lts").alias("ts_ns")))
    op_rows = spans["row"].gather(idx.fill_null(0)).to_numpy().astype(np.int64)
    op_rows = np.where(idx.is_null().to_numpy(), -1, op_rows)
    have = have.with_columns(pl.Series("op_row", op_rows).replace(-1, None).cast(pl.UInt32))
    return g.join(have.select("row", "op_row"), on="row", how="left", maintain_order="left")


def _kernels(
    trace: Trace, knorm: Callable[[str], str], onorm: Callable[[str], str]
) -> tuple[pl.DataFrame, pl.DataFrame]:
    g = trace.gpu_events.filter(pl.col("dur_ns").is_not_null()).select(
        "row", "kind", "name", "ts_ns", "dur_ns", "step", "launch_row"
    )
    g = _launch_ops(trace, g)
    names = (
        trace.scan()
        .filter(pl.col("row").is_in(g["op_row"].drop_nulls().unique().implode()))
        .select(pl.col("row").alias("op_row"), pl.col("name").alias("op_raw"))
        .collect()
    )
    dims = trace.table("op").select(pl.col("row").alias("op_row"), pl.col("input_dims").cast(pl.String).alias("dims"))
    g = (
        g.join(names, on="op_row", how="left", maintain_order="left")
        .join(dims, on="op_row", how="left", maintain_order="left")
        .sort("lts", "ts_ns", "row", nulls_last=True)
        .with_columns(
            pl.when(pl.col("op_row").is_not_null())
            .then(pl.int_range(pl.len()).over("op_row"))
            .otherwise(None)
            .cast(pl.Int32)
            .alias("pos"),
        )
    )
    g = g.with_columns(
        normalize_series(g["name"], knorm).alias("name"),
        normalize_series(g["op_raw"], onorm).alias("op"),
        pl.col("kind").cast(pl.String),
    )
    sigs = g.group_by("kind", "name", "op", "dims", "pos").agg(pl.len().cast(pl.Int64).alias("count"))
    g = _with_step(trace, g)
    per_step = g.group_by("step", "kind", "name", "op").agg(
        pl.len().cast(pl.Int64).alias("count"), pl.col("dur_ns").sum().alias("total_ns")
    )
    return per_step, sigs


def _segments(spans: pl.DataFrame) -> pl.DataFrame:
    """Elementary segments between consecutive range boundaries of each thread."""
    pts = (
        pl.concat([spans.select("tid", pl.col("ts_ns").alias("a")), spans.select("tid", pl.col("end_ns").alias("a"))])
        .unique()
        .sort("tid", "a")
        .with_columns(pl.col("a").shift(-1).over("tid").alias("b"))
        .filter(pl.col("b").is_not_null())
    )
    return pts


def _exposed(trace: Trace, norm: Callable[[str], str]) -> pl.DataFrame:
    spans = trace.kind(*OWNER_KINDS).filter(pl.col("dur_ns").is_not_null() & (pl.col("dur_ns") > 0))
    spans = spans.select("row", "tid", "ts_ns", "end_ns", "kind", "name", "step")
    empty = pl.DataFrame(schema={"step": pl.Int32, "kind": pl.String, "name": pl.String, "exposed_ns": pl.Int64})
    if spans.height == 0:
        return empty
    seg = _segments(spans)
    owner = innermost_enclosing(spans, seg.select("tid", pl.col("a").alias("ts_ns")))
    dl = spans.filter(pl.col("name").cast(pl.String).str.contains(DATALOADER_RE))
    if dl.height:
        dl_owner = innermost_enclosing(dl, seg.select("tid", pl.col("a").alias("ts_ns")))
        dl_rows = dl["row"].gather(dl_owner.fill_null(0))
        own_rows = spans["row"].gather(owner.fill_null(0))
        row = pl.select(
            pl.when(dl_owner.is_not_null())
            .then(dl_rows)
            .when(owner.is_not_null())
            .then(own_rows)
            .otherwise(None)
            .alias("row")
        )["row"]
    else:
        row = pl.select(
            pl.when(owner.is_not_null()).then(spans["row"].gather(owner.fill_null(0))).otherwise(None).alias("row")
        )["row"]
    seg = seg.with_columns(row.alias("row")).filter(pl.col("row").is_not_null())
    g = trace.gpu_events.filter(pl.col("dur_ns").is_not_null())
    gs, ge = union(g["ts_ns"].to_numpy(), g["end_ns"].to_numpy())
    a = seg["a"].to_numpy()
    b = seg["b"].to_numpy()
    seg = seg.with_columns(pl.Series("exposed_ns", (b - a) - covered_length(gs, ge, a, b)))
    per = (
        seg.group_by("row")
        .agg(pl.col("exposed_ns").sum())
        .join(spans.select("row", "kind", "name", "step"), on="row", how="left")
    )
    per = _with_step(trace, per)
    per = per.with_columns(normalize_series(per["name"], norm).alias("name"), pl.col("kind").cast(pl.String))
    return per.group_by("step", "kind", "name").agg(pl.col("exposed_ns").sum()).filter(pl.col("exposed_ns") > 0)


def _memory(trace: Trace) -> pl.DataFrame:
    """``step, peak_bytes``: the largest allocated total of any GPU device in each step."""
    from ranksight.views.memory_records import memory_records

    rec = memory_records(trace)
    rec = _with_step(trace, rec.filter(pl.col("device_type") != 0))
    return (
        rec.group_by("step")
        .agg(pl.col("allocated_bytes").max().alias("peak_bytes"))
        .filter(pl.col("peak_bytes").is_not_null())
    )


def rank_profile(
    trace: Trace, *, kernel_templates: bool = True, shapes: bool = False, operators: Trace | None = None
) -> dict[str, pl.DataFrame]:
    """The per-step tables of one rank (module doc); every table gets a ``rank`` column.

    ``operators``: the trace whose operators launched the GPU work for ``kernels`` and ``kernel_sigs`` (the
    graph-attributed trace of :func:`ranksight.views.graph_attribution.attributed_operators`, whose replayed
    kernels have their capture-side launching op); default ``trace``. The other tables read ``trace``."""

    def onorm(n: str) -> str:
        return normalize_op(n, shapes=shapes)

    def knorm(n: str) -> str:
        return normalize_kernel(n, templates=kernel_templates, shapes=shapes)

    kernels, sigs = _kernels(operators if operators is not None else trace, knorm, onorm)
    out = {
        "ops": _ops(trace, onorm),
        "kernels": kernels,
        "kernel_sigs": sigs,
        "exposed": _exposed(trace, onorm),
        "memory": _memory(trace),
    }
    rank = pl.lit(trace.rank, dtype=pl.Int32).alias("rank")
    return {k: v.with_columns(rank) for k, v in out.items()}


def step_windows(trace: Trace) -> pl.DataFrame:
    """``rank, step, total_ns`` without the overview analysis: the TensorBoard plugin's
    device-extended contiguous windows (:func:`ranksight.views.gpu_work.step_windows`), steps marked
    ``incomplete`` dropped. A trace without ProfilerSteps is one step 0 from its first to its last
    timed event."""
    from ranksight.views.gpu_work import step_windows as plugin_windows

    if trace.steps.height == 0:
        span = trace.span_ns
        total = (span[1] - span[0]) if span else 0
        return pl.DataFrame(
            {"rank": [trace.rank], "step": [0], "total_ns": [total]},
            schema={"rank": pl.Int32, "step": pl.Int32, "total_ns": pl.Int64},
        )
    w = plugin_windows(trace).join(trace.steps.select("step", "incomplete"), on="step", how="left")
    return w.filter(~pl.col("incomplete").fill_null(False)).select(
        pl.lit(trace.rank, dtype=pl.Int32).alias("rank"),
        pl.col("step").cast(pl.Int32),
        (pl.col("end_ns") - pl.col("start_ns")).alias("total_ns"),
    )
