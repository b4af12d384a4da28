"""``torch.profiler.tensorboard_trace_handler`` folders (issue 21, item 7): files named
``<worker>.<timestamp>.pt.trace.json[.gz]``, several profiling cycles per worker in one folder.

Each cycle's trace here is hand-built with one kernel whose name says which worker and cycle
wrote it, so the test can tell exactly which file was read for each rank."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

import pytest

import ranksight
from ranksight.errors import DuplicateRankError, MixedRunsError, TraceNotFoundError, UsageError
from ranksight.io.discovery import discover, handler_name

#: three cycles, the timestamps time.time_ns() gave (PyTorch >= 2.1): 2024-05-01 12:00:00, :20, :40 UTC
NS = [1714564800_000000000, 1714564820_000000000, 1714564840_000000000]


def trace(tag: str, *, rank: int | None = None, world: int = 2) -> dict[str, Any]:
    doc: dict[str, Any] = {"schemaVersion": 1}
    if rank is not None:  # before traceEvents, where Kineto writes it
        doc["distributedInfo"] = {"rank": rank, "world_size": world, "backend": "nccl"}
    doc["traceEvents"] = [
        {"ph": "X", "cat": "kernel", "name": tag, "pid": 0, "tid": 7, "ts": 100.0, "dur": 5.0, "args": {}},
    ]
    return doc


def write(path: Path, doc: dict[str, Any], *, mtime: float | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.dumps(doc).encode()
    path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def handler_folder(d: Path, workers: dict[str, int | None], stamps: list[int], *, gz: bool = True) -> Path:
    """What the handler leaves after len(stamps) cycles of each worker (``{worker: rank}``);
    the kernel of cycle i of worker w is named ``w/ci``; mtimes follow the timestamps."""
    for w, rank in workers.items():
        for i, st in enumerate(stamps):
            name = f"{w}.{st}.pt.trace.json" + (".gz" if gz else "")
            mt = st / 1e9 if st > 10**17 else st / 1e3
            write(d / name, trace(f"{w}/c{i}", rank=rank), mtime=mt)
    return d


def kernels(run: ranksight.Run) -> dict[int, str]:
    out = {}
    for t in run:
        names = t.events.filter(t.events["cat"] == "kernel")["name"].to_list()
        out[t.rank] = names[0]
    return out


def files(found: list) -> dict[int, str]:
    return {f.rank: Path(f.path).name for f in found}


def test_handler_name():
    assert handler_name("/x/host-a_1234.1714564800000000000.pt.trace.json.gz") == ("host-a_1234", 1714564800000000000)
    assert handler_name("node1.cluster.local_77.1623143089861.pt.trace.json") == (
        "node1.cluster.local_77",
        1623143089861,
    )
    assert handler_name("rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz") == ("rank-0.Apr_03_18_51_38", 1102)
    assert handler_name("worker0.pt.trace.json") is None  # the plugin's name without a timestamp
    assert handler_name("trace.json") is None


def test_two_cycles_latest_by_default(tmp_path):
    """The case issue 21 found refused ("two files claim rank 0"): the latest cycle of each worker."""
    d = handler_folder(tmp_path / "log", {"host_11": 0, "host_12": 1}, NS[:2])
    notes: list[str] = []
    found = discover(d, notes=notes)
    assert files(found) == {0: f"host_11.{NS[1]}.pt.trace.json.gz", 1: f"host_12.{NS[1]}.pt.trace.json.gz"}
    assert [f.rank_source for f in found] == ["distributedInfo", "distributedInfo"]
    assert notes == [
        "tensorboard_trace_handler files: 2 worker(s) with 2 cycle(s) (host_11, host_12); "
        "cycles 0: 2024-05-01 12:00:00.000 UTC, 1: 2024-05-01 12:00:20.000 UTC; "
        "read the latest cycle of each worker (choose another with --cycle N: 0 the oldest, -1 the latest)"
    ]
    with pytest.warns(ranksight.RanksightWarning, match="read the latest cycle of each worker"):
        run = ranksight.load(d, cache=False)
    assert kernels(run) == {0: "host_11/c1", 1: "host_12/c1"}


@pytest.mark.parametrize(("cycle", "picked"), [(0, 0), (1, 1), (2, 2), (-1, 2), (-2, 1), (-3, 0)])
def test_cycle_counts_from_the_oldest_or_back_from_the_latest(tmp_path, cycle, picked):
    d = handler_folder(tmp_path / "log", {"host_11": 0, "host_12": 1}, NS)
    notes: list[str] = []
    found = discover(d, cycle=cycle, notes=notes)
    assert files(found) == {0: f"host_11.{NS[picked]}.pt.trace.json.gz", 1: f"host_12.{NS[picked]}.pt.trace.json.gz"}
    assert notes == []  # a cycle the user chose needs no note
    run = ranksight.load(d, cycle=cycle, cache=False)
    assert kernels(run) == {0: f"host_11/c{picked}", 1: f"host_12/c{picked}"}


def test_cycle_out_of_range_lists_the_cycles(tmp_path):
    d = handler_folder(tmp_path / "log", {"host_11": 0, "host_12": 1}, NS)
    for bad in (3, -4):
        with pytest.raises(UsageError) as err:
            discover(d, cycle=bad)
        assert str(err.value) == (
            f"cycle {bad} does not exist for every worker: 2 worker(s) with 3 cycle(s) (host_11, host_12); "
            "cycles 0: 2024-05-01 12:00:00.000 UTC, 1: 2024-05-01 12:00:20.000 UTC, 2: 2024-05-01 12:00:40.000 UTC; "
            "N counts from 0 (the oldest) or back from -1 (the latest)"
        )


def test_cycles_are_ordered_by_the_number_not_the_name(tmp_path):
    """The number before ``.pt.trace.json`` orders the cycles as a number: ``w.987`` before
    ``w.1102``, which a sort of the names reverses; a number that is no time is listed as is."""
    d = tmp_path / "log"
    write(d / "w.1102.pt.trace.json", trace("late"))
    write(d / "w.987.pt.trace.json", trace("early"))
    notes: list[str] = []
    assert files(discover(d, notes=notes)) == {0: "w.1102.pt.trace.json"}
    assert files(discover(d, cycle=0)) == {0: "w.987.pt.trace.json"}
    assert "cycles 0: 987, 1: 1102;" in notes[0]


def test_millisecond_stamps_and_workers_without_distributed_info(tmp_path):
    """PyTorch < 2.1 wrote ms; without distributedInfo, ranks come from the names (worker0,
    worker1) — the rank pattern is applied to the worker part as before."""
    ms = [1623143089861, 1623143095861]
    d = handler_folder(tmp_path / "log", {"worker0": None, "worker1": None}, ms, gz=False)
    notes: list[str] = []
    found = discover(d, notes=notes)
    assert files(found) == {0: f"worker0.{ms[1]}.pt.trace.json", 1: f"worker1.{ms[1]}.pt.trace.json"}
    assert [f.rank_source for f in found] == ["file name", "file name"]
    assert "cycles 0: 2021-06-08 09:04:49.861 UTC, 1: 2021-06-08 09:04:55.861 UTC" in notes[0]


def test_workers_with_different_cycle_counts(tmp_path):
    d = handler_folder(tmp_path / "log", {"host_11": 0}, NS)
    handler_folder(d, {"host_12": 1}, NS[1:])
    notes: list[str] = []
    assert files(discover(d, notes=notes)) == {
        0: f"host_11.{NS[2]}.pt.trace.json.gz",
        1: f"host_12.{NS[2]}.pt.trace.json.gz",
    }
    assert notes[0].startswith(
        "tensorboard_trace_handler files: 1 worker(s) with 3 cycle(s) (host_11); 1 worker(s) with 2 cycle(s) (host_12);"
    )
    assert "(their counts differ: check that these cycles belong together)" in notes[0]
    # cycle 0 of each worker (the first one each wrote); cycle 2 exists for host_11 only
    assert files(discover(d, cycle=0)) == {
        0: f"host_11.{NS[0]}.pt.trace.json.gz",
        1: f"host_12.{NS[1]}.pt.trace.json.gz",
    }
    with pytest.raises(UsageError, match="cycle 2 does not exist for every worker"):
        discover(d, cycle=2)


def test_a_worker_name_shared_by_every_rank_is_not_one_worker(tmp_path):
    """tensorboard_trace_handler(dir, worker_name="train") on every rank: the files of ranks 0
    and 1 share the worker name but declare different ranks: two workers, one cycle each."""
    d = tmp_path / "log"
    write(d / f"train.{NS[0]}.pt.trace.json", trace("r0", rank=0))
    write(d / f"train.{NS[0] + 1234}.pt.trace.json", trace("r1", rank=1))
    notes: list[str] = []
    assert files(discover(d, notes=notes)) == {
        0: f"train.{NS[0]}.pt.trace.json",
        1: f"train.{NS[0] + 1234}.pt.trace.json",
    }
    assert notes == []


def test_single_cycle_folder_is_unchanged_and_cycle_0_or_minus_1_accepted(tmp_path):
    d = handler_folder(tmp_path / "log", {"host_11": 0, "host_12": 1}, NS[:1])
    expected = {0: f"host_11.{NS[0]}.pt.trace.json.gz", 1: f"host_12.{NS[0]}.pt.trace.json.gz"}
    notes: list[str] = []
    assert files(discover(d, notes=notes)) == expected and notes == []
    assert files(discover(d, cycle=0)) == expected == files(discover(d, cycle=-1))
    with pytest.raises(UsageError, match="cycle 1 does not exist for every worker: 2 worker"):
        discover(d, cycle=1)


def test_cycle_without_handler_files_is_refused(tmp_path):
    d = tmp_path / "t"
    write(d / "rank0.json", trace("a", rank=0))
    with pytest.raises(UsageError, match="none of the traces is named so"):
        discover(d, cycle=0)
    with pytest.raises(UsageError, match="a \\{rank: path\\} mapping names each rank's file"):
        discover({0: d / "rank0.json"}, cycle=0)


def test_other_files_in_the_folder_are_kept(tmp_path):
    """Files not named by the handler are read as before, next to the chosen cycle."""
    d = handler_folder(tmp_path / "log", {"host_11": 0}, NS[:2])
    write(d / "extra_rank1.json", trace("x", rank=1))
    assert files(discover(d, notes=[])) == {0: f"host_11.{NS[1]}.pt.trace.json.gz", 1: "extra_rank1.json"}


def test_explicit_files_and_globs_select_cycles_too(tmp_path):
    d = handler_folder(tmp_path / "log", {"host_11": 0, "host_12": 1}, NS[:2])
    assert files(discover(str(d / "host_11.*"), notes=[])) == {0: f"host_11.{NS[1]}.pt.trace.json.gz"}
    both = [d / f"host_11.{NS[0]}.pt.trace.json.gz", d / f"host_11.{NS[1]}.pt.trace.json.gz"]
    assert files(discover(both, cycle=0)) == {0: f"host_11.{NS[0]}.pt.trace.json.gz"}


def test_recursive_search_finds_the_one_subfolder(tmp_path):
    """`ranksight ... ./log` where the handler wrote ./log/resnet18 (the PyTorch tutorial's
    layout); hidden folders (a notebook's checkpoints hold copies) are not entered."""
    top = tmp_path / "log"
    handler_folder(top / "resnet18", {"host_11": 0, "host_12": 1}, NS[:2])
    handler_folder(top / ".ipynb_checkpoints", {"host_99": 0}, NS[:1])
    write(top / "wandb" / "run-1" / "wandb-summary.json", {"loss": 0.1})
    (top / "notes.txt").write_text("x")
    found = discover(top, notes=[])
    assert files(found) == {0: f"host_11.{NS[1]}.pt.trace.json.gz", 1: f"host_12.{NS[1]}.pt.trace.json.gz"}
    assert all(Path(f.path).parent == top / "resnet18" for f in found)


def test_recursive_search_several_runs_is_an_error_naming_them(tmp_path):
    top = tmp_path / "log"
    handler_folder(top / "run_a", {"host_11": 0}, NS[:2])
    handler_folder(top / "run_b" / "profile", {"host_21": 1}, NS[:1])
    with pytest.raises(MixedRunsError) as err:
        discover(top)
    assert str(err.value) == (
        f"{top}: no trace in the folder itself, and 2 of its subfolders hold traces (several runs, as TensorBoard "
        "shows them): run_a/ (2 file(s)), run_b/profile/ (1 file(s)); pass one of them, or several to read them "
        "as one run"
    )
    # several folders named together are one run (per-node folders of a multi-node job)
    found = discover([top / "run_a", top / "run_b" / "profile"], notes=[])
    assert files(found) == {0: f"host_11.{NS[1]}.pt.trace.json.gz", 1: f"host_21.{NS[0]}.pt.trace.json.gz"}


def test_the_folder_own_traces_come_first(tmp_path):
    """A folder holding traces itself is read as before: its subfolders are not searched."""
    top = tmp_path / "log"
    write(top / "rank0.json", trace("top", rank=0, world=1))
    handler_folder(top / "old", {"host_11": 1}, NS[:1])
    assert files(discover(top)) == {0: "rank0.json"}


def test_empty_tree_says_subfolders_were_searched(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    with pytest.raises(TraceNotFoundError, match="holds no .json or .json.gz file .*, nor do its subfolders"):
        discover(tmp_path)


def test_symlinked_folders_are_not_followed(tmp_path):
    top = tmp_path / "log"
    top.mkdir()
    handler_folder(tmp_path / "elsewhere", {"host_11": 0}, NS[:1])
    os.symlink(tmp_path / "elsewhere", top / "link")
    os.symlink(top, top / "loop")
    with pytest.raises(TraceNotFoundError):
        discover(top)


def test_two_runs_in_one_folder_get_a_hint(tmp_path):
    """The folder reused by a second run (new pids): both runs' rank 0 claim rank 0; the error
    says why and how to pick one run's files."""
    d = handler_folder(tmp_path / "log", {"host_11": 0}, NS[:1])
    handler_folder(d, {"host_57": 0}, NS[2:])
    with pytest.raises(DuplicateRankError) as err:
        discover(d)
    msg = str(err.value)
    assert "two files claim rank 0" in msg
    assert msg.endswith(
        "(tensorboard_trace_handler workers host_11 and host_57: the folder holds the traces of several runs? "
        f"a glob such as '{d}/host_57.*' selects one worker's files)"
    )


def test_late_distributed_info_keeps_the_selection(tmp_path):
    """distributedInfo written after traceEvents (load resolves ranks again with it): the cycle
    chosen first stays chosen (a cycle's group is decided by what the header says before the events)."""
    d = tmp_path / "log"
    for w, rank in (("host_11", 0), ("host_12", 1)):
        for i, st in enumerate(NS[:2]):
            body = json.dumps(trace(f"{w}/c{i}"))[:-1] + f', "distributedInfo": {{"rank": {rank}, "world_size": 2}}}}'
            p = d / f"{w}.{st}.pt.trace.json"
            p.parent.mkdir(exist_ok=True)
            p.write_text(body)
    with pytest.warns(ranksight.RanksightWarning, match="read the latest cycle"):
        run = ranksight.load(d, cache=False)
    assert kernels(run) == {0: "host_11/c1", 1: "host_12/c1"}
    assert {t.rank: t.meta.rank_source for t in run} == {0: "distributedInfo", 1: "distributedInfo"}
    run = ranksight.load(d, cache=False, cycle=0, ranks=[1])
    assert kernels(run) == {1: "host_12/c0"}
