"""``alpha-beta``: a latency–bandwidth cost model of the trace's own collectives.

For every (collective type, group size) the transfer time of each matched instance (time after the
last rank arrived, so waiting is excluded) is fitted as ``T = α + bytes / β`` with the
Theil–Sen estimator: the slope ``1/β`` is the median of the slopes of all pairs of points with
different sizes, ``α`` the median of ``T − bytes/β``. When the slope is not positive (or all sizes
are equal) the fit is a constant ``α = median T`` and β is left empty. It ignores up to ~29 % of wild points, needs
no scipy, and is exact for two points. Reported with R² (on all points), the median absolute
residual and each point's residual.

Comparison with the flat-ring model ``T = steps·a + factor·S/B`` (all_reduce 2(n−1) steps and
factor 2(n−1)/n; all_gather / reduce_scatter / all_to_all (n−1) and (n−1)/n; broadcast / reduce
(n−1) and 1; send / recv 1 and 1): the fit implies a per-step latency ``a = α / steps`` and a link
bandwidth ``B = β × factor`` (= bus bandwidth). ``predict(type, group_size, bytes)`` uses the
fit of that pair, or the type's ring parameters rescaled to another group size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, Option, register
from ranksight.analyses.collectives import ALIGN_OPTION, comm_data, single_rank_note
from ranksight.errors import MissingDataError
from ranksight.views.comm_types import ring_coefficients

if TYPE_CHECKING:
    from ranksight.model.run import Run

__all__ = ["Fit", "AlphaBetaModel", "theil_sen", "fit_alpha_beta", "alpha_beta", "parse_bytes"]


def parse_bytes(text: str) -> int:
    """``4096``, ``64KiB``, ``1MB``, ``2GiB`` → bytes (binary multiples for KB/KiB alike)."""
    t = text.strip().upper().replace("IB", "B")
    for suffix, mult in (("KB", 1 << 10), ("MB", 1 << 20), ("GB", 1 << 30), ("TB", 1 << 40), ("B", 1)):
        if t.endswith(suffix):
            return int(float(t[: -len(suffix)]) * mult)
    return int(float(t))


def theil_sen(x: np.ndarray, y: np.ndarray) -> tuple[float, float] | None:
    """``(intercept, slope)`` of the Theil–Sen line; None with fewer than two distinct x."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    i, j = np.triu_indices(x.size, k=1)
    dx = x[j] - x[i]
    ok = dx != 0
    if not ok.any():
        return None
    slope = float(np.median((y[j] - y[i])[ok] / dx[ok]))
    intercept = float(np.median(y - slope * x))
    return intercept, slope


@dataclass(frozen=True)
class Fit:
    """One fitted pair: ``T_ns = alpha_ns + bytes · slope_ns_per_byte``."""

    coll_type: str
    group_size: int | None
    points: int
    distinct_sizes: int
    alpha_ns: float
    slope_ns_per_byte: float
    r2: float | None
    median_abs_residual_ns: float

    @property
    def beta_gbps(self) -> float | None:
        """Bandwidth β in GB/s (bytes per ns); None when the fitted slope is not positive."""
        return 1.0 / self.slope_ns_per_byte if self.slope_ns_per_byte > 0 else None

    def predict_ns(self, nbytes: float) -> float:
        return self.alpha_ns + max(self.slope_ns_per_byte, 0.0) * nbytes

    def ring(self) -> tuple[float, float | None] | None:
        """``(per-step latency a_ns, link bandwidth B_gbps)`` implied by the flat-ring model."""
        if self.group_size is None:
            return None
        c = ring_coefficients(self.coll_type, self.group_size)
        if c is None or c[0] <= 0:
            return None
        steps, factor = c
        beta = self.beta_gbps
        return self.alpha_ns / steps, (beta * factor if beta is not None else None)


@dataclass
class AlphaBetaModel:
    """Fits per (type, group size) with a prediction API."""

    fits: dict[tuple[str, int | None], Fit] = field(default_factory=dict)

    def predict(self, coll_type: str, group_size: int | None, nbytes: float) -> float:
        """Predicted transfer time (ns) of a collective of ``nbytes``.

        Uses the (type, group size) fit; for another group size of a fitted type, the ring model
        with that fit's per-step latency and link bandwidth. Raises MissingDataError otherwise."""
        f = self.fits.get((coll_type, group_size))
        if f is not None:
            return f.predict_ns(nbytes)
        for (t, _n), g in sorted(self.fits.items(), key=lambda kv: -kv[1].points):
            ring = g.ring()
            c = ring_coefficients(coll_type, group_size) if group_size else None
            if t == coll_type and ring is not None and c is not None:
                a, b = ring
                if b:
                    return c[0] * a + c[1] * nbytes / b
        raise MissingDataError(f"no alpha-beta fit for {coll_type} with group size {group_size}")


def fit_alpha_beta(points: pl.DataFrame) -> AlphaBetaModel:
    """Fit every (coll_type, group_size) of ``points`` (columns ``coll_type, group_size, bytes,
    transfer_ns``)."""
    model = AlphaBetaModel()
    for (t, n), g in points.group_by(["coll_type", "group_size"], maintain_order=True):
        x = g["bytes"].to_numpy().astype(np.float64)
        y = g["transfer_ns"].to_numpy().astype(np.float64)
        line = theil_sen(x, y)
        if line is None or line[1] <= 0:  # no size dependence visible: a constant
            line = None
            alpha, slope = float(np.median(y)), 0.0
        else:
            alpha, slope = line
        pred = alpha + slope * x
        ss_tot = float(((y - y.mean()) ** 2).sum())
        r2 = 1.0 - float(((y - pred) ** 2).sum()) / ss_tot if ss_tot > 0 else None
        model.fits[(str(t), None if n is None else int(n))] = Fit(
            str(t),
            None if n is None else int(n),
            int(x.size),
            int(np.unique(x).size),
            alpha,
            slope,
            r2,
            float(np.median(np.abs(y - pred))),
        )
    return model


def _fits_table(model: AlphaBetaModel) -> pl.DataFrame:
    rows = []
    for f in model.fits.values():
        ring = f.ring()
        rows.append(
            {
                "coll_type": f.coll_type,
                "group_size": f.group_size,
                "points": f.points,
                "distinct_sizes": f.distinct_sizes,
                "alpha_us": round(f.alpha_ns / 1e3, 3),
                "beta_gbps": f.beta_gbps,
                "r2": f.r2,
                "median_abs_residual_us": round(f.median_abs_residual_ns / 1e3, 3),
                "ring_step_latency_us": round(ring[0] / 1e3, 3) if ring else None,
                "ring_link_gbps": ring[1] if ring else None,
            }
        )
    schema = {
        "coll_type": pl.String,
        "group_size": pl.Int64,
        "points": pl.Int64,
        "distinct_sizes": pl.Int64,
        "alpha_us": pl.Float64,
        "beta_gbps": pl.Float64,
        "r2": pl.Float64,
        "median_abs_residual_us": pl.Float64,
        "ring_step_latency_us": pl.Float64,
        "ring_link_gbps": pl.Float64,
    }
    return pl.DataFrame(rows, schema=schema).sort(["coll_type", "group_size"])


def alpha_beta(
    run: Run, *, ranks: Sequence[int] | None = None, no_align: bool = False, predict: Sequence[int] | None = None
) -> AnalysisResult:
    """α (latency) and β (bandwidth) per (type, group size) from transfer time vs bytes."""
    cd = comm_data(run, ranks, align=not no_align)
    notes = [n for n in cd.notes if not n.startswith("times in")]
    pts = (
        cd.instances.filter(
            (pl.col("ranks_present") >= 2)
            & pl.col("transfer_ns").is_not_null()
            & (pl.col("transfer_ns") > 0)
            & pl.col("bytes").is_not_null()
        ).select("instance", "coll_type", "group_size", "bytes", "transfer_ns")
        if cd.instances.height
        else pl.DataFrame()
    )
    if len(cd.ranks) < 2 or pts.height == 0:
        if len(cd.ranks) >= 2:
            notes.append("no matched collective with a size and a transfer time: nothing to fit")
        else:
            notes = [single_rank_note(cd.ranks)]
        return AnalysisResult({"fits": _fits_table(AlphaBetaModel()), "residuals": pl.DataFrame()}, notes)
    model = fit_alpha_beta(pts)
    coef = pl.DataFrame(
        [(t, n, f.alpha_ns, max(f.slope_ns_per_byte, 0.0)) for (t, n), f in model.fits.items()],
        schema={"coll_type": pl.String, "group_size": pl.Int64, "__a": pl.Float64, "__s": pl.Float64},
        orient="row",
    )
    pts = pts.join(coef, on=["coll_type", "group_size"], how="left", nulls_equal=True)
    pred = pl.col("__a") + pl.col("__s") * pl.col("bytes")
    res = (
        pts.with_columns((pred / 1e3).round(3).alias("predicted_us"))
        .select(
            "instance",
            "coll_type",
            "group_size",
            "bytes",
            (pl.col("transfer_ns") / 1e3).alias("transfer_us"),
            "predicted_us",
        )
        .with_columns((pl.col("transfer_us") - pl.col("predicted_us")).round(3).alias("residual_us"))
    )
    tables = {"fits": _fits_table(model), "residuals": res}
    if predict:
        rows = [(t, n, int(b), model.predict(t, n, b) / 1e3) for (t, n) in model.fits for b in predict]
        tables["predictions"] = pl.DataFrame(
            rows,
            schema={"coll_type": pl.String, "group_size": pl.Int64, "bytes": pl.Int64, "predicted_us": pl.Float64},
            orient="row",
        )
    flat = [f for f in model.fits.values() if f.beta_gbps is None]
    if flat:
        notes.append(
            f"{len(flat)} fit(s) show no growth of transfer time with size: β not identifiable, α = median transfer "
            "time"
        )
    thin = [f for f in model.fits.values() if f.distinct_sizes < 3]
    if thin:
        notes.append(f"{len(thin)} fit(s) rest on fewer than 3 distinct sizes: α and β are poorly determined there")
    notes.append("T = α + bytes/β (Theil–Sen on transfer time after the last arrival); ring: a = α/steps, B = β·factor")
    return AnalysisResult(tables, notes)


register(
    AnalysisSpec(
        name="alpha-beta",
        func=alpha_beta,
        help="latency α and bandwidth β per (collective type, group size), fitted robustly, with R², residuals and the "
        "ring model",
        options=(
            ALIGN_OPTION,
            Option(
                "predict",
                parse_bytes,
                None,
                "also predict the transfer time of this message size (repeatable)",
                multiple=True,
            ),
        ),
    )
)
