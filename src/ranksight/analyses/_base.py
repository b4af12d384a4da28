"""What every analysis module shares: its result type, its CLI options, and the registry.

An analysis is a module in :mod:`ranksight.analyses` (one slug per module) that calls
:func:`register` with an :class:`AnalysisSpec`. The CLI (``ranksight analyze NAME``), the
Python API (``ranksight.analyses.run_analysis`` and ``Run.analyze``) and the docs all read the
registry, so an analysis is written once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

if TYPE_CHECKING:
    from ranksight.model.run import Run

__all__ = ["AnalysisResult", "Option", "AnalysisSpec", "REGISTRY", "register"]


@dataclass
class AnalysisResult:
    """Tables (name → DataFrame) plus notes that explain what is missing or assumed."""

    tables: dict[str, pl.DataFrame]
    notes: list[str] = field(default_factory=list)

    @property
    def main(self) -> pl.DataFrame:
        """The first table."""
        return next(iter(self.tables.values()))

    def __getitem__(self, name: str) -> pl.DataFrame:
        return self.tables[name]


@dataclass(frozen=True)
class Option:
    """An analysis option, shown as a CLI flag (``--kebab-name``) and passed as a keyword."""

    name: str
    type: Callable[[str], Any]
    default: Any
    help: str
    multiple: bool = False
    flag: bool = False


@dataclass(frozen=True)
class AnalysisSpec:
    """One analysis: ``func(run, ranks=..., **options) -> AnalysisResult``."""

    name: str
    func: Callable[..., AnalysisResult]
    help: str
    options: Sequence[Option] = ()
    #: options that make TRACES optional on the CLI: given alone, ``func`` gets ``run=None``
    standalone: Sequence[str] = ()


REGISTRY: dict[str, AnalysisSpec] = {}


def register(spec: AnalysisSpec) -> AnalysisSpec:
    """Add an analysis to the registry (called at import of its module)."""
    if spec.name in REGISTRY and REGISTRY[spec.name].func is not spec.func:
        raise ValueError(f"analysis {spec.name!r} registered twice")
    REGISTRY[spec.name] = spec
    return spec


def selected(run: Run, ranks: Sequence[int] | None) -> list[int]:
    """The ranks an analysis should cover."""
    if ranks is None:
        return run.ranks
    missing = [r for r in ranks if r not in run.ranks]
    if missing:
        from ranksight.errors import UsageError

        raise UsageError(f"rank(s) {missing} not loaded; ranks: {run.ranks}")
    return list(ranks)
