"""``ranksight diff BASE TEST``: compare two runs; ``--fail-if-slower 5%`` makes it a CI gate.

Each side is a trace file, a folder of rank files, or a quoted glob. Output: the verdict, the
summary, top contributors, operators, kernels and collectives (``--format table``, default),
every column as CSV or JSON, or Markdown for a pull-request comment.

Gate: with ``--fail-if-slower PCT`` the command exits 1 when ``--metric`` (default
``step_time``) regressed significantly (Welch p < ``--alpha``) and by more than PCT of its base
mean, 0 otherwise, and prints a one-line verdict (on stdout after the table or Markdown, on
stderr with CSV/JSON; JSON also has it under ``"gate"``). Bad input stays exit code 2.
``--metric`` may be repeated (or list several names with commas): each metric is one check of the
gate, and the gate fails when any check fails. ``--junit FILE`` writes the checks as a JUnit XML
report (one testcase per check; a failed check is a ``<failure>`` with its numbers) for CI.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import glob
import os
import re
import sys
import time
from dataclasses import dataclass
from typing import Any

from ranksight.cli._common import Command, Context, add_format_arg, add_trace_args, load_run
from ranksight.errors import EXIT_FAILED_GATE, RanksightError
from ranksight.io.output import atomic_path, check_output

__all__ = [
    "COMMAND",
    "DIFF_SCHEMA",
    "DIFF_SCHEMA_VERSION",
    "GateCheck",
    "diff_json",
    "gate_checks",
    "junit_xml",
    "parse_percent",
    "side_label",
]

#: ``diff --format json`` follows ``docs/diff-schema.json``: bumped when a field is removed or
#: changes meaning; adding fields (or tables and columns) keeps the version.
DIFF_SCHEMA = "ranksight-diff"
DIFF_SCHEMA_VERSION = 1


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
    add_format_arg(p, help="output format (markdown: for PR comments; csv: one table, see --table)")
    p.add_argument(
        "--fail-if-slower",
        type=parse_percent,
        default=None,
        metavar="PCT",
        help="exit 1 when --metric regressed significantly by more than PCT (e.g. 5%%)",
    )
    p.add_argument(
        "--metric",
        action="append",
        type=_metric_names,
        default=None,
        metavar="NAME",
        help="what the gate checks: step_time (default), a step-breakdown category (kernel, memcpy, memset, "
        "communication, runtime, dataloader, cpu_exec, other), memory_peak, or mfu (a drop is the "
        "regression); repeat it (or separate names with commas) to check several",
    )
    p.add_argument(
        "--junit",
        default=None,
        metavar="FILE",
        help="also write the gate's checks as a JUnit XML report (one testcase per --metric) for CI; needs "
        "--fail-if-slower",
    )
    p.add_argument("--force", action="store_true", help="overwrite the --junit file if it exists")
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
    p.add_argument(
        "--capture",
        metavar="PATH",
        default=None,
        help="graph capture trace or folder of TEST: its kernels replayed from CUDA/HIP graphs are keyed by (and the "
        "operators side by side and MFU read) the capture-side operators that launched them (docs/graphs.md; "
        "default: capture_traces/ beside the trace; 'none': no capture)",
    )
    p.add_argument("--base-capture", metavar="PATH", default=None, help="the same as --capture, for BASE")
    p.add_argument("--base-label", default=None, help="name of the baseline in the output (default: from its path)")
    p.add_argument("--test-label", default=None, help="name of the test run in the output (default: from its path)")


def _metric_names(text: str) -> list[str]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"not a metric name: {text!r}")
    return names


def _metrics(args: argparse.Namespace) -> list[str]:
    """The gate's metrics in the order given, each once (default ``step_time``)."""
    out: list[str] = []
    for group in args.metric or [["step_time"]]:
        out.extend(m for m in group if m not in out)
    return out


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
    from ranksight.analyses.diff import diff
    from ranksight.errors import UsageError
    from ranksight.report.diff import diff_markdown, print_diff
    from ranksight.report.terminal import print_tables

    if args.top < 0 or args.rows < 0:
        raise UsageError("--top and --rows must be ≥ 0")
    if args.junit is not None:
        if args.fail_if_slower is None:
            raise UsageError("--junit writes the gate's checks: give the threshold with --fail-if-slower PCT")
        check_output(args.junit, inputs=_input_files(args.traces), force=args.force)
    started = time.monotonic()
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
        captures=(args.base_capture, args.capture),
    )
    checks: list[GateCheck] = []
    if args.fail_if_slower is not None:
        checks = gate_checks(res, args.fail_if_slower, _metrics(args))
        if args.junit is not None:
            xml = junit_xml(
                checks, res, threshold=args.fail_if_slower, seconds=time.monotonic() - started, traces=args.traces
            )
            with atomic_path(args.junit, suffix=".xml") as tmp, open(tmp, "wb") as fh:
                fh.write(xml)
        errors = [c.error for c in checks if c.error is not None]
        if errors:
            raise errors[0]
    verdicts = [c.verdict for c in checks if c.verdict is not None]
    if args.format == "json":
        sys.stdout.write(diff_json(res, verdicts, args.fail_if_slower) + "\n")
    elif args.format == "csv":
        print_tables(res.tables, "csv", table=args.table)
    elif args.format == "markdown":
        sys.stdout.write(diff_markdown(res, rows=args.rows))
    else:
        print_diff(res, rows=args.rows)
    if not verdicts:
        return 0
    out = sys.stdout if args.format in ("table", "markdown") else sys.stderr
    for v in verdicts:
        out.write(v.line + "\n")
    return EXIT_FAILED_GATE if any(v.failed for v in verdicts) else 0


def gate_checks(res: Any, threshold: float, metrics: list[str]) -> list[GateCheck]:
    """One :class:`GateCheck` per metric: its verdict, or the error that keeps it undecided (an
    unknown metric, too few steps), which the caller raises once the checks are reported."""
    from ranksight.analyses.diff import gate

    checks = []
    for m in metrics:
        try:
            checks.append(GateCheck(m, gate(res, threshold=threshold, metric=m), None))
        except RanksightError as err:
            checks.append(GateCheck(m, None, err))
    return checks


def diff_json(res: Any, verdicts: list[Any], threshold: float | None) -> str:
    """The versioned JSON document of ``diff --format json`` (``docs/diff-schema.json``; also what
    ``ranksight mcp``'s diff tool returns): labels, verdict, method, every table's column types,
    every table, the notes and, with a gate, ``"gate"`` (the first failed check's keys, else the
    first check's, ``failed`` for any, every check under ``checks``)."""
    from ranksight import __version__
    from ranksight.report.terminal import tables_to_json

    extra: dict[str, Any] = {
        "schema": DIFF_SCHEMA,
        "schema_version": DIFF_SCHEMA_VERSION,
        "ranksight_version": __version__,
        "labels": list(res.labels),
        "verdict": res.verdict,
        "method": res.method,
    }
    if verdicts:
        every = [
            {
                "failed": v.failed,
                "line": v.line,
                "metric": v.metric,
                "threshold": threshold,
                "change": v.change,
                "p_value": v.p_value,
            }
            for v in verdicts
        ]
        first = next((c for c in every if c["failed"]), every[0])
        extra["gate"] = {**first, "failed": any(v.failed for v in verdicts), "checks": every}
    extra["columns"] = {n: {c: str(dt) for c, dt in df.schema.items()} for n, df in res.tables.items()}
    return tables_to_json(res.tables, res.notes, extra=extra)


def _input_files(traces: list[str]) -> list[str]:
    """The trace files a side names (a file itself, or the files a folder or glob holds): the JUnit
    report must not overwrite one of them."""
    out: list[str] = []
    for t in traces:
        if os.path.isdir(t):
            with contextlib.suppress(OSError):
                out.extend(os.path.join(t, n) for n in os.listdir(t))
        elif any(c in t for c in "*?["):
            out.extend(glob.glob(t))
        else:
            out.append(t)
    return out


@dataclass(frozen=True)
class GateCheck:
    """One metric of the gate: its verdict, or the error that kept it from being decided."""

    metric: str
    verdict: Any  # ranksight.analyses.diff.GateVerdict | None
    error: RanksightError | None


#: the ``summary`` columns a JUnit failure quotes (the numbers behind the verdict)
_JUNIT_NUMBERS = ("unit", "base_median", "test_median", "delta", "delta_pct", "ci_low", "ci_high", "p_value", "change")


def junit_xml(checks: list[GateCheck], res: Any, *, threshold: float, seconds: float, traces: list[str]) -> bytes:
    """The gate's checks as a JUnit XML report (the format CI systems read: Jenkins, GitLab,
    GitHub Actions reporters): one ``<testsuite>`` for the comparison, one ``<testcase>`` per
    metric; a failed check is a ``<failure>`` whose message is the verdict line and whose text
    lists the metric's numbers (the ``summary`` row: medians, delta, CI, p-value); a check that
    could not be decided (unknown metric, too few steps) is an ``<error>``."""
    import xml.etree.ElementTree as ET

    failures = sum(1 for c in checks if c.verdict is not None and c.verdict.failed)
    errors = sum(1 for c in checks if c.error is not None)
    base_label, test_label = res.labels
    counts = {"tests": str(len(checks)), "failures": str(failures), "errors": str(errors)}
    root = ET.Element("testsuites", {"name": "ranksight diff", **counts, "time": f"{seconds:.3f}"})
    suite = ET.SubElement(
        root,
        "testsuite",
        {
            "name": f"ranksight diff {base_label} -> {test_label}",
            **counts,
            "skipped": "0",
            "time": f"{seconds:.3f}",
            "timestamp": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S"),
        },
    )
    props = ET.SubElement(suite, "properties")
    for name, value in (
        ("base", traces[0]),
        ("test", traces[1]),
        ("threshold_pct", f"{threshold * 100:g}"),
        ("alpha", f"{res.alpha:g}"),
        ("method", res.method),
        ("verdict", res.verdict),
    ):
        ET.SubElement(props, "property", {"name": name, "value": str(value)})
    rows = {r["metric"]: r for r in res["summary"].to_dicts()} if "summary" in res.tables else {}
    for c in checks:
        case = ET.SubElement(suite, "testcase", {"classname": "ranksight.diff.gate", "name": c.metric, "time": "0"})
        if c.error is not None:
            ET.SubElement(case, "error", {"message": c.error.message, "type": type(c.error).__name__}).text = str(
                c.error
            )
            continue
        v = c.verdict
        lines = [v.line, f"metric = {c.metric}", f"threshold_pct = {threshold * 100:g}", f"alpha = {res.alpha:g}"]
        row = rows.get(c.metric)
        if row is not None:
            lines += [f"{k} = {row[k]}" for k in _JUNIT_NUMBERS if row.get(k) is not None]
        else:  # the verdict's own numbers
            if v.change is not None:
                lines.append(f"delta_pct = {v.change * 100}")
            lines.append(f"p_value = {v.p_value}")
        text = "\n".join(lines) + "\n"
        if v.failed:
            ET.SubElement(case, "failure", {"message": v.line, "type": "regression"}).text = text
        else:
            ET.SubElement(case, "system-out").text = text
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"


COMMAND = Command(
    "diff",
    "compare two runs (per step, with significance); --fail-if-slower makes it a CI gate",
    _add,
    _run,
    description="Compare TEST with BASE (ranksight diff BASE TEST) per step, with significance. "
    + (__doc__.split("\n\n", 1)[1] if __doc__ else ""),
    order=28,
)
