"""``torch.profiler.tensorboard_trace_handler`` folders made of real traces (issue 21, item 7).

A folder laid out as the handler leaves it after two profiling cycles of a 2-rank job: worker
names ``<hostname>_<pid>``, ``time.time_ns()`` timestamps, modification times that follow them.
Cycle 0 holds HTA's ``trace_filter`` ranks 0 and 1, cycle 1 the 2-rank DDP run recorded on an
H100 (``generated/h100/ddp-gloo-2ranks``), so which cycle was read shows in every number.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

CYCLE0 = ["hta/trace_filter/sampled_rank-0.json.gz", "hta/trace_filter/sampled_rank-1.json.gz"]
DDP = "generated/h100/ddp-gloo-2ranks"
CYCLE1 = [
    f"{DDP}/rank0.1795345570754875741.pt.trace.json.gz",
    f"{DDP}/rank1.1795345570766808859.pt.trace.json.gz",
]
#: the handler's timestamps: cycle 0 at 2024-05-01 12:00:00 UTC, cycle 1 30 s later; the second
#: worker's file a few ms after the first's (the ranks export one after another)
STAMPS = [[1714564800_000000000, 1714564800_004000000], [1714564830_000000000, 1714564830_007000000]]
WORKERS = ["gpu-node-7_31001", "gpu-node-7_31002"]


def handler_folder(d: Path, data) -> Path:
    d.mkdir(parents=True)
    for srcs, stamps in zip([CYCLE0, CYCLE1], STAMPS):
        for worker, src, st in zip(WORKERS, srcs, stamps):
            dst = d / f"{worker}.{st}.pt.trace.json.gz"
            shutil.copyfile(data(src), dst)
            os.utime(dst, (st / 1e9, st / 1e9))
    return d


def files_table(stdout: str) -> list[tuple[int, str, str]]:
    return [(x["rank"], x["file"], x["rank_from"]) for x in json.loads(stdout)["tables"]["files"]]


def test_latest_cycle_by_default_and_the_note(tmp_path, cli, data):
    d = handler_folder(tmp_path / "log", data)
    r = cli("info", str(d), "--no-cache", "--format", "json")
    assert r.returncode == 0, r.stderr
    assert files_table(r.stdout) == [
        (0, f"{WORKERS[0]}.{STAMPS[1][0]}.pt.trace.json.gz", "distributedInfo"),
        (1, f"{WORKERS[1]}.{STAMPS[1][1]}.pt.trace.json.gz", "distributedInfo"),
    ]
    assert (
        "ranksight: warning: tensorboard_trace_handler files: 2 worker(s) with 2 cycle(s) "
        "(gpu-node-7_31001, gpu-node-7_31002); cycles 0: 2024-05-01 12:00:00.000 UTC, 1: 2024-05-01 12:00:30.000 UTC; "
        "read the latest cycle of each worker (choose another with --cycle N: 0 the oldest, -1 the latest)"
    ) in r.stderr.splitlines()


@pytest.mark.parametrize(("cycle", "sources"), [("0", CYCLE0), ("-2", CYCLE0), ("1", CYCLE1), ("-1", CYCLE1)])
def test_cycle_reads_the_same_numbers_as_its_files(tmp_path, cli, data, cycle, sources):
    """`analyze temporal --cycle N` over the handler folder equals the analysis of that cycle's
    original files, number for number."""
    d = handler_folder(tmp_path / "log", data)
    got = cli("analyze", "temporal", str(d), "--cycle", cycle, "--no-cache", "--format", "json")
    assert got.returncode == 0, got.stderr
    assert "tensorboard_trace_handler" not in got.stderr  # a chosen cycle needs no note
    want = cli("analyze", "temporal", *[str(data(s)) for s in sources], "--no-cache", "--format", "json")
    assert want.returncode == 0, want.stderr
    a, b = json.loads(got.stdout), json.loads(want.stdout)
    assert a["tables"] == b["tables"]
    assert len(a["tables"]["temporal"]) == 2


def test_cycle_out_of_range(tmp_path, cli, data):
    d = handler_folder(tmp_path / "log", data)
    r = cli("info", str(d), "--cycle", "2", "--no-cache")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip() == (
        "ranksight: error: cycle 2 does not exist for every worker: 2 worker(s) with 2 cycle(s) "
        "(gpu-node-7_31001, gpu-node-7_31002); cycles 0: 2024-05-01 12:00:00.000 UTC, 1: 2024-05-01 12:00:30.000 UTC; "
        "N counts from 0 (the oldest) or back from -1 (the latest)"
    )


def test_recursive_search_from_the_parent_folder(tmp_path, cli, data):
    """The PyTorch tutorial's layout: the handler writes ./log/<model>; `ranksight info ./log`."""
    handler_folder(tmp_path / "log" / "resnet18", data)
    r = cli("info", str(tmp_path / "log"), "--cycle", "0", "--no-cache", "--format", "json")
    assert r.returncode == 0, r.stderr
    assert [f for _r, f, _s in files_table(r.stdout)] == [
        f"{WORKERS[0]}.{STAMPS[0][0]}.pt.trace.json.gz",
        f"{WORKERS[1]}.{STAMPS[0][1]}.pt.trace.json.gz",
    ]


def test_two_runs_in_subfolders_are_named(tmp_path, cli, data):
    """The kineto TB-plugin samples: ResNet-50 with num_workers 0 and 4, one run per folder."""
    top = tmp_path / "samples"
    for sub in ("resnet50_num_workers_0", "resnet50_num_workers_4"):
        src = data(f"kineto/2021-07-08_c6e5fe20/tb_plugin/samples/{sub}")
        shutil.copytree(src, top / sub)
    r = cli("info", str(top), "--no-cache")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip() == (
        f"ranksight: error: {top}: no trace in the folder itself, and 2 of its subfolders hold traces (several runs, "
        "as TensorBoard shows them): resnet50_num_workers_0/ (1 file(s)), resnet50_num_workers_4/ (1 file(s)); "
        "pass one of them, or several to read them as one run"
    )
    one = cli("info", str(top / "resnet50_num_workers_4"), "--no-cache", "--format", "json")
    assert one.returncode == 0, one.stderr
    assert files_table(one.stdout) == [(0, "worker0.1623212756351.pt.trace.json.gz", "file name")]
