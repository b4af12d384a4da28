"""Analyses: pure functions from the trace model to tables. No plotting, no printing.

Every module here (one slug per module, files not starting with ``_``) registers itself in
:data:`REGISTRY`; :func:`run_analysis` runs one by name.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import TYPE_CHECKING, Any

from ranksight.analyses._base import REGISTRY, AnalysisResult, AnalysisSpec, Option, register

if TYPE_CHECKING:
    from ranksight.model.run import Run

__all__ = ["REGISTRY", "AnalysisResult", "AnalysisSpec", "Option", "register", "run_analysis", "names"]

_loaded = False


def _load_all() -> None:
    global _loaded
    if _loaded:
        return
    for mod in pkgutil.iter_modules(__path__):
        if not mod.name.startswith("_"):
            importlib.import_module(f"{__name__}.{mod.name}")
    _loaded = True


def names() -> list[str]:
    """Slugs of every registered analysis."""
    _load_all()
    return sorted(REGISTRY)


def run_analysis(name: str, run: Run, **options: Any) -> AnalysisResult:
    """Run the analysis ``name`` (a slug such as ``"temporal"``) on a run."""
    _load_all()
    if name not in REGISTRY:
        from ranksight.errors import UsageError

        raise UsageError(f"unknown analysis {name!r}; choose from: {', '.join(sorted(REGISTRY))}")
    return REGISTRY[name].func(run, **options)
