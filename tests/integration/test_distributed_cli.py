"""The distributed analyses on real traces: every name on the DLRM example, the 2-rank HTA pair,
the 4-rank gloo traces and a single-rank trace (in-process), and the CLI as a subprocess."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import ranksight
from ranksight.analyses import run_analysis
from ranksight.data import example_path

NAMES = ["collectives", "alignment", "bandwidth", "stragglers", "alpha-beta", "exposed-comm", "bubble", "all-to-all"]
DATA = Path(__file__).resolve().parents[1] / "data"
SETS = {
    "dlrm": example_path("dlrm"),
    "hta_pair": DATA / "hta/trace_filter",
    "gloo": DATA / "generated/cpu-ddp-gloo-4ranks",
    "single": DATA / "hta/nccl_parser_config",
}


@pytest.fixture(scope="module", params=sorted(SETS))
def loaded(request: pytest.FixtureRequest) -> tuple[str, ranksight.Run]:
    return request.param, ranksight.load(SETS[request.param])


def test_every_name_runs(loaded: tuple[str, ranksight.Run]) -> None:
    name, run = loaded
    for a in NAMES:
        res = run_analysis(a, run)
        assert res.tables, a
        if name == "single" and a not in ("exposed-comm", "bubble"):
            assert any(n.startswith("cross-rank analysis needs several ranks") for n in res.notes), a


def test_gloo_straggler_named() -> None:
    res = run_analysis("stragglers", ranksight.load(SETS["gloo"]))
    assert res["ranks"]["rank"][0] == 2  # step 4: rank 2 enqueues its buckets ~0.22 s late
    assert set(res["instances"]["cause"].to_list()) == {"compute"}


def test_cli_stragglers_on_example(cli) -> None:  # noqa: ANN001
    r = cli("analyze", "stragglers", str(example_path("dlrm")))
    assert r.returncode == 0, r.stderr
    assert "straggler: rank 7 arrived last at 5 of 8 collectives" in r.stdout


def test_cli_collectives_csv_and_no_align(cli) -> None:  # noqa: ANN001
    r = cli("analyze", "collectives", str(SETS["gloo"]), "--no-align", "--format", "csv")
    assert r.returncode == 0, r.stderr
    assert "gloo_annotation" in r.stdout and "also: instances" in r.stderr  # csv: one table, the others named


def test_cli_alpha_beta_predict(cli) -> None:  # noqa: ANN001
    r = cli("analyze", "alpha-beta", str(example_path("dlrm")), "--predict", "1MiB", "--format", "json")
    assert r.returncode == 0, r.stderr
    assert '"predictions"' in r.stdout and "1048576" in r.stdout


def test_cli_single_rank_one_line(cli) -> None:  # noqa: ANN001
    r = cli("analyze", "stragglers", str(SETS["single"]))
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("cross-rank analysis needs several ranks") == 1


def test_cli_nccl_log_with_traces(cli) -> None:  # noqa: ANN001
    r = cli("nccl-log", str(DATA / "nccl_logs/dlrm-8ranks.log.gz"), "--traces", str(example_path("dlrm")))
    assert r.returncode == 0, r.stderr
    assert "64 of 64 traced collectives matched" in r.stdout


def test_cli_nccl_log_missing_file(cli, tmp_path: Path) -> None:  # noqa: ANN001
    r = cli("nccl-log", str(tmp_path / "absent.log"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1


def test_cli_nccl_log_topology_csv(cli) -> None:  # noqa: ANN001
    logs = DATA / "nccl_logs"
    r = cli(
        "nccl-log",
        str(logs / "cluster-gpu-node-a.log"),
        str(logs / "cluster-gpu-node-b.log"),
        "--topology",
        "--format",
        "json",
    )
    assert r.returncode == 0, r.stderr
    tables = json.loads(r.stdout)["tables"]
    assert "rings" in tables and "trees" in tables and "NET/IB/0/GDRDMA" in r.stdout
