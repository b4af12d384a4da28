"""Is a difference between two runs more than step-to-step noise? Welch's t-test, in numpy.

Each compared quantity has one sample per step on each side (``base`` and ``test``). For each
quantity (vectorised over rows of a matrix):

- ``delta`` = mean(test) − mean(base);
- ``se`` = sqrt(var_b / n_b + var_t / n_t) with sample variances (ddof = 1);
- ``df`` = Welch–Satterthwaite: se⁴ / ((var_b/n_b)² / (n_b − 1) + (var_t/n_t)² / (n_t − 1));
- ``p_value`` = two-sided P(|T_df| ≥ |delta| / se) from the Student t distribution;
- ``ci_low, ci_high`` = delta ∓ t_{1−α/2, df} · se.

Edge cases: with fewer than 2 samples on a side nothing can be said about noise: ``p_value`` and
the interval are NaN. When both sides have zero variance the difference is exact: ``p_value`` is
0 if the means differ and 1 if they do not, and the interval is [delta, delta].

:func:`bh_adjust` gives Benjamini–Hochberg adjusted p-values (false-discovery rate) for tables
with many rows (operators, kernels), so that among hundreds of unchanged operators a handful
of "significant" ones are not reported by chance.

The Student t CDF uses the regularised incomplete beta function (continued fraction, modified
Lentz), and the quantile inverts the CDF by safeguarded Newton steps: no scipy needed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Welch", "welch", "t_sf", "t_ppf", "bh_adjust", "METHOD"]

METHOD = (
    "Welch's t-test over {unit}; two-sided, alpha {alpha:g}; {ci:g}% confidence interval of the difference of means"
)


@dataclass(frozen=True)
class Welch:
    """Per-row results (numpy arrays of equal length)."""

    n_base: np.ndarray
    n_test: np.ndarray
    mean_base: np.ndarray
    mean_test: np.ndarray
    delta: np.ndarray
    se: np.ndarray
    df: np.ndarray
    p_value: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray


def _betacf(a: np.ndarray, b: np.ndarray, x: np.ndarray, iters: int = 300) -> np.ndarray:
    """Continued fraction of the incomplete beta function (Numerical Recipes ``betacf``)."""
    tiny = 1e-300
    qab = a + b
    qap = a + 1.0
    qam = a - 1.0
    c = np.ones_like(x)
    d = 1.0 - qab * x / qap
    d = np.where(np.abs(d) < tiny, tiny, d)
    d = 1.0 / d
    h = d.copy()
    for m in range(1, iters + 1):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = np.where(np.abs(d) < tiny, tiny, d)
        c = 1.0 + aa / c
        c = np.where(np.abs(c) < tiny, tiny, c)
        d = 1.0 / d
        h = h * d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = np.where(np.abs(d) < tiny, tiny, d)
        c = 1.0 + aa / c
        c = np.where(np.abs(c) < tiny, tiny, c)
        d = 1.0 / d
        de = d * c
        h = h * de
        if np.all(np.abs(de - 1.0) < 1e-14):
            break
    return h


def _lgamma(x: np.ndarray) -> np.ndarray:
    from math import lgamma

    return np.vectorize(lgamma, otypes=[float])(x)


def _betainc(a: np.ndarray, b: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Regularised incomplete beta I_x(a, b), elementwise."""
    a, b, x = np.broadcast_arrays(np.asarray(a, float), np.asarray(b, float), np.asarray(x, float))
    out = np.zeros(x.shape)
    out[x >= 1] = 1.0
    inside = (x > 0) & (x < 1)
    if not inside.any():
        return out
    ai, bi, xi = a[inside], b[inside], x[inside]
    lbt = _lgamma(ai + bi) - _lgamma(ai) - _lgamma(bi) + ai * np.log(xi) + bi * np.log1p(-xi)
    bt = np.exp(lbt)
    direct = xi < (ai + 1.0) / (ai + bi + 2.0)
    res = np.empty(xi.shape)
    if direct.any():
        res[direct] = bt[direct] * _betacf(ai[direct], bi[direct], xi[direct]) / ai[direct]
    if (~direct).any():
        r = ~direct
        res[r] = 1.0 - bt[r] * _betacf(bi[r], ai[r], 1.0 - xi[r]) / bi[r]
    out[inside] = res
    return out


def t_sf(t: np.ndarray, df: np.ndarray) -> np.ndarray:
    """Two-sided tail probability P(|T_df| ≥ |t|)."""
    t = np.abs(np.asarray(t, float))
    df = np.asarray(df, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        x = df / (df + t * t)
    p = _betainc(df / 2.0, np.full_like(x, 0.5), np.where(np.isfinite(x), x, 0.0))
    return np.where(np.isinf(t), 0.0, p)


def _t_pdf(x: np.ndarray, df: np.ndarray) -> np.ndarray:
    lc = _lgamma((df + 1.0) / 2.0) - _lgamma(df / 2.0) - 0.5 * np.log(df * np.pi)
    return np.exp(lc - (df + 1.0) / 2.0 * np.log1p(x * x / df))


def t_ppf(q: float, df: np.ndarray) -> np.ndarray:
    """Quantile t_{q, df} for q in (0.5, 1): Newton's method on the CDF from a bracketed start,
    with bisection steps whenever Newton would leave the bracket."""
    df = np.asarray(df, float)
    target = 2.0 * (1.0 - q)  # two-sided tail at the quantile
    lo = np.zeros_like(df)
    hi = np.full_like(df, 1e4)
    x = np.full_like(df, 2.0)
    for _ in range(60):
        tail = t_sf(x, df)
        err = tail - target  # > 0: x too small
        lo = np.where(err > 0, x, lo)
        hi = np.where(err > 0, hi, x)
        step = err / (2.0 * _t_pdf(x, df))
        nx = x + step
        nx = np.where((nx <= lo) | (nx >= hi) | ~np.isfinite(nx), (lo + hi) / 2.0, nx)
        if np.all(np.abs(nx - x) <= 1e-12 * np.maximum(1.0, np.abs(x))):
            x = nx
            break
        x = nx
    return x


def welch(base: np.ndarray, test: np.ndarray, *, alpha: float = 0.05) -> Welch:
    """Welch's t-test of ``test`` against ``base`` for each row.

    ``base`` is (rows × n_b) and ``test`` (rows × n_t); a 1-D array is one row. NaN entries are
    missing samples (rows may have different sample counts).
    """
    b = np.atleast_2d(np.asarray(base, float))
    t = np.atleast_2d(np.asarray(test, float))
    nb = np.sum(~np.isnan(b), axis=1).astype(float)
    nt = np.sum(~np.isnan(t), axis=1).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        mb = np.nanmean(b, axis=1) if b.shape[1] else np.full(b.shape[0], np.nan)
        mt = np.nanmean(t, axis=1) if t.shape[1] else np.full(t.shape[0], np.nan)
        vb = np.where(nb > 1, np.nansum((b - mb[:, None]) ** 2, axis=1) / (nb - 1), np.nan)
        vt = np.where(nt > 1, np.nansum((t - mt[:, None]) ** 2, axis=1) / (nt - 1), np.nan)
        delta = mt - mb
        wb, wt = vb / nb, vt / nt
        se = np.sqrt(wb + wt)
        df = (wb + wt) ** 2 / (wb**2 / (nb - 1) + wt**2 / (nt - 1))
    testable = (nb > 1) & (nt > 1)
    exact = testable & (se == 0)
    noisy = testable & (se > 0)
    p = np.full(delta.shape, np.nan)
    lo = np.full(delta.shape, np.nan)
    hi = np.full(delta.shape, np.nan)
    p[exact] = np.where(delta[exact] != 0, 0.0, 1.0)
    lo[exact] = hi[exact] = delta[exact]
    if noisy.any():
        tstat = delta[noisy] / se[noisy]
        p[noisy] = t_sf(tstat, df[noisy])
        half = t_ppf(1.0 - alpha / 2.0, df[noisy]) * se[noisy]
        lo[noisy] = delta[noisy] - half
        hi[noisy] = delta[noisy] + half
    return Welch(nb, nt, mb, mt, delta, se, np.where(noisy, df, np.nan), p, lo, hi)


def bh_adjust(p: np.ndarray) -> np.ndarray:
    """Benjamini–Hochberg adjusted p-values; NaN entries stay NaN and are not counted."""
    p = np.asarray(p, float)
    out = np.full(p.shape, np.nan)
    ok = ~np.isnan(p)
    m = int(ok.sum())
    if m == 0:
        return out
    pv = p[ok]
    order = np.argsort(pv)
    ranked = pv[order] * m / np.arange(1, m + 1)
    adj = np.minimum.accumulate(ranked[::-1])[::-1]
    res = np.empty(m)
    res[order] = np.minimum(adj, 1.0)
    out[ok] = res
    return out
