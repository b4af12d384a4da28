"""The ``ranksight`` command.

Each module listed in :data:`COMMAND_MODULES` defines ``COMMAND``, a
:class:`~ranksight.cli._common.Command`; adding a command is adding a module and its name there.
Exit codes: 0 success, 1 a failed gate (``diff --fail-if-slower``), 2 bad input or usage, 3 an
internal error (a bug; a panic in the Rust core included), 130 interrupted. A failure prints one
line on stderr; ``-v`` shows the traceback.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
import traceback
import warnings
from collections.abc import Sequence
from typing import NoReturn

from ranksight.cli._common import Command, Context
from ranksight.errors import EXIT_BAD_INPUT, EXIT_INTERNAL, RanksightError, RanksightWarning

__all__ = ["main", "build_parser", "COMMAND_MODULES"]


#: Every command module (each defines ``COMMAND``).
COMMAND_MODULES = (
    "analyze",
    "cache",
    "completion",
    "counters",
    "demo",
    "diagnose",
    "diff",
    "export",
    "health",
    "info",
    "mcp",
    "nccl_log",
    "report",
    "summary",
)


def _commands() -> list[Command]:
    cmds = [importlib.import_module(f"{__name__}.{m}").COMMAND for m in COMMAND_MODULES]
    return sorted(cmds, key=lambda c: (c.order, c.name))


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit code 2
        self.exit(EXIT_BAD_INPUT, f"ranksight: error: {message} (see {self.prog} --help)\n")


def _is_rust_panic(err: BaseException) -> bool:
    """A panic of the Rust core that reached Python as pyo3's ``PanicException`` (a
    ``BaseException``; the core turns the panics of its functions into ``_core.InternalError``,
    an ``Exception``, but a panic elsewhere in it still arrives this way)."""
    t = type(err)
    return t.__name__ == "PanicException" and t.__module__ == "pyo3_runtime"


#: The warnings that report a bug caught so that the rest of the output survives: an analysis that
#: raised (``Session._guarded``) or a report section that could not be built (``report.html.build``).
#: Their output is incomplete: the command then exits 3 (an internal error), never 0.
_FAILURE = re.compile(r"^(analysis|section) `[^`]*` (failed|could not be built): ")


def build_parser() -> argparse.ArgumentParser:
    from ranksight import __version__

    p = _Parser(prog="ranksight", description="Where the time goes in multi-GPU PyTorch jobs (Kineto traces).")
    p.add_argument("--version", action="version", version=f"ranksight {__version__}")
    p.add_argument("-v", "--verbose", action="store_true", help="show tracebacks and details")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar, no warnings on stderr")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for cmd in _commands():
        sp = sub.add_parser(cmd.name, help=cmd.help, description=cmd.description or cmd.help)
        sp.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        sp.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        cmd.add_arguments(sp)
        sp.set_defaults(_command=cmd)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_command", None):
        parser.print_help()
        return EXIT_BAD_INPUT
    ctx = Context(verbose=bool(args.verbose), quiet=bool(args.quiet))
    failures: list[str] = []

    def show(message, category, filename, lineno, file=None, line=None):  # noqa: ANN001
        text = str(message)
        if issubclass(category, RanksightWarning):
            if not ctx.quiet:
                sys.stderr.write(f"ranksight: warning: {text}\n")
        elif _FAILURE.match(text):
            failures.append(text)
            if ctx.verbose:
                sys.stderr.write(f"ranksight: debug: {text}\n")
        elif ctx.verbose:  # a library's warning (numpy, polars): not the user's business unless asked
            sys.stderr.write(f"ranksight: debug: {category.__name__}: {text} ({filename}:{lineno})\n")

    old = warnings.showwarning
    warnings.showwarning = show
    try:
        code = int(args._command.run(args, ctx) or 0)
        if failures and code in (0, 1):
            more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
            sys.stderr.write(
                f"ranksight: internal error: {failures[0]}{more}; the output above is incomplete (a bug: "
                "please report it)\n"
            )
            return EXIT_INTERNAL
        return code
    except RanksightError as err:
        if ctx.verbose:
            traceback.print_exc()
        sys.stderr.write(f"ranksight: error: {err}\n")
        return err.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("ranksight: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0
    except Exception as err:  # a bug: say so in one line, details with -v
        if ctx.verbose:
            traceback.print_exc()
        sys.stderr.write(f"ranksight: internal error: {type(err).__name__}: {err} (run with -v for details)\n")
        return EXIT_INTERNAL
    except BaseException as err:
        if not _is_rust_panic(err):
            raise
        if ctx.verbose:
            traceback.print_exc()
        sys.stderr.write(f"ranksight: internal error: the Rust core panicked: {err} (run with -v for details)\n")
        return EXIT_INTERNAL
    finally:
        warnings.showwarning = old


def entry() -> None:
    sys.exit(main())
