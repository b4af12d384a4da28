"""``ranksight mcp``: a Model Context Protocol server over stdio, for coding agents.

An MCP client (Claude Code, Cursor, VS Code, any agent built on an MCP SDK) starts
``ranksight mcp`` and talks JSON-RPC on its stdin/stdout. The tools:

- ``load_run(paths, ranks, cycle, strict, jobs, cache)``: load traces as ``ranksight`` commands
  do; returns a handle (``run-1``), the ranks, each rank's file and the load warnings;
- ``list_runs()`` / ``unload_run(run)``: the runs held, and forgetting one;
- ``list_analyses()``: every registered analysis with its options (name, type, default, help);
- ``analyze(analysis, run, options, ranks)``: the document ``ranksight analyze NAME --format json``
  prints (the same function writes both: :func:`ranksight.report.terminal.analysis_doc`);
- ``diagnose(run, ranks, min_severity)``: the versioned document of ``ranksight diagnose
  --format json`` (:func:`ranksight.analyses.diagnose.to_json`);
- ``diff(base, test, fail_if_slower, metrics, …)``: the document of ``ranksight diff --format
  json`` (:func:`ranksight.cli.diff.diff_json`), with the gate's checks when a threshold is given.

The server holds the loaded runs in memory until ``unload_run`` or the end of the session; each
run's :class:`~ranksight.analyses.Session` keeps the results, so a second call computes nothing.
Errors are tool errors (``isError``) whose text is the one line the CLI would print. Nothing is
written to stdout but the protocol. It needs the ``mcp`` package (``pip install
'ranksight[mcp]'``); see docs/mcp.md.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import itertools
import json
import sys
import warnings
from collections.abc import Iterator
from typing import Any

from ranksight.cli._common import Command, Context
from ranksight.errors import UsageError

__all__ = ["COMMAND", "Tools", "build_server", "INSTALL_HINT"]

INSTALL_HINT = "ranksight mcp needs the mcp package: pip install 'ranksight[mcp]' (or: pip install mcp)"

_INSTRUCTIONS = (
    "ranksight analyses PyTorch profiler (Kineto) traces, Nsight Systems SQLite exports and NCCL logs of "
    "multi-GPU jobs. Call load_run with trace paths (files, folders of rank files, globs) to get a run handle, "
    "then diagnose (findings with evidence and fixes, worst first), list_analyses and analyze (one analysis' "
    "tables as JSON), or diff two runs (per-step comparison with significance; a CI gate with fail_if_slower)."
)


@contextlib.contextmanager
def _quiet_stdout() -> Iterator[list[str]]:
    """stdout is the protocol: anything a library prints goes to stderr; warnings are collected."""
    with contextlib.redirect_stdout(sys.stderr), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        seen: list[str] = []
        try:
            yield seen
        finally:
            from ranksight.errors import RanksightWarning

            for w in caught:
                if issubclass(w.category, RanksightWarning) and str(w.message) not in seen:
                    seen.append(str(w.message))


def _jsonable(text: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(text)
    return out


class Tools:
    """The server's tools as plain methods (the MCP layer only forwards to them; tests and other
    front ends can call them directly). Runs are held by handle."""

    def __init__(self) -> None:
        self.runs: dict[str, tuple[Any, list[str]]] = {}  # handle -> (Run, the paths it was loaded from)
        self._ids = itertools.count(1)

    def _run(self, handle: str) -> Any:
        try:
            return self.runs[handle][0]
        except KeyError:
            held = ", ".join(self.runs) or "none (call load_run first)"
            raise UsageError(f"no run {handle!r}; runs held: {held}") from None

    def load_run(
        self,
        paths: list[str],
        ranks: list[int] | None = None,
        cycle: int | None = None,
        strict: bool = False,
        jobs: int | None = None,
        cache: bool = True,
    ) -> dict[str, Any]:
        """Load traces (files, folders of rank files, globs: as on the command line) into a run;
        returns its handle, ranks, files and the warnings of loading."""
        from ranksight.model import load

        if isinstance(paths, str):
            paths = [paths]
        with _quiet_stdout() as said:
            run = load(list(paths), ranks=ranks, strict=strict, jobs=jobs, cache=None if cache else False, cycle=cycle)
            files = [{"rank": r, "path": run[r].path, "rank_from": run[r].meta.rank_source} for r in run.ranks]
        handle = f"run-{next(self._ids)}"
        self.runs[handle] = (run, list(paths))
        return {"run": handle, "ranks": run.ranks, "world_size": run.world_size, "files": files, "warnings": said}

    def list_runs(self) -> dict[str, Any]:
        """The runs held: handle, paths, ranks."""
        return {"runs": [{"run": h, "paths": p, "ranks": r.ranks} for h, (r, p) in self.runs.items()]}

    def unload_run(self, run: str) -> dict[str, Any]:
        """Forget a run (its memory is freed once nothing else holds it)."""
        self._run(run)
        del self.runs[run]
        return {"unloaded": run, "runs": list(self.runs)}

    def list_analyses(self) -> dict[str, Any]:
        """Every analysis with its options (what ``ranksight analyze NAME --help`` lists)."""
        from ranksight.analyses import REGISTRY, names
        from ranksight.cli.analyze import is_boolean

        out = []
        for name in names():
            spec = REGISTRY[name]
            opts = [
                {
                    "name": o.name,
                    "type": "bool" if is_boolean(o) else getattr(o.type, "__name__", "str").replace("<lambda>", "str"),
                    "multiple": o.multiple,
                    "default": o.default,
                    "help": o.help,
                }
                for o in spec.options
            ]
            out.append({"name": name, "help": spec.help, "options": opts, "without_run": list(spec.standalone)})
        return {"analyses": out}

    def analyze(
        self,
        analysis: str,
        run: str | None = None,
        options: dict[str, Any] | None = None,
        ranks: list[int] | None = None,
    ) -> dict[str, Any]:
        """Run one analysis; returns the document ``ranksight analyze NAME --format json`` prints."""
        from ranksight.analyses import REGISTRY, names, run_analysis
        from ranksight.errors import MissingDataError
        from ranksight.report.terminal import analysis_doc

        if analysis not in names():
            raise UsageError(f"unknown analysis {analysis!r}; analyses: {', '.join(names())}")
        spec = REGISTRY[analysis]
        opts = _options(spec, options or {})
        the_run = self._run(run) if run is not None else None
        if the_run is None and not any(o in opts for o in spec.standalone):
            raise UsageError(f"{analysis} needs a run (load_run first)")
        shown = list(ranks) if ranks else (the_run.ranks if the_run is not None else [])
        with _quiet_stdout():
            try:
                res = run_analysis(analysis, the_run, ranks=ranks, **opts)
            except MissingDataError as err:  # nothing to report: the CLI's document with `missing`
                doc = analysis_doc(spec.name, {}, (), ranks=shown, options=opts, missing=_missing(err))
                return _jsonable(json.dumps(doc, default=str))
            doc = analysis_doc(spec.name, res.tables, res.notes, ranks=shown, options=opts)
            return _jsonable(json.dumps(doc, default=str))

    def diagnose(self, run: str, ranks: list[int] | None = None, min_severity: str = "low") -> dict[str, Any]:
        """Findings with evidence and the fix to try, worst first: the document of ``ranksight
        diagnose --format json``."""
        from ranksight.analyses.diagnose import SEVERITIES, findings, to_json

        if min_severity not in SEVERITIES:
            raise UsageError(f"min_severity must be one of {', '.join(SEVERITIES)}, not {min_severity!r}")
        the_run = self._run(run)
        with _quiet_stdout():
            found, rules, notes = findings(the_run, ranks=ranks)
            keep = SEVERITIES[: SEVERITIES.index(min_severity) + 1]
            return _jsonable(to_json(the_run, [f for f in found if f.severity in keep], rules, notes))

    def diff(
        self,
        base: str,
        test: str,
        fail_if_slower: float | None = None,
        metrics: list[str] | None = None,
        alpha: float = 0.05,
        min_change: float = 2.0,
        top: int = 5,
        ranks: list[int] | None = None,
    ) -> dict[str, Any]:
        """Compare run ``test`` with run ``base`` per step: the document of ``ranksight diff
        --format json``. ``fail_if_slower`` and ``min_change`` are percentages (5 = 5 %); with
        ``fail_if_slower`` the gate checks ``metrics`` (default step_time) and ``gate.failed``
        says whether it would fail CI."""
        from ranksight.analyses.diff import diff
        from ranksight.cli.diff import diff_json, gate_checks, side_label

        b, t = self._run(base), self._run(test)
        lb = side_label(self.runs[base][1][0]) if len(self.runs[base][1]) == 1 else base
        lt = side_label(self.runs[test][1][0]) if len(self.runs[test][1]) == 1 else test
        labels = (lb, lt) if lb != lt else ("base", "test")
        with _quiet_stdout():
            res = diff(b, t, ranks=ranks, alpha=alpha, min_change=min_change / 100, top=top, labels=labels)
            verdicts = []
            threshold = None if fail_if_slower is None else fail_if_slower / 100
            if threshold is not None:
                checks = gate_checks(res, threshold, list(metrics or ["step_time"]))
                for c in checks:
                    if c.error is not None:
                        raise c.error
                verdicts = [c.verdict for c in checks]
            return _jsonable(diff_json(res, verdicts, threshold))


def _missing(err: Exception) -> dict[str, str]:
    return {"kind": "no-data", "reason": str(err)}


def _options(spec: Any, given: dict[str, Any]) -> dict[str, Any]:
    """The options as ``ranksight analyze`` passes them: every option at its CLI default unless
    given; a given value converted by the option's own parser from its text (as on the command
    line), booleans as JSON booleans (or ``"true"``/``"false"``), lists for repeatable options."""
    from ranksight.cli.analyze import is_boolean

    known = {o.name: o for o in spec.options}
    unknown = sorted(set(given) - set(known))
    if unknown:
        listed = ", ".join(known) or "none"
        raise UsageError(f"{spec.name} has no option {', '.join(unknown)}; options: {listed}")
    out: dict[str, Any] = {}
    for o in spec.options:
        if o.name not in given or given[o.name] is None:
            v = bool(o.default) if is_boolean(o) else None if o.multiple else o.default
        elif is_boolean(o):
            v = _bool(o.name, given[o.name])
        elif o.multiple:
            items = given[o.name] if isinstance(given[o.name], list) else [given[o.name]]
            v = [_convert(o, x) for x in items]
        else:
            v = _convert(o, given[o.name])
        if v is not None:
            out[o.name] = v
    return out


def _bool(name: str, v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.lower() in ("true", "false"):
        return v.lower() == "true"
    raise UsageError(f"option {name}: expected true or false, not {v!r}")


def _convert(o: Any, v: Any) -> Any:
    try:
        return o.type(v if isinstance(v, str) else json.dumps(v))
    except (ValueError, TypeError, argparse.ArgumentTypeError) as err:
        raise UsageError(f"option {o.name}: {err}") from None


def _server_class() -> Any:
    """The SDK's high-level server: ``MCPServer`` (mcp >= 2) or ``FastMCP`` (mcp 1.x)."""
    try:
        return importlib.import_module("mcp.server.mcpserver").MCPServer
    except ImportError:
        pass
    try:
        return importlib.import_module("mcp.server.fastmcp").FastMCP
    except ImportError:
        raise UsageError(INSTALL_HINT) from None


def build_server(tools: Tools | None = None) -> Any:
    """The MCP server with the tools of :class:`Tools` registered (not started)."""
    from ranksight import __version__

    cls = _server_class()
    try:
        server = cls("ranksight", instructions=_INSTRUCTIONS, version=__version__)
    except TypeError:  # mcp 1.x: no version argument
        server = cls("ranksight", instructions=_INSTRUCTIONS)
    t = tools or Tools()
    tool_error = _tool_error_class()
    for name in ("load_run", "list_runs", "unload_run", "list_analyses", "analyze", "diagnose", "diff"):
        fn = getattr(t, name)
        server.add_tool(_as_tool(fn, tool_error), name=name, description=fn.__doc__)
    return server


def _tool_error_class() -> type[Exception]:
    """The SDK's ``ToolError``: the one exception whose text reaches the client (mcp >= 2 hides
    the text of any other exception, as a crash)."""
    for module in ("mcp.server.mcpserver.exceptions", "mcp.server.fastmcp.exceptions"):
        try:
            cls: type[Exception] = importlib.import_module(module).ToolError
            return cls
        except (ImportError, AttributeError):
            continue
    return ValueError


def _as_tool(method: Any, tool_error: type[Exception]) -> Any:
    """The method as a function with its signature (the SDK builds the tool's input schema from
    it) whose :class:`~ranksight.errors.RanksightError` is a tool error with the CLI's one line."""
    import functools

    from ranksight.errors import RanksightError

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except RanksightError as err:
            raise tool_error(str(err)) from None

    return call


def _add(p: argparse.ArgumentParser) -> None:
    del p  # no options: the client passes everything as tool arguments


def _run(args: argparse.Namespace, ctx: Context) -> int:
    del args, ctx
    try:
        importlib.import_module("mcp")
    except ImportError:
        raise UsageError(INSTALL_HINT) from None
    build_server().run("stdio")
    return 0


COMMAND = Command(
    "mcp",
    "serve ranksight's analyses to coding agents (Model Context Protocol over stdio)",
    _add,
    _run,
    description="A Model Context Protocol server on stdin/stdout: tools load_run, list_runs, unload_run, "
    "list_analyses, analyze, diagnose and diff (docs/mcp.md). Needs the mcp package: pip install 'ranksight[mcp]'.",
    order=90,
)
