"""Operator roofline: op-perf's operators against the GPU's peaks and memory bandwidth."""

from __future__ import annotations

from typing import Any

import polars as pl

from ranksight.report.html.payload import series
from ranksight.report.html.sections import Ctx, Skip, section

#: Ranks drawn as their own roofline (the tables cover every rank).
MAX_CHARTS = 8
#: Operator groups drawn per rank (the longest first); the rest are in the tables.
MAX_POINTS = 400

_US = {c: "µs" for c in ("kernel_us_sum", "lost_us", "kernel_us", "modelled_us")}
_HELP = {
    "pct_of_roofline": "achieved ÷ attainable × 100, attainable = min(peak, FLOP/byte × bandwidth)",
    "lost_us": "kernel time × (1 − % of roofline / 100): the time above the roofline's",
    "bound": "compute when FLOP/byte × bandwidth ≥ peak, else memory",
    "flop_per_byte": "arithmetic intensity: FLOPs ÷ minimum bytes moved",
}


def roofline_chart(ctx: Ctx, ops: pl.DataFrame, gpu: dict[str, Any], *, id: str, title: str) -> dict[str, Any]:
    """One rank's roofline block: each modelled op group as a point (x FLOP/byte, y achieved
    TFLOP/s, size ∝ kernel time), one ceiling per precision the ops were held to, and the bandwidth."""
    pts = ops.filter(
        (pl.col("model") == "yes") & (pl.col("flop_per_byte") > 0) & (pl.col("achieved_tflop_per_s") > 0)
    ).sort("kernel_us_sum", descending=True)
    if pts.height == 0:
        raise Skip("no operator with FLOPs, bytes and a known peak")
    pts = pts.head(MAX_POINTS)
    peaks = (
        pts.group_by("peak_dtype", "tensor_cores")
        .agg(pl.col("peak_tflop_per_s").first(), pl.col("kernel_us_sum").sum())
        .sort("peak_tflop_per_s", descending=True)
    )
    ceilings = []
    for dt, tc, peak, _ in peaks.iter_rows():
        kind = "Tensor/Matrix Cores" if tc != "no" and dt not in ("fp32", "fp64") else "vector"
        ceilings.append({"name": ctx.strings(f"{dt} {kind}: {peak:,.1f} TFLOP/s"), "peak": peak})
    groups = []
    for cat in pts["category"].unique(maintain_order=True).to_list():
        g = pts.filter(pl.col("category") == cat)
        labels = [f"{n} {d}" if d else n for n, d in zip(g["name"].to_list(), g["input_dims"].to_list(), strict=True)]
        groups.append(
            {
                "name": ctx.strings(cat),
                "x": series(g["flop_per_byte"].to_list()),
                "y": series(g["achieved_tflop_per_s"].to_list()),
                "time_us": series(g["kernel_us_sum"].to_list()),
                "pct": series(g["pct_of_roofline"].to_list()),
                "labels": ctx.strings.many(labels),
            }
        )
    return {
        "type": "chart",
        "chart": "roofline",
        "id": id,
        "title": title,
        "bandwidth_tb_per_s": gpu.get("mem_bw_tb_per_s"),
        "bandwidth_name": ctx.strings(f"memory {gpu.get('mem_bw_tb_per_s')} TB/s"),
        "ceilings": ceilings,
        "series": groups,
        "x_label": "FLOP/byte",
        "y_label": "achieved TFLOP/s",
    }


@section(
    "op-perf",
    "Operator roofline",
    needs=("op-perf",),
    group="Kernels",
    order=40,
    help="Each GPU operator (the CPU op that launched the kernels) and shape as a point of the roofline: x its "
    "arithmetic intensity (FLOPs per minimum byte moved), y its achieved TFLOP/s, size its kernel time; the "
    "ceilings are the GPU's peaks for the precisions the operators ran at and its memory bandwidth "
    "(docs/op-perf.md). Below: the operators losing the most time to the roofline, and the categories.",
)
def op_perf(ctx: Ctx) -> list[dict[str, Any]]:
    tabs = ctx.tables("op-perf", "ops")
    ops, cats, attr, gpus = tabs["ops"], tabs["categories"], tabs["attribution"], tabs["gpus"]
    blocks: list[dict[str, Any]] = []
    ranks = sorted(ops["rank"].unique().to_list())
    gpu_of = {r["rank"]: r for r in gpus.to_dicts()}
    drawn = 0
    for r in ranks:
        if drawn >= MAX_CHARTS:
            break
        g = gpu_of.get(r, {})
        if g.get("mem_bw_tb_per_s") is None:
            continue
        try:
            blocks.append(
                roofline_chart(
                    ctx,
                    ops.filter(pl.col("rank") == r),
                    g,
                    id=f"op-perf-roofline-{r}",
                    title=f"Rank {r} roofline ({g.get('gpu')})",
                )
            )
        except Skip:
            continue
        drawn += 1
    if not blocks:
        raise Skip("no rank has an operator with FLOPs, bytes and a GPU with known peaks and bandwidth")
    if len(ranks) > drawn:
        blocks.append(
            ctx.text(
                f"Rooflines drawn for {drawn} of {len(ranks)} ranks; the tables below cover every rank.",
                id="op-perf-ranks-note",
            )
        )
    lost = (
        ops.filter(pl.col("lost_us").is_not_null())
        .sort("lost_us", descending=True)
        .head(25)
        .select(
            "rank",
            "name",
            "category",
            "input_dims",
            "count",
            "kernel_us_sum",
            "lost_us",
            "pct_of_roofline",
            "bound",
            "achieved_tflop_per_s",
            "achieved_tb_per_s",
            "flop_per_byte",
            "precision",
            "tensor_cores",
        )
    )
    blocks.append(
        ctx.table(
            lost,
            id="op-perf-lost",
            title="Operators losing the most time to the roofline",
            units=_US,
            help=_HELP,
            sort=("lost_us", True),
        )
    )
    if cats.height:
        blocks.append(
            ctx.table(cats, id="op-perf-categories", title="Per category", units=_US, sort=("kernel_us", True))
        )
    blocks.append(
        ctx.table(
            attr,
            id="op-perf-attribution",
            title="GPU time attributed to operators (the rest: launched outside any op, or launch not traced)",
            units={c: "µs" for c in attr.columns if c.endswith("_us")},
        )
    )
    return blocks
