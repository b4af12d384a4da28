"""Fixtures shared by the report tests: the example's run, payload and HTML, built once."""

from __future__ import annotations

import pytest

import ranksight
from ranksight.data import example_path


@pytest.fixture(scope="session")
def demo_run():
    return ranksight.load(example_path("dlrm"))


@pytest.fixture(scope="session")
def demo_session(demo_run):
    """Analysis results of the example, computed once for every test that needs them."""
    from ranksight.analyses import Session

    return Session(demo_run)


@pytest.fixture(scope="session")
def demo_doc(demo_session):
    from ranksight.report.html import build_payload

    return build_payload(demo_session, title="ranksight demo: 8-rank DLRM training step")


@pytest.fixture(scope="session")
def demo_html(demo_doc):
    from ranksight.report.html import render_html

    return render_html(demo_doc)


@pytest.fixture(scope="session")
def many_run_dir(tmp_path_factory):
    """40 hand-built ranks (more than MANY_RANKS), rank 13 slow by known amounts (many_ranks.py)."""
    from tests.report.many_ranks import write_run

    return write_run(tmp_path_factory.mktemp("many-ranks") / "run")


@pytest.fixture(scope="session")
def many_session(many_run_dir):
    """The 40 ranks' analyses, computed once for every test that needs them."""
    from ranksight.analyses import Session

    return Session(ranksight.load(many_run_dir))


@pytest.fixture(scope="session")
def many_doc(many_session):
    from ranksight.report.html import build_payload

    return build_payload(many_session, title="40 ranks, rank 13 slow")


@pytest.fixture(scope="session")
def many_html(many_doc):
    from ranksight.report.html import render_html

    return render_html(many_doc)
