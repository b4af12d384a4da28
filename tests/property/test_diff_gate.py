"""The CI gate on step samples: never trips on noise, always trips on a clear regression.

"Noise" = both sides drawn from one distribution (normal, log-normal or uniform, coefficient of
variation up to 2 %, the usual step-to-step spread of a steady training loop), 5–40 steps per side,
optionally with one outlier step (up to +200 %, a GC pause or a checkpoint) on either side. At the
default settings (5 % threshold, alpha 0.05) the gate must pass: a single outlier moves the mean
but inflates the variance as much (Welch's t stays ≈ 1), and 2 % noise cannot move a mean of 5+
steps by 5 % (that is ≥ 3.9 standard errors of the difference).
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ranksight.analyses.diff import gate_samples


def _draw(rng: np.random.Generator, dist: str, mean: float, cv: float, n: int) -> np.ndarray:
    if dist == "normal":
        return rng.normal(mean, cv * mean, n)
    if dist == "lognormal":
        s = np.sqrt(np.log1p(cv * cv))
        return mean * rng.lognormal(-s * s / 2, s, n)
    half = cv * mean * np.sqrt(3.0)  # uniform with the same standard deviation
    return rng.uniform(mean - half, mean + half, n)


@settings(max_examples=150, derandomize=True, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n_base=st.integers(5, 40),
    n_test=st.integers(5, 40),
    cv=st.floats(0.0, 0.02),
    mean=st.floats(1e4, 1e10),
    dist=st.sampled_from(["normal", "lognormal", "uniform"]),
    outlier=st.sampled_from([None, "base", "test"]),
    outlier_size=st.floats(0.05, 2.0),
)
def test_same_distribution_never_trips(seed, n_base, n_test, cv, mean, dist, outlier, outlier_size):
    rng = np.random.default_rng(seed)
    b = _draw(rng, dist, mean, cv, n_base)
    t = _draw(rng, dist, mean, cv, n_test)
    if outlier == "base":
        b[rng.integers(n_base)] += outlier_size * mean
    elif outlier == "test":
        t[rng.integers(n_test)] += outlier_size * mean
    v = gate_samples(b, t, threshold=0.05)
    assert not v.failed, v.line


@settings(max_examples=60, derandomize=True, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(5, 40),
    cv=st.floats(0.0, 0.01),
    slowdown=st.floats(0.10, 1.0),
    dist=st.sampled_from(["normal", "lognormal", "uniform"]),
)
def test_clear_regression_always_trips(seed, n, cv, slowdown, dist):
    """At least twice the threshold, with 1 % noise: always a failure (the gate is not blind)."""
    rng = np.random.default_rng(seed)
    b = _draw(rng, dist, 1e8, cv, n)
    t = _draw(rng, dist, 1e8 * (1 + slowdown), cv, n)
    v = gate_samples(b, t, threshold=0.05)
    assert v.failed, v.line
    assert not gate_samples(t, b, threshold=0.05).failed  # the reverse is an improvement
