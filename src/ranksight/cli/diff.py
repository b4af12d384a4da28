"""``ranksight diff BASE TEST``: compare two runs; ``--fail-if-slower 5%`` makes it a CI gate.

Each side is a trace file, a folder of rank files, or a quoted glob. Output: the verdict, the
summary, top contributors, operators, kernels and collectives (``--format table``, default),
every column as CSV or JSON, or Markdown for a pull-request comment.

Gate: with ``--fail-if-slower PCT`` the command exits 1 when ``--metric`` (default
``step_time``) regressed significantly (Welch p < ``--alpha``) and by more than PCT of its base
mean, 0 otherwise, and prints a one-line verdict (on stdout after the table or Markdown, on
stderr with CSV/JSON; JSON also has it under ``"gate"``). Bad input stays exit code 2.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import Any

from ranksight.cli._common import Command, Context, add_trace_args, load_run
from ranksight.errors import EXIT_FAILED_GATE

__all__ = ["COMMAND", "parse_percent", "side_label"]


def parse_percent(text: str) -> float:
    """``5%`` or ``5`` → 0.05 (a fraction); negative or non-numbers are refused."""
    t = text.strip().rstrip("%").strip()
    try:
        v = float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a percentage: {text!r} (write e.g. 5%)") from None
    if not (v >= 0 and v < 1e6):
        raise argparse.ArgumentTypeError(f"percentage out of range: {text!r}")
    return v / 100.0


def side_label(path: str) -> str:
    """A short label for a side: the folder name, or the file name without its trace suffix."""
    p = os.path.normpath(path)
    base = os.path.basename(p)
    if not os.path.isdir(p):
        base = re.sub(r"(\.pt\.trace)?\.json(\.gz)?$", "", base)
    return base or path


def _add(p: argparse.ArgumentParser) -> None:
    add_trace_args(p, nargs=2)  # the common loading options stay in step with every other command
    for a in p._actions:
        if a.dest == "traces":
            a.metavar = "RUN"  # argparse cannot print a tuple metavar for a positional
            a.help = (
                "the baseline (BASE), then the run to compare (TEST): each a trace file, a folder of rank files, or a "
                "quoted glob"
            )
        elif a.dest == "ranks":
            a.help = "only this rank, on both sides (repeatable)"
    p.add_argument(
        "--format",
        choices=("table", "csv", "json", "markdown"),
        default="table",
        help="output format (markdown: for PR comments)",
    )
    p.add_argument(
        "--fail-if-slower",
        type=parse_percent,
        default=None,
        metavar="PCT",
        help="exit 1 when --metric regressed significantly by more than PCT (e.g. 5%%)",
    )
    p.add_argument(
        "--metric",
        default="step_time",
        metavar="NAME",
        help="what the gate checks: step_time (default), a step-breakdown category (kernel, memcpy, memset, "
        "communication, runtime, dataloader, cpu_exec, other), memory_peak, or mfu (a drop is the "
        "regression)",
    )
    p.add_argument("--alpha", type=float, default=0.05, help="significance level of Welch's t-test (default 0.05)")
    p.add_argument(
        "--min-change",
        type=parse_percent,
        default=0.02,
        metavar="PCT",
        help="smallest relative change reported as a change (default 2%%)",
    )
    p.add_argument("--top", type=int, default=5, help="top contributors shown (default 5)")
    p.add_argument(
        "--rows",
        type=int,
        default=20,
        help="rows of the operator and kernel tables shown in table/markdown output (default 20)",
    )
    p.add_argument("--keep-templates", action="store_true", help="keep template arguments in kernel names")
    p.add_argument("--shapes", action="store_true", help="also normalise shape suffixes in names (tile sizes, [dims])")
    p.add_argument("--base-label", default=None, help="name of the baseline in the output (default: from its path)")
    p.add_argument("--test-label", default=None, help="name of the test run in the output (default: from its path)")


def _load(args: argparse.Namespace, ctx: Context, path: str):  # noqa: ANN202
    side = argparse.Namespace(**{**vars(args), "traces": [path]})
    return load_run(side, ctx)


def _labels(args: argparse.Namespace) -> tuple[str, str]:
    b = args.base_label or side_label(args.traces[0])
    t = args.test_label or side_label(args.traces[1])
    if b == t and not (args.base_label or args.test_label):
        b, t = "base", "test"
    return b, t


def _run(args: argparse.Namespace, ctx: Context) -> int:
    from ranksight.analyses.diff import diff, gate
    from ranksight.errors import UsageError
    from ranksight.report.diff import diff_markdown, print_diff
    from ranksight.report.terminal import print_tables, tables_to_json

    if args.top < 0 or args.rows < 0:
        raise UsageError("--top and --rows must be ≥ 0")
    base = _load(args, ctx, args.traces[0])
    test = _load(args, ctx, args.traces[1])
    res = diff(
        base,
        test,
        ranks=args.ranks,
        alpha=args.alpha,
        min_change=args.min_change,
        top=args.top,
        kernel_templates=not args.keep_templates,
        shapes=args.shapes,
        labels=_labels(args),
    )
    verdict = gate(res, threshold=args.fail_if_slower, metric=args.metric) if args.fail_if_slower is not None else None
    if args.format == "json":
        extra: dict[str, Any] = {"labels": list(res.labels), "verdict": res.verdict, "method": res.method}
        if verdict is not None:
            extra["gate"] = {
                "failed": verdict.failed,
                "line": verdict.line,
                "metric": verdict.metric,
                "threshold": args.fail_if_slower,
                "change": verdict.change,
                "p_value": verdict.p_value,
            }
        sys.stdout.write(tables_to_json(res.tables, res.notes, extra=extra) + "\n")
    elif args.format == "csv":
        print_tables(res.tables, "csv")
    elif args.format == "markdown":
        sys.stdout.write(diff_markdown(res, rows=args.rows))
    else:
        print_diff(res, rows=args.rows)
    if verdict is None:
        return 0
    out = sys.stdout if args.format in ("table", "markdown") else sys.stderr
    out.write(verdict.line + "\n")
    return EXIT_FAILED_GATE if verdict.failed else 0


COMMAND = Command(
    "diff",
    "compare two runs (per step, with significance); --fail-if-slower makes it a CI gate",
    _add,
    _run,
    description="Compare TEST with BASE (ranksight diff BASE TEST) per step, with significance. "
    + (__doc__.split("\n\n", 1)[1] if __doc__ else ""),
    order=28,
)
