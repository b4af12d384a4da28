"""``ranksight analyze memory --snapshot`` (with and without traces), ``ranksight report
--snapshot``, and a malicious snapshot given to the CLI (exit 2, one line, no code run)."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import polars as pl

from ranksight.report.html import read_payload

SNAPS = Path(__file__).resolve().parents[1] / "data" / "generated" / "memory_snapshots"
TRAIN = str(SNAPS / "train_step.pickle")


def test_analyze_memory_snapshot_alone(cli, tmp_path: Path) -> None:
    r = cli("analyze", "memory", "--snapshot", TRAIN, "-o", str(tmp_path))  # every table as a CSV file
    assert r.returncode == 0, r.stderr
    tabs = {f.stem: pl.read_csv(f) for f in tmp_path.glob("*.csv")}
    assert "snapshot_devices" in tabs and "snapshot_blocks" in tabs
    d = tabs["snapshot_devices"].row(0, named=True)
    assert (d["device"], d["reserved_bytes"], d["peak_allocated_bytes"], d["ooms"]) == (
        "cuda:0",
        176160768,
        167845888,
        0,
    )
    assert tabs["snapshot_blocks"]["top_frame"][0] == "__init__ (work/model.py:12)"


def test_analyze_memory_needs_traces_or_snapshot(cli) -> None:
    r = cli("analyze", "memory")
    assert r.returncode == 2 and "give TRACES or --snapshot" in r.stderr


def test_analyze_memory_snapshot_beside_traces(cli, data) -> None:
    r = cli("analyze", "memory", str(data("hta/trace_filter")), "--snapshot", TRAIN)
    assert r.returncode == 0, r.stderr
    assert "snapshot_devices" in r.stdout and "rank 0: no [memory] events" in r.stdout


class _Evil:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_malicious_snapshot_on_the_cli(cli, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    evil = tmp_path / "snapshot.pickle"
    evil.write_bytes(pickle.dumps({"segments": [], "device_traces": [_Evil(marker)]}))
    r = cli("analyze", "memory", "--snapshot", str(evil))
    assert r.returncode == 2
    assert "refused to unpickle" in r.stderr and "posix.system" in r.stderr
    assert "Traceback" not in r.stderr
    assert not marker.exists()


def test_report_with_snapshot_section(cli, data, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    r = cli("report", str(data("hta/trace_filter")), "--snapshot", str(SNAPS / "oom_2gpu.pickle.gz"), "-o", str(out))
    assert r.returncode == 0, r.stderr
    doc = read_payload(out.read_text(encoding="utf-8"))
    sec = next(s for s in doc["sections"] if s["slug"] == "memory-snapshot")
    assert sec["shown"] and sec["group"] == "Memory"
    ids = [b["id"] for b in sec["blocks"]]
    assert ids[:3] == ["memsnap-facts-cuda0", "memsnap-facts-cuda1", "memsnap-chart"]
    assert {"memsnap-oom", "memsnap-blocks", "memsnap-allocs", "memsnap-devices"} <= set(ids)
    no = tmp_path / "n.html"
    r = cli("report", str(data("hta/trace_filter")), "-o", str(no))
    sec = next(s for s in read_payload(no.read_text(encoding="utf-8"))["sections"] if s["slug"] == "memory-snapshot")
    assert not sec["shown"] and "--snapshot FILE" in sec["reason"]
