"""Every step view runs on every trace in tests/data, or says in one line why it cannot."""

from __future__ import annotations

from pathlib import Path

import pytest

import ranksight
from ranksight.analyses import run_analysis
from ranksight.errors import MissingDataError

DATA = Path(__file__).resolve().parents[1] / "data"
TRACES = sorted(
    p for p in DATA.rglob("*.json*")
    if p.suffix in (".json", ".gz") and "memory_timeline" not in p.name and p.parent.name != "malicious"
)  # fmt: skip
VIEWS = ("overview", "gpu-metrics", "ops", "kernel-config")


@pytest.mark.parametrize("path", TRACES, ids=lambda p: str(p.relative_to(DATA)))
def test_views_run_or_explain(path: Path) -> None:
    run = ranksight.load([path])
    has_kernels = any(t.kind("kernel").height for t in run)
    for name in VIEWS:
        try:
            res = run_analysis(name, run)
        except MissingDataError as e:
            assert name in ("gpu-metrics", "kernel-config", "ops") and "\n" not in str(e)
            assert not has_kernels or name == "ops", (name, str(e))
            continue
        assert res.main.height > 0 or name == "ops", name
    steps = run_analysis("overview", run)["steps"]
    parts = [c for c in steps.columns if c.endswith("_us") and c != "total_us"]
    diff = (steps.select(parts).sum_horizontal() - steps["total_us"]).abs().max()
    assert diff is not None and diff < 1e-6  # type: ignore[operator]
