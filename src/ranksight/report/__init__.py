"""Reporters: terminal tables, files, and the HTML report. They format; they never compute.

The package is callable: ``ranksight.report(run, "out.html")`` writes the HTML report (the notebook
API of ``ranksight.analyze`` / ``ranksight.diagnose``; see docs/cli.md). It is the package itself
that is called, so that ``ranksight.report`` stays this package for ``import ranksight.report.x``.
"""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path
from typing import Any


def write_html(
    run: Any,
    path: str | os.PathLike[str],
    *,
    title: str | None = None,
    force: bool = False,
    **options: Any,
) -> Path:
    """Write the self-contained HTML report of ``run`` (a :class:`~ranksight.model.run.Run`, a
    :class:`~ranksight.analyses.Session` whose results it reuses, or the paths ``ranksight.load``
    takes) to ``path`` and return the path. Never over an input; an existing file only with
    ``force``. ``options``: ``baseline=(run, (base_label, test_label))``, ``snapshot=FILE``,
    ``detail_ranks="all"`` or ranks (:func:`ranksight.report.html.write_report`)."""
    from ranksight import load
    from ranksight.io.output import check_output
    from ranksight.report.html import write_report

    if isinstance(run, str | os.PathLike | list | tuple | dict):
        run = load(run)
    traces = getattr(run, "run", run)  # a Session's run
    inputs = [t.path for t in traces] if traces is not None else []
    out = os.fspath(path)
    check_output(out, inputs=inputs, force=force, folder_must_exist=True)
    write_report(run, out, title=title, inputs=[os.path.basename(i) for i in inputs], **options)
    return Path(out)


class _CallableModule(types.ModuleType):
    """This package, callable: ``ranksight.report(run, path, ...)`` is :func:`write_html`."""

    def __call__(self, run: Any, path: str | os.PathLike[str], **kwargs: Any) -> Path:
        return write_html(run, path, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
