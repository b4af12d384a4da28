"""No analysis failure is a note while the command exits 0, and no library warning reaches the
terminal raw (issue 24, item 2).

A bug in one analysis is caught so that the rest of the output survives (``Session.try_result``,
the report's sections); the command then exits 3 with one ``internal error`` line saying which
analysis failed. A warning from a library (numpy's ``RuntimeWarning`` and the like) is not shown
unless ``-v`` asks for it; ranksight's own warnings are.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import sys
import warnings

import pytest
from _fault_helpers import case, check_table
from _hostile import EVENTS

from ranksight.analyses import _base
from ranksight.analyses._base import REGISTRY, load_all
from ranksight.cli import main
from ranksight.errors import RanksightWarning


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        warnings.simplefilter("always")
        rc = main(list(args))
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture
def trace(make_trace):  # noqa: ANN001
    return str(make_trace(EVENTS, baseTimeNanoseconds=1_700_000_000_000_000_000))


def _patch(monkeypatch: pytest.MonkeyPatch, name: str, wrap) -> None:  # noqa: ANN001
    load_all()
    spec = REGISTRY[name]
    monkeypatch.setitem(_base.REGISTRY, name, dataclasses.replace(spec, func=wrap(spec.func)))


@case(
    "failures",
    "an analysis raises (a bug) inside `summary`",
    "clear error",
    "what could be computed is printed, then exit 3 with one line: internal error: analysis `summary` failed: ...; "
    "the output above is incomplete (was: exit 0 with a note)",
)
def test_an_analysis_that_fails_makes_the_command_fail(monkeypatch, trace):
    def wrap(func):  # noqa: ANN001, ANN202
        def boom(run, **kw):  # noqa: ANN001, ANN003, ANN202
            raise ValueError("cannot convert float NaN to integer")

        return boom

    _patch(monkeypatch, "summary", wrap)
    rc, out, err = _cli("summary", "--no-cache", trace)
    assert rc == 3, err
    assert "per_rank" in out  # what could be computed is still printed
    lines = err.strip().splitlines()
    assert lines[-1] == (
        "ranksight: internal error: analysis `summary` failed: ValueError: cannot convert float NaN to integer; "
        "the output above is incomplete (a bug: please report it)"
    )
    assert not any("UserWarning" in ln for ln in lines)


@case(
    "failures",
    "a numpy RuntimeWarning and a RanksightWarning inside an analysis",
    "correct result",
    "exit 0; only `ranksight: warning: ...` on stderr; with `-v` also `ranksight: debug: RuntimeWarning: ...`",
)
def test_a_library_warning_is_not_shown_unless_asked(monkeypatch, trace):
    def wrap(func):  # noqa: ANN001, ANN202
        def noisy(run, **kw):  # noqa: ANN001, ANN003, ANN202
            warnings.warn("invalid value encountered in divide", RuntimeWarning, stacklevel=1)
            warnings.warn("a note for the user", RanksightWarning, stacklevel=1)
            return func(run, **kw)

        return noisy

    _patch(monkeypatch, "temporal", wrap)
    rc, out, err = _cli("analyze", "temporal", "--no-cache", trace)
    assert rc == 0 and out
    assert err.strip().splitlines() == ["ranksight: warning: a note for the user"]
    rc, out, err = _cli("-v", "analyze", "temporal", "--no-cache", trace)
    assert rc == 0
    assert any(
        ln.startswith("ranksight: debug: RuntimeWarning: invalid value encountered in divide (")
        for ln in err.splitlines()
    ), err


def test_docs_table():
    check_table(sys.modules[__name__], "failures")
