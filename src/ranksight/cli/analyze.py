"""``ranksight analyze NAME TRACES``: run one analysis and print its tables (or write them to files).

- ``--format table|markdown|csv|json``: ``csv`` writes ONE table (``--table NAME``, default the
  analysis' main table) that ``pandas.read_csv`` reads as is; ``json`` writes every table in the
  versioned document of ``docs/analysis-schema.json``.
- ``-o DIR``: every table as its own file (``DIR/<table>.csv``, or ``.json`` / ``.md``), written
  together or not at all.
- Nothing to report (the traces lack what the analysis needs: a
  :class:`~ranksight.errors.MissingDataError`) exits 0 with an empty output and one note on
  stderr; bad input or usage stays exit code 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from ranksight.analyses import REGISTRY, AnalysisResult, AnalysisSpec, Option, names, run_analysis
from ranksight.cli._common import (
    Command,
    Context,
    add_format_arg,
    add_output_arg,
    add_trace_args,
    deprecated,
    load_run,
    step,
)
from ranksight.errors import MissingDataError, UsageError
from ranksight.report.terminal import analysis_doc, print_tables, select_table, write_tables

__all__ = ["COMMAND", "is_boolean", "flag_of"]

_TRUE = ("1", "true", "yes", "y", "on")
_FALSE = ("0", "false", "no", "n", "off")


def is_boolean(o: Option) -> bool:
    """An option that is on or off: ``--name`` / ``--no-name`` on the command line."""
    return o.flag or isinstance(o.default, bool)


def flag_of(o: Option) -> str:
    return "--" + o.name.replace("_", "-")


class _OldBooleans(argparse.ArgumentParser):
    """Mixed into the parser of one analysis: it still reads the old spelling of a boolean option
    with a value (``--include-memory false``), with a deprecation note, as ``--no-include-memory``."""

    bool_flags: tuple[str, ...] = ()

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if args is not None and self.bool_flags:
            out: list[str] = []
            it = iter(list(args))
            for a in it:
                flag, eq, value = a.partition("=")
                if flag in self.bool_flags and eq and value.lower() in _TRUE + _FALSE:
                    pass  # --include-memory=false
                elif a in self.bool_flags:
                    nxt = next(it, None)
                    if nxt is not None and nxt.lower() in _TRUE + _FALSE:
                        value = nxt
                    else:
                        out.append(a)
                        if nxt is not None:
                            out.append(nxt)
                        continue
                else:
                    out.append(a)
                    continue
                on = value.lower() in _TRUE
                new = flag if on else "--no-" + flag[2:]
                deprecated(f"{flag} {value}", new)
                out.append(new)
            args = out
        return super().parse_known_args(args, namespace)


def _add_option(sp: argparse.ArgumentParser, o: Option) -> None:
    flag = flag_of(o)
    if is_boolean(o):
        if o.name.startswith("no_"):  # already the negative spelling (--no-align)
            sp.add_argument(flag, dest=o.name, action="store_true", default=bool(o.default), help=o.help)
        else:
            on = " (default)" if o.default else ""
            sp.add_argument(
                flag,
                dest=o.name,
                action=argparse.BooleanOptionalAction,
                default=bool(o.default),
                help=f"{_strip_true_false(o.help)}{on}",
            )
    elif o.multiple:
        sp.add_argument(flag, dest=o.name, type=o.type, action="append", default=None, help=o.help)
    else:
        sp.add_argument(flag, dest=o.name, type=o.type, default=o.default, help=f"{o.help} (default: {o.default})")


def _strip_true_false(text: str) -> str:
    """An option's help without the ``(true/false)`` of its old spelling."""
    return text.replace(" (true/false)", "")


def _add(p: argparse.ArgumentParser) -> None:
    parser_class: type[argparse.ArgumentParser] = type("AnalysisParser", (_OldBooleans, type(p)), {})
    # the parsers of the analyses: the CLI's one-line errors, and old booleans read
    sub: Any = p.add_subparsers(dest="analysis", metavar="NAME", required=True, parser_class=parser_class)
    for name in names():
        spec = REGISTRY[name]
        sp = sub.add_parser(name, help=spec.help, description=spec.help)
        assert isinstance(sp, _OldBooleans)
        sp.bool_flags = tuple(flag_of(o) for o in spec.options if is_boolean(o) and not o.name.startswith("no_"))
        add_trace_args(sp, nargs="*" if spec.standalone else "+")
        add_format_arg(sp)
        add_output_arg(
            sp,
            metavar="DIR",
            help="write every table as its own file into DIR (DIR/<table>.csv, or .json / .md with --format)",
        )
        sp.add_argument("--force", action="store_true", help="with -o: overwrite existing files (never an input)")
        for o in spec.options:
            _add_option(sp, o)


def _options(spec: AnalysisSpec, args: argparse.Namespace) -> dict[str, Any]:
    opts = {o.name: getattr(args, o.name) for o in spec.options}
    return {k: v for k, v in opts.items() if v is not None}


def _note(ctx: Context, text: str) -> None:
    if not ctx.quiet:
        sys.stderr.write(f"note: {text}\n")


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
    opts = _options(spec, args)
    fmt = args.format
    if args.output is not None and fmt == "table":
        fmt = "csv"  # -o DIR: files other tools read
    ranks = list(args.ranks) if args.ranks else (run.ranks if run is not None else [])

    def doc(tables: Any, notes: Sequence[str] = (), missing: dict[str, str] | None = None) -> dict[str, Any]:
        return analysis_doc(spec.name, tables, notes, ranks=ranks, options=opts, missing=missing)

    try:
        with step(ctx, f"running {spec.name}"):
            res: AnalysisResult = run_analysis(args.analysis, run, ranks=args.ranks, **opts)
    except MissingDataError as err:  # nothing to report: not bad input
        sys.stderr.write(f"ranksight: nothing to report: {err}\n")
        if fmt == "json" and args.output is None:
            sys.stdout.write(json.dumps(doc({}, (), {"kind": "no-data", "reason": str(err)}), indent=1) + "\n")
        return 0
    tables = res.tables
    if getattr(args, "tracelens_csv", None) is not None:  # op-perf --tracelens-csv DIR (report/tracelens.py)
        tables = _write_tracelens(args, ctx, run, tables)
    if args.output is not None:
        if args.table is not None:
            tables = {args.table: tables[select_table(tables, args.table)]}
        inputs = [t.path for t in run] if run is not None else []
        with step(ctx, f"writing {len(tables)} files"):
            written = write_tables(
                tables, args.output, fmt, force=args.force, inputs=inputs, doc=lambda one: doc(one, res.notes)
            )
        for n in res.notes:
            _note(ctx, n)
        if not ctx.quiet:
            sys.stdout.write(f"wrote {len(written)} {fmt} files to {args.output}: {', '.join(written)}\n")
        return 0
    if fmt == "json":
        if args.table is not None:
            tables = {args.table: tables[select_table(tables, args.table)]}
        sys.stdout.write(json.dumps(doc(tables, res.notes), indent=1, default=str) + "\n")
        return 0
    if fmt == "csv":
        chosen = select_table(tables, args.table)
        if not tables[chosen].width:  # no column at all: nothing a CSV reader could read
            said = "; ".join(res.notes) or f"the table `{chosen}` is empty"
            sys.stderr.write(f"ranksight: nothing to report: {said}\n")
            return 0
        print_tables(tables, "csv", table=chosen)
        others = [n for n in tables if n != chosen]
        if others and args.table is None:
            _note(
                ctx,
                f"csv holds the table `{chosen}`; also: {', '.join(others)} (--table NAME, or -o DIR for every table)",
            )
        for n in res.notes:
            _note(ctx, n)
        return 0
    print_tables(tables, fmt, notes=res.notes, table=args.table)
    return 0


def _write_tracelens(args: argparse.Namespace, ctx: Context, run: Any, tables: Any) -> dict[str, Any]:
    """Write the TraceLens sheets of an op-perf result into ``--tracelens-csv DIR``; the other tables."""
    from ranksight.report.tracelens import split_tables, write_tracelens_csv

    own, sheets = split_tables(tables)
    inputs = [t.path for t in run] if run is not None else []
    with step(ctx, "writing TraceLens sheets"):
        written = write_tracelens_csv(sheets, args.tracelens_csv, force=args.force, inputs=inputs)
    _note(ctx, f"wrote {len(written)} TraceLens csv files to {args.tracelens_csv}")
    return own


COMMAND = Command("analyze", "run one analysis (ranksight analyze --help lists them)", _add, _run, order=30)
