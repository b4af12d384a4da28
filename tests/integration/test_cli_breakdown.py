"""``ranksight analyze`` for the breakdown analyses: the CLI on the built-in example, and every
analysis on every trace in ../shared/traces (a result, or one clear line)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from tests.conftest import SHARED, run_cli

import ranksight
from ranksight.analyses import run_analysis
from ranksight.errors import RanksightError

EXAMPLE = str(Path(__file__).resolve().parents[2] / "src" / "ranksight" / "data" / "examples" / "dlrm")
NAMES = ("temporal", "idle", "kernel-types", "kernels", "kernel-spread", "overlap")


@pytest.mark.parametrize(
    ("args", "table", "rows"),
    [
        (["idle", "--rank", "0", "--stats", "--per-step", "--kernel-wait-us", "10", "--hta-compat"], "intervals", 11),
        (["kernel-types", "--include-memory", "false"], "kernel_types", 3),
    ],
)
def test_cli_on_example(args, table, rows):
    r = run_cli("--quiet", "analyze", *args, EXAMPLE, "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert len(doc["tables"][table]) == rows


def test_cli_temporal_csv_matches_hta_numbers():
    r = run_cli("--quiet", "analyze", "temporal", EXAMPLE, "--rank", "7", "--per-step", "--format", "csv")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()  # one table: the main one (--table NAME for another)
    assert lines[0].startswith("rank,kernel_time_us,") and lines[1] == "7,10967.0,8308.0,1059.0,1600.0,75.75,9.66,14.59"
    per_step = run_cli(
        "--quiet", "analyze", "temporal", EXAMPLE, "--rank", "7", "--per-step", "--format", "csv", "--table", "per_step"
    )
    assert per_step.returncode == 0 and per_step.stdout.startswith("rank,step,")


def test_cli_kernels_launch_view_without_kernel_config_is_one_line():
    r = run_cli("--quiet", "analyze", "kernels", EXAMPLE, "--view", "launch")
    try:
        import ranksight.analyses.kernel_config  # noqa: F401
    except ImportError:
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and "kernel_config" in r.stderr
    else:
        assert r.returncode == 0, r.stderr


TRACES = SHARED / "traces"
FILES = (
    sorted(p for p in TRACES.rglob("*") if p.is_file() and p.name.endswith((".json", ".json.gz")))
    if TRACES.exists()
    else []
)


@pytest.mark.shared
@pytest.mark.parametrize("path", FILES or [None], ids=[str(p.relative_to(TRACES)) for p in FILES] or ["absent"])
def test_every_breakdown_on_every_shared_trace(path: Path | None, shared_traces):
    assert path is not None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run = ranksight.load(path)
    except RanksightError:
        pytest.skip("not a loadable trace (covered by test_shared_corpus)")
    for name in NAMES:
        try:
            res = run_analysis(name, run)
        except RanksightError as e:
            assert "\n" not in str(e)
            continue
        assert res.tables
