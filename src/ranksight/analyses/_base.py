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

    # ---- notebooks: _repr_html_ and plot() (issue 21) ----------------------------------------

    #: rows of each table shown by :meth:`_repr_html_` (the DataFrames hold them all)
    HTML_ROWS = 20

    def _repr_html_(self) -> str:
        """The result in a notebook: each table as a small self-contained HTML table (its first
        :attr:`HTML_ROWS` rows, numbers right-aligned, trace text escaped), then the notes."""
        import html

        parts = ['<div class="ranksight-result">']
        for name, df in self.tables.items():
            parts.append(
                f"<p><b>{html.escape(name)}</b> <small>({df.height:,} rows × {df.width} columns)</small></p>"
                + _html_table(df, self.HTML_ROWS)
            )
            if df.height > self.HTML_ROWS:
                parts.append(
                    f"<p><small>{df.height - self.HTML_ROWS:,} more rows: "
                    f"<code>result[{html.escape(repr(name))}]</code> is the whole DataFrame</small></p>"
                )
        if self.notes:
            parts.append("<ul>" + "".join(f"<li>note: {html.escape(n)}</li>" for n in self.notes) + "</ul>")
        parts.append("</div>")
        return "\n".join(parts)

    def plot(self, table: str | None = None, *, x: str | None = None, y: Sequence[str] | str | None = None) -> Any:
        """A plotly bar chart of one table (default: the main one): ``y`` columns (default: the
        numeric columns with the unit of the first one) over ``x`` (default: ``rank`` when there
        is one, else the first text column). Needs plotly (``pip install plotly``): without it, a
        :class:`~ranksight.errors.UsageError` says so."""
        from ranksight.errors import UsageError

        try:
            import plotly.graph_objects as go
        except ImportError:
            raise UsageError(
                "AnalysisResult.plot() needs plotly, which is not installed: pip install plotly "
                "(or pip install 'ranksight[plot]'); the tables are polars DataFrames to plot with anything else"
            ) from None
        name = table if table is not None else next(iter(self.tables), None)
        if name is None or name not in self.tables:
            raise UsageError(f"no table {name!r}; tables: {', '.join(self.tables) or 'none'}")
        df = self.tables[name]
        numeric = [c for c, dt in df.schema.items() if dt.is_numeric()]
        if x is None:
            text = [c for c in df.columns if c not in numeric]
            x = "rank" if "rank" in df.columns else (text[0] if text else df.columns[0])
        if isinstance(y, str):
            y = [y]
        if y is None:  # the value columns in the unit of the first one (kernel_time_us, idle_us, ...)
            cand = [c for c in numeric if c != x and c not in _KEYS]
            y = [c for c in cand if c.rsplit("_", 1)[-1] == cand[0].rsplit("_", 1)[-1]] if cand else []
        missing = [c for c in [x, *y] if c not in df.columns]
        if missing or not y:
            raise UsageError(f"nothing to plot in {name!r}: columns {missing or 'y'} not in {df.columns}")
        labels = [str(v) for v in df[x].to_list()]
        fig = go.Figure([go.Bar(name=c, x=labels, y=df[c].to_list()) for c in y])
        fig.update_layout(title=name, barmode="group", xaxis_title=x, xaxis_type="category", legend_title="column")
        return fig


#: Key columns that are not values to plot.
_KEYS = ("rank", "step", "device", "stream", "instance", "pid", "tid")


def _html_cell(v: Any) -> str:
    import html
    import math

    if v is None or (isinstance(v, float) and (math.isnan(v) or math.isinf(v))):
        return ""
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:,.0f}" if abs(v) >= 1e6 else f"{v:.6g}"
    return html.escape(str(v))


def _html_table(df: pl.DataFrame, rows: int) -> str:
    """A small HTML table (no style sheet, no script): the first ``rows`` rows of ``df``."""
    import html

    right = [dt.is_numeric() for dt in df.schema.values()]
    head = "".join(
        f'<th style="text-align:{"right" if r else "left"}">{html.escape(c)}</th>'
        for c, r in zip(df.columns, right, strict=True)
    )
    body = "".join(
        "<tr>"
        + "".join(
            f'<td style="text-align:{"right" if r else "left"}">{_html_cell(v)}</td>'
            for v, r in zip(row, right, strict=True)
        )
        + "</tr>"
        for row in df.head(rows).iter_rows()
    )
    return f'<table class="dataframe"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


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
    "serving",
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
