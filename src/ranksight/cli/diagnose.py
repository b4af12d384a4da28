"""``ranksight diagnose TRACES``: findings with evidence and the fix to try, worst first."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ranksight.cli._common import Command, Context, add_format_arg, add_trace_args, load_run, step

__all__ = ["COMMAND"]

_STYLE = {"high": "bold red", "medium": "yellow", "low": "cyan"}


def _add(p: argparse.ArgumentParser) -> None:
    add_trace_args(p)
    add_format_arg(p, ("table", "json"), table=False, help="table (default) or the versioned JSON document")
    p.add_argument(
        "--min-severity", choices=("low", "medium", "high"), default="low", help="hide findings below this severity"
    )


def _evidence_lines(ev: dict[str, Any]) -> list[str]:
    out = []
    for k, v in ev.items():
        if k == "by_rank":
            continue
        text = json.dumps(v, default=str) if isinstance(v, (dict, list)) else str(v)
        out.append(f"{k}: {text if len(text) <= 160 else text[:159] + '…'}")
    return out


def _run(args: argparse.Namespace, ctx: Context) -> int:
    from ranksight.analyses.diagnose import SEVERITIES, findings, to_json
    from ranksight.report.terminal import console

    run = load_run(args, ctx)
    with step(ctx, "running the diagnose rules"):
        found, rules, notes = findings(run, ranks=args.ranks)
    keep = SEVERITIES[: SEVERITIES.index(args.min_severity) + 1]
    found = [f for f in found if f.severity in keep]
    if args.format == "json":
        sys.stdout.write(to_json(run, found, rules, notes) + "\n")
        return 0
    con = console()
    if not found:
        con.print(f"no finding ({len(rules)} rules run on {len(run)} rank(s): {', '.join(rules)})")
    for i, f in enumerate(found, 1):
        con.print(
            f"[{_STYLE[f.severity]}]{i}. [{f.severity.upper()}] {f.title}[/] ({f.rule}; ranks "
            f"{', '.join(map(str, f.ranks))})",
            markup=True,
            highlight=False,
        )
        con.print(f"   {f.summary}", markup=False)
        for line in _evidence_lines(f.evidence):
            con.print(f"   - {line}", markup=False)
        for fix in f.fixes:
            con.print(f"   fix: {fix}", markup=False)
        con.print("")
    for n in notes:
        con.print(f"note: {n}", markup=False)
    return 0


COMMAND = Command(
    "diagnose",
    "findings with evidence and the fix to try, worst first",
    _add,
    _run,
    description="Run every diagnose rule on the traces and print the findings, worst first "
    "(severity, then the share of time at stake). --format json gives the versioned document "
    "described in docs/diagnose.md.",
    order=25,
)
