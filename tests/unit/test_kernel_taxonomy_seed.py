"""views/kernel_taxonomy.seed_kernel_taxonomy: the taxonomy of every rank from one pass over the
stacked events equals each rank's own (issue 19), the launching op's dtype included (the ``op``
precision source), and each rank's kernels take their precision from their own rank's operators."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal
from tests.conftest import DATA

import ranksight
from ranksight.analyses import Session
from ranksight.analyses.run_context import run_contexts
from ranksight.views import kernel_taxonomy as kt

_ORDER = ["dur_ns", "name", "kind"]


def _per_rank_and_seeded(path: Path) -> tuple[dict[int, pl.DataFrame], dict[int, pl.DataFrame]]:
    run = ranksight.load(path, cache=False)
    sess = Session.of(run)
    per = {r: kt._compute(run[r]) for r in sess.ranks}  # each rank on its own, nothing memoised
    stacked = sess.stacked_events()
    assert stacked is not None
    kt.seed_kernel_taxonomy([run[r] for r in sess.ranks], stacked)
    assert all(run[r].has_memo("kernel_taxonomy") for r in sess.ranks)
    return per, {r: kt.kernel_taxonomy_table(run[r]) for r in sess.ranks}


@pytest.mark.parametrize(
    ("folder", "op_rows"),
    [("generated/h100/ddp-gloo-2ranks", 50), ("tracelens/mi300", 20), ("hta/trace_filter", 22)],
)
def test_seeded_equals_per_rank_on_real_traces(folder: str, op_rows: int) -> None:
    per, seeded = _per_rank_and_seeded(DATA / folder)
    n_op = 0
    for r, want in per.items():
        assert_frame_equal(seeded[r].sort(_ORDER), want.sort(_ORDER))
        assert seeded[r]["rank"].unique().to_list() in ([r], [])
        n_op += want.filter(pl.col("precision_source") == "op").height
    assert n_op == op_rows  # the op-dtype path is exercised, not only the names


def _rank_trace(rank: int, dtype: str, shift: int = 0) -> dict[str, Any]:
    """One rank: an ``aten::mm`` on tid 100 launching a kernel whose name gives no precision; the
    op's first input dtype is ``dtype``. Every rank uses the same tid; ``shift`` > 0 starts the op
    that much later (shorter by as much) and records an ``aten::empty`` before it (other rows)."""

    def x(name: str, cat: str, ts: float, dur: float, **kw: Any) -> dict[str, Any]:
        return {"ph": "X", "cat": cat, "name": name, "pid": kw.pop("pid", 1), "tid": kw.pop("tid", 100), "ts": ts,
                "dur": dur, "args": kw.pop("args", {})}  # fmt: skip

    ev = [
        x("ProfilerStep#1", "user_annotation", 0, 200),
        *([x("aten::empty", "cpu_op", 1, 1)] if shift else []),
        x(
            "aten::mm",
            "cpu_op",
            5 + shift,
            100 - shift,
            args={"Input type": [dtype, dtype], "Input Dims": [[8, 8], [8, 8]]},
        ),
        x("cudaLaunchKernel", "cuda_runtime", 10, 5, args={"correlation": 7}),
        x("mystery_kernel", "kernel", 20, 30, pid=0, tid=7, args={"correlation": 7, "stream": 7, "device": 0}),
    ]
    return {
        "schemaVersion": 1,
        "distributedInfo": {"rank": rank, "world_size": 2, "backend": "nccl"},
        "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "computeMajor": 9, "computeMinor": 0}],
        "traceEvents": ev,
    }


def test_each_rank_reads_its_own_operators_exact(tmp_path: Path) -> None:
    # rank 1's op starts later on the same tid, and sits at another row: were the ranks' threads
    # swept as one, rank 0's launch would find rank 1's op
    for rank, dtype, shift in ((0, "c10::BFloat16", 0), (1, "float", 1)):
        (tmp_path / f"rank{rank}.json").write_text(json.dumps(_rank_trace(rank, dtype, shift)))
    per, seeded = _per_rank_and_seeded(tmp_path)
    got = {r: seeded[r].select("name", "precision", "precision_source").rows() for r in seeded}
    assert got == {0: [("mystery_kernel", "bf16", "op")], 1: [("mystery_kernel", "fp32", "op")]}
    for r in per:
        assert_frame_equal(seeded[r], per[r])


def test_run_contexts_seed_the_taxonomy(tmp_path: Path) -> None:
    """run_contexts on several small ranks fills every rank's taxonomy in one pass before its map."""
    for rank, dtype in ((0, "c10::BFloat16"), (1, "c10::BFloat16")):
        (tmp_path / f"rank{rank}.json").write_text(json.dumps(_rank_trace(rank, dtype)))
    run = ranksight.load(tmp_path, cache=False)
    calls: list[int] = []
    real = kt._compute

    def spy(trace: Any) -> pl.DataFrame:
        calls.append(trace.rank)
        return real(trace)

    kt._compute = spy  # type: ignore[assignment]
    try:
        run_contexts(run)
    finally:
        kt._compute = real  # type: ignore[assignment]
    assert calls == []  # no rank computed its own
    assert kt.kernel_taxonomy_table(run[1])["precision"].to_list() == ["bf16"]
