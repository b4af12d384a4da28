"""``ranksight report TRACES [-o report.html]``: one self-contained, offline HTML report."""

from __future__ import annotations

import argparse
import os
import re
import sys

from ranksight.cli._common import Command, Context, add_trace_args, load_run, step
from ranksight.io.output import check_output as _check

__all__ = ["COMMAND", "default_output", "check_output"]


def default_output(traces: list[str]) -> str:
    """``<input stem>.report.html`` in the current folder: the folder's name for a folder of rank
    files, the file name without ``.json[.gz]`` / ``.pt.trace`` / ``.sqlite`` for one file, ``ranksight-report``
    otherwise."""
    if len(traces) == 1:
        p = os.path.normpath(traces[0])
        base = os.path.basename(p)
        if not os.path.isdir(p):
            base = re.sub(r"(\.pt\.trace)?\.json(\.gz)?$|\.sqlite$", "", base)
    else:
        parents = {os.path.dirname(os.path.abspath(t)) for t in traces}
        base = os.path.basename(parents.pop()) if len(parents) == 1 else "ranksight-report"
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", base).strip("._") or "ranksight-report"
    return f"{base}.report.html"


def check_output(path: str, inputs: list[str], force: bool) -> None:
    """Refuse to overwrite an input, a folder, or (without ``force``) an existing file; the
    folder must exist (:func:`ranksight.io.output.check_output`)."""
    _check(path, inputs=inputs, force=force, folder_must_exist=True)


def _add(p: argparse.ArgumentParser) -> None:
    add_trace_args(p)
    p.add_argument("-o", "--output", metavar="FILE", help="where to write (default: <input>.report.html)")
    p.add_argument("--title", help="report title (default: from the input)")
    p.add_argument("--force", action="store_true", help="overwrite an existing file")
    p.add_argument(
        "--baseline",
        metavar="BASE",
        help="add a comparison with this baseline run (trace file or folder; see `ranksight diff`)",
    )
    p.add_argument(
        "--capture",
        metavar="PATH",
        help="graph capture trace or folder: the operator sections (ops, op-kernels, modules, MFU, op-perf, the "
        "comparison) give kernels replayed from CUDA/HIP graphs their capture-side operators (docs/graphs.md; "
        "default: capture_traces/ beside the trace; 'none': no capture)",
    )
    p.add_argument(
        "--detail-ranks",
        metavar="RANKS",
        type=_detail_ranks,
        default=None,
        help="a run of more than 64 ranks computes its operator-level sections (ops, op-perf, op-kernels, "
        "kernel-config, modules, each rank's own critical path) for the focus ranks (worst, outliers, minimum "
        "and maximum): 'all' for every rank, or ranks to add, e.g. 5,17,40-47",
    )
    p.add_argument(
        "--snapshot",
        metavar="FILE",
        help="add a section on a PyTorch CUDA memory snapshot (torch.cuda.memory._dump_snapshot pickle)",
    )


def _detail_ranks(text: str) -> str | list[int]:
    """``all``, or ranks and ranges: ``5,17,40-47``."""
    if text.strip() == "all":
        return "all"
    out: list[int] = []
    try:
        for part in text.split(","):
            a, sep, b = part.strip().partition("-")
            out += list(range(int(a), int(b) + 1)) if sep else [int(a)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"'all' or ranks such as 5,17,40-47, not {text!r}") from None
    return sorted(set(out))


def _run(args: argparse.Namespace, ctx: Context) -> int:
    out = args.output or default_output(args.traces)
    check_output(out, list(args.traces), args.force)
    run = load_run(args, ctx)
    inputs = [t.path for t in run]
    check_output(out, inputs, args.force)
    snapshot = getattr(args, "snapshot", None)
    if snapshot:
        check_output(out, [snapshot], args.force)
    baseline = None
    if args.baseline:
        from ranksight.cli.diff import side_label

        base = load_run(argparse.Namespace(**{**vars(args), "traces": [args.baseline]}), ctx)
        baseline = (base, (side_label(args.baseline), side_label(args.traces[0])))
    from ranksight.analyses import Session
    from ranksight.report.html import write_report

    sess = Session.of(run)
    if args.capture is not None:
        sess.set_default("capture", args.capture)
    with step(ctx, f"writing the report {out}"):
        doc = write_report(
            sess,
            out,
            title=args.title,
            inputs=[os.path.basename(i) for i in inputs],
            baseline=baseline,
            snapshot=snapshot or None,
            detail_ranks=args.detail_ranks,
        )
    if not ctx.quiet:
        shown = sum(1 for s in doc["sections"] if s["shown"])
        sys.stderr.write(f"{shown} of {len(doc['sections'])} sections shown; {os.path.getsize(out) / 1e6:.2f} MB\n")
    sys.stdout.write(f"{out}\n")
    return 0


COMMAND = Command(
    "report",
    "write one self-contained offline HTML report",
    _add,
    _run,
    description="Write one self-contained HTML file (CSS, JS and data inline; it makes no network request).",
    order=25,
)
