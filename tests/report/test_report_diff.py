"""The report's comparison section (``ranksight report --baseline BASE TEST``)."""

from __future__ import annotations

import sys
from pathlib import Path

import ranksight
from ranksight.report.html import build_payload

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from diff_traces import Op, write_steps  # noqa: E402

OPS = [
    Op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 0, 400),
    Op("aten::mm", 500, 100, kernels=[("gemm", 200)]),
]


def _section(doc: dict) -> dict:
    return next(s for s in doc["sections"] if s["slug"] == "diff")


def test_section_only_with_a_baseline(make_trace):
    base = ranksight.load(write_steps(make_trace, [1000, 1010, 990, 1000], OPS))
    test = ranksight.load(write_steps(make_trace, [1400, 1410, 1390, 1400], OPS))
    plain = _section(build_payload(test))
    assert not plain["shown"] and "--baseline" in plain["reason"]
    doc = build_payload(test, baseline=(base, ("before", "after")))
    sec = _section(doc)
    assert sec["shown"] and sec["group"] == "Findings"
    ids = [b["id"] for b in sec["blocks"]]
    assert ids[:3] == ["diff-summary-text", "diff-breakdown", "diff-summary"] and "diff-kernels" in ids
    bar = next(b for b in sec["blocks"] if b["id"] == "diff-breakdown")
    assert bar["chart"] == "bar" and len(bar["series"]) >= 1
    notes = [doc["strings"][i] for i in sec["notes"]]
    assert any(n.startswith("significance: Welch's t-test over steps") for n in notes)
    texts = [doc["strings"][b["text"]] for b in sec["blocks"] if b["type"] == "text"]
    assert texts[0].startswith("after is 40.0% slower per step than before")
    assert _section(build_payload(test))["shown"] is False  # the baseline is a parameter of one report


def test_report_cli_baseline(cli, make_trace, tmp_path):
    from ranksight.report.html import read_payload

    base = write_steps(make_trace, [1000, 1010, 990, 1000], OPS)
    test = write_steps(make_trace, [1400, 1410, 1390, 1400], OPS)
    out = tmp_path / "r.html"
    r = cli("report", str(test), "--baseline", str(base), "-o", str(out))
    assert r.returncode == 0, r.stderr
    doc = read_payload(out.read_text())
    sec = _section(doc)
    assert sec["shown"]
    first = next(b for b in sec["blocks"] if b["type"] == "text")
    assert doc["strings"][first["text"]].startswith(
        f"{Path(test).stem} is 40.0% slower per step than {Path(base).stem}"
    )
