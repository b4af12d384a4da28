"""The kernel → GPU annotation rule (``ranksight.analyses.annotations.kernel_annotations``) and the
facade's ``t`` links on a hand-built trace: nesting, crossing an end, a zero-length kernel at an
annotation's start, another stream, equally long annotations, a sync event with a correlation."""

from __future__ import annotations

import warnings

import pytest
from tests.unit.test_launch_analyses import K, R, X

pytest.importorskip("pandas")

from ranksight.hta import TraceAnalysis  # noqa: E402


def A(name, ts, dur, *, stream=7):  # noqa: ANN001, ANN201, N802
    """A GPU user annotation on ``stream``."""
    return X(name, "gpu_user_annotation", ts, dur, pid=0, tid=stream, stream=stream, device=0)


EVENTS = [
    A("outer", 10, 40),  # [10, 50)
    A("inner", 20, 10),  # [20, 30)
    A("other_stream", 0, 100, stream=8),
    A("a1", 70, 10),  # [70, 80)
    A("a2", 75, 10),  # [75, 85): as long as a1, starts later
    R("cudaLaunchKernel", 1, 1, 1),
    K("k_outer", 12, 2, 1),
    R("cudaLaunchKernel", 2, 1, 2),
    K("k_inner", 22, 3, 2),
    R("cudaLaunchKernel", 3, 1, 3),
    K("k_cross", 28, 5, 3),  # [28, 33): overlaps inner and outer
    R("cudaLaunchKernel", 4, 1, 4),
    K("k_zero", 20, 0, 4),  # zero-length at inner's start
    R("cudaLaunchKernel", 5, 1, 5),
    K("k_none", 60, 2, 5),
    R("cudaLaunchKernel", 6, 1, 6),
    K("k_s8", 40, 2, 6, stream=8),
    R("cudaLaunchKernel", 7, 1, 7),
    K("k_tie", 76, 2, 7),
    R("cudaStreamSynchronize", 90, 6, 8),
    K("Stream Sync", 91, 4, 8, cat="cuda_sync"),
]


def _ta(path, compat: bool) -> TraceAnalysis:  # noqa: ANN001
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return TraceAnalysis(trace_dir=str(path), hta_compat=compat)


def _owners(path, compat: bool) -> dict[str, str]:  # noqa: ANN001
    df = _ta(path, compat).get_gpu_kernels_with_user_annotations(rank=0)
    return dict(zip(df["name"], df["user_annotation"], strict=True))


def test_innermost_overlapping_annotation(make_trace) -> None:  # noqa: ANN001
    p = make_trace(EVENTS)
    assert _owners(p, False) == {
        "k_outer": "outer",
        "k_inner": "inner",
        "k_cross": "inner",  # the shortest of the two it overlaps
        "k_zero": "inner",  # ann.ts <= ev.ts < ann.end
        "k_none": "",
        "k_s8": "other_stream",  # only annotations of its own stream
        "k_tie": "a2",  # equally long: the later start
    }


def test_hta_rules(make_trace) -> None:  # noqa: ANN001
    """HTA's set also holds the sync event (stream and correlation), and its strict overlap puts
    a zero-length kernel at an annotation's start outside it."""
    p = make_trace(EVENTS)
    got = _owners(p, True)
    assert got["k_zero"] == "outer" and got["Stream Sync"] == ""
    assert {k: v for k, v in got.items() if k not in ("k_zero", "Stream Sync")} == {
        k: v for k, v in _owners(p, False).items() if k != "k_zero"
    }


def test_index_correlation_links(make_trace) -> None:  # noqa: ANN001
    """A launch and its kernel point at each other; the sync call and the sync event share a
    correlation: HTA links them (``hta_compat``), ranksight's launch link does not (0: a
    correlation without a linked event); an event without a correlation is -1."""
    p = make_trace(EVENTS)
    for compat in (False, True):
        f = _ta(p, compat).t.get_trace(0).set_index("name")
        assert f.loc["k_inner", "index_correlation"] == f.loc["cudaLaunchKernel", "index"].iloc[1]
        launches = f.loc["cudaLaunchKernel"]
        assert launches["index_correlation"].iloc[1] == f.loc["k_inner", "index"]
        assert f.loc["outer", "index_correlation"] == -1
        sync, call = f.loc["Stream Sync"], f.loc["cudaStreamSynchronize"]
        if compat:
            assert (sync["index_correlation"], call["index_correlation"]) == (call["index"], sync["index"])
        else:
            assert (sync["index_correlation"], call["index_correlation"]) == (0, 0)
