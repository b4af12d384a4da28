"""Shared test fixtures.

- ``data(rel)``: a file under tests/data (real traces copied from ../shared with their licences);
- ``shared_traces``: ../shared/traces, skipped loudly when absent;
- ``make_trace(events, **top)``: writes a small hand-built Kineto trace and returns its path.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parent
DATA = TESTS / "data"
SHARED = TESTS.parents[1] / "shared"


def pytest_configure(config: pytest.Config) -> None:
    # never write into the user's cache from tests; with pytest-xdist (`-n auto`) each worker has a
    # cache folder of its own, so a test that clears or counts cache entries sees only its own
    import tempfile

    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if "RANKSIGHT_CACHE_DIR" not in os.environ:
        os.environ["RANKSIGHT_CACHE_DIR"] = tempfile.mkdtemp(prefix="ranksight-test-cache-")
        os.environ["_RANKSIGHT_TEST_CACHE"] = "1"  # made here, not the user's: workers make their own
    elif worker and os.environ.get("_RANKSIGHT_TEST_CACHE") == "1":
        os.environ["RANKSIGHT_CACHE_DIR"] = tempfile.mkdtemp(prefix=f"ranksight-test-cache-{worker}-")


def data_path(rel: str) -> Path:
    p = DATA / rel
    if not p.exists():
        raise FileNotFoundError(f"test data missing: {p}")
    return p


@pytest.fixture
def data() -> Callable[[str], Path]:
    return data_path


def shared_or_skip(rel: str = "") -> Path:
    p = SHARED / rel
    if not p.exists():
        msg = f"SKIPPED LOUDLY: {p} is absent; this test needs ../shared beside the checkout"
        warnings.warn(msg)
        pytest.skip(msg)
    return p


@pytest.fixture
def shared_traces() -> Path:
    return shared_or_skip("traces")


@pytest.fixture
def shared_oracles() -> Path:
    return shared_or_skip("oracles/hta-0.6")


def write_trace(
    path: Path, events: list[dict[str, Any]], *, compact: bool = False, gz: bool = False, **top: Any
) -> Path:
    doc = {**top, "traceEvents": events}
    text = json.dumps(doc, separators=(",", ":")) if compact else json.dumps(doc, indent=1)
    if gz:
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


@pytest.fixture
def make_trace(tmp_path: Path) -> Callable[..., Path]:
    counter = {"n": 0}

    def make(events: list[dict[str, Any]], *, name: str | None = None, **kw: Any) -> Path:
        counter["n"] += 1
        gz = kw.get("gz", False)
        fname = name or f"trace{counter['n']}.json" + (".gz" if gz else "")
        return write_trace(tmp_path / fname, events, **kw)

    return make


def run_cli(*args: str, cwd: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run the ranksight CLI in a subprocess."""
    env = dict(os.environ)
    env.setdefault("COLUMNS", "200")
    return subprocess.run(
        [sys.executable, "-m", "ranksight", *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=600
    )


@pytest.fixture
def cli() -> Callable[..., subprocess.CompletedProcess[str]]:
    return run_cli
