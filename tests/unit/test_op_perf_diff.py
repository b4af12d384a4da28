"""Operators of two runs side by side (views/diff_op_perf): the key (vendor-neutral name, tensor
shapes, dtypes), per-call ratio, per-rank time, one-side-only operators, and the categories that
explain the difference; and the diff on real traces (an H100 trace against an MI300X trace)."""

from __future__ import annotations

import json

import polars as pl
import pytest

import ranksight
from ranksight.analyses.diff import diff
from ranksight.views.diff_op_perf import op_key, op_perf_diff

BF = "c10::BFloat16"


def _ops(rows: list[dict]) -> pl.DataFrame:
    base = {
        "rank": 0,
        "count": 1,
        "kernel_us_sum": 0.0,
        "gflop_per_call": None,
        "lost_us": None,
        "model": "no model",
        "gpu": "H100 SXM",
        "category": "gemm",
        "input_type": json.dumps([BF, BF]),
    }
    return pl.DataFrame([{**base, **r} for r in rows]).with_columns(
        pl.col("gflop_per_call").cast(pl.Float64), pl.col("lost_us").cast(pl.Float64)
    )


def test_key_is_vendor_neutral_and_ignores_scalars() -> None:
    # cudnn_convolution(input, weight, padding, ...) and miopen_convolution(input, weight, bias, padding, ...)
    cu = op_key("aten::cudnn_convolution", "[[8,3,32,32],[16,3,3,3],[],[],[]]", json.dumps([BF, BF, "", "", ""]))
    mi = op_key("aten::miopen_convolution", "[[8,3,32,32],[16,3,3,3],[],[]]", json.dumps([BF, BF, "", ""]))
    assert cu == mi == ("aten::dnn_convolution", "[[8,3,32,32],[16,3,3,3]]", f'["{BF}","{BF}"]')
    assert op_key("aten::mm", None, None) == ("aten::mm", "[]", "[]")


def test_side_by_side() -> None:
    dims = json.dumps([[64, 128], [128, 32]])
    base = _ops(
        [
            # two ranks: per-rank time is the side's total over its ranks
            {"rank": 0, "name": "aten::mm", "input_dims": dims, "count": 10, "kernel_us_sum": 100.0,
             "gflop_per_call": 0.5, "lost_us": 50.0, "model": "yes"},
            {"rank": 1, "name": "aten::mm", "input_dims": dims, "count": 10, "kernel_us_sum": 140.0,
             "gflop_per_call": 0.5, "lost_us": 70.0, "model": "yes"},
            {"rank": 0, "name": "aten::add", "category": "elementwise_binary", "input_dims": "[[4],[4]]",
             "count": 2, "kernel_us_sum": 8.0},
        ]
    )  # fmt: skip
    test = _ops(
        [
            {"rank": 0, "name": "aten::mm", "input_dims": dims, "count": 20, "kernel_us_sum": 300.0,
             "gflop_per_call": 0.5, "lost_us": 30.0, "model": "yes", "gpu": "MI300X"},
            {"rank": 0, "name": "myext::op", "category": "other", "input_dims": None, "input_type": None,
             "count": 3, "kernel_us_sum": 6.0, "gpu": "MI300X"},
        ]
    )  # fmt: skip
    ops, cats = op_perf_diff(base, test, ("h100", "mi300x"))
    r = {o["op"]: o for o in ops.to_dicts()}
    mm = r["aten::mm"]
    assert (mm["base_calls"], mm["test_calls"]) == (20, 20)
    assert (mm["base_kernel_us"], mm["test_kernel_us"], mm["delta_us"]) == (120.0, 300.0, 180.0)
    assert (mm["base_us_per_call"], mm["test_us_per_call"], mm["ratio"]) == (12.0, 15.0, 1.25)
    # TFLOP/s over the modelled time; % of roofline time-weighted
    assert mm["base_tflop_per_s"] == pytest.approx(20 * 0.5 / 240 * 1e3)
    assert mm["test_tflop_per_s"] == pytest.approx(20 * 0.5 / 300 * 1e3)
    assert mm["base_pct_of_roofline"] == pytest.approx(50.0)
    assert mm["test_pct_of_roofline"] == pytest.approx(90.0)
    assert mm["only"] is None and (mm["base_gpu"], mm["test_gpu"]) == ("H100 SXM", "MI300X")
    assert r["aten::add"]["only"] == "h100" and r["aten::add"]["delta_us"] == -4.0  # 8 µs over 2 ranks
    assert r["myext::op"]["only"] == "mi300x" and r["myext::op"]["ratio"] is None
    assert ops["op"].to_list()[0] == "aten::mm"  # the largest |delta| first
    c = {x["category"]: x for x in cats.to_dicts()}
    total = 180.0 - 4.0 + 6.0
    assert c["gemm"]["share_of_delta_pct"] == pytest.approx(180 / total * 100)
    assert (c["other"]["one_side_only"], c["elementwise_binary"]["one_side_only"]) == (1, 1)
    assert cats["category"].to_list()[0] == "gemm"


def test_cross_vendor_diff_on_real_traces(data) -> None:
    """BERT-small on an H100 against the same model on an MI300X: every operator matched."""
    b = ranksight.load(data("tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz"), cache=False)
    t = ranksight.load(data("tracelens/mi300/gaunernst_bert-small-uncased__1016001.json.gz"), cache=False)
    res = diff(b, t, labels=("h100", "mi300x"))
    ops = res["op_perf"]
    assert ops["only"].null_count() == ops.height  # nothing on one side only
    assert set(ops["base_gpu"].unique()) == {"H100 SXM"} and set(ops["test_gpu"].unique()) == {"MI300X"}
    fa = ops.filter(pl.col("op") == "aten::_flash_attention_forward").row(0, named=True)
    assert (fa["base_calls"], fa["test_calls"]) == (4, 4) and fa["ratio"] > 1
    cats = res["op_perf_categories"]
    assert cats["delta_us"].sum() == pytest.approx(ops["delta_us"].sum())
    assert cats["share_of_delta_pct"].sum() == pytest.approx(100.0)
    titles = [s["title"] for s in __import__("ranksight.report.diff", fromlist=["x"]).diff_sections(res)]
    assert any(t.startswith("Operators side by side") for t in titles)
