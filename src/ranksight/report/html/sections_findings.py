"""Findings of ``diagnose`` at the top of the report, each linking to the section with its evidence."""

from __future__ import annotations

from typing import Any

from ranksight.report.html.sections import Ctx, section

#: diagnose rule → report sections that show its numbers (the first one shown is linked).
EVIDENCE: dict[str, tuple[str, ...]] = {
    "dataloader-bound": ("step-overview", "steps"),
    "launch-bound": ("launches", "queue", "kernels"),
    "low-gpu-utilization": ("gpu-busy", "temporal"),  # its busy_pct_of_steps is gpu-busy's steps table
    "exposed-communication": ("overlap", "exposed-comm", "collectives"),  # it reads overlap (GPU span)
    "host-device-sync": ("step-overview", "launches"),
    "pageable-memcpy": ("memcpy-bw",),
    "low-tensor-core-use": ("kernel-config", "ops"),
    "memory-near-capacity": ("memory",),
    "memory-fragmentation": ("memory",),
    "full-launch-queue": ("queue",),
    "load-imbalance": ("stragglers", "kernel-spread", "collectives"),
}


def evidence_slug(rule: str, shown: set[str]) -> str | None:
    """The first shown section for a rule (also tried: a section named like the rule)."""
    for slug in (*EVIDENCE.get(rule, ()), rule):
        if slug in shown:
            return slug
    return None


@section(
    "findings",
    "Findings",
    needs=("diagnose",),
    group="Findings",
    order=0,
    help="What diagnose found, worst first (severity, then the share of time at stake). "
    "Each finding links to the section with the numbers behind it.",
)
def findings(ctx: Ctx) -> list[dict[str, Any]]:
    found, rules, notes = ctx.findings()
    for n in notes:
        if n not in ctx.notes:
            ctx.notes.append(n)
    items = []
    for f in found:
        detail = f.summary
        items.append(
            {
                "severity": f.severity,
                "rule": f.rule,
                "title": ctx.strings(f.title),
                "detail": ctx.strings(detail),
                "ranks": [int(r) for r in f.ranks],
                "impact": float(f.impact) if f.impact == f.impact else None,
                "fixes": [ctx.strings(x) for x in f.fixes],
                "evidence": evidence_slug(f.rule, ctx.shown),
            }
        )
    if not found:
        ctx.notes.append(f"rules run: {', '.join(rules)}")
    return [{"type": "findings", "id": "findings-list", "items": items}]
