"""Memory: the allocated/reserved curve and its peak; time per nn.Module."""

from __future__ import annotations

from typing import Any

from ranksight.report.html.sections import Ctx, section


@section(
    "memory",
    "Memory curve and peak",
    needs=("memory",),
    group="Memory",
    order=10,
    help="Allocated and reserved device memory over time from [memory] events, the peak, the op that "
    "reached it, and fragmentation (reserved but unused).",
)
def memory(ctx: Ctx) -> list[dict[str, Any]]:
    tabs = ctx.tables("memory", "peaks")
    blocks: list[dict[str, Any]] = []
    c = tabs.get("curve")
    if c is not None and c.height:
        lines: list[tuple[str, list[Any], list[Any]]] = []
        for (r, dev), g in sorted(c.group_by(["rank", "device"]), key=lambda kv: (kv[0][0], str(kv[0][1]))):
            if len(lines) >= 16:
                break
            g = g.sort("ts_ns")
            x = g["time_ms"].to_list()
            lines.append((f"rank {r} {dev} allocated", x, (g["allocated_bytes"] / 2**20).to_list()))
            if g["reserved_bytes"].drop_nulls().len():
                lines.append((f"rank {r} {dev} reserved", x, (g["reserved_bytes"] / 2**20).to_list()))
        blocks.append(
            ctx.line(
                lines,
                id="memory-chart",
                title="Device memory over time",
                mode="step",
                x_label="time",
                x_unit="ms",
                y_label="memory",
                y_unit="MiB",
            )
        )
    blocks.append(
        ctx.table(
            tabs["peaks"],
            id="memory-peaks",
            title="Peak per rank and device",
            units={"peak_allocated_bytes": "B", "peak_reserved_bytes": "B"},
        )
    )
    for name, title in (
        ("by_step", "Peak per step"),
        ("by_op", "Allocations per op"),
        ("allocations", "Largest allocations"),
    ):
        if name in tabs and tabs[name].height:
            blocks.append(ctx.table(tabs[name], id=f"memory-{name}", title=title))
    return blocks


@section(
    "modules",
    "nn.Module time",
    needs=("modules",),
    group="CPU and launches",
    order=45,
    help="Time per nn.Module from the profiler's module frames: host and device, total and self.",
)
def modules(ctx: Ctx) -> list[dict[str, Any]]:
    t = ctx.tables("modules", "modules")["modules"]
    top = (
        t.sort("device_total_us", descending=True, nulls_last=True).head(15)
        if "device_total_us" in t.columns
        else t.head(15)
    )
    col = "path" if "path" in top.columns else "module"
    chart = ctx.bar(
        top[col].to_list(),
        {
            "device total": (top["device_total_us"] / 1e3).to_list(),
            "host total": (top["host_total_us"] / 1e3).to_list(),
        },
        id="modules-chart",
        title="Modules with the most device time",
        horizontal=True,
        stacked=False,
        unit="ms",
        x_label="ms",
    )
    us = {c: "µs" for c in ("host_total_us", "host_self_us", "device_total_us", "device_self_us")}
    return [chart, ctx.table(t, id="modules-table", title="Modules", units=us, sort=("device_total_us", True))]
