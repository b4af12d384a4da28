"""Assemble the report payload: run every declared section, list the ones not shown and why."""

from __future__ import annotations

import importlib
import os
import re
import time
import warnings
from collections.abc import Sequence
from typing import Any

from ranksight.analyses import Session
from ranksight.report.html.payload import SCHEMA_NAME, SCHEMA_VERSION
from ranksight.report.html.sections import GROUPS, SECTIONS, Ctx, Omit, Section, Skip

__all__ = ["build_payload", "load_sections", "covered_analyses", "GENERIC_EXCLUDED", "SECTION_MODULES"]

#: Registered analyses that get no generic section (they need two runs, or NCCL logs).
GENERIC_EXCLUDED = frozenset({"diff", "nccl-log"})
#: Rows embedded per table of an analysis without a section of its own (the block says how many
#: there were; ``ranksight analyze NAME --format csv`` gives them all): a per-edge table of 25,000
#: rows made the demo report 2.4 MB larger.
GENERIC_MAX_ROWS = 1_000

#: Every module of report sections (each registers its sections when imported); a new module is
#: added here.
SECTION_MODULES = (
    "sections_cpu",
    "sections_diff",
    "sections_dist",
    "sections_findings",
    "sections_gpu",
    "sections_health",
    "sections_idle_causes",
    "sections_kernels",
    "sections_memory",
    "sections_memory_snapshot",
    "sections_ranks",
    "sections_roofline",
    "sections_run",
    "sections_serving",
    "sections_steps",
    "sections_timeline",
)

_loaded = False


def load_sections() -> list[Section]:
    """Import every module of :data:`SECTION_MODULES` and return the sections in page order."""
    global _loaded
    if not _loaded:
        for m in SECTION_MODULES:
            importlib.import_module(f"ranksight.report.html.{m}")
        _loaded = True
    return sorted(SECTIONS, key=lambda s: (GROUPS.index(s.group), s.order, s.slug))


def covered_analyses() -> set[str]:
    """Analyses some declared section needs."""
    return {n for s in load_sections() for n in s.needs}


def _generic(name: str) -> Section:
    """A section that shows every table of an analysis that has no section of its own."""

    def build(ctx: Ctx) -> list[dict[str, Any]]:
        res = ctx.result(name)
        blocks = [
            ctx.table(df, id=f"{name}-{i}", title=t, max_rows=GENERIC_MAX_ROWS)
            for i, (t, df) in enumerate(res.tables.items())
            if df.height
        ]
        if not blocks:
            raise Skip(f"`{name}` found nothing in these traces")
        return blocks

    from ranksight.analyses import REGISTRY

    return Section(f"more-{name}", f"{name}", (name,), build, "More analyses", 50, REGISTRY[name].help)


def _sections_to_run() -> list[Section]:
    from ranksight.analyses import names

    declared = load_sections()
    covered = covered_analyses()
    extra = [_generic(n) for n in names() if n not in covered and n not in GENERIC_EXCLUDED]
    return declared + extra


def _run_section(sec: Section, ctx: Ctx) -> dict[str, Any]:
    out: dict[str, Any] = {
        "slug": sec.slug,
        "title": sec.title,
        "group": sec.group,
        "help": sec.help,
        "needs": list(sec.needs),
        "shown": False,
        "reason": None,
        "notes": [],
        "blocks": [],
    }
    ctx.notes = []
    ctx._detail_used = None
    t0 = time.perf_counter()
    try:
        blocks = sec.build(ctx)
    except Omit:
        out["omitted"] = True
        return out
    except Skip as why:
        out["reason"] = _short_rank_lists(str(why)) if ctx.many else str(why)
    except Exception as err:  # a builder that does not fit an analysis' tables must not lose the report
        msg = f"section `{sec.slug}` could not be built: {type(err).__name__}: {err}"
        ctx.failures.append(msg)
        warnings.warn(msg, stacklevel=2)
        out["reason"] = msg
    else:
        if blocks:
            out["shown"] = True
            out["blocks"] = blocks
        else:
            out["reason"] = "nothing to show for these traces"
    out["notes"] = [ctx.strings(n) for n in ctx.notes]
    out["build_ms"] = round((time.perf_counter() - t0) * 1e3, 1)
    return out


def build_payload(
    run: Any,
    *,
    title: str | None = None,
    inputs: Sequence[str] = (),
    baseline: tuple[Any, tuple[str, str]] | None = None,
    snapshot: str | os.PathLike[str] | None = None,
    detail_ranks: Sequence[int] | str | None = None,
) -> dict[str, Any]:
    """The report document (see ``docs/report-schema.json``) of a run or a
    :class:`~ranksight.analyses.Session` (pass the session to reuse the analysis results it
    holds, e.g. after :func:`ranksight.report.headline.build_summary`). ``baseline`` is
    ``(base run, (base label, this run's label))`` for the comparison section; ``snapshot`` a
    PyTorch memory snapshot file for its section; ``detail_ranks`` the ranks of the operator-level
    sections beyond the focus ranks of a run of many ranks, or ``"all"`` (see
    :meth:`~ranksight.report.html.sections.Ctx.detail_subset`)."""
    from ranksight import __version__
    from ranksight.errors import UsageError

    session = Session.of(run)
    if detail_ranks is not None and detail_ranks != "all":
        if isinstance(detail_ranks, str):
            raise UsageError(f"detail ranks: 'all' or a list of ranks, not {detail_ranks!r}")
        unknown = sorted({int(r) for r in detail_ranks} - set(session.ranks))
        if unknown:
            raise UsageError(f"detail ranks {unknown} are not ranks of this run ({len(session.ranks)} ranks)")
    ctx = Ctx(
        session,
        baseline=baseline,
        snapshot=None if snapshot is None else os.fspath(snapshot),
        detail_ranks=detail_ranks,
    )
    run = ctx.run
    todo = _sections_to_run()
    # findings link to the sections that show their evidence: build them last, show them first
    built: dict[str, dict[str, Any]] = {}
    for sec in sorted(todo, key=lambda s: s.group == "Findings"):
        built[sec.slug] = _run_section(sec, ctx)
        if built[sec.slug]["shown"]:
            ctx.shown.add(sec.slug)
    try:
        ctx.finish_tables()  # a many-rank report's per-rank tables, once the size budget is known
    except Exception as err:  # a bug there must not lose the report: those tables stay empty
        msg = f"per-rank tables could not be encoded: {type(err).__name__}: {err}"
        ctx.failures.append(msg)
        warnings.warn(msg, stacklevel=2)
        for d in ctx.deferred:
            d.block.update({"columns": [], "data": [], "rows": 0, "page_size": 25})
        ctx.deferred.clear()
    sections = [built[s.slug] for s in todo if not built[s.slug].get("omitted")]
    files = [os.path.basename(t.path) for t in run]
    doc: dict[str, Any] = {
        "schema": SCHEMA_NAME,
        "version": SCHEMA_VERSION,
        "generator": f"ranksight {__version__}",
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "title": ctx.strings(title or _default_title(run)),
        "inputs": ctx.strings.many(inputs or files),
        "ranks": list(run.ranks),
        "groups": list(GROUPS),
        "sections": sections,
        "failures": ctx.failures,
        "strings": ctx.strings.strings,
    }
    context = _context_line(ctx.session)
    if context is not None:
        doc["context"] = context
    return doc


_INT_LIST = re.compile(r"\[(\d+(?:, \d+){32,})\]")


def _short_rank_lists(text: str) -> str:
    """``[0, 1, 2, …, 4095]`` (a list of more than 32 numbers, e.g. the ranks an analysis names in
    its reason) written as ranges: ``[0–4095]``."""
    from ranksight.report.html.ranks import rank_ranges

    return _INT_LIST.sub(lambda m: "[" + rank_ranges([int(x) for x in m.group(1).split(", ")]) + "]", text)


def _context_line(session: Session) -> str | None:
    """The run-context line for the header (``training, bf16, torch.compile, …``), None when it cannot be had."""
    from ranksight.analyses import Missing
    from ranksight.analyses.run_context import run_context_line, run_contexts

    if isinstance(session.try_result("run-context"), Missing):
        return None
    return run_context_line(run_contexts(session))


def _default_title(run: Any) -> str:
    """The file name for one rank; the folder name (or first file) and the rank count for several."""
    n = len(run)
    if n == 0:
        return "ranksight report"
    paths = [os.path.abspath(t.path) for t in run]
    if n == 1:
        return os.path.basename(paths[0])
    parents = {os.path.dirname(p) for p in paths}
    name = os.path.basename(parents.pop()) if len(parents) == 1 else os.path.basename(paths[0])
    return f"{name} ({n} ranks)"
