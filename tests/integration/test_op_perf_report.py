"""The report's operator roofline (section ``op-perf``): its payload on a real H100 trace (one point
per modelled operator group, the ceilings of the precisions the ops were held to, the bandwidth;
schema-valid), and the chart drawn in a real browser (headless Chromium + Playwright; skips loudly
without them). With ``RANKSIGHT_SAVE_SCREENSHOT=1`` the roofline's screenshot goes to
docs/img/roofline.png (the README's picture)."""

from __future__ import annotations

import json
import os
import shutil
import warnings
from pathlib import Path

import polars as pl
import pytest

import ranksight
from ranksight.analyses import Session, run_analysis
from ranksight.report.html import build_payload, read_payload, write_report

ROOT = Path(__file__).resolve().parents[2]
BERT = "tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz"
QWEN = "tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
CHROMIUM = os.environ.get("RANKSIGHT_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


def _section(doc: dict) -> dict:
    (sec,) = [s for s in doc["sections"] if s["slug"] == "op-perf"]
    return sec


def _expected_points(run: ranksight.Run) -> int:
    ops = run_analysis("op-perf", run)["ops"]
    ok = ops.filter((pl.col("model") == "yes") & (pl.col("flop_per_byte") > 0) & (pl.col("achieved_tflop_per_s") > 0))
    return ok.height


def test_payload(data) -> None:
    run = ranksight.load(data(BERT), cache=False)
    doc = build_payload(Session(run), title="bert")
    sec = _section(doc)
    assert sec["shown"], sec.get("reason")
    ids = [b["id"] for b in sec["blocks"]]
    assert ids == ["op-perf-roofline-0", "op-perf-lost", "op-perf-categories", "op-perf-attribution"]
    chart = sec["blocks"][0]
    strings = doc["strings"]
    assert chart["chart"] == "roofline" and chart["bandwidth_tb_per_s"] == 3.35
    ceilings = {strings[c["name"]]: c["peak"] for c in chart["ceilings"]}
    assert ceilings["bf16 Tensor/Matrix Cores: 989.4 TFLOP/s"] == 989.4
    assert ceilings["fp32 vector: 67.0 TFLOP/s"] == 67.0
    assert sum(len(s["x"]) for s in chart["series"]) == _expected_points(run)
    assert {strings[s["name"]] for s in chart["series"]} >= {"gemm", "attention_fwd"}
    schema = json.loads((ROOT / "docs" / "report-schema.json").read_text())
    import jsonschema

    jsonschema.validate(doc, schema)


def test_no_section_without_a_known_gpu(make_trace) -> None:
    ev = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 10,
         "args": {"Input Dims": [[64, 64], [64, 64]], "Input type": ["float", "float"]}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 12, "dur": 2,
         "args": {"correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 100, "dur": 10,
         "args": {"correlation": 1, "device": 0, "stream": 7}},
    ]  # fmt: skip
    run = ranksight.load(make_trace(ev, deviceProperties=[{"id": 0, "name": "ARTEMIS"}]), cache=False)
    sec = _section(build_payload(Session(run), title="x"))
    assert not sec["shown"]
    assert "no rank has an operator with FLOPs, bytes and a GPU with known peaks and bandwidth" in sec["reason"]


def _skip(msg: str) -> None:
    msg = f"SKIPPED LOUDLY: {msg}"
    warnings.warn(msg)
    pytest.skip(msg)


def test_drawn_in_a_browser(tmp_path, shared_traces) -> None:
    if not CHROMIUM:
        _skip("chromium is not installed (apt-get install chromium); the roofline browser test did not run")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _skip("playwright is not installed (pip install playwright); the roofline browser test did not run")
    run = ranksight.load(shared_traces / QWEN, cache=False)
    path = tmp_path / "qwen.html"
    write_report(run, path, title="Qwen1.5-0.5B on an H100")
    doc = read_payload(path.read_text(encoding="utf-8"))
    chart = _section(doc)["blocks"][0]
    n = sum(len(s["x"]) for s in chart["series"])
    assert n == _expected_points(run) > 20
    errors: list[str] = []
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = b.new_page(viewport={"width": 1280, "height": 900})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(path.resolve().as_uri())
        page.wait_for_selector("body[data-ready='1']", timeout=15_000)
        fig = page.locator("#chart-op-perf-roofline-0")
        assert fig.get_attribute("data-points") == str(n)
        assert fig.locator("circle.pt").count() == n
        assert fig.locator("line[data-ceiling='bandwidth']").count() == 1
        assert fig.locator("line[data-ceiling='peak']").count() == len(chart["ceilings"])
        assert "memory 3.35 TB/s" in fig.inner_text() or "memory 3.35 TB/s" in fig.locator("svg").text_content()
        fig.scroll_into_view_if_needed()
        fig.screenshot(path=str(tmp_path / "roofline.png"))
        if os.environ.get("RANKSIGHT_SAVE_SCREENSHOT") == "1":
            fig.screenshot(path=str(ROOT / "docs" / "img" / "roofline.png"))
        b.close()
    assert errors == []
