"""``ranksight report``, ``summary`` and ``demo`` as subprocesses on real traces."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ranksight.cli.report import default_output
from ranksight.report.html import read_payload

ROOT = Path(__file__).resolve().parents[2]


def test_default_output_names(tmp_path):
    d = tmp_path / "my run"
    d.mkdir()
    assert default_output([str(d)]) == "my_run.report.html"
    assert default_output(["x/rank0.pt.trace.json.gz"]) == "rank0.report.html"
    assert default_output(["a/r0.json", "a/r1.json"]) == "a.report.html"
    assert default_output(["a/r0.json", "b/r1.json"]) == "ranksight-report.report.html"
    assert default_output(["<evil>.json"]) == "evil.report.html"


def test_report_writes_refuses_and_forces(cli, data, tmp_path):
    src = str(data("hta/trace_filter"))
    r = cli("report", src, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    out = tmp_path / "trace_filter.report.html"
    assert r.stdout.strip().splitlines()[-1] == "trace_filter.report.html" and out.exists()
    doc = read_payload(out.read_text(encoding="utf-8"))
    assert doc["ranks"] == [0, 1]
    mtime = out.stat().st_mtime_ns
    again = cli("report", src, cwd=str(tmp_path))
    assert again.returncode == 2 and "--force" in again.stderr and out.stat().st_mtime_ns == mtime
    forced = cli("report", str(data("malicious")), "-o", str(out), "--force")
    assert forced.returncode == 0 and forced.stdout.strip().endswith(str(out))
    assert read_payload(out.read_text(encoding="utf-8"))["ranks"] == [0, 1] and out.stat().st_mtime_ns != mtime
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".ranksight-")]  # no temp file left


def test_report_refuses_to_overwrite_input(cli, make_trace):
    p = make_trace(
        [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2, "args": {"stream": 7}}]
    )
    r = cli("report", str(p), "-o", str(p), "--force")
    assert r.returncode == 2 and "input" in r.stderr


def test_report_rank_selection(cli, data, tmp_path):
    out = tmp_path / "r1.html"
    r = cli("report", str(data("malicious")), "--rank", "1", "-o", str(out))
    assert r.returncode == 0, r.stderr
    doc = read_payload(out.read_text(encoding="utf-8"))
    assert doc["ranks"] == [1]
    files = next(b for s in doc["sections"] for b in s["blocks"] if b["id"] == "overview-files")
    assert files["rows"] == 1


def test_report_title_and_names_escaped(cli, data, tmp_path):
    out = tmp_path / "m.html"
    r = cli("report", str(data("malicious")), "-o", str(out), "--title", "</script><b>t</b>")
    assert r.returncode == 0, r.stderr
    html = out.read_text(encoding="utf-8")
    assert "<b>t</b>" not in html and html.lower().count("<script") == 2
    assert "&lt;/script&gt;&lt;b&gt;t&lt;/b&gt;" in html


def _summary_validator():
    jsonschema = pytest.importorskip("jsonschema")
    return jsonschema.Draft202012Validator(json.loads((ROOT / "docs" / "summary-schema.json").read_text()))


def test_summary_json_schema(cli, data):
    r = cli("summary", str(data("hta/trace_filter")), "--format", "json", "--top", "2")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    _summary_validator().validate(doc)
    assert doc["schema"] == "ranksight-summary" and doc["version"] == 1
    rows = doc["tables"]["per_rank"]
    assert [x["rank"] for x in rows] == [0, 1]
    assert all(set(x) <= set(doc["columns"]) for x in rows)
    assert {"kernels", "gpu_busy_pct"} <= set(doc["columns"])
    assert max(sum(1 for k in doc["tables"]["top_kernels"] if k["rank"] == r) for r in (0, 1)) == 2


def test_summary_table_output(cli, data):
    r = cli("summary", str(data("malicious")), "--findings", "2")
    assert r.returncode == 0, r.stderr
    assert "per_rank" in r.stdout and "gpu_busy_pct" in r.stdout and "findings" in r.stdout
    assert "<svg onload=window.__pwned=4>" in r.stdout  # names printed as they are


def test_demo_writes_report_and_json_stays_clean(cli, tmp_path):
    r = cli("demo", "--format", "json", "-o", "d.html", cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)  # the path went to stderr
    _summary_validator().validate(doc)
    assert [x["rank"] for x in doc["tables"]["per_rank"]] == list(range(8))
    assert r.stderr.strip().endswith("d.html")
    size = (tmp_path / "d.html").stat().st_size
    assert 10_000 < size < 5 * 1024 * 1024
    # the demo replaces its own report, but not a foreign file
    (tmp_path / "other.html").write_text("<html>mine</html>")
    again = cli("demo", "-o", "other.html", cwd=str(tmp_path))
    assert again.returncode == 2 and "--force" in again.stderr
    assert (tmp_path / "other.html").read_text() == "<html>mine</html>"
