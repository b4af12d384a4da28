"""mfu on real traces: the MI300X of a ROCm trace whose GPU events carry device 2 while its one
deviceProperties entry has id 0 (``info`` names it, and now so does ``mfu``), and a trace where
MFU cannot be computed (empty with a note in ``analyze mfu`` and ``summary``, not 0)."""

from __future__ import annotations

import csv

import pytest

import ranksight
from ranksight.analyses import run_analysis
from ranksight.report.headline import build_summary

BERT_MI300 = "tracelens/mi300/gaunernst_bert-small-uncased__1016001.json.gz"
TRITON = "hta/triton_example/triton_example.json.gz"


def test_mi300x_named_by_info_is_mfus_gpu(data) -> None:
    run = ranksight.load(data(BERT_MI300), cache=False)
    t = run[0]
    assert t.meta.devices_used == [2] and [p["id"] for p in t.meta.device_properties] == [0]
    assert run_analysis("info", run)["files"]["gpu"].to_list() == ["AMD Instinct MI300X VF"]
    res = run_analysis("mfu", run)
    (s,) = res["steps"].to_dicts()
    assert (s["gpu"], s["peak_tflop_per_s"], s["note"]) == ("MI300X", pytest.approx(1307.4), None)
    assert set(res["ops"]["dtype"].to_list()) == {"bf16"}
    assert s["mfu"] == pytest.approx(s["achieved_tflop_per_s"] / 1307.4, rel=1e-12)
    assert s["mfu"] == pytest.approx(s["model_gflop"] / 1e3 / (s["step_us"] / 1e6) / 1307.4, rel=1e-12)
    assert not any("no peak" in n for n in res.notes)


def test_mfu_that_cannot_be_computed_is_empty_with_a_note(data) -> None:
    """The Triton example records no op with a FLOP formula: MFU was printed as 0.00."""
    run = ranksight.load(data(TRITON), cache=False)
    (s,) = run_analysis("mfu", run)["steps"].to_dicts()
    assert (s["model_gflop"], s["achieved_tflop_per_s"], s["mfu"]) == (None, None, None)
    assert s["note"] == "no op in this step has a FLOP formula and input shapes"
    doc = build_summary(run)
    assert doc.tables["per_rank"]["mfu_pct"].to_list() == [None]
    assert "`mfu`: mfu_pct empty on rank 0: no op in this step has a FLOP formula and input shapes" in doc.notes


def test_summary_cli_prints_no_zero_mfu(cli, data) -> None:
    out = cli("summary", str(data(TRITON)), "--no-cache", "--format", "csv")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()  # csv: the main table, per_rank
    cols, row = csv.reader(lines[0:2])
    assert row[cols.index("mfu_pct")] == ""
