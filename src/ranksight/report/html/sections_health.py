"""Trace health: what in the traces may make the numbers wrong."""

from __future__ import annotations

from typing import Any

from ranksight.report.html.sections import Ctx, section


@section(
    "health",
    "Trace health",
    needs=("health",),
    group="Health",
    order=10,
    help="Checks for dropped records, overlapping kernels on one stream, broken nesting, time base, "
    "steps and ranks; problems first.",
)
def health(ctx: Ctx) -> list[dict[str, Any]]:
    tabs = ctx.tables("health", "checks")
    blocks = []
    if "problems" in tabs and tabs["problems"].height:
        blocks.append(
            ctx.table(
                tabs["problems"], id="health-problems", title="Problems", units={"total_us": "µs", "max_us": "µs"}
            )
        )
    else:
        blocks.append(ctx.text("No problem found by the health checks.", id="health-ok"))
    blocks.append(
        ctx.table(tabs["checks"], id="health-checks", title="All checks", units={"total_us": "µs", "max_us": "µs"})
    )
    return blocks
