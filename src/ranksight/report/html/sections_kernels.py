"""Kernels: top kernels per type and rank, duration across ranks, launch configuration."""

from __future__ import annotations

from typing import Any

import polars as pl

from ranksight.report.html.sections import Ctx, Skip, rank_labels, section

US = {c: "µs" for c in ("sum_us", "mean_us", "min_us", "max_us", "std_us", "total_us")}


@section(
    "kernels",
    "Top kernels by type",
    needs=("kernels",),
    group="Kernels",
    order=10,
    help="Per rank and kernel type, the kernels with the most GPU time (count, sum, mean, min, max, std); "
    "the rest is folded into an 'others' row.",
)
def kernels(ctx: Ctx) -> list[dict[str, Any]]:
    t = ctx.tables("kernels", "kernels")["kernels"]
    top = (
        t.filter(~pl.col("name").str.starts_with("others"))
        .group_by("name", "kernel_type")
        .agg(pl.col("sum_us").sum())
        .sort(["sum_us", "name"], descending=[True, False])
        .head(12)
    )
    per_rank = t.filter(pl.col("name").is_in(top["name"].implode())).pivot(
        on="rank", index="name", values="sum_us", aggregate_function="sum"
    )
    per_rank = top.select("name").join(per_rank, on="name", how="left", maintain_order="left").fill_null(0)
    ranks = [c for c in per_rank.columns if c != "name"]
    chart = ctx.rank_series_bar(
        per_rank["name"].to_list(),
        {int(r): (per_rank[r] / 1e3).to_list() for r in ranks},
        id="kernels-chart",
        title="Top kernels (all types), GPU time per rank",
        horizontal=True,
        unit="ms",
        x_label="ms",
    )
    return [
        chart,
        ctx.table(t, id="kernels-table", title="Top kernels per rank and type", units=US, sort=("sum_us", True)),
    ]


@section(
    "kernel-spread",
    "Kernel duration across ranks",
    needs=("kernel-spread",),
    group="Kernels",
    order=20,
    help="For the top kernels, their mean duration on each rank; spread_pct = (max − min) / mean of "
    "the per-rank means. The same kernel taking longer on one rank points at that rank.",
)
def kernel_spread(ctx: Ctx) -> list[dict[str, Any]]:
    t = ctx.tables("kernel-spread", "kernel_spread")["kernel_spread"]
    names = (
        t.group_by("name")
        .agg(pl.col("sum_us").sum())
        .sort(["sum_us", "name"], descending=[True, False])
        .head(20)["name"]
        .to_list()
    )
    ranks = sorted(t["rank"].unique().to_list())
    piv = t.pivot(on="rank", index="name", values="mean_us", aggregate_function="mean")
    piv = pl.DataFrame({"name": names}).join(piv, on="name", how="left", maintain_order="left")
    values = [[piv[str(r)][i] if str(r) in piv.columns else None for r in ranks] for i in range(piv.height)]
    heat = ctx.heatmap(
        names,
        rank_labels(ranks),
        values,
        id="kernel-spread-heatmap",
        title="Mean kernel duration per rank (colour: each kernel's own range)",
        unit="µs",
        x_label="rank",
        y_label="kernel",
        scale="row",
        reduce="max" if ctx.many else "mean",  # many ranks: a slow rank's column survives the merge
    )
    return [
        heat,
        ctx.table(t, id="kernel-spread-table", title="Per kernel and rank", units=US, sort=("spread_pct", True)),
    ]


@section(
    "kernel-config",
    "Kernels by launch configuration",
    needs=("kernel-config",),
    group="Kernels",
    order=30,
    help="Kernels per name and launch configuration (grid, block, registers, shared memory): calls, time, "
    "blocks per SM, estimated occupancy, Tensor Core use.",
)
def kernel_config(ctx: Ctx) -> list[dict[str, Any]]:
    t = ctx.tables("kernel-config", "kernels")["kernels"]
    return [ctx.table(t, id="kernel-config-table", title="Kernels", units=US, sort=("total_us", True))]


@section(
    "sequences",
    "Frequent kernel sequences",
    needs=("sequences", "ops"),
    group="Kernels",
    order=40,
    help="The GPU kernel sequences launched under the operator with the most device time (HTA's frequent "
    "CUDA kernel sequences): identical sequences counted, with their GPU and CPU time.",
)
def sequences(ctx: Ctx) -> list[dict[str, Any]]:
    ops = ctx.tables("ops", "ops")["ops"]
    cand = (
        ops.filter(
            ~pl.col("name").str.starts_with("ProfilerStep")
            & ~pl.col("name").str.starts_with("##")
            & (pl.col("calls") > 1)
        )
        .group_by("name")
        .agg(pl.col("device_total_us").sum())
        .sort(["device_total_us", "name"], descending=[True, False])
        .head(5)["name"]
        .to_list()
    )
    ctx.end_detail()  # the operators are chosen from `ops`; the table is `sequences`' own
    for op in cand:
        try:
            tabs = ctx.tables("sequences", "patterns", op=op, min_pattern_len=2)
        except Skip:
            continue
        ctx.notes[:] = [f"operator: {op} (the one with the most device time that launches 2 or more GPU activities)"]
        return [ctx.table(tabs["patterns"], id="sequences-table", title=f"Kernel sequences under {op}", units=US)]
    raise Skip(
        "no operator with repeated kernel sequences (tried: " + ", ".join(cand) + ")"
        if cand
        else "no operator with device time"
    )


@section(
    "cupti-counters",
    "CUPTI counters",
    needs=("cupti-counters",),
    group="Kernels",
    order=60,
    help="Hardware counters from the CUPTI range profiler per kernel, with the operators that launched it.",
)
def cupti_counters(ctx: Ctx) -> list[dict[str, Any]]:
    tabs = ctx.tables("cupti-counters", "kernels")
    blocks = []
    if "by_op" in tabs and tabs["by_op"].height:
        blocks.append(ctx.table(tabs["by_op"], id="cupti-by-op", title="Per operator", units={"dur_us": "µs"}))
    k = tabs["kernels"]
    blocks.append(
        ctx.table(
            k.drop([c for c in ("row", "launch_row") if c in k.columns]),
            id="cupti-kernels",
            title="Per kernel",
            units={"dur_ns": "ns", "ts_ns": "ns"},
        )
    )
    return blocks
