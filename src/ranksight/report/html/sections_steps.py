"""Steps: the TensorBoard-style step breakdown, ProfilerSteps, MFU."""

from __future__ import annotations

from typing import Any

import polars as pl

from ranksight.report.html.sections import Ctx, section, wide

CATS = ("kernel", "memcpy", "memset", "communication", "runtime", "dataloader", "cpu_exec", "other")


@section(
    "step-overview",
    "Step time breakdown (TensorBoard plugin's steps)",
    needs=("overview",),
    group="Steps",
    order=10,
    help="Each ProfilerStep split into Kernel, Memcpy, Memset, Communication, Runtime, DataLoader, "
    "CPU Exec and Other (the TensorBoard plugin's overview), averaged over steps. The steps are the "
    "plugin's (launches inside the host step only; a short last step dropped), so total_us can differ "
    "from the step windows of the summary's step_ms and of the other sections.",
)
def step_overview(ctx: Ctx) -> list[dict[str, Any]]:
    tabs = ctx.tables("overview", "steps")
    st = tabs["steps"]
    cats = [c for c in CATS if f"{c}_us" in st.columns]
    avg = st.group_by("rank").agg(pl.col(f"{c}_us").mean() for c in cats).sort("rank")
    blocks = [
        *ctx.rank_bar(
            avg["rank"].to_list(),
            {c: (avg[f"{c}_us"] / 1e3).to_list() for c in cats},
            id="step-overview-chart",
            title="Mean step time per rank (TensorBoard plugin's steps)",
            unit="ms",
            y_label="ms",
        ),
    ]
    if st["step"].n_unique() > 1:
        per = st.group_by("step").agg(pl.col(f"{c}_us").mean() for c in cats).sort("step")
        blocks.append(
            ctx.bar(
                [f"step {s}" for s in per["step"].to_list()],
                {c: (per[f"{c}_us"] / 1e3).to_list() for c in cats},
                id="step-overview-steps",
                title="Step time per step (mean over ranks)",
                unit="ms",
                y_label="ms",
            )
        )
    blocks.append(
        ctx.table(
            st, id="step-overview-table", title="Per rank and step", units={f"{c}_us": "µs" for c in (*cats, "total")}
        )
    )
    if "average" in tabs and tabs["average"].height:
        blocks.append(
            ctx.table(
                tabs["average"],
                id="step-overview-average",
                title="Average per rank and category",
                units={"time_us": "µs"},
            )
        )
    return blocks


@section(
    "steps",
    "ProfilerSteps",
    needs=("steps",),
    group="Steps",
    order=20,
    help="Each ProfilerStep's CPU span, the GPU span of the work it launched, and its kernels.",
)
def steps(ctx: Ctx) -> list[dict[str, Any]]:
    st = ctx.tables("steps", "steps")["steps"]
    blocks = []
    if st["step"].n_unique() > 1:
        cats, bars = wide(st, "step", "rank", "gpu_span_us", scale=1e-3, order=sorted(st["rank"].unique().to_list()))
        blocks.append(
            ctx.rank_series_bar(
                [f"step {s}" for s in cats],
                {int(r): v for r, v in bars.items()},
                id="steps-chart",
                title="GPU span per step and rank",
                stacked=False,
                unit="ms",
                y_label="ms",
            )
        )
    blocks.append(
        ctx.table(
            st,
            id="steps-table",
            title="Steps",
            units={
                "cpu_dur_us": "µs",
                "gpu_span_us": "µs",
                "cpu_start_ns": "ns",
                "gpu_start_ns": "ns",
                "gpu_end_ns": "ns",
            },
        )
    )
    return blocks


@section(
    "mfu",
    "Model FLOPs utilization",
    needs=("mfu",),
    group="Steps",
    order=30,
    help="FLOPs from operator input shapes (2 per multiply-add) per step, achieved TFLOP/s over the "
    "step time, and MFU = achieved / GPU peak (HFU counts recomputation too).",
)
def mfu(ctx: Ctx) -> list[dict[str, Any]]:
    tabs = ctx.tables("mfu", "steps")
    st = tabs["steps"]
    blocks = []
    if "mfu" in st.columns and st["mfu"].drop_nulls().len():
        per = st.group_by("rank").agg((pl.col("mfu").mean() * 100).alias("mfu_pct")).sort("rank")
        blocks += ctx.rank_bar(
            per["rank"].to_list(),
            {"MFU": per["mfu_pct"].to_list()},
            id="mfu-chart",
            title="Mean MFU per rank",
            unit="%",
            y_label="%",
        )
    else:
        ctx.notes.append("MFU needs the GPU's peak: unknown GPU (pass --peak-tflops to `ranksight analyze mfu`)")
    blocks.append(ctx.table(st, id="mfu-steps", title="Per rank and step", units={"step_us": "µs"}))
    if "ops" in tabs and tabs["ops"].height:
        blocks.append(
            ctx.table(
                tabs["ops"], id="mfu-ops", title="FLOPs per operator", units={"device_us": "µs"}, sort=("gflop", True)
            )
        )
    return blocks
