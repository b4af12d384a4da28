"""Fixtures of the hostile-input battery: the big generated inputs (made once per session), and
the table of outcomes written at the end when ``RANKSIGHT_HOSTILE_TABLE=FILE`` is set (the table
in docs/robustness.md comes from it)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from _hostile import OUTCOMES, gzip_one_string, long_string_json


@pytest.fixture(scope="session")
def gzip_2gib_string(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2.1 MB gzip holding one event whose name is 2 GiB of ``a``."""
    return gzip_one_string(tmp_path_factory.mktemp("bomb") / "bomb.json.gz", 2 << 30)


@pytest.fixture(scope="session")
def json_200mb_name(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Plain JSON with one event whose name is 200 MB of ``b``."""
    return long_string_json(tmp_path_factory.mktemp("long") / "long.json", 200_000_000)


@pytest.fixture(scope="session", autouse=True)
def _outcome_table() -> Iterator[None]:
    yield
    out = os.environ.get("RANKSIGHT_HOSTILE_TABLE")
    if not out or not OUTCOMES:
        return
    lines = ["| Family | Case | Outcome | Detail |", "|---|---|---|---|"]
    for family, case, outcome, detail in OUTCOMES:
        lines.append(f"| {family} | {case} | {outcome} | {detail.replace('|', '/')} |")
    Path(out).write_text("\n".join(lines) + "\n")
