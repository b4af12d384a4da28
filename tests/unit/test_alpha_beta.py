"""alpha-beta: Theil–Sen fit, prediction API, ring comparison, on exact synthetic collectives."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.unit.dist_traces import rank_events, write_rank

import ranksight
from ranksight.analyses import run_analysis
from ranksight.analyses.alpha_beta import AlphaBetaModel, fit_alpha_beta, parse_bytes, theil_sen
from ranksight.errors import MissingDataError

ALPHA_US = 10.0
BETA_GBPS = 10.0  # bytes per ns


def _two_ranks(tmp_path: Path, outlier: bool) -> ranksight.Run:
    sizes = [1 << k for k in range(10, 21)]  # 1 KiB .. 1 MiB, in bytes
    t0 = 1000.0
    colls = []
    for i, b in enumerate(sizes):
        transfer = ALPHA_US + b / BETA_GBPS / 1e3  # µs
        if outlier and i == 5:
            transfer *= 5
        colls.append(
            {"start": t0, "end": t0 + transfer, "nelems": b // 4, "group_size": 2, "ranks": "[0, 1]", "seq": i}
        )
        t0 += 1000
    for r in (0, 1):
        write_rank(tmp_path, r, rank_events(colls=colls, steps=[(1, 900, t0)]), world=2)
    return ranksight.load(tmp_path)


@pytest.mark.parametrize("outlier", [False, True])
def test_fit_recovers_alpha_beta(tmp_path: Path, outlier: bool) -> None:
    res = run_analysis("alpha-beta", _two_ranks(tmp_path, outlier), predict=[1 << 22])
    f = res["fits"].row(0, named=True)
    assert (f["coll_type"], f["group_size"], f["points"], f["distinct_sizes"]) == ("all_reduce", 2, 11, 11)
    assert f["alpha_us"] == pytest.approx(ALPHA_US, abs=1e-3)
    assert f["beta_gbps"] == pytest.approx(BETA_GBPS, rel=1e-4)
    # ring model for all_reduce, n = 2: 2(n-1) = 2 steps, factor 2(n-1)/n = 1
    assert f["ring_step_latency_us"] == pytest.approx(ALPHA_US / 2, abs=1e-3)
    assert f["ring_link_gbps"] == pytest.approx(BETA_GBPS, rel=1e-4)
    if outlier:
        assert f["r2"] < 0.9  # the outlier hurts R², not the robust fit
        assert res["residuals"]["residual_us"].abs().max() == pytest.approx(
            4 * (ALPHA_US + 32768 / BETA_GBPS / 1e3), abs=1e-2
        )
    else:
        assert f["r2"] == pytest.approx(1.0)
    pred = res["predictions"].row(0, named=True)
    assert pred["predicted_us"] == pytest.approx(ALPHA_US + (1 << 22) / BETA_GBPS / 1e3, rel=1e-4)


def test_predict_api_and_ring_rescaling() -> None:
    pts = pl.DataFrame(
        {
            "coll_type": ["all_reduce"] * 3,
            "group_size": [8] * 3,
            "bytes": [1000, 2000, 3000],
            "transfer_ns": [2000.0, 3000.0, 4000.0],
        }
    )
    m = fit_alpha_beta(pts)
    assert m.predict("all_reduce", 8, 5000) == pytest.approx(6000.0)
    # another group size: ring model with a = α/14 per step and B = β·1.75
    a, b = m.fits[("all_reduce", 8)].ring()
    assert m.predict("all_reduce", 4, 5000) == pytest.approx(6 * a + 1.5 * 5000 / b)
    with pytest.raises(MissingDataError):
        m.predict("all_gather", 8, 5000)
    with pytest.raises(MissingDataError):
        AlphaBetaModel().predict("all_reduce", 8, 1)


def test_flat_transfer_gives_constant_fit() -> None:
    pts = pl.DataFrame(
        {
            "coll_type": ["all_to_all"] * 3,
            "group_size": [8] * 3,
            "bytes": [100, 200, 300],
            "transfer_ns": [9000.0, 7000.0, 8000.0],
        }
    )
    f = fit_alpha_beta(pts).fits[("all_to_all", 8)]
    assert f.beta_gbps is None and f.alpha_ns == 8000.0


def test_parse_bytes() -> None:
    assert parse_bytes("4096") == 4096
    assert parse_bytes("64KiB") == 65536
    assert parse_bytes("1MB") == 1 << 20
    assert parse_bytes("2GiB") == 2 << 30


@settings(max_examples=50, deadline=None)
@given(
    a=st.floats(0, 1e4),
    s=st.floats(1e-4, 10),
    xs=st.lists(st.integers(1, 10**9), min_size=2, max_size=30, unique=True),
)
def test_theil_sen_exact_on_lines(a: float, s: float, xs: list[int]) -> None:
    x = np.array(xs, dtype=np.float64)
    got = theil_sen(x, a + s * x)
    assert got is not None
    assert got[1] == pytest.approx(s, rel=1e-6)
    assert got[0] == pytest.approx(a, abs=1e-6 * (1 + abs(a) + s * x.max()))


def test_dlrm_fits(dlrm_run: ranksight.Run) -> None:
    f = run_analysis("alpha-beta", dlrm_run)["fits"]
    assert f["coll_type"].to_list() == ["all_reduce", "all_to_all"]
    assert f["points"].to_list() == [3, 5]
    ar = f.row(0, named=True)
    assert ar["alpha_us"] == pytest.approx(19.48, abs=0.01) and ar["beta_gbps"] == pytest.approx(24.07, abs=0.01)
    assert ar["ring_link_gbps"] == pytest.approx(ar["beta_gbps"] * 1.75)


@pytest.fixture(scope="module")
def dlrm_run() -> ranksight.Run:
    from ranksight.data import example_path

    return ranksight.load(example_path("dlrm"))
