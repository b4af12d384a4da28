"""``ranksight analyze NAME TRACES``: run one analysis and print its tables."""

from __future__ import annotations

import argparse

from ranksight.analyses import REGISTRY, names, run_analysis
from ranksight.cli._common import Command, Context, add_format_arg, add_trace_args, load_run
from ranksight.errors import UsageError
from ranksight.report.terminal import print_tables

__all__ = ["COMMAND"]


def _add(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="analysis", metavar="NAME", required=True, parser_class=type(p))
    for name in names():
        spec = REGISTRY[name]
        sp = sub.add_parser(name, help=spec.help, description=spec.help)
        add_trace_args(sp, nargs="*" if spec.standalone else "+")
        add_format_arg(sp)
        for o in spec.options:
            flag = "--" + o.name.replace("_", "-")
            if o.flag:
                sp.add_argument(flag, dest=o.name, action="store_true", default=o.default, help=o.help)
            elif o.multiple:
                sp.add_argument(flag, dest=o.name, type=o.type, action="append", default=None, help=o.help)
            else:
                sp.add_argument(
                    flag, dest=o.name, type=o.type, default=o.default, help=f"{o.help} (default: {o.default})"
                )


def _run(args: argparse.Namespace, ctx: Context) -> int:
    spec = REGISTRY[args.analysis]
    if not args.traces and spec.standalone:
        given = [o for o in spec.standalone if getattr(args, o, None) is not None]
        if not given:
            flags = " or ".join("--" + o.replace("_", "-") for o in spec.standalone)
            raise UsageError(f"give TRACES or {flags}")
        run = None
    else:
        run = load_run(args, ctx)
    opts = {o.name: getattr(args, o.name) for o in spec.options}
    opts = {k: v for k, v in opts.items() if v is not None}
    res = run_analysis(args.analysis, run, ranks=args.ranks, **opts)
    print_tables(res.tables, args.format, notes=res.notes)
    return 0


COMMAND = Command("analyze", "run one analysis (ranksight analyze --help lists them)", _add, _run, order=30)
