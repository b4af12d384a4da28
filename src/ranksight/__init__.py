"""ranksight: where the time goes in multi-GPU PyTorch jobs.

>>> import ranksight
>>> run = ranksight.load("traces/")          # doctest: +SKIP
>>> run[0].events                            # doctest: +SKIP
"""

import os as _os

#: ``RANKSIGHT_LOW_MEMORY=1``: trade some speed for a lower peak (docs/scale.md). polars allocates
#: through its own jemalloc, which keeps freed pages for 0.5–1 s, so the transient columns of one step
#: stay resident while the next allocates (1 GB trace: 0.71 GB resident after loading instead of
#: 0.98 GB, load ~15 % slower). Takes effect only if polars is imported after ranksight; a
#: ``_RJEM_MALLOC_CONF`` the user set wins.
LOW_MEMORY = _os.environ.get("RANKSIGHT_LOW_MEMORY", "").lower() in ("1", "true", "yes", "on")
if LOW_MEMORY:
    _os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:0,muzzy_decay_ms:0")

from ranksight._core import __version__ as _core_version  # noqa: F401 (loads the Rust core: a missing build fails here)
from ranksight.errors import (
    DuplicateRankError,
    InputTooLargeError,
    MissingDataError,
    RanksightError,
    RanksightWarning,
    TraceChangedError,
    TraceFormatError,
    TraceNotFoundError,
    UsageError,
)
from ranksight.model import Run, Trace, TraceMeta, load

__version__ = "0.1.0"

# ---- the notebook API: ranksight.analyze / ranksight.diagnose / ranksight.report ---------------
# The analyses and the reporters sit on floors above the model; this package imports them only
# when one of these is called (importlib, at call time), so `import ranksight` stays light and the
# floors below that import `ranksight` (for `_core`) do not depend on them (docs/guardrails.md).
import importlib as _importlib  # noqa: E402
from typing import Any as _Any  # noqa: E402


def _as_run(run: _Any) -> _Any:
    """A Run or a Session as given; paths (what :func:`load` takes) loaded."""
    if isinstance(run, str | _os.PathLike | list | tuple | dict):
        return load(run)
    return run


def analyze(run: _Any, name: str, /, *, ranks: list[int] | None = None, **options: _Any) -> _Any:
    """Run the analysis ``name`` (``"temporal"``, ``"idle-causes"``, …; ``ranksight analyze
    --help`` lists them) on ``run`` and return its
    :class:`~ranksight.analyses.AnalysisResult`: ``.tables`` (name → polars DataFrame), ``.main``
    (the main table), ``.notes``; ``_repr_html_`` for notebooks, ``.plot()`` with plotly.

    ``run`` is a :class:`Run`, a :class:`~ranksight.analyses.Session` (each analysis computed once
    and reused, also by :func:`report`), or the paths :func:`load` takes. ``options`` are the
    analysis' options by their Python names (``per_step=True`` for ``--per-step``). The traces
    lacking what the analysis needs raise :class:`MissingDataError`.

    >>> ranksight.analyze(run, "temporal", per_step=True).main    # doctest: +SKIP
    """
    analyses = _importlib.import_module("ranksight.analyses")
    return analyses.run_analysis(name, _as_run(run), ranks=ranks, **options)


def diagnose(run: _Any, /, *, ranks: list[int] | None = None) -> _Any:
    """Every diagnose rule on ``run``: an :class:`~ranksight.analyses.AnalysisResult` whose
    ``findings`` table has one row per finding, worst first (severity, rule, impact, ranks,
    summary, fix); docs/diagnose.md."""
    return analyze(run, "diagnose", ranks=ranks)


def __getattr__(name: str) -> _Any:
    # ``ranksight.report``: the reporters package, which is callable: ranksight.report(run, path)
    # writes the HTML report and returns its path (ranksight.report.write_html).
    if name == "report":
        return _importlib.import_module("ranksight.report")
    raise AttributeError(f"module 'ranksight' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), "report"})


if LOW_MEMORY:
    from ranksight._core import set_mmap_threshold as _set_mmap_threshold

    _set_mmap_threshold(128 << 10)

__all__ = [
    "load",
    "analyze",
    "diagnose",
    "report",
    "Run",
    "Trace",
    "TraceMeta",
    "RanksightError",
    "TraceFormatError",
    "TraceNotFoundError",
    "TraceChangedError",
    "DuplicateRankError",
    "InputTooLargeError",
    "UsageError",
    "MissingDataError",
    "RanksightWarning",
    "__version__",
]
