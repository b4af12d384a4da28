"""The documentation site (mkdocs.yml: the guides in docs/ and the API reference generated from
the docstrings by mkdocstrings) builds with ``--strict``: no broken link, no docstring griffe
cannot read. Skipped loudly when mkdocs-material and mkdocstrings are not installed
(``pip install '.[docs]'``)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NEEDED = ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python")


def test_site_builds_strict(tmp_path):
    missing = [m for m in NEEDED if importlib.util.find_spec(m.split(".")[0]) is None]
    if not missing:
        missing = [m for m in NEEDED[3:] if importlib.util.find_spec(m) is None]
    if missing:
        msg = f"SKIPPED LOUDLY: {', '.join(missing)} not installed (pip install '.[docs]'); the docs site is not built"
        warnings.warn(msg)
        pytest.skip(msg)
    site = tmp_path / "site"
    r = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "-d", str(site)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    problems = [line for line in r.stderr.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert r.returncode == 0, "\n".join(problems) or r.stderr[-3000:]
    api = (site / "api" / "index.html").read_text()
    for name in ("ranksight.load", "ranksight.analyze", "ranksight.analyses.Session", "ranksight.hta.TraceAnalysis"):
        assert f'id="{name}"' in api, name
    # a link from a page to a file outside docs/ points into the repository (docs/_hooks/repo_links.py)
    assert "/blob/main/src/ranksight/views/enclosing.py" in (site / "idle-causes" / "index.html").read_text()
    assert (site / "index.html").exists() and (site / "mcp" / "index.html").exists()
