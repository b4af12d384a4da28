"""views/idle_gaps.idle_pieces_many: the idle pieces of many ranks in one pass over the stacked
events (issue 19) equal each rank's own, every cause included; ranks with and without step windows
side by side; the one-rank-at-a-time fallback for lanes too long for int64; and the tie rule of
the innermost span (same start and end on a thread: the later trace row) that the pass made
deterministic."""

from __future__ import annotations

import warnings

import polars as pl
import pytest
from polars.testing import assert_frame_equal
from tests.conftest import DATA
from tests.unit.test_idle_causes import K, R, X

import ranksight
from ranksight.analyses import Session, run_analysis
from ranksight.analyses.idle_causes import peer_waits
from ranksight.views import idle_gaps
from ranksight.views.gpu_work import gpu_work_categorical, step_windows
from ranksight.views.rank_slices import rank_rows


def _per_rank_and_many(run: ranksight.Run) -> tuple[dict[int, pl.DataFrame], pl.DataFrame]:
    sess = Session.of(run)
    waits = peer_waits(sess)
    per = {
        r: idle_gaps.idle_pieces(run[r], None if waits is None else rank_rows(waits, r).drop("rank"))
        for r in sess.ranks
    }
    stacked = sess.stacked_events()
    assert stacked is not None
    inputs = {r: (gpu_work_categorical(run[r]), step_windows(run[r])) for r in sess.ranks}
    return per, idle_gaps.idle_pieces_many(stacked.lazy(), inputs, waits)


def _assert_same(per: dict[int, pl.DataFrame], many: pl.DataFrame) -> None:
    assert many["rank"].is_sorted()
    for r, want in per.items():
        assert_frame_equal(many.filter(pl.col("rank") == r).drop("rank"), want)


@pytest.mark.parametrize("folder", ["generated/h100/ddp-gloo-2ranks", "tracelens/mi300"])
def test_one_pass_equals_each_rank_on_real_traces(folder: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = ranksight.load(DATA / folder, cache=False)
    per, many = _per_rank_and_many(run)
    _assert_same(per, many)
    if folder.startswith("generated"):  # two H100 ranks of DDP over gloo: every cause there is
        assert set(many["cause"]) == {
            "collective_wait",
            "cpu_op",
            "dataloader",
            "launch_latency",
            "sync",
            "unexplained",
        }


def _rank(step: bool, shift: int) -> list[dict]:
    """A kernel, a CPU op on the launching thread, a second kernel; ``step``: in a ProfilerStep."""
    ev = [
        R("cudaLaunchKernel", 10 + shift, 5, 1),
        K("k1", 20 + shift, 30, 1),
        X("aten::foo", "cpu_op", 60 + shift, 100),
        R("cudaLaunchKernel", 150 + shift, 5, 2),
        K("k2", 200 + shift, 40, 2),
    ]
    return ([X("ProfilerStep#1", "user_annotation", 0, 300)] if step else []) + ev


def test_ranks_with_and_without_steps_and_the_lane_fallback(make_trace, tmp_path, monkeypatch) -> None:  # noqa: ANN001
    # rank 2 (last) has no step window: its pieces must not read another rank's steps
    for r, step, shift in ((0, True, 0), (1, True, 7), (2, False, 3)):
        make_trace(_rank(step, shift), name=f"rank{r}.json", distributedInfo={"rank": r, "world_size": 3})
    run = ranksight.load(tmp_path, cache=False)
    per, many = _per_rank_and_many(run)
    _assert_same(per, many)
    assert many.filter(pl.col("rank") == 2)["step"].null_count() == many.filter(pl.col("rank") == 2).height
    assert many.filter(pl.col("rank") == 0)["step"].drop_nulls().to_list() != []
    # lanes longer than int64 allows: the CPU parts are attributed one rank at a time, same answer
    monkeypatch.setattr(idle_gaps, "_LANE_LIMIT", 1)
    _, again = _per_rank_and_many(run)
    assert_frame_equal(again, many)


def test_same_start_and_end_on_a_thread_reads_the_later_row_exact(make_trace) -> None:  # noqa: ANN001
    """``aten::to`` and its ``aten::_to_copy`` start and end together (µs clocks): the idle under
    them belongs to the later trace row, the inner op (the rule of views/enclosing)."""
    run = ranksight.load(
        make_trace(
            [
                X("ProfilerStep#1", "user_annotation", 0, 300),
                R("cudaLaunchKernel", 10, 5, 1),
                K("k1", 20, 30, 1),
                X("aten::to", "cpu_op", 60, 80),
                X("aten::_to_copy", "cpu_op", 60, 80),
                R("cudaLaunchKernel", 150, 5, 2),
                K("k2", 200, 40, 2),
            ]
        ),
        cache=False,
    )
    g = run_analysis("idle-causes", run)["gaps"]
    t0 = int(g["start_ns"].min())
    rows = g.filter(pl.col("gap") == 1).sort("start_ns").select((pl.col("start_ns") - t0) // 1000, "call_site").rows()
    assert rows == [(50, "ProfilerStep#*"), (60, "aten::_to_copy"), (140, "ProfilerStep#*"), (150, "cudaLaunchKernel")]


def test_the_tie_rule_on_a_real_trace() -> None:
    """HTA's trace_filter rank 0: ``aten::to`` / ``aten::_to_copy`` pairs with the same µs times; the
    idle under them is the inner op's (before the rule was enforced, polars' unstable sort of the
    thread's spans gave the outer one here)."""
    run = ranksight.load(DATA / "hta/trace_filter/sampled_rank-0.json.gz", cache=False)
    g = idle_gaps.idle_pieces(run[0])
    starts = [1682725898085119000, 1682725898086966000, 1682725898702796000, 1682725898702814000]
    sites = g.filter(pl.col("start_ns").is_in(starts)).sort("start_ns").select("gap", "call_site").rows()
    assert sites == [(28, "aten::_to_copy"), (43, "aten::_to_copy"), (510, "aten::_to_copy"), (510, "aten::_to_copy")]
