"""GPU time: where the idle time went (``idle-causes``)."""

from __future__ import annotations

from typing import Any

import polars as pl

from ranksight.report.html.sections import Ctx, Skip, section, wide

#: Longest attributed idle pieces embedded in the report (the CLI's ``--format csv`` has all).
LONGEST_GAPS = 200
#: Causes in the order the charts stack them.
CAUSE_ORDER = ("dataloader", "collective_wait", "sync", "cpu_op", "launch_latency", "unexplained")


@section(
    "idle-causes",
    "Where the idle time went",
    needs=("idle-causes",),
    group="GPU time",
    order=25,
    help="Every GPU idle gap attributed to what held the next GPU work back: the DataLoader, a collective "
    "waiting for a late rank, a synchronisation (also the idle after a sync emptied the GPU's queue), the "
    "CPU op, annotation or Python frame running on the launching thread, launch latency (launched, not yet "
    "started), or unexplained. Per rank the causes sum to the temporal breakdown's idle time; per step to "
    "its per-step idle. Definitions: docs/idle-causes.md.",
)
def idle_causes(ctx: Ctx) -> list[dict[str, Any]]:
    tabs = ctx.result("idle-causes").tables
    by_rank, by_step, sites, gaps = tabs["by_rank"], tabs["by_step"], tabs["call_sites"], tabs["gaps"]
    if gaps.height == 0:
        raise Skip("`idle-causes`: no GPU idle time in these traces (no GPU work, or the GPU never idles)")
    order = [c for c in CAUSE_ORDER if c in set(gaps["cause"].to_list())]
    blocks: list[dict[str, Any]] = []
    if by_rank.height:
        cats, bars = wide(by_rank, "rank", "cause", "idle_us", scale=1e-3, order=order)
        blocks += ctx.rank_bar(
            cats,
            bars,
            id="idle-causes-chart",
            title="GPU idle per rank and cause (GPU span)",
            unit="ms",
            y_label="ms",
        )
    if by_step.height and by_step["step"].n_unique() > 1:
        mean = by_step.group_by("step", "cause").agg(pl.col("idle_us").sum() / by_step["rank"].n_unique())
        cats, bars = wide(mean, "step", "cause", "idle_us", scale=1e-3, order=order)
        blocks.append(
            ctx.bar(
                [f"step {s}" for s in cats],
                bars,
                id="idle-causes-steps-chart",
                title="GPU idle per step and cause (mean over ranks)",
                unit="ms",
                y_label="ms",
            )
        )
    if not blocks:
        raise Skip("`idle-causes`: no GPU idle time inside a GPU span or step window")
    units = {"idle_us": "µs", "dur_us": "µs", "start_ns": "ns", "end_ns": "ns"}
    blocks.append(ctx.table(by_rank, id="idle-causes-ranks", title="Per rank and cause (GPU span)", units=units))
    if by_step.height:
        blocks.append(ctx.table(by_step, id="idle-causes-steps", title="Per step and cause", units=units))
    blocks.append(
        ctx.table(sites, id="idle-causes-sites", title="Top call sites per cause", units=units, sort=("idle_us", True))
    )
    blocks.append(
        ctx.table(
            gaps.head(LONGEST_GAPS),
            id="idle-causes-gaps",
            title=f"Longest idle pieces (of {gaps.height}) with their evidence",
            units=units,
            sort=("dur_us", True),
        )
    )
    return blocks
