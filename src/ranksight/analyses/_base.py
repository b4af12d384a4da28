"""What every analysis module shares: its result type, its CLI options, and the registry.

An analysis is a module in :mod:`ranksight.analyses` (one slug per module) that calls
:func:`register` with an :class:`AnalysisSpec`. The CLI (``ranksight analyze NAME``), the
Python API (:class:`ranksight.analyses.Session` and ``ranksight.analyses.run_analysis``), the report
and the docs all read the registry, so an analysis is written once. The modules are listed in
:data:`ANALYSIS_MODULES` (a new analysis is added there).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

if TYPE_CHECKING:
    from ranksight.model.run import Run

__all__ = [
    "AnalysisResult",
    "Option",
    "AnalysisSpec",
    "REGISTRY",
    "ANALYSIS_MODULES",
    "register",
    "load_all",
    "selected",
]


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

#: Every analysis module of :mod:`ranksight.analyses` (each registers one slug when imported).
ANALYSIS_MODULES = (
    "alignment",
    "all_to_all",
    "alpha_beta",
    "annotations",
    "bandwidth",
    "bubble",
    "collectives",
    "critical_path",
    "cupti_counters",
    "diagnose",
    "diff",
    "exposed_comm",
    "gpu_metrics",
    "graphs",
    "health",
    "idle",
    "idle_causes",
    "info",
    "kernel_config",
    "kernel_spread",
    "kernel_taxonomy",
    "kernel_types",
    "kernels",
    "late_start",
    "launches",
    "memcpy_bw",
    "memory",
    "mfu",
    "modules",
    "nccl_log",
    "op_kernels",
    "op_perf",
    "ops",
    "overlap",
    "overview",
    "queue",
    "run_context",
    "sequences",
    "steps",
    "stragglers",
    "summary",
    "temporal",
)

_loaded = False


def load_all() -> None:
    """Import every module of :data:`ANALYSIS_MODULES` (each registers its analysis)."""
    global _loaded
    if _loaded:
        return
    import importlib

    for mod in ANALYSIS_MODULES:
        importlib.import_module(f"ranksight.analyses.{mod}")
    _loaded = True


def register(spec: AnalysisSpec) -> AnalysisSpec:
    """Add an analysis to the registry (called at import of its module)."""
    if spec.name in REGISTRY and REGISTRY[spec.name].func is not spec.func:
        raise ValueError(f"analysis {spec.name!r} registered twice")
    REGISTRY[spec.name] = spec
    return spec


def selected(run: Run | None, ranks: Sequence[int] | None) -> list[int]:
    """The ranks an analysis should cover (all of the run's by default; none without a run)."""
    if run is None:
        return []
    if ranks is None:
        return run.ranks
    missing = [r for r in ranks if r not in run.ranks]
    if missing:
        from ranksight.errors import UsageError

        raise UsageError(f"rank(s) {missing} not loaded; ranks: {run.ranks}")
    return list(ranks)
