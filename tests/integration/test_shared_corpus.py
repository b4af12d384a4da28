"""``ranksight info`` on every trace in ../shared/traces: success, or one clear line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import SHARED, run_cli

TRACES = SHARED / "traces"
FILES = sorted(p for p in TRACES.rglob("*") if p.is_file() and p.name.endswith((".json", ".json.gz"))) if TRACES.exists() else []


@pytest.mark.shared
@pytest.mark.parametrize("path", FILES or [None], ids=[str(p.relative_to(TRACES)) for p in FILES] or ["absent"])
def test_info_every_shared_trace(path: Path | None, shared_traces):
    assert path is not None
    r = run_cli("info", str(path), "--format", "json")
    if r.returncode != 0:
        assert r.returncode == 2, r.stderr
        assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    else:
        assert '"files"' in r.stdout
