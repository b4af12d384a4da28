"""1,024 small rank files through ``info``, ``summary`` and ``report`` (issue 19): every rank read
and shown, the slow rank named, the report under 10 MB with every rank's data in it (the
operator-level tables: the focus ranks').

The run is the hand-built one of tests/report/many_ranks.py at 1,024 ranks (rank 13 slow by known
amounts before each all-reduce). Heavy (minutes on the 2-core development machine: the analyses
still run rank by rank): not in the default run, ``pytest -m heavy`` (CI runs it as its own step).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.conftest import run_cli
from tests.report.many_ranks import write_run

from ranksight.report.html import read_payload

N = 1024
SLOW = 13  # tests/report/many_ranks.py: write_run's default slow rank


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return write_run(tmp_path_factory.mktemp("ranks1024") / "run", n_ranks=N)


@pytest.mark.heavy
def test_info_reads_every_rank(run_dir):
    r = run_cli("info", str(run_dir), "--no-cache", "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    ranks = doc["tables"]["ranks"] if "ranks" in doc["tables"] else next(iter(doc["tables"].values()))
    assert sorted(row["rank"] for row in ranks) == list(range(N))


@pytest.mark.heavy
def test_summary_names_the_slow_rank(run_dir):
    r = run_cli("summary", str(run_dir), "--no-cache", "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["ranks"] == list(range(N))
    assert sorted(row["rank"] for row in doc["tables"]["per_rank"]) == list(range(N))
    stragglers = [f for f in doc["tables"]["findings"] if f["rule"] == "straggler"]
    assert [f["ranks"] for f in stragglers] == ["13"]


@pytest.mark.heavy
def test_report_is_small_and_holds_every_rank(run_dir, tmp_path):
    out = tmp_path / "report.html"
    r = run_cli("report", str(run_dir), "--no-cache", "-o", str(out))
    assert r.returncode == 0, r.stderr
    size = out.stat().st_size
    assert size < 10 << 20, size
    doc = read_payload(out.read_text(encoding="utf-8"))
    blocks = {b["id"]: b for s in doc["sections"] for b in s["blocks"]}
    # every rank's row in the per-rank tables (none cut to the focus ranks), the slow rank named
    for bid in ("temporal-table", "ranks-headlines", "stragglers-ranks"):
        b = blocks[bid]
        assert "rank_subset" not in b, bid
        ranks = b["data"][[c["name"] for c in b["columns"]].index("rank")]
        assert sorted(set(ranks)) == list(range(N)), bid
    # the slow rank is the one the others wait for, the only outlier, and shown first
    detail = blocks["ranks-detail"]
    assert detail["ranks"] == list(range(N)) and detail["worst"][0] == SLOW and SLOW in detail["outliers"]
    # operator-level tables: computed for the focus ranks only (more than 64 ranks), and say so
    details = sorted(b for b in blocks if blocks[b].get("rank_subset", {}).get("reason") == "detail")
    assert "ops-table" in details
    for bid in details:
        sub = blocks[bid]["rank_subset"]
        assert sub["reason"] == "detail" and sub["of"] == N and sub["ranks"] == sorted(detail["focus"]), bid
        ranks = blocks[bid]["data"][[c["name"] for c in blocks[bid]["columns"]].index("rank")]
        assert set(ranks) <= set(detail["focus"]) and SLOW in ranks, bid
    S = doc["strings"]
    spread = blocks["ranks-spread"]
    names = [c["name"] for c in spread["columns"]]
    rows = [dict(zip(names, r, strict=True)) for r in zip(*spread["data"], strict=True)]
    wait = next(r for r in rows if S[r["metric"]] == "wait_caused_ms")
    assert S[wait["max_rank"]] == str(SLOW) and wait["outliers"] == 1
