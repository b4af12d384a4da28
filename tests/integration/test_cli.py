"""The CLI as a subprocess on real traces."""

from __future__ import annotations

import json

import polars as pl


def test_demo_prints_all_eight_ranks(cli, tmp_path):
    r = cli("demo", "--format", "json", "--no-report", cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [row["rank"] for row in doc["tables"]["per_rank"]] == list(range(8))
    assert all(row["kernels"] > 200 for row in doc["tables"]["per_rank"])


def test_demo_table(cli, tmp_path):
    r = cli("demo", cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "ncclKernel_SendRecv" in r.stdout and "busy_pct" in r.stdout
    assert r.stdout.rstrip().endswith("ranksight-demo.html")


def test_info_on_real_traces(cli, data):
    r = cli("info", str(data("hta/trace_filter")), "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    files = doc["tables"]["files"]
    assert [f["rank"] for f in files] == [0, 1]
    assert files[0]["world_size"] == 128
    assert any("2 of 128 ranks" in n for n in doc["notes"])


def test_info_gloo_cpu_traces(cli, data):
    r = cli("info", str(data("generated/cpu-ddp-gloo-4ranks")), "--format", "csv")
    assert r.returncode == 0, r.stderr
    assert "rank" in r.stdout.splitlines()[1] or "rank" in r.stdout.splitlines()[0]


def test_summary_rank_filter(cli, data):
    r = cli("summary", str(data("hta/trace_filter")), "--rank", "1", "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [row["rank"] for row in doc["tables"]["per_rank"]] == [1]


def test_export_parquet(cli, data, tmp_path):
    out = tmp_path / "out"
    r = cli("export", str(data("hta/trace_filter")), "--to", str(out), "--tables")
    assert r.returncode == 0, r.stderr
    ev = pl.read_parquet(out / "rank0.events.parquet")
    assert ev.height == 4855 and "ts_ns" in ev.columns
    assert (out / "rank1.kernel.parquet").exists()
    again = cli("export", str(data("hta/trace_filter")), "--to", str(out))
    assert again.returncode == 2 and "--force" in again.stderr


def test_bad_input_one_line_exit_2(cli, tmp_path):
    p = tmp_path / "bad.json"
    p.write_text("{not json")
    r = cli("info", str(p))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and str(p) in lines[0] and "Traceback" not in r.stderr
    r = cli("-v", "info", str(p))
    assert r.returncode == 2 and "Traceback" in r.stderr


def test_missing_path_exit_2(cli):
    r = cli("info", "/no/such/dir")
    assert r.returncode == 2 and r.stderr.count("\n") == 1


def test_version_and_help(cli):
    r = cli("--version")
    assert r.returncode == 0 and "ranksight" in r.stdout
    r = cli("--help")
    assert r.returncode == 0 and "info" in r.stdout and "demo" in r.stdout
    r = cli("analyze", "--help")
    assert r.returncode == 0 and "summary" in r.stdout
    r = cli("nosuchcommand")
    assert r.returncode == 2
