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


@section(
    "gpu-busy",
    "GPU busy and idle per rank",
    needs=("summary",),
    group="GPU time",
    order=5,
    help="busy = union of GPU work (kernels, memcpy, memset) over all streams; idle = span − busy; "
    "span = first start to last end of GPU work on the rank.",
)
def gpu_busy(ctx: Ctx) -> list[dict[str, Any]]:
    t = ctx.tables("summary", "gpu", top=SUMMARY_TOP)["gpu"]
    t = t.filter(pl.col("span_us").is_not_null())
    if t.height == 0:
        raise Skip("no GPU events in these traces (CPU-only)")
    cats = [f"rank {r}" for r in t["rank"].to_list()]
    chart = ctx.bar(
        cats,
        {"busy": (t["busy_us"] / 1e3).to_list(), "idle": (t["idle_us"] / 1e3).to_list()},
        id="gpu-busy-chart",
        title="GPU busy and idle time per rank",
        unit="ms",
        y_label="ms",
    )
    return [
        chart,
        ctx.table(t, id="gpu-busy-table", title="Per rank", units={"span_us": "µs", "busy_us": "µs", "idle_us": "µs"}),
    ]


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
    bars = {f"rank {r}": (piv[str(r)] / 1e3).to_list() for r in ranks}
    chart = ctx.bar(
        names,
        bars,
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
