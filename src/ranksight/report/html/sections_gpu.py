"""GPU time: temporal and idle breakdowns, kernel types, overlap, GPU metrics."""

from __future__ import annotations

from typing import Any

import polars as pl

from ranksight.report.html.sections import Ctx, section, wide

US = {
    c: "µs"
    for c in (
        "kernel_time_us",
        "idle_us",
        "compute_us",
        "non_compute_us",
        "sum_us",
        "comm_us",
        "union_us",
        "overlap_us",
        "exposed_comm_us",
        "window_us",
        "busy_us",
        "kernel_busy_us",
        "step_time_us",
        "stream_idle_us",
    )
}


@section(
    "temporal",
    "Temporal breakdown",
    needs=("temporal",),
    group="GPU time",
    order=10,
    help="Per rank, the GPU span (first to last GPU event) split into compute kernels, non-compute work "
    "(communication, memory) and idle (HTA's temporal breakdown); per step, the same split of each step "
    "window (the ProfilerStep extended to the GPU work it launched). idle is GPU idle: no GPU work on any "
    "stream.",
)
def temporal(ctx: Ctx) -> list[dict[str, Any]]:
    t = ctx.tables("temporal", "temporal", per_step=True)["temporal"]  # per_step: the options summary reads too
    blocks = [
        *ctx.rank_bar(
            t["rank"].to_list(),
            {k: (t[f"{k}_us"] / 1e3).to_list() for k in ("compute", "non_compute", "idle")},
            id="temporal-chart",
            title="GPU time per rank, over the GPU span",
            unit="ms",
            y_label="ms",
        ),
        ctx.table(t, id="temporal-table", title="Per rank, over the GPU span", units=US),
    ]
    ps = ctx.result("temporal", per_step=True).tables
    step_tables = [df for name, df in ps.items() if "step" in df.columns and df.height]
    if step_tables:
        st = step_tables[0]
        blocks.append(ctx.table(st, id="temporal-steps", title="Per step, over each step window", units=US))
        if {"compute_us", "non_compute_us", "idle_us"} <= set(st.columns) and st["step"].n_unique() > 1:
            agg = st.group_by("step").agg(pl.col("compute_us", "non_compute_us", "idle_us").mean()).sort("step")
            blocks.insert(
                1,
                ctx.bar(
                    [f"step {s}" for s in agg["step"].to_list()],
                    {k: (agg[f"{k}_us"] / 1e3).to_list() for k in ("compute", "non_compute", "idle")},
                    id="temporal-steps-chart",
                    title="GPU time per step window (mean over ranks)",
                    unit="ms",
                    y_label="ms",
                ),
            )
    return blocks


@section(
    "idle",
    "Idle time breakdown",
    needs=("idle",),
    group="GPU time",
    order=20,
    help="Stream idle: the gaps between the GPU work of each stream, by cause — host_wait (the GPU waits for "
    "the CPU to launch work), kernel_wait (short gaps between back-to-back kernels) and other (HTA's idle "
    "time breakdown). A gap on one stream while another stream runs counts, so the sum over streams is not "
    "GPU idle time (GPU busy and idle, Temporal breakdown: no work on any stream).",
)
def idle(ctx: Ctx) -> list[dict[str, Any]]:
    t = ctx.tables("idle", "idle")["idle"].rename({"idle_us": "stream_idle_us"})
    cats, bars = wide(t, "rank", "idle_category", "stream_idle_us", scale=1e-3)
    help = {"stream_idle_us": "this stream's gaps of the category (idle of the analysis `idle`): not GPU idle"}
    return [
        *ctx.rank_bar(
            cats,
            bars,
            id="idle-chart",
            title="Stream idle per rank, summed over streams (not GPU idle)",
            unit="ms",
            y_label="ms, summed over streams",
        ),
        ctx.table(t, id="idle-table", title="Stream idle per rank and stream", units=US, help=help),
    ]


@section(
    "kernel-types",
    "Kernel types",
    needs=("kernel-types",),
    group="GPU time",
    order=30,
    help="GPU time by kernel type (computation, communication, memory) and the time where they overlap.",
)
def kernel_types(ctx: Ctx) -> list[dict[str, Any]]:
    tabs = ctx.tables("kernel-types", "kernel_types")
    blocks = []
    if "per_rank" in tabs and tabs["per_rank"].height:
        pr = tabs["per_rank"]
        cats, bars = wide(pr, "rank", "kernel_type", "sum_us", scale=1e-3)
        blocks += ctx.rank_bar(
            cats,
            bars,
            id="kernel-types-chart",
            title="GPU time by kernel type per rank",
            unit="ms",
            y_label="ms",
        )
    blocks.append(ctx.table(tabs["kernel_types"], id="kernel-types-table", title="All ranks", units=US))
    if "per_rank" in tabs:
        blocks.append(ctx.table(tabs["per_rank"], id="kernel-types-ranks", title="Per rank", units=US))
    return blocks


@section(
    "overlap",
    "Communication / computation overlap",
    needs=("overlap",),
    group="GPU time",
    order=40,
    help="Over the GPU span: the share of communication time that runs while computation runs on the same GPU "
    "(comp_comm_overlap_pctg, HTA's number: the overlap efficiency in %), and exposed communication, "
    "communication with no computation under it. Exposed communication gives the same numbers over the step "
    "windows. hidden_share_of_shorter is the share of the shorter of compute and communication that runs "
    "under the other: not an overlap efficiency.",
)
def overlap(ctx: Ctx) -> list[dict[str, Any]]:
    t = ctx.tables("overlap", "overlap")["overlap"]
    bars = {"overlapped": (t["overlap_us"] / 1e3).to_list(), "exposed": (t["exposed_comm_us"] / 1e3).to_list()}
    return [
        *ctx.rank_bar(
            t["rank"].to_list(),
            bars,
            id="overlap-chart",
            title="Communication time per rank, over the GPU span",
            unit="ms",
            y_label="ms",
        ),
        ctx.table(t, id="overlap-table", title="Per rank, over the GPU span", units=US),
    ]


@section(
    "gpu-metrics",
    "GPU metrics",
    needs=("gpu-metrics",),
    group="GPU time",
    order=50,
    help="GPU utilization, estimated SM efficiency and estimated achieved occupancy (TensorBoard plugin "
    "definitions), overall and per step. Kernels only (copies and sets excluded), over the plugin's step "
    "windows: utilization_pct is not GPU busy (see GPU busy and idle).",
)
def gpu_metrics(ctx: Ctx) -> list[dict[str, Any]]:
    tabs = ctx.tables("gpu-metrics", "overall")
    o = tabs["overall"]
    cats = [
        f"rank {r}" + (f" gpu {d}" if o.filter(pl.col("rank") == r).height > 1 else "")
        for r, d in zip(o["rank"].to_list(), o["device"].to_list(), strict=True)
    ]
    metrics = [
        c for c in ("utilization_pct", "sm_efficiency_pct", "occupancy_pct", "tensor_core_pct") if c in o.columns
    ]
    blocks = [
        *ctx.rank_bar(
            o["rank"].to_list(),
            {m: o[m].to_list() for m in metrics},
            labels=cats,
            id="gpu-metrics-chart",
            title="GPU metrics per rank (kernels only, TensorBoard plugin's steps)",
            stacked=False,
            unit="%",
            y_label="%",
        ),
        ctx.table(o, id="gpu-metrics-table", title="Overall", units=US),
    ]
    if "per_step" in tabs and tabs["per_step"].height:
        blocks.append(ctx.table(tabs["per_step"], id="gpu-metrics-steps", title="Per step", units=US))
    return blocks
