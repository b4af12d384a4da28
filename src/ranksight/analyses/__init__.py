"""Analyses: pure functions from the trace model to tables. No plotting, no printing.

Every module listed in :data:`ANALYSIS_MODULES` (one slug per module) registers itself in
:data:`REGISTRY`. Analyses run through a :class:`Session`, which caches each result and runs
per-rank work on the run's engine; :func:`run_analysis` is the one-call form.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ranksight.analyses._base import (
    ANALYSIS_MODULES,
    REGISTRY,
    AnalysisResult,
    AnalysisSpec,
    Option,
    load_all,
    register,
)
from ranksight.analyses._session import MISSING_KINDS, Missing, Session

if TYPE_CHECKING:
    from ranksight.model.run import Run

__all__ = [
    "REGISTRY",
    "ANALYSIS_MODULES",
    "AnalysisResult",
    "AnalysisSpec",
    "Option",
    "register",
    "run_analysis",
    "names",
    "Session",
    "Missing",
    "MISSING_KINDS",
]


def names() -> list[str]:
    """Slugs of every registered analysis."""
    load_all()
    return sorted(REGISTRY)


def run_analysis(
    name: str, run: Run | Session | None, *, ranks: Sequence[int] | None = None, **options: Any
) -> AnalysisResult:
    """Run the analysis ``name`` (a slug such as ``"temporal"``) on a run or a session."""
    return Session.of(run, ranks).result(name, **options)
