"""Parity with the TensorBoard plugin's own end-to-end answers (``result_check_file.txt``).

Lines 1–5 belong to ``resnet50_num_workers_0/worker0.1623143089861``, lines 6–10 to
``resnet50_num_workers_4/worker0.1623212756351`` (oracles.md §6.1). Definition compared: the
plugin's (the 2021 traces have no collectives, no driver launches and no Tensor Core kernels, so
ranksight's default definitions give the same numbers; both rule sets are run). Integers are
compared after Python's ``round`` as the plugin rounds them; percentages after ``round(x, 2)``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import ranksight
from ranksight.analyses.gpu_metrics import gpu_metrics
from ranksight.analyses.kernel_config import kernel_config
from ranksight.analyses.ops import ops
from ranksight.analyses.overview import LABELS, overview

RESULT = "kineto/last_before_removal_f8881ce3/tb_plugin/test/result_check_file.txt"
SAMPLES = {
    0: "kineto/2021-07-08_c6e5fe20/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz",
    5: "kineto/2021-07-08_c6e5fe20/tb_plugin/samples/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz",
}
PARTS = ["kernel", "memcpy", "memset", "runtime", "dataloader", "cpu_exec", "other"]

_cache: dict[Any, Any] = {}


def oracle(data: Callable[[str], Path], line: int) -> Any:
    key = ("oracle", line)
    if key not in _cache:
        _cache[key] = json.loads(data(RESULT).read_text().splitlines()[line])
    return _cache[key]


def run_of(data: Callable[[str], Path], base: int) -> Any:
    if base not in _cache:
        _cache[base] = ranksight.load([data(SAMPLES[base])])
    return _cache[base]


@pytest.mark.parametrize("base", [0, 5])
def test_overview_steps(data: Callable[[str], Path], base: int) -> None:
    exp = oracle(data, base)
    cols = [c["name"] for c in exp["steps"]["columns"] if c.get("role") != "tooltip"]
    assert cols == ["Step", "Kernel", "Memcpy", "Memset", "Runtime", "DataLoader", "CPU Exec", "Other"]
    got = overview(run_of(data, base))["steps"].to_dicts()
    exp_rows = [[v for v in r if not (isinstance(v, str) and v.startswith("<"))] for r in exp["steps"]["rows"]]
    got_rows = [[str(r["step"]), *(round(r[f"{p}_us"]) for p in PARTS)] for r in got]
    assert got_rows == exp_rows
    assert all(r["communication_us"] == 0 for r in got)  # the plugin shows no column: no collectives
    for r in got:  # the eight parts add up to the step exactly
        assert sum(r[f"{p}_us"] for p in [*PARTS, "communication"]) == pytest.approx(r["total_us"], abs=1e-6)


@pytest.mark.parametrize("base", [0, 5])
def test_overview_average(data: Callable[[str], Path], base: int) -> None:
    (perf,) = oracle(data, base)["performance"]
    avg = {r["category"]: r for r in overview(run_of(data, base))["average"].to_dicts()}
    assert round(avg["Step"]["time_us"]) == perf["value"]
    for child in perf["children"]:
        mine = avg[child["name"]]
        assert (round(mine["time_us"]), mine["pct"]) == (child["value"], child["extra"]), child["name"]
    assert set(LABELS.values()) - {c["name"] for c in perf["children"]} == {"Communication"}


@pytest.mark.parametrize("rules", ["plugin", "current"])
@pytest.mark.parametrize("base", [0, 5])
def test_gpu_summary(data: Callable[[str], Path], base: int, rules: str) -> None:
    summary = {d["title"]: d["value"] for d in oracle(data, base)["gpu_metrics"]["data"]}
    (o,) = gpu_metrics(run_of(data, base), tensor_core_rules=rules)["overall"].to_dicts()
    assert summary["GPU 0:"] == "" and o["device"] == 0
    for title, col in [
        ("GPU Utilization", "utilization_pct"),
        ("Est. SM Efficiency", "sm_efficiency_pct"),
        ("Est. Achieved Occupancy", "occupancy_pct"),
        ("Kernel Time using Tensor Cores", "tensor_core_pct"),
    ]:
        assert f"{round(o[col], 2)} %" == summary[title], title


@pytest.mark.parametrize("rules", ["plugin", "current"])
@pytest.mark.parametrize("base", [0, 5])
def test_operator_table(data: Callable[[str], Path], base: int, rules: str) -> None:
    exp = oracle(data, base + 2)["data"]
    got = {r["name"]: r for r in ops(run_of(data, base), tensor_core_rules=rules)["ops"].to_dicts()}
    assert len(got) == len(exp) == {0: 76, 5: 69}[base]
    for e in exp:
        g = got[e["name"]]
        assert g["calls"] == e["calls"], e["name"]
        for k in ("device_self", "device_total", "host_self", "host_total"):
            assert round(g[f"{k}_us"]) == e[f"{k}_duration"], (e["name"], k)
        assert ("Yes" if g["tc_eligible"] else "No") == e["tc_eligible"], e["name"]
        assert (round(g["tc_self_pct"], 2), round(g["tc_total_pct"], 2)) == (e["tc_self_ratio"], e["tc_total_ratio"])
    # same order: device self time, descending (ties may differ)
    order = [r["device_self_duration"] for r in exp]
    assert order == sorted(order, reverse=True)


@pytest.mark.parametrize("base", [0, 5])
def test_operator_pies(data: Callable[[str], Path], base: int) -> None:
    pies = oracle(data, base + 1)
    got = {r["name"]: r for r in ops(run_of(data, base))["ops"].to_dicts()}
    for key, col in [("device_total_time", "device_total_us"), ("device_self_time", "device_self_us"),
                     ("host_total_time", "host_total_us"), ("host_self_time", "host_self_us")]:  # fmt: skip
        for name, value in pies[key]["rows"]:
            assert round(got[name][col]) == value, (key, name)


@pytest.mark.parametrize("base", [0, 5])
def test_kernel_table(data: Callable[[str], Path], base: int) -> None:
    exp = oracle(data, base + 3)["data"]
    cols = [c["name"] for c in exp["columns"]]
    rows = [dict(zip(cols, r, strict=True)) for r in exp["rows"]]
    got = {r["name"]: r for r in kernel_config(run_of(data, base), group_by="name")["kernels"].to_dicts()}
    assert len(got) == len(rows) == {0: 67, 5: 62}[base]
    assert sum(r["Calls"] for r in rows) == {0: 8772, 5: 8868}[base]
    assert sum(r["Total Duration (us)"] for r in rows) == {0: 591532, 5: 594868}[base]
    for e in rows:
        g = got[e["Name"]]
        assert ("Yes" if g["tensor_cores"] else "No") == e["Tensor Cores Used"]
        assert (g["calls"], round(g["total_us"]), round(g["mean_us"]), round(g["max_us"]), round(g["min_us"])) == (
            e["Calls"], e["Total Duration (us)"], e["Mean Duration (us)"], e["Max Duration (us)"], e["Min Duration (us)"],
        )  # fmt: skip
        # every kernel here carries both args, so "missing stays missing" changes nothing; the
        # plugin rounds with pandas (half-to-even on the binary value): compare within half a unit
        assert g["mean_blocks_per_sm"] == pytest.approx(e["Mean Blocks Per SM"], abs=0.005 + 1e-9)
        assert g["mean_est_occupancy_pct"] == pytest.approx(e["Mean Est. Achieved Occupancy (%)"], abs=0.005 + 1e-9)
    top = max(got.values(), key=lambda r: r["total_us"])
    assert top["name"].startswith("void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>")
    pie = oracle(data, base + 4)["total"]["rows"]
    assert {n: v for n, v in pie} == {n: round(r["total_us"]) for n, r in got.items() if n in dict(pie)}
