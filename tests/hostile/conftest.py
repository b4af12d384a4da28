"""Fixtures of the hostile-input battery: the big generated inputs, made once per session."""

from __future__ import annotations

from pathlib import Path

import pytest
from _hostile import gzip_one_string, long_string_json


@pytest.fixture(scope="session")
def gzip_2gib_string(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2.1 MB gzip holding one event whose name is 2 GiB of ``a``."""
    return gzip_one_string(tmp_path_factory.mktemp("bomb") / "bomb.json.gz", 2 << 30)


@pytest.fixture(scope="session")
def json_200mb_name(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Plain JSON with one event whose name is 200 MB of ``b``."""
    return long_string_json(tmp_path_factory.mktemp("long") / "long.json", 200_000_000)
