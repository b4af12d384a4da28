"""GPU utilization, estimated SM efficiency and estimated achieved occupancy per rank and device
(the TensorBoard plugin's GPU summary), over all steps and per step.

Kernels only (memcpy/memset excluded), grouped by the kernel's ``device``. Window ``W`` = from the
first step's start to the last step's end (the TensorBoard plugin's device-extended steps,
:mod:`ranksight.views.tb_steps`, as in ``overview``: not the step windows of ``temporal``) for the
overall row, one step for the per-step rows.

- ``kernel_busy_us = |∪ kernels ∩ W|``, ``utilization_pct = 100 × kernel_busy / |W|``: the plugin's
  "GPU Utilization", kernels only over the plugin's steps. Not ranksight's GPU busy (``temporal``,
  ``summary``: kernels, copies and sets), which is never lower over the same window;
- ``compute_utilization_pct``: the same without communication kernels (ranksight's addition: the
  plugin counts a GPU waiting inside an NCCL kernel as busy);
- ``sm_efficiency_pct``: each kernel with ``blocks per SM`` > 0 contributes that value while it
  runs; at every instant the sum over running kernels is capped at 1; ``100 × ∫_W min(Σ, 1) / |W|``
  (idle time counts 0; kernels without the arg count 0);
- ``occupancy_pct``: mean of ``est. achieved occupancy %`` (values ≥ 0 only) weighted by each
  kernel's time inside ``W``: ``Σ occ × |k ∩ W| / Σ |k ∩ W|`` (kernel time only; null when no kernel
  in ``W`` has the arg);
- ``tensor_core_pct`` (overall row only, whole trace as in the plugin): ``100 ×`` time of kernels
  using Tensor Cores (:mod:`ranksight.model.tensor_cores`) / time of all kernels, over kernels
  that have a launching runtime/driver call (the plugin leaves launch-less kernels out); null
  without such kernels.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, Option, register
from ranksight.analyses._session import Session
from ranksight.errors import MissingDataError
from ranksight.model.kinds import LAUNCH_KINDS
from ranksight.model.taxonomy import tensor_core_mask
from ranksight.model.tensor_cores import RULESETS
from ranksight.views.event_source import CannotStack, EventSource
from ranksight.views.intervals import union
from ranksight.views.rank_slices import RankSlices
from ranksight.views.tb_steps import plugin_steps, seed_plugin_steps

if TYPE_CHECKING:
    from ranksight.model.run import Run
    from ranksight.model.trace import Trace

__all__ = ["weighted_cover", "sm_efficiency_segments", "device_metrics", "trace_gpu_metrics", "gpu_metrics"]

_SCHEMA = {
    "rank": pl.Int32,
    "device": pl.Int32,
    "step": pl.Int32,
    "window_us": pl.Float64,
    "kernel_busy_us": pl.Float64,
    "utilization_pct": pl.Float64,
    "compute_utilization_pct": pl.Float64,
    "sm_efficiency_pct": pl.Float64,
    "occupancy_pct": pl.Float64,
    "kernels": pl.Int64,
}
#: Columns of the ``overall`` table: no step, the Tensor Core share.
_OVERALL = {**{c: t for c, t in _SCHEMA.items() if c != "step"}, "tensor_core_pct": pl.Float64}


def weighted_cover(s: np.ndarray, e: np.ndarray, w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``Σ_k w_k × |[s_k, e_k) ∩ (−∞, x)|`` for each ``x`` (intervals may overlap).

    Written as ``Σ_{s_k < x} w_k (x − s_k) − Σ_{e_k < x} w_k (x − e_k)`` with sorted prefix sums.
    Times should be rebased (small) so that the float products stay exact to well below 1 ns.
    """
    s = np.asarray(s, np.float64)
    e = np.asarray(e, np.float64)
    w = np.asarray(w, np.float64)
    x = np.asarray(x, np.float64)
    if s.size == 0:
        return np.zeros(x.shape)

    def part(t: np.ndarray) -> np.ndarray:
        o = np.argsort(t, kind="stable")
        ts, ws = t[o], w[o]
        cw = np.concatenate([[0.0], np.cumsum(ws)])
        cwt = np.concatenate([[0.0], np.cumsum(ws * ts)])
        i = np.searchsorted(ts, x, side="left")
        return cw[i] * x - cwt[i]

    return part(s) - part(e)


def sm_efficiency_segments(s: np.ndarray, e: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The plugin's sweep: elementary segments between kernel start/end points (starts before ends
    at equal times, then event order) with ``min(Σ blocks-per-SM of running kernels, 1)``;
    segments whose running sum is not positive are left out."""
    n = s.size
    if n == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0)
    t = np.concatenate([s, e])
    typ = np.concatenate([np.zeros(n, np.int64), np.ones(n, np.int64)])
    seq = np.concatenate([np.arange(n), np.arange(n)])
    val = np.concatenate([v, -v])
    o = np.lexsort((seq, typ, t))
    t, val = t[o], val[o]
    run = np.cumsum(val)
    keep = (t[1:] > t[:-1]) & (run[:-1] > 0.0)
    return t[:-1][keep], t[1:][keep], np.minimum(run[:-1][keep], 1.0)


def _kernels(src: EventSource, ruleset: str) -> pl.DataFrame:
    """The timed kernels (``*by, row, device, ts_ns, end_ns, launch_row, comm``, the two
    occupancy args and ``tc``) of one rank or of stacked ranks, in row order within a rank."""
    by = src.by
    # only the columns used, of the kernel rows and of their side table (both are big on big traces)
    k = (
        src.ev.filter((pl.col("kind") == "kernel") & pl.col("dur_ns").is_not_null())
        .select(*by, "row", "device", "ts_ns", "end_ns", "launch_row", "kernel_class", "name")
        .collect()
    )
    cols = ["blocks_per_sm", "est_occupancy_pct"]
    side = src.table("kernel")
    have = [c for c in cols if c in side.columns]
    if have:
        k = k.join(
            side.select(*by, pl.col("row").cast(k.schema["row"]), *have),
            on=[*by, "row"],
            how="left",
            maintain_order="left",
        )
    for c in cols:
        if c not in k.columns:
            k = k.with_columns(pl.lit(None, pl.Float64).alias(c))
    return k.select(
        *by,
        "row",
        "device",
        "ts_ns",
        "end_ns",
        "launch_row",
        (pl.col("kernel_class") == "COMMUNICATION").fill_null(False).alias("comm"),
        *cols,
        tensor_core_mask(k["name"], ruleset).alias("tc"),
    )


def device_metrics(k: pl.DataFrame, ws: np.ndarray, we: np.ndarray, t0: int) -> dict[str, np.ndarray]:
    """Metrics of one device's kernels ``k`` over each window ``[ws_i, we_i)`` (ns, absolute)."""
    s = k["ts_ns"].to_numpy() - t0
    e = k["end_ns"].to_numpy() - t0
    a, b = ws - t0, we - t0
    length = (b - a).astype(np.float64)

    def union_cover(mask: np.ndarray) -> np.ndarray:
        us, ue = union(s[mask], e[mask])
        return weighted_cover(us, ue, np.ones(us.size), b) - weighted_cover(us, ue, np.ones(us.size), a)

    busy = union_cover(np.ones(s.size, bool))
    compute = union_cover(~k["comm"].to_numpy())
    bps = k["blocks_per_sm"].to_numpy()
    has_b = ~np.isnan(bps) & (bps > 0)
    ss, se, sv = sm_efficiency_segments(s[has_b], e[has_b], bps[has_b])
    sm = weighted_cover(ss, se, sv, b) - weighted_cover(ss, se, sv, a)
    # the plugin reports no SM efficiency for a window without any such segment
    sm_any = np.searchsorted(ss, b, side="left") - np.searchsorted(se, a, side="right") > 0
    occ = k["est_occupancy_pct"].to_numpy()
    has_o = ~np.isnan(occ) & (occ >= 0)
    ow = weighted_cover(s[has_o], e[has_o], occ[has_o], b) - weighted_cover(s[has_o], e[has_o], occ[has_o], a)
    ot = weighted_cover(s[has_o], e[has_o], np.ones(int(has_o.sum())), b) - weighted_cover(
        s[has_o], e[has_o], np.ones(int(has_o.sum())), a
    )
    # kernels overlapping each window: started before its end, minus those ended by its start
    kernels = np.searchsorted(np.sort(s), b, side="left") - np.searchsorted(np.sort(e), a, side="right")
    with np.errstate(invalid="ignore", divide="ignore"):
        return {
            "window_us": length / 1e3,
            "kernel_busy_us": busy / 1e3,
            "utilization_pct": np.where(length > 0, 100 * busy / length, np.nan),
            "compute_utilization_pct": np.where(length > 0, 100 * compute / length, np.nan),
            "sm_efficiency_pct": np.where((length > 0) & sm_any, 100 * sm / length, np.nan),
            "occupancy_pct": np.where(ot > 0, ow / ot, np.nan),
            "kernels": kernels,
        }


def trace_gpu_metrics(
    trace: Trace, ruleset: str = "current", kernels: RankSlices | None = None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Overall and per-step metrics of one rank (pure function of its trace); ``kernels``: every
    rank's :func:`_kernels`, read once over stacked ranks (issue 19)."""
    k = _kernels(EventSource.one(trace), ruleset) if kernels is None else kernels[trace.rank]
    steps = plugin_steps(trace, launch_kinds=LAUNCH_KINDS)
    if k.height == 0 or steps.height == 0:  # the columns of a rank with rows, none of them
        return pl.DataFrame(schema=_OVERALL), pl.DataFrame(schema=_SCHEMA)
    t0 = int(min(k["ts_ns"].min(), steps["start_ns"].min()))  # type: ignore[type-var,arg-type]
    overall, per_step = [], []
    ws_all = np.array([int(steps["start_ns"].min())])  # type: ignore[arg-type]
    we_all = np.array([int(steps["end_ns"].max())])  # type: ignore[arg-type]
    for dev in sorted(k["device"].drop_nulls().unique().to_list()):
        kd = k.filter(pl.col("device") == dev).sort("ts_ns", maintain_order=True)
        m = device_metrics(kd, ws_all, we_all, t0)
        launched = kd.filter(pl.col("launch_row").is_not_null())
        tot = int(launched["end_ns"].sum()) - int(launched["ts_ns"].sum()) if launched.height else 0
        tc = launched.filter(pl.col("tc"))
        tcv = int(tc["end_ns"].sum()) - int(tc["ts_ns"].sum()) if tc.height else 0
        row = {"rank": trace.rank, "device": dev, "step": None, **{c: float(v[0]) for c, v in m.items()}}
        row["kernels"] = int(m["kernels"][0])
        row["tensor_core_pct"] = 100.0 * tcv / tot if tot else None
        overall.append(row)
        ms = device_metrics(kd, steps["start_ns"].to_numpy(), steps["end_ns"].to_numpy(), t0)
        per_step.append(pl.DataFrame({"rank": trace.rank, "device": dev, "step": steps["step"], **ms}))
    nan_to_null = [
        pl.col(c).fill_nan(None)
        for c in ("utilization_pct", "compute_utilization_pct", "sm_efficiency_pct", "occupancy_pct")
    ]
    o = pl.DataFrame(overall, schema={**_SCHEMA, "tensor_core_pct": pl.Float64}).with_columns(nan_to_null).drop("step")
    assert o.schema == pl.Schema(_OVERALL)
    p = pl.concat(per_step, how="vertical_relaxed").cast({c: t for c, t in _SCHEMA.items()}).with_columns(nan_to_null)
    return o, p


def gpu_metrics(run: Run, *, ranks: Sequence[int] | None = None, tensor_core_rules: str = "current") -> AnalysisResult:
    """GPU utilization, est. SM efficiency, est. achieved occupancy (and Tensor Core share) per rank
    and device, over all steps (``overall``) and per step (``per_step``)."""
    if tensor_core_rules not in RULESETS:
        from ranksight.errors import UsageError

        raise UsageError(f"--tensor-core-rules must be one of {', '.join(RULESETS)}")
    sess = Session.of(run, ranks)
    kernels = None
    stacked = sess.stacked_events()
    if stacked is not None:  # many small ranks: the kernels and the steps of every rank in one pass
        src = EventSource.stacked([sess.trace(r) for r in sess.ranks], stacked)
        with contextlib.suppress(CannotStack):
            kernels = RankSlices(_kernels(src, tensor_core_rules), drop=True)
            seed_plugin_steps(src, launch_kinds=LAUNCH_KINDS)
    parts = list(sess.map(trace_gpu_metrics, ruleset=tensor_core_rules, kernels=kernels).values())
    overall = pl.concat([p[0] for p in parts], how="vertical_relaxed")
    per_step = pl.concat([p[1] for p in parts], how="vertical_relaxed")
    if overall.height == 0:
        raise MissingDataError("gpu-metrics needs GPU kernel events; these traces have none (CPU-only)")
    notes = []
    no_sm = overall.filter(pl.col("sm_efficiency_pct").is_null())
    if no_sm.height:
        notes.append(
            "est. SM efficiency / occupancy are empty where kernels lack the 'blocks per SM' / 'est. achieved "
            "occupancy %' args (ROCm, CUDA graphs, old Kineto)"
        )
    return AnalysisResult({"overall": overall, "per_step": per_step}, notes)


register(
    AnalysisSpec(
        name="gpu-metrics",
        func=gpu_metrics,
        help="GPU utilization, est. SM efficiency, est. achieved occupancy per rank and device, overall and per step",
        options=(
            Option("tensor_core_rules", str, "current", "Tensor Core kernel rules: current or plugin (the 2019 list)"),
        ),
    )
)
