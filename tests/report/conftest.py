"""Fixtures shared by the report tests: the example's run, payload and HTML, built once."""

from __future__ import annotations

import pytest

import ranksight
from ranksight.data import example_path


@pytest.fixture(scope="session")
def demo_run():
    return ranksight.load(example_path("dlrm"))


@pytest.fixture(scope="session")
def demo_ctx(demo_run):
    """Analysis results of the example, computed once for every test that needs them."""
    from ranksight.report.html.sections import Ctx

    return Ctx(demo_run)


@pytest.fixture(scope="session")
def demo_doc(demo_run, demo_ctx):
    from ranksight.report.html import build_payload

    return build_payload(demo_run, title="ranksight demo: 8-rank DLRM training step", ctx=demo_ctx)


@pytest.fixture(scope="session")
def demo_html(demo_doc):
    from ranksight.report.html import render_html

    return render_html(demo_doc)
