"""views/run_context.seed_name_tables: the run context's name table of every rank from one query
over the stacked events equals each rank's own (issue 19), and ``run_contexts`` reads them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal
from tests.conftest import DATA

import ranksight
from ranksight.analyses import Session
from ranksight.analyses.run_context import run_contexts
from ranksight.data import example_path
from ranksight.views import run_context as rc

_ORDER = ["kind", "name"]


@pytest.mark.parametrize(
    "folder", [example_path("dlrm"), DATA / "tracelens/mi300", DATA / "generated/h100/ddp-gloo-2ranks"]
)
def test_seeded_name_tables_equal_per_rank(folder: Path) -> None:
    run = ranksight.load(folder, cache=False)
    per = {r: rc._name_tables(run[r].scan(), []) for r in run.ranks}
    stacked = Session.of(run).stacked_events()
    assert stacked is not None
    rc.seed_name_tables([run[r] for r in run.ranks], stacked)
    for r in run.ranks:
        assert run[r].has_memo("run_context_names")
        got = rc._name_table(run[r])
        assert got.height > 0
        assert_frame_equal(got.sort(_ORDER), per[r].sort(_ORDER))


def test_run_contexts_read_the_seeded_tables() -> None:
    """On several small ranks the name tables come from one query over every rank, none per rank;
    the contexts equal those of each rank on its own."""
    run = ranksight.load(DATA / "generated/h100/ddp-gloo-2ranks", cache=False)
    calls: list[list[str]] = []
    real = rc._name_tables

    def spy(ev: Any, by: list[str]) -> pl.DataFrame:
        calls.append(by)
        return real(ev, by)

    rc._name_tables = spy  # type: ignore[assignment]
    try:
        got = run_contexts(run)
    finally:
        rc._name_tables = real  # type: ignore[assignment]
    assert calls == [["rank"]]
    alone = ranksight.load(DATA / "generated/h100/ddp-gloo-2ranks", cache=False)
    assert got == {r: rc._compute(alone[r]) for r in alone.ranks}
