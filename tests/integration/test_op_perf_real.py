"""op-perf on real traces: on every corpus trace with shapes the kernel time of the op groups sums to
the GPU time attributed to ops, and attributed + unattributed is all the GPU time; the model's
FLOPs and bytes of real GEMMs and attention equal the hand-computed ones; the CLI prints the table."""

from __future__ import annotations

import csv
import io
import warnings

import polars as pl
import pytest

import ranksight
from ranksight.analyses import run_analysis
from ranksight.errors import MissingDataError

BERT_H100 = "tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz"
QWEN_H100 = "tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
LOCAL = [
    BERT_H100,
    "tracelens/mi300/gaunernst_bert-small-uncased__1016001.json.gz",
    "tracelens/mi300/facebook_timesformer-base-finetuned-k400__1016002.json.gz",
    "tracelens/mi300/resnet_act_checkpoint.json.gz",
    "tracelens/torch_compile_triton/trace.json.gz",
    "kineto/2021-07-08_c6e5fe20/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz",
    "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
]


def _check_attribution(run: ranksight.Run) -> pl.DataFrame:
    res = run_analysis("op-perf", run)
    ops, attr = res["ops"], res["attribution"]
    per = ops.group_by("rank").agg(pl.col("kernel_us_sum").sum()).join(attr, on="rank")
    for r in per.to_dicts():
        assert r["kernel_us_sum"] == pytest.approx(r["attributed_us"], rel=1e-12, abs=1e-9)
        assert r["attributed_us"] + r["unattributed_us"] == pytest.approx(r["gpu_us"], rel=1e-12, abs=1e-9)
        assert r["no_launch_us"] + r["outside_ops_us"] == pytest.approx(r["unattributed_us"], abs=1e-9)
        assert r["modelled_us"] + r["no_model_us"] == pytest.approx(r["attributed_us"], rel=1e-12, abs=1e-9)
    # GPU time of the trace itself: every kernel, memcpy and memset with a duration
    for t in run:
        g = t.gpu_events.filter(pl.col("dur_ns").is_not_null())
        (a,) = attr.filter(pl.col("rank") == t.rank).to_dicts()
        assert a["gpu_us"] == int(g["dur_ns"].sum()) / 1e3
    # what has a roofline has it whole; no model means no numbers
    ok = ops.filter(pl.col("model") == "yes")
    assert ok["pct_of_roofline"].null_count() == 0 and ok["bound"].null_count() == 0
    nm = ops.filter(pl.col("model").str.starts_with("no model"))
    assert nm["pct_of_roofline"].null_count() == nm.height
    return ops


@pytest.mark.parametrize("rel", LOCAL)
def test_attribution_on_local_traces(data, rel: str) -> None:
    _check_attribution(ranksight.load(data(rel), cache=False))


def test_attribution_on_every_corpus_trace_with_shapes(shared_traces) -> None:
    seen = 0
    for p in sorted(shared_traces.rglob("*.json*")):
        if "_et.json" in p.name or "gpu_metrics" in p.name:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                run = ranksight.load(p, cache=False)
            except ranksight.errors.RanksightError:
                continue
        if all(t.table("op")["input_dims"].is_null().all() for t in run):
            continue  # no shapes
        try:
            ops = _check_attribution(run)
        except MissingDataError:
            continue  # shapes but no GPU work launched by an op (CPU-only)
        assert ops.height > 0
        seen += 1
    assert seen >= 20


def test_real_gemm_and_attention_costs(shared_traces) -> None:
    """Qwen1.5-0.5B on an H100: the FLOPs and bytes per call of its largest GEMM and its causal
    flash attention, by hand (bytes agree with TraceLens's "Data Moved" of the same calls)."""
    run = ranksight.load(shared_traces / QWEN_H100, cache=False)
    ops = run_analysis("op-perf", run)["ops"]
    mm = ops.filter((pl.col("name") == "aten::mm") & (pl.col("input_dims") == "[[8944,1024],[1024,2816]]")).row(
        0, named=True
    )
    assert mm["gflop_per_call"] == pytest.approx(2 * 8944 * 1024 * 2816 / 1e9, rel=1e-12)
    assert mm["bytes_per_call"] == (8944 * 1024 + 1024 * 2816 + 8944 * 2816) * 2 == 71.0078125 * 2**20
    assert (mm["precision"], mm["tensor_cores"], mm["peak_tflop_per_s"], mm["bound"]) == (
        "bf16",
        "yes",
        989.4,
        "compute",
    )
    fa = ops.filter(pl.col("name") == "aten::_flash_attention_forward").row(0, named=True)
    # B 16, H 16, S 559, D 64, causal (top-left): 559·560/2 query-key pairs
    assert fa["gflop_per_call"] == pytest.approx(2 * 16 * 16 * (559 * 560 // 2) * (64 + 64) / 1e9, rel=1e-12)
    assert fa["bytes_per_call"] == 4 * 16 * 559 * 16 * 64 * 2
    assert fa["category"] == "attention_fwd" and fa["model"] == "yes"


def test_cli_prints_the_op_table(cli, data) -> None:
    out = cli("analyze", "op-perf", str(data(BERT_H100)), "--no-cache", "--format", "csv")
    assert out.returncode == 0, out.stderr
    rows = list(csv.DictReader(io.StringIO(out.stdout)))
    assert rows and {"name", "category", "kernel_us_sum", "pct_of_roofline", "bound", "model"} <= set(rows[0])
    gemm = [r for r in rows if r["category"] == "gemm"]
    assert gemm and all(r["model"] == "yes" and float(r["pct_of_roofline"]) > 0 for r in gemm)
    table = cli("analyze", "op-perf", str(data(BERT_H100)), "--no-cache", "--top", "3")
    assert table.returncode == 0, table.stderr
    assert "aten::addmm" in table.stdout and "H100 SXM" in table.stdout
