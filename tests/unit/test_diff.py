"""``ranksight.analyses.diff`` on hand-built step traces, with values worked out by hand.

Traces come from ``diff_traces.step_events`` (module doc there). The pair used most:

- base: 4 steps of 1000, 1010, 990, 1000 µs; per step a DataLoader ``__next__`` of 400 µs at the
  step start (single-process iterator) and ``aten::mm`` at +500 µs launching a 200 µs GEMM;
- test: 4 steps of 700, 710, 690, 700 µs; a 100 µs DataLoader (multi-process iterator: another
  raw name, the same normalised one), ``aten::mm`` at +200 µs, the GEMM compiled with other
  template arguments (same normalised name).

So the step is 300 µs shorter (Welch: t = −300 / sqrt(2 × 66.67 / 4) = −51.96, 6 df), all of it
from the DataLoader; the GPU work is identical.
"""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest
from diff_traces import Op, write_steps

import ranksight
from ranksight.analyses import REGISTRY, names
from ranksight.analyses.diff import diff, gate, gate_samples
from ranksight.errors import MissingDataError, UsageError
from ranksight.views.diff_profile import rank_profile

BASE_LEN = [1000, 1010, 990, 1000]
TEST_LEN = [700, 710, 690, 700]
BASE_OPS = [
    Op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 0, 400),
    Op("aten::mm", 500, 100, kernels=[("void gemm_kernel<float, 128>(float*)", 200)]),
]
TEST_OPS = [
    Op("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", 0, 100),
    Op("aten::mm", 200, 100, kernels=[("void gemm_kernel<c10::Half, 64>(c10::Half*)", 200)]),
]


@pytest.fixture
def pair(make_trace):
    base = ranksight.load(write_steps(make_trace, BASE_LEN, BASE_OPS))
    test = ranksight.load(write_steps(make_trace, TEST_LEN, TEST_OPS))
    return base, test


def _row(df: pl.DataFrame, col: str, value: str) -> dict:
    rows = df.filter(pl.col(col) == value)
    assert rows.height == 1, (value, df)
    return rows.row(0, named=True)


def test_summary_step_time(pair):
    res = diff(*pair)
    st = _row(res["summary"], "metric", "step_time")
    assert st["unit"] == "ms"
    assert st["base_median"] == pytest.approx(1.0) and st["test_median"] == pytest.approx(0.7)
    assert st["base_iqr"] == pytest.approx(0.005)  # p25 = 997.5, p75 = 1002.5 µs
    assert st["delta"] == pytest.approx(-0.3) and st["delta_pct"] == pytest.approx(-30.0)
    assert st["p_value"] < 1e-6 and st["change"] == "decreased"
    assert st["ci_low"] < -0.28 and st["ci_high"] > -0.32  # ±t(6 df) × 5.77 µs
    assert res.samples["step_time"][0].tolist() == [1e6, 1.01e6, 0.99e6, 1e6]  # one sample per step (ns)
    assert "faster" in res.verdict and "enumerate(DataLoader)#__next__" in res.verdict


def test_summary_categories(pair):
    names()
    if "overview" not in REGISTRY:
        pytest.skip("the overview analysis is not in this checkout: categories are not compared")
    s = diff(*pair)["summary"]
    dl = _row(s, "metric", "dataloader")
    assert (dl["base_median"], dl["test_median"], dl["change"]) == (pytest.approx(0.4), pytest.approx(0.1), "decreased")
    for unchanged in ("kernel", "runtime", "cpu_exec", "other", "memcpy", "memset", "communication"):
        assert _row(s, "metric", unchanged)["change"] == "unchanged", unchanged
    assert _row(s, "metric", "kernel")["base_median"] == pytest.approx(0.2)
    assert _row(s, "metric", "other")["base_median"] == pytest.approx(0.397)  # len − 603 µs


def test_contributors_and_ops(pair):
    res = diff(*pair)
    c = res["contributors"]
    # only the DataLoader changed; its exposed time explains the whole step-time change
    assert c.height == 1
    r = c.row(0, named=True)
    assert (r["kind"], r["name"], r["base_us"], r["test_us"], r["delta_us"]) == (
        "op",
        "enumerate(DataLoader)#__next__",
        400.0,
        100.0,
        -300.0,
    )
    assert r["share_of_change_pct"] == pytest.approx(100.0)
    ops = res["ops"]
    dl = _row(ops, "name", "enumerate(DataLoader)#__next__")
    assert (dl["base_calls"], dl["test_calls"], dl["base_us"], dl["test_us"], dl["change"]) == (
        1.0,
        1.0,
        400.0,
        100.0,
        "decreased",
    )
    assert dl["base_share_pct"] == pytest.approx(40.0) and dl["test_share_pct"] == pytest.approx(100 / 7)
    mm = _row(ops, "name", "aten::mm")
    assert (mm["base_us"], mm["test_us"], mm["change"]) == (100.0, 100.0, "unchanged")
    assert _row(ops, "name", "ProfilerStep#*")["change"] == "decreased"
    assert set(ops["name"]) == {"ProfilerStep#*", "enumerate(DataLoader)#__next__", "aten::mm", "cudaLaunchKernel"}


def test_kernels_normalised_and_unchanged(pair):
    k = diff(*pair)["kernels"]
    assert k.height == 1
    r = k.row(0, named=True)
    assert (r["kernel"], r["test_kernel"], r["op"], r["match"]) == ("gemm_kernel", None, "aten::mm", "name")
    assert (r["base_calls"], r["base_us"], r["test_us"], r["base_mean_us"], r["change"]) == (
        1.0,
        200.0,
        200.0,
        200.0,
        "unchanged",
    )
    assert r["q_value"] == 1.0  # identical constant samples


def test_exposed_time_by_hand(make_trace):
    """A [0, 100] holds B [20, 50]; B launches a kernel on the GPU for [23, 60]; step 200 µs.

    A's self time [0, 20) + [50, 100) minus GPU [50, 60) = 60 µs; B's self [20, 21) + [21.05, 50)
    minus GPU [23, 50) = 2.95 µs; the launch 0.05 µs (GPU idle then); the step itself [100, 200)."""
    b = Op("aten::B", 20, 30, kernels=[("kern", 37)])
    a = Op("aten::A", 0, 100, children=[b])
    t = ranksight.load(write_steps(make_trace, [200], [a]))[0]
    ex = rank_profile(t)["exposed"].sort("name")
    assert dict(zip(ex["name"], ex["exposed_ns"])) == {
        "ProfilerStep#*": 100_000,
        "aten::A": 60_000,
        "aten::B": 2_950,
        "cudaLaunchKernel": 50,
    }


def test_dataloader_owns_its_children(make_trace):
    dl = Op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 0, 400, children=[Op("aten::div", 100, 50)])
    t = ranksight.load(write_steps(make_trace, [500], [dl]))[0]
    ex = rank_profile(t)["exposed"]
    assert dict(zip(ex["name"], ex["exposed_ns"])) == {
        "enumerate(DataLoader)#__next__": 400_000,
        "ProfilerStep#*": 100_000,
    }


def test_kernels_matched_through_their_op(make_trace):
    """Other GEMM names on the other side (another GPU vendor): matched by launching op, its input
    shapes and the kernel's position; a kernel under a new op is added."""
    d1, d2 = [[8, 16], [16, 32], [32]], [[64, 16], [16, 32], [32]]
    base_ops = [Op("aten::addmm", 100, 50, kernels=[("sm90_xmma_gemm_bf16_tilesize64x64", 50)], dims=d1),
                Op("aten::addmm", 300, 50, kernels=[("sm90_xmma_gemm_bf16_tilesize128x128", 80)], dims=d2),
                Op("aten::to", 600, 50, kernels=[("copy_kernel", 5)])]  # fmt: skip
    test_ops = [Op("aten::addmm", 100, 50, kernels=[("Cijk_Alik_Bljk_MT16x16", 60)], dims=d1),
                Op("aten::addmm", 300, 50, kernels=[("Cijk_Alik_Bljk_MT128x128", 70)], dims=d2),
                Op("aten::_to_copy", 600, 50, kernels=[("copy_kernel", 5)]),
                Op("aten::relu", 700, 50, kernels=[("relu_kernel", 10)])]  # fmt: skip
    base = ranksight.load(write_steps(make_trace, [1000, 1000], base_ops))
    test = ranksight.load(write_steps(make_trace, [1000, 1000], test_ops))
    k = diff(base, test)["kernels"]
    small = _row(k, "kernel", "sm90_xmma_gemm_bf16_tilesize64x64")
    assert (small["test_kernel"], small["op"], small["match"], small["base_us"], small["test_us"]) == (
        "Cijk_Alik_Bljk_MT16x16",
        "aten::addmm",
        "op + shapes",
        50.0,
        60.0,
    )
    large = _row(k, "kernel", "sm90_xmma_gemm_bf16_tilesize128x128")
    assert (large["test_kernel"], large["delta_us"]) == ("Cijk_Alik_Bljk_MT128x128", -10.0)
    copy = _row(k, "kernel", "copy_kernel")
    assert (copy["op"], copy["match"], copy["change"]) == ("aten::to → aten::_to_copy", "name, other op", "unchanged")
    relu = _row(k, "kernel", "relu_kernel")
    assert (relu["match"], relu["change"], relu["base_us"], relu["test_us"]) == (None, "added", 0.0, 10.0)
    assert k.height == 4


def test_one_step_sides_are_untested(make_trace):
    base = ranksight.load(write_steps(make_trace, [1000], BASE_OPS))
    test = ranksight.load(write_steps(make_trace, [700], TEST_OPS))
    res = diff(base, test)
    st = _row(res["summary"], "metric", "step_time")
    assert st["change"] == "untested" and st["p_value"] is None and st["delta"] == pytest.approx(-0.3)
    assert "not tested" in res.verdict
    with pytest.raises(MissingDataError, match="at least 2 steps"):
        gate(res, threshold=0.05)


# ---- gate -----------------------------------------------------------------------------------


def test_gate_regression_noise_and_threshold(pair):
    base, test = pair
    assert not gate(diff(base, test), threshold=0.05).failed  # faster: never a failure
    slow = diff(test, base)  # 700 → 1000 µs: +42.9 %, p ≈ 1e-9
    v = gate(slow, threshold=0.05)
    assert v.failed and v.line.startswith("FAIL: step_time +42.9% (mean 0.7 → 1 ms")
    assert v.change == pytest.approx(3 / 7) and v.p_value < 1e-6
    assert not gate(slow, threshold=0.5).failed  # smaller than the threshold
    assert gate(slow, threshold=0.5).line.startswith("PASS: step_time +42.9%")
    with pytest.raises(UsageError, match="unknown metric"):
        gate(slow, threshold=0.05, metric="nope")


def test_gate_on_noise_passes(make_trace):
    base = ranksight.load(write_steps(make_trace, BASE_LEN, BASE_OPS))
    test = ranksight.load(write_steps(make_trace, [1005, 995, 1000, 1000], BASE_OPS))
    res = diff(base, test)
    assert _row(res["summary"], "metric", "step_time")["change"] == "unchanged"
    assert not gate(res, threshold=0.0).failed  # delta 0: passes even a 0 % threshold
    assert res["contributors"].height == 0


def test_gate_samples_significance_and_direction():
    b = np.array([100.0, 101, 99, 100, 100])
    big_noise = np.array([60.0, 160, 90, 200, 40])  # mean +10 %, far within noise
    assert not gate_samples(b, big_noise, threshold=0.05).failed
    assert "not significant" in gate_samples(b, big_noise, threshold=0.05).line
    assert gate_samples(b, b * 1.1, threshold=0.05).failed
    assert not gate_samples(b, b * 1.1, threshold=0.05, higher_is_worse=False).failed  # higher is better


# ---- CLI on constructed pairs ---------------------------------------------------------------


def test_cli_gate_exit_codes(make_trace, cli, capsys):
    from ranksight.cli import main

    fast = str(write_steps(make_trace, TEST_LEN, TEST_OPS))
    slow = str(write_steps(make_trace, BASE_LEN, BASE_OPS))
    noisy = str(write_steps(make_trace, [1005, 995, 1000, 1000], BASE_OPS))
    r = cli("diff", fast, slow, "--fail-if-slower", "5%")  # a real process exit code
    assert r.returncode == 1, r.stderr
    assert r.stdout.rstrip().splitlines()[-1].startswith("FAIL: step_time +42.9%")
    assert main(["diff", slow, fast, "--fail-if-slower", "5%", "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().splitlines()[-1].startswith("PASS: step_time -30.0%") and "### Top contributors" in out
    assert main(["diff", slow, noisy, "--fail-if-slower", "1", "--format", "json"]) == 0
    cap = capsys.readouterr()
    doc = json.loads(cap.out)
    assert doc["gate"]["failed"] is False and doc["gate"]["threshold"] == 0.01
    assert cap.err.strip().startswith("PASS: step_time +0.0%")
    assert main(["diff", fast, slow, "--fail-if-slower", "50%", "--format", "csv"]) == 0  # +42.9 % < 50 %


def test_cli_bad_input_is_2(make_trace, cli, tmp_path, capsys):
    from ranksight.cli import main

    one = str(write_steps(make_trace, TEST_LEN, TEST_OPS))
    r = cli("diff", one, str(tmp_path / "missing.json"), "--fail-if-slower", "5%")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    with pytest.raises(SystemExit) as e:
        main(["diff", one, one, "--fail-if-slower", "five"])
    assert e.value.code == 2 and "not a percentage" in capsys.readouterr().err
    assert main(["diff", one, one, "--fail-if-slower", "5%", "--metric", "nope"]) == 2
    assert "unknown metric" in capsys.readouterr().err
    single = str(write_steps(make_trace, [700], TEST_OPS))
    assert main(["diff", single, single, "--fail-if-slower", "5%"]) == 2
    assert "at least 2 steps" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["diff", "--help"])
    assert e.value.code == 0 and "ranksight diff BASE TEST" in capsys.readouterr().out


def test_a_failing_optional_analysis_does_not_lose_the_diff(pair, monkeypatch):
    from dataclasses import replace

    names()

    def broken(run, **kw):
        raise RuntimeError("boom")

    monkeypatch.setitem(REGISTRY, "mfu", replace(REGISTRY["mfu"], func=broken))
    with pytest.warns(UserWarning, match="analysis `mfu` failed"):
        res = diff(*pair)
    assert _row(res["summary"], "metric", "step_time")["change"] == "decreased"
    assert any(
        "analysis `mfu` failed: RuntimeError: boom; its part of the comparison is left out" in n for n in res.notes
    )


def test_without_the_overview_analysis_step_time_alone(pair, monkeypatch, data):
    names()
    monkeypatch.delitem(REGISTRY, "overview")
    res = diff(*pair)
    assert res["summary"]["metric"].to_list()[0] == "step_time"
    assert "dataloader" not in res["summary"]["metric"].to_list()
    assert _row(res["summary"], "metric", "step_time")["delta"] == pytest.approx(-0.3)
    assert any("need the `overview` analysis" in n for n in res.notes)
    # the fallback windows are the plugin's: its oracle's six step times on the 2021 ResNet-50 sample
    from ranksight.views.diff_profile import step_windows

    t = ranksight.load(
        data(
            "kineto/2021-07-08_c6e5fe20/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
        )
    )[0]
    assert step_windows(t)["total_ns"].to_list() == [187948000, 175153000, 179733000, 174564000, 182172000, 165983000]
