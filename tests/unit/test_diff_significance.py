"""Welch's t-test in numpy: reference values, hand-worked cases, edge cases, invariants."""

from __future__ import annotations

import numpy as np
import pytest

from ranksight.views.significance import bh_adjust, t_ppf, t_sf, welch


def test_student_t_reference_values():
    # two-sided tails and 97.5 % quantiles from printed Student t tables
    p = t_sf(np.array([2.0, 1.0, 0.0, 2.228139]), np.array([5.0, 10.0, 3.0, 10.0]))
    np.testing.assert_allclose(p, [0.101939, 0.340893, 1.0, 0.05], atol=2e-6)
    q = t_ppf(0.975, np.array([1.0, 5.0, 10.0, 30.0, 1000.0]))
    np.testing.assert_allclose(q, [12.706205, 2.570582, 2.228139, 2.042272, 1.962339], atol=2e-6)


def test_welch_worked_by_hand():
    # base mean 3, var 2.5 (n 5); test mean 7, var 14 (n 6)
    # se = sqrt(2.5/5 + 14/6) = 1.683251; t = 2.376350; df = 2.833333² / (0.25/4 + 5.444444/5) = 6.972256
    w = welch(np.array([1.0, 2, 3, 4, 5]), np.array([2.0, 4, 6, 8, 10, 12]))
    assert w.delta[0] == 4.0
    np.testing.assert_allclose([w.se[0], w.df[0]], [1.683251, 6.972256], atol=1e-6)
    assert 0.049 < w.p_value[0] < 0.0495  # t = 2.376 at 6.97 df
    half = t_ppf(0.975, w.df)[0] * w.se[0]
    np.testing.assert_allclose([w.ci_low[0], w.ci_high[0]], [4 - half, 4 + half])


def test_edge_cases():
    w = welch(
        np.array([[5.0, 5, 5], [5.0, 5, 5], [1.0, np.nan, np.nan]]),
        np.array([[5.0, 5, 5], [6.0, 6, 6], [1.0, 2.0, 3.0]]),
    )
    assert w.p_value[0] == 1.0 and w.ci_low[0] == w.ci_high[0] == 0.0  # identical constants
    assert w.p_value[1] == 0.0 and w.delta[1] == 1.0  # constants that differ: exact
    assert np.isnan(w.p_value[2]) and w.n_base[2] == 1  # one sample: no noise estimate


def test_invariants():
    rng = np.random.default_rng(7)
    a, b = rng.normal(10, 1, (50, 8)), rng.normal(10.5, 2, (50, 9))
    w, swapped, scaled = welch(a, b), welch(b, a), welch(3 * a + 1, 3 * b + 1)
    np.testing.assert_allclose(w.p_value, swapped.p_value)
    np.testing.assert_allclose(w.delta, -swapped.delta)
    np.testing.assert_allclose(w.p_value, scaled.p_value, rtol=1e-9)
    assert np.all((w.ci_low <= w.delta) & (w.delta <= w.ci_high))
    assert np.all(((w.p_value < 0.05) == ((w.ci_low > 0) | (w.ci_high < 0))) | np.isclose(w.p_value, 0.05))


def test_calibration_under_the_null():
    """Same distribution, 4,000 seeded draws: about 5 % of two-sided tests reject at 0.05."""
    rng = np.random.default_rng(2024)
    w = welch(rng.normal(0, 1, (4000, 6)), rng.normal(0, 1, (4000, 6)))
    assert 0.035 < float(np.mean(w.p_value < 0.05)) < 0.065


def test_bh_adjust():
    q = bh_adjust(np.array([0.01, 0.04, 0.03, 0.5, np.nan]))
    np.testing.assert_allclose(q[:4], [0.04, 0.04 * 4 / 3, 0.04 * 4 / 3, 0.5])
    assert np.isnan(q[4])
    assert np.isnan(bh_adjust(np.array([np.nan]))[0])


@pytest.mark.parametrize("df", [0.7, 1.0, 2.5, 1e5])
def test_ppf_inverts_sf(df):
    x = t_ppf(0.975, np.array([df]))
    np.testing.assert_allclose(t_sf(x, np.array([df])), [0.05], rtol=1e-8)
