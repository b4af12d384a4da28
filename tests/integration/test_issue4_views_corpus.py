"""memory, modules, mfu and diagnose run on the DLRM example and on every GPU trace of the shared
corpus, or say in one line why they cannot (MissingDataError)."""

from __future__ import annotations

from pathlib import Path

import pytest

import ranksight
from ranksight.analyses import run_analysis
from ranksight.errors import MissingDataError
from tests.conftest import SHARED, shared_or_skip

NAMES = ("memory", "modules", "mfu", "diagnose")
DLRM = Path(ranksight.__file__).parent / "data" / "examples" / "dlrm"


def _gpu_traces() -> list[str]:
    manifest = SHARED / "traces" / "MANIFEST.tsv"
    if not manifest.exists():
        return []
    rows = [line.split("\t")[0] for line in manifest.read_text().splitlines()[1:]]
    skip = ("_et.json", "gpu_metrics_", "cpu_only", "rank_non_gpu", "distributed_info_unavailable", "cupti_profiler")
    return [r for r in rows if ".json" in r and not any(s in r for s in skip)]


def _check(run: ranksight.Run, name: str) -> None:
    try:
        res = run_analysis(name, run)
    except MissingDataError as err:
        assert "\n" not in str(err) and str(err)
        return
    assert res.tables


@pytest.mark.parametrize("name", NAMES)
def test_dlrm_example(name):
    _check(ranksight.load(str(DLRM)), name)


@pytest.mark.shared
@pytest.mark.parametrize("rel", _gpu_traces() or ["(shared traces absent)"])
def test_shared_gpu_trace(rel):
    path = shared_or_skip(f"traces/{rel}")
    run = ranksight.load(str(path))
    for name in NAMES:
        _check(run, name)


def test_cli_views_on_dlrm(cli):
    for args in (("mfu",), ("memory", "--points", "5"), ("modules",)):
        r = cli("analyze", *args, str(DLRM))
        assert r.returncode in (0, 2), r.stderr
        if r.returncode == 2:
            assert r.stderr.count("\n") == 1 and "error:" in r.stderr
