"""Notebook figures added to ranksight.report.plots for the report's views (plotly, optional)."""

from __future__ import annotations

import warnings

import pandas as pd
import pytest

import ranksight
from ranksight.analyses import run_analysis


@pytest.fixture(scope="module")
def go():
    try:
        import plotly.graph_objects as go
    except ImportError:
        msg = "SKIPPED LOUDLY: plotly is not installed (pip install ranksight[plot]); figure tests did not run"
        warnings.warn(msg)
        pytest.skip(msg)
    return go


def test_memory_and_memcpy_figures(go, data):
    from ranksight.report.plots import memcpy_bandwidth_figure, memory_curve_figure

    run = ranksight.load(data("tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz"))
    curve = run_analysis("memory", run)["curve"]
    fig = memory_curve_figure(curve)
    assert isinstance(fig, go.Figure) and sum(len(t.x) for t in fig.data if "allocated" in t.name) == curve.height
    copies = run_analysis("memcpy-bw", run)["copies"]
    fig = memcpy_bandwidth_figure(copies)
    assert sum(len(t.y) for t in fig.data) == copies.height


def test_wait_heatmap_and_diff_bars(go, demo_run):
    from ranksight.report.plots import diff_bars_figure, wait_heatmap_figure

    w = run_analysis("stragglers", demo_run)["wait_by_step"]
    fig = wait_heatmap_figure(w)
    assert len(fig.data[0].z) == 8 and len(fig.data[0].x) == w.width - 1
    df = pd.DataFrame(
        {"control_counts": [1, 2, 3], "test_counts": [1, 4, 0], "diff_counts": [0, 2, -3]}, index=["a", "b", "c"]
    )
    fig = diff_bars_figure(df, "counts", "diff_counts", "calls")
    assert [list(t.y) for t in fig.data] == [["c", "b"], ["c", "b"]]
    assert diff_bars_figure(df.iloc[:1], "counts", "diff_counts", "calls") is None
