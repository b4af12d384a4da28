"""``run-context``: what kind of run each rank records, with the evidence for every answer.

Tables:

- ``run context``: one row per rank: ``rank, mode`` (training / inference / unknown), ``graphs``
  (capture / replay / capture+replay / none / unknown), ``compiled`` (yes / no / unknown),
  ``parallel_hints`` (``tensor``, ``pipeline``, ``expert``, ``data``, ``context``, comma-separated;
  hints, not facts), ``dominant_precision`` (of GPU matrix-kernel time), ``precision_pct`` (its
  share of matrix-kernel time), ``graph_launches``, ``graph_captures``, ``captured_launches``
  (launches recorded under capture: not executed), ``gpu``, ``arch``, ``context`` (one line) and
  ``evidence`` (every answer's evidence, ``;``-joined).
- ``evidence``: one row per (rank, aspect): ``rank, aspect, answer, evidence``.

The rules and their evidence: ``docs/run-context.md`` (view :mod:`ranksight.views.run_context`).
Other analyses (diagnose rules, summary, info, the report) read :func:`run_contexts`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, register
from ranksight.analyses._session import Session
from ranksight.views.kernel_taxonomy import seed_kernel_taxonomy
from ranksight.views.run_context import RunContext, context_line, run_context, seed_name_tables

if TYPE_CHECKING:
    from ranksight.model.run import Run

__all__ = ["run_contexts", "run_context_line", "run_context_table", "RUN_CONTEXT_SCHEMA", "run_context_analysis"]

RUN_CONTEXT_SCHEMA = {
    "rank": pl.Int64,
    "mode": pl.String,
    "graphs": pl.String,
    "compiled": pl.String,
    "parallel_hints": pl.String,
    "dominant_precision": pl.String,
    "precision_pct": pl.Float64,
    "graph_launches": pl.Int64,
    "graph_captures": pl.Int64,
    "captured_launches": pl.Int64,
    "gpu": pl.String,
    "arch": pl.String,
    "context": pl.String,
    "evidence": pl.String,
}
_EVIDENCE_SCHEMA = {"rank": pl.Int64, "aspect": pl.String, "answer": pl.String, "evidence": pl.String}


def run_contexts(run: Run | Session, ranks: Sequence[int] | None = None) -> dict[int, RunContext]:
    """``{rank: RunContext}`` over the session's ranks, computed once per session (the accessor
    for rules: ``ctx.is_inference``, ``ctx.is_capture``, ``ctx.low_precision``, ...)."""
    sess = Session.of(run, ranks)
    ctxs: dict[int, RunContext] = sess.memo(("run_context",), lambda: _contexts(sess))
    return ctxs


def _contexts(sess: Session) -> dict[int, RunContext]:
    seed_taxonomy(sess)
    stacked = sess.stacked_events()
    if stacked is not None:  # many small ranks: every rank's name table in one query
        seed_name_tables([sess.trace(r) for r in sess.ranks], stacked)
    return sess.map(run_context)


def seed_taxonomy(sess: Session) -> None:
    """Many small ranks held here: every rank's kernel taxonomy in one pass over the stacked events
    (each distinct kernel name classified once, issue 19), before the per-rank work reads it."""
    stacked = sess.stacked_events()
    if stacked is not None:
        seed_kernel_taxonomy([sess.trace(r) for r in sess.ranks], stacked)


def run_context_line(ctxs: dict[int, RunContext]) -> str | None:
    """One line for the whole run: the ranks' common line, or each distinct line with its ranks."""
    if not ctxs:
        return None
    lines: dict[str, list[int]] = {}
    for r, c in sorted(ctxs.items()):
        lines.setdefault(context_line(c), []).append(r)
    if len(lines) == 1:
        return next(iter(lines))
    return "; ".join(f"rank{'s' if len(rs) > 1 else ''} {','.join(map(str, rs))}: {line}" for line, rs in lines.items())


def _answer(c: RunContext, aspect: str) -> str:
    if aspect == "parallel":
        return ",".join(c.parallel_hints) or "none"
    if aspect == "device":
        return ", ".join(b for b in (c.gpu_vendor, c.gpu_model, c.gpu_arch) if b) or "unknown"
    return str({"mode": c.mode, "graphs": c.graphs, "compiled": c.compiled, "precision": c.precision}[aspect])


def run_context_table(ctxs: dict[int, RunContext]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The ``run context`` and ``evidence`` tables of per-rank contexts."""
    rows, ev = [], []
    for r, c in sorted(ctxs.items()):
        rows.append(
            {
                "rank": r,
                "mode": c.mode,
                "graphs": c.graphs,
                "compiled": c.compiled,
                "parallel_hints": ",".join(c.parallel_hints) or None,
                "dominant_precision": c.precision,
                "precision_pct": None if c.precision_share is None else round(100 * c.precision_share, 1),
                "graph_launches": c.graph_launches,
                "graph_captures": c.graph_captures,
                "captured_launches": c.captured_launches,
                "gpu": c.gpu_model or c.gpu_vendor,
                "arch": c.gpu_arch,
                "context": context_line(c),
                "evidence": "; ".join(f"{k}: {v}" for k, v in c.evidence.items()),
            }
        )
        for aspect, text in c.evidence.items():
            ev.append({"rank": r, "aspect": aspect, "answer": _answer(c, aspect), "evidence": text})
    return pl.DataFrame(rows, schema=RUN_CONTEXT_SCHEMA), pl.DataFrame(ev, schema=_EVIDENCE_SCHEMA)


def run_context_analysis(run: Run | Session, *, ranks: Sequence[int] | None = None) -> AnalysisResult:
    """Training or inference, CUDA/HIP graph capture or replay, torch.compile, parallelism hints,
    dominant precision and device, per rank, each with its evidence."""
    sess = Session.of(run, ranks)
    ctxs = run_contexts(sess)
    main, evidence = run_context_table(ctxs)
    notes = []
    line = run_context_line(ctxs)
    if line:
        notes.append(f"context: {line}")
    cap = [r for r, c in ctxs.items() if c.is_capture]
    if cap:
        notes.append(
            f"rank(s) {cap}: CUDA/HIP graph capture trace: launches recorded under capture ran no kernel "
            "(captured, not executed; not dropped records)"
        )
    if any(c.parallel_hints for c in ctxs.values()):
        notes.append("parallel_hints are hints from group names and communication ops, not facts")
    return AnalysisResult({"run context": main, "evidence": evidence}, notes)


register(
    AnalysisSpec(
        name="run-context",
        func=run_context_analysis,
        help="training or inference, CUDA/HIP graphs (capture/replay), torch.compile, parallel hints, "
        "dominant precision, with evidence",
    )
)
