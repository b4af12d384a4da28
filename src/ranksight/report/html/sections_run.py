"""Run overview (the ``info`` analysis) and the headline GPU sections (from ``summary``)."""

from __future__ import annotations

from typing import Any

import polars as pl

from ranksight.report.headline import SUMMARY_TOP
from ranksight.report.html.sections import Ctx, Skip, section


@section(
    "overview",
    "Run overview",
    needs=("info", "run-context"),
    group="Run",
    order=10,
    help="Files, ranks, GPUs, steps and time span of the traces, any trace warnings, and the run context "
    "(training or inference, precision, torch.compile, CUDA/HIP graphs) with its evidence.",
)
def overview(ctx: Ctx) -> list[dict[str, Any]]:
    if len(ctx.session.ranks) == 0:
        raise Skip("no traces loaded")
    res = ctx.result("info")
    files = res["files"].drop("time_base")
    r = res["run"].row(0, named=True)
    facts: list[tuple[str, Any]] = [
        ("run context", r.get("context") or "unknown"),
        ("ranks loaded", r["ranks"]),
        ("world size", r["world_size"] or "unknown"),
        ("GPU", r["gpus"]),
        ("steps", f"{r['steps']} (#{r['first_step']}–#{r['last_step']})" if r["steps"] else "none found"),
        ("time span (all ranks)", f"{r['span_ms']:,.3f} ms" if r["span_ms"] is not None else "empty"),
        ("events", r["events"]),
        ("trace warnings", r["warnings"]),
    ]
    blocks = [
        ctx.kv(facts, id="overview-facts"),
        ctx.table(files, id="overview-files", title="Files", units={"json_mb": "MB", "span_ms": "ms"}),
    ]
    try:
        ev = ctx.tables("run-context", "evidence")["evidence"]
        blocks.append(ctx.table(ev, id="overview-context", title="Run context: the evidence for each answer"))
    except Skip:
        pass  # the facts say "unknown"; the overview stands without it
    warnings = ctx.run.warnings
    if warnings:
        w = pl.DataFrame({"warning": [str(x) for x in warnings]})
        blocks.append(ctx.table(w, id="overview-warnings", title="Trace warnings"))
    return blocks


#: Column help of the GPU busy tables: each says which window it is over (docs/metrics.md).
BUSY_HELP = {
    "span_us": "GPU span: first start to last end of the rank's GPU work",
    "busy_us": "GPU busy: union of GPU work (kernels, memcpy, memset) over all streams, inside the window",
    "idle_us": "GPU idle: window − GPU busy",
    "busy_pct": "GPU busy over the GPU span × 100 (= 100 − temporal idle_pct; the summary's gpu_busy_pct)",
    "step_time_us": "the step windows summed (ProfilerStep extended to its GPU work, contiguous)",
    "busy_us_in_steps": "GPU busy inside the step windows",
    "idle_us_in_steps": "GPU idle inside the step windows: step windows − GPU busy in them",
    "busy_pct_of_steps": "GPU busy over the step windows × 100 (the summary's gpu_busy_pct_of_steps; what "
    "low-gpu-utilization judges)",
    "idle_pct_of_steps": "GPU idle over the step windows × 100",
}


@section(
    "gpu-busy",
    "GPU busy and idle per rank",
    needs=("summary", "temporal"),
    group="GPU time",
    order=5,
    help="GPU busy = union of GPU work (kernels, memcpy, memset) over all streams; idle = window − busy. "
    "One definition, two windows: the GPU span (first start to last end of GPU work on the rank; the "
    "summary's gpu_busy_pct) and the step windows (each ProfilerStep extended to the GPU work it launched; "
    "the summary's gpu_busy_pct_of_steps, what the GPU-utilization finding judges). GPU metrics' "
    "utilization_pct counts kernels only, over the TensorBoard plugin's steps.",
)
def gpu_busy(ctx: Ctx) -> list[dict[str, Any]]:
    t = ctx.tables("summary", "gpu", top=SUMMARY_TOP)["gpu"]
    t = t.filter(pl.col("span_us").is_not_null())
    if t.height == 0:
        raise Skip("no GPU events in these traces (CPU-only)")
    charts = ctx.rank_bar(
        t["rank"].to_list(),
        {"busy": (t["busy_us"] / 1e3).to_list(), "idle": (t["idle_us"] / 1e3).to_list()},
        id="gpu-busy-chart",
        title="GPU busy and idle time per rank, over the GPU span",
        unit="ms",
        y_label="ms of the GPU span",
    )
    us = {c: "µs" for c in ("span_us", "busy_us", "idle_us", "step_time_us", "busy_us_in_steps", "idle_us_in_steps")}
    blocks = [
        *charts,
        ctx.table(t, id="gpu-busy-table", title="Per rank, over the GPU span", units=us, help=BUSY_HELP),
    ]
    steps = ctx.result("temporal", per_step=True).tables.get("over_steps")
    if steps is not None and steps.height:
        blocks.append(
            ctx.table(
                steps, id="gpu-busy-steps-table", title="Per rank, over the step windows", units=us, help=BUSY_HELP
            )
        )
    return blocks


@section(
    "top-kernels",
    "Top kernels per rank",
    needs=("summary",),
    group="Kernels",
    order=50,
    help="Kernels by total duration (sum of dur) on each rank, with count and mean.",
)
def top_kernels(ctx: Ctx) -> list[dict[str, Any]]:
    t = ctx.tables("summary", "top_kernels", top=SUMMARY_TOP)["top_kernels"]
    ranks = sorted(t["rank"].unique().to_list())
    top = (
        t.group_by("name")
        .agg(pl.col("total_us").sum().alias("all"))
        .sort(["all", "name"], descending=[True, False])
        .head(10)
    )
    names = top["name"].to_list()
    piv = (
        top.select("name")
        .join(
            t.pivot(on="rank", index="name", values="total_us", aggregate_function="sum"),
            on="name",
            how="left",
            maintain_order="left",
        )
        .fill_null(0)
    )
    chart = ctx.rank_series_bar(
        names,
        {r: (piv[str(r)] / 1e3).to_list() for r in ranks},
        id="top-kernels-chart",
        title="Top kernels, time per rank",
        horizontal=True,
        unit="ms",
        x_label="ms",
    )
    return [
        chart,
        ctx.table(
            t,
            id="top-kernels-table",
            title="Top kernels per rank",
            sort=("total_us", True),
            units={"total_us": "µs", "mean_us": "µs"},
        ),
    ]
