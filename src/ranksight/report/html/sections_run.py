"""Run overview (from the trace model) and the headline GPU sections (from ``summary``)."""

from __future__ import annotations

import os
from typing import Any

import polars as pl

from ranksight.report.html.sections import Ctx, Skip, section


def _files(run: Any) -> pl.DataFrame:
    rows = []
    for t in run:
        m = t.meta
        steps = t.steps
        span = t.span_ns
        rows.append(
            {
                "rank": t.rank,
                "file": os.path.basename(t.path),
                "rank_from": m.rank_source,
                "json_mb": round(m.json_bytes / 1e6, 3),
                "events": t.stats.get("events", t.n_events),
                "gpu": m.gpu_model or (m.gpu_vendor or "none"),
                "devices": ",".join(str(d) for d in m.devices_used),
                "world_size": m.world_size,
                "steps": steps.height,
                "first_step": steps["step"].min() if steps.height else None,
                "last_step": steps["step"].max() if steps.height else None,
                "span_ms": round((span[1] - span[0]) / 1e6, 3) if span else None,
                "warnings": len(t.warnings),
            }
        )
    return pl.DataFrame(rows, infer_schema_length=None)


@section(
    "overview",
    "Run overview",
    group="Run",
    order=10,
    help="Files, ranks, GPUs, steps and time span of the traces, and any trace warnings.",
)
def overview(ctx: Ctx) -> list[dict[str, Any]]:
    run = ctx.run
    if len(run) == 0:
        raise Skip("no traces loaded")
    files = _files(run)
    gpus = sorted({g for g in files["gpu"].to_list() if g})
    spans = [t.span_ns for t in run if t.span_ns]
    span_ms = (max(s[1] for s in spans) - min(s[0] for s in spans)) / 1e6 if spans else None
    ws = sorted({t.meta.world_size for t in run if t.meta.world_size})
    steps = sorted({s for t in run for s in t.steps["step"].to_list()})
    facts: list[tuple[str, Any]] = [
        ("ranks loaded", len(run)),
        ("world size", ", ".join(map(str, ws)) if ws else "unknown"),
        ("GPU", ", ".join(gpus) if gpus else "none"),
        ("steps", f"{len(steps)} (#{steps[0]}–#{steps[-1]})" if steps else "none found"),
        ("time span (all ranks)", f"{span_ms:,.3f} ms" if span_ms is not None else "empty"),
        ("events", int(files["events"].sum())),
        ("trace warnings", len(run.warnings)),
    ]
    blocks = [ctx.kv(facts, id="overview-facts"), ctx.table(files, id="overview-files", title="Files", units={"json_mb": "MB", "span_ms": "ms"})]
    if ws and len(ws) == 1 and len(run) < ws[0]:
        ctx.notes.append(f"{len(run)} of {ws[0]} ranks loaded")
    elif len(ws) > 1:
        ctx.notes.append(f"ranks disagree on the world size: {ws} (runs mixed in one folder?)")
    if run.warnings:
        w = pl.DataFrame({"warning": [str(x) for x in run.warnings]})
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
    t = ctx.tables("summary", "gpu", top=10)["gpu"]
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
    return [chart, ctx.table(t, id="gpu-busy-table", title="Per rank", units={"span_us": "µs", "busy_us": "µs", "idle_us": "µs"})]


@section(
    "top-kernels",
    "Top kernels per rank",
    needs=("summary",),
    group="Kernels",
    order=50,
    help="Kernels by total duration (sum of dur) on each rank, with count and mean.",
)
def top_kernels(ctx: Ctx) -> list[dict[str, Any]]:
    t = ctx.tables("summary", "top_kernels", top=10)["top_kernels"]
    ranks = sorted(t["rank"].unique().to_list())
    top = (
        t.group_by("name").agg(pl.col("total_us").sum().alias("all")).sort(["all", "name"], descending=[True, False]).head(10)
    )
    names = top["name"].to_list()
    piv = top.select("name").join(
        t.pivot(on="rank", index="name", values="total_us", aggregate_function="sum"), on="name", how="left", maintain_order="left"
    ).fill_null(0)
    bars = {f"rank {r}": (piv[str(r)] / 1e3).to_list() for r in ranks}
    chart = ctx.bar(names, bars, id="top-kernels-chart", title="Top kernels, time per rank", horizontal=True, unit="ms", x_label="ms")
    return [chart, ctx.table(t, id="top-kernels-table", title="Top kernels per rank", sort=("total_us", True), units={"total_us": "µs", "mean_us": "µs"})]
