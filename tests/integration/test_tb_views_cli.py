"""``ranksight analyze overview | gpu-metrics | ops | kernel-config`` as a user runs them."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ranksight.data import __file__ as data_init

RESNET0 = "kineto/2021-07-08_c6e5fe20/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
DLRM = str(Path(data_init).parent / "examples" / "dlrm")
DLRM_RANK3 = str(next((Path(DLRM)).glob("worker3_*")))


def test_overview_json_on_resnet(cli: Callable[..., Any], data: Callable[[str], Path]) -> None:
    r = cli("analyze", "overview", str(data(RESNET0)), "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    steps = doc["tables"]["steps"]
    assert [s["step"] for s in steps] == [5, 6, 7, 8, 9, 10]
    assert list(steps[0]) == ["rank", "step", "kernel_us", "memcpy_us", "memset_us", "communication_us", "runtime_us",
                              "dataloader_us", "cpu_exec_us", "other_us", "total_us"]  # fmt: skip
    assert steps[0]["dataloader_us"] == 69317 and steps[0]["total_us"] == 187948
    dl = [a for a in doc["tables"]["average"] if a["category"] == "DataLoader"][0]
    assert dl["pct"] == 33.37


def test_all_four_on_a_dlrm_example_rank(cli: Callable[..., Any]) -> None:
    first: dict[str, list[dict[str, str]]] = {}
    for name, extra in [
        ("overview", []),
        ("gpu-metrics", []),
        ("ops", ["--group-by", "shape"]),
        ("kernel-config", ["--group-by", "op"]),
    ]:
        r = cli("analyze", name, DLRM_RANK3, "--format", "csv", *extra)
        assert r.returncode == 0, (name, r.stderr)
        table = r.stdout.split("\n\n")[0]
        rows = list(csv.DictReader(io.StringIO("\n".join(ln for ln in table.splitlines() if not ln.startswith("#")))))
        assert rows and {row["rank"] for row in rows} == {"3"}, name
        first[name] = rows
    (s,) = first["overview"]
    assert float(s["communication_us"]) > 0  # NCCL kernels recognised from their names and launching ops
    assert "input_dims" in first["ops"][0] and "op" in first["kernel-config"][0]


def test_gpu_views_say_why_on_cpu_only(cli: Callable[..., Any], data: Callable[[str], Path]) -> None:
    path = str(data("hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"))
    r = cli("analyze", "gpu-metrics", path)
    assert r.returncode == 0 and r.stdout == ""  # nothing to report, not bad input
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "CPU-only" in lines[0], r.stderr


def test_kernel_config_options(cli: Callable[..., Any], data: Callable[[str], Path]) -> None:
    path = str(data("tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz"))
    r = cli("analyze", "kernel-config", path, "--tensor-core-rules", "plugin", "--group-by", "name", "--format", "json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["tables"]["kernels"]
    flash = [k for k in rows if "flash_fwd_kernel" in k["name"]][0]
    assert flash["tensor_cores"] is False  # the 2019 list misses FlashAttention
    r = cli("analyze", "kernel-config", path, "--group-by", "bogus")
    assert r.returncode == 2 and "group-by" in r.stderr
