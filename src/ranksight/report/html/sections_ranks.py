"""Run: "Across ranks", the section of a report of more than ``MANY_RANKS`` ranks.

The headline numbers of every rank (``ranksight summary``'s, read from the analyses), their
distribution across ranks with the outlier ranks named, rank × step heatmaps, and the detail of the
worst ranks or any rank the reader picks. Definitions: ``ranksight.report.html.ranks`` and
docs/report.md ("Many ranks").
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from ranksight.report.html import ranks as rkmod
from ranksight.report.html.payload import series
from ranksight.report.html.sections import SPREAD_HELP, Ctx, Omit, Skip, section

#: Rank × step heatmaps: (analysis, options, table, column, title, unit scale to ms).
STEP_HEATMAPS: tuple[tuple[str, dict[str, Any], str, str, str], ...] = (
    ("temporal", {"per_step": True}, "per_step", "step_time_us", "Step window, rank × step"),
    ("temporal", {"per_step": True}, "per_step", "idle_us", "GPU idle in the step window, rank × step"),
    ("exposed-comm", {}, "per_step", "exposed_us", "Exposed communication in the step window, rank × step"),
)


def unit_of(column: str) -> str:
    """The unit a headline column's name carries."""
    for suffix, unit in (("_ms", "ms"), ("_us", "µs"), ("_pct", "%"), ("_gib", "GiB")):
        if column.endswith(suffix):
            return unit
    return ""


def _headline_columns(per_rank: pl.DataFrame) -> list[str]:
    return [c for c in per_rank.columns if c != "rank" and per_rank[c].dtype.is_numeric()]


@section(
    "ranks",
    "Across ranks",
    needs=("summary", "temporal", "exposed-comm", "stragglers"),
    group="Run",
    order=20,
    help=f"With more than {rkmod.MANY_RANKS} ranks the report shows distributions across ranks instead of one "
    "bar or row per rank. Per headline (ranksight summary's numbers, one definition each): nearest-rank "
    "percentiles (pXX is the value of the rank at position ceil(XX/100·n), ascending), the ranks with the "
    "minimum and maximum, and the outliers: ranks whose robust z-score, (value − median) / (1.4826 · median "
    f"absolute deviation), exceeds {rkmod.OUTLIER_Z} in absolute value. The worst ranks have the largest z on "
    "the bad side of a headline (slower, idler, more waiting). Pick any rank to see its numbers, steps and "
    "its rows in every per-rank table; the worst, outlier, minimum and maximum ranks are always embedded "
    "in full.",
)
def ranks_section(ctx: Ctx) -> list[dict[str, Any]]:
    if not ctx.many:
        raise Omit(f"{len(ctx.session.ranks)} ranks: every section shows each rank")
    per_rank = ctx.headlines()
    cols = _headline_columns(per_rank)
    if not cols:
        raise Skip("no headline number per rank (no analysis with per-rank data)")
    focus = ctx.focus()
    ranks = [int(r) for r in per_rank["rank"].to_list()]
    from ranksight.report.headline import HEADLINES

    defs = {c: d for h in HEADLINES for c, d in h.columns.items()}
    spreads = [(c, unit_of(c), rkmod.spread(ranks, per_rank[c].to_list())) for c in cols]
    n_out = sorted({lab for _, _, sp in spreads if sp is not None for lab, _ in sp.outliers})
    facts: list[tuple[str, Any]] = [
        ("ranks", len(ranks)),
        ("worst ranks", ", ".join(str(r) for r in focus.worst) or "none"),
        ("outlier ranks", f"{len(n_out)}: {rkmod.rank_ranges(n_out)}" if n_out else "none"),
        ("ranks embedded in full", rkmod.rank_ranges(focus.ranks)),
    ]
    metrics = []
    for c, (_, _, sp) in zip(cols, spreads, strict=True):
        v = per_rank[c].cast(pl.Float64).to_numpy()
        z = np.full(v.shape, np.nan)
        ok = np.isfinite(v)
        if ok.any():
            z[ok] = rkmod.robust_z(v[ok])
        metrics.append(
            {
                "name": ctx.strings(c),
                "unit": unit_of(c),
                "help": ctx.strings(defs.get(c, c)),
                "worse": rkmod.HIGHER_IS_WORSE.get(c, 0),
                "p50": None if sp is None else series([sp.p50])[0],
                "values": series(v.tolist()),
                "z": series(z.tolist()),
            }
        )
    detail = {
        "type": "rankdetail",
        "id": "ranks-detail",
        "ranks": ranks,
        "metrics": metrics,
        "worst": focus.worst,
        "outliers": focus.outliers,
        "focus": focus.ranks,
        "outlier_z": rkmod.OUTLIER_Z,
    }
    dist = rkmod.spread_frame(spreads).with_columns(
        pl.col("metric").replace_strict(defs, default=pl.col("metric")).alias("definition")
    )
    blocks: list[dict[str, Any]] = [
        ctx.kv(facts, id="ranks-facts"),
        ctx.table(
            dist,
            id="ranks-spread",
            title="Headlines across ranks",
            help={**SPREAD_HELP, "definition": "the headline's definition (ranksight summary)"},
        ),
        {
            "type": "chart",
            "chart": "rankbars",
            "id": "ranks-chart",
            "title": "Headlines per rank (pick one; click a rank for its detail)",
            "ranks": ranks,
            "labels": None,
            "series": [{"name": m["name"], "values": m["values"], "unit": m["unit"]} for m in metrics],
            "stacked": False,
            "select": True,
            "unit": "",
            "y_label": "",
        },
        detail,
    ]
    blocks += _step_heatmaps(ctx)
    blocks.append(
        ctx.table(
            per_rank,
            id="ranks-headlines",
            title="Headlines per rank",
            help={c: defs[c] for c in per_rank.columns if c in defs},
        )
    )
    return blocks


def _step_heatmaps(ctx: Ctx) -> list[dict[str, Any]]:
    out = []
    for name, opts, table, col, title in STEP_HEATMAPS:
        try:
            t = ctx.tables(name, table, **opts)[table]
        except Skip:
            continue
        if col not in t.columns or "step" not in t.columns:
            continue
        t = t.select(pl.col("rank").cast(pl.Int64), pl.col("step"), (pl.col(col) / 1e3).alias("v"))
        steps = sorted(t["step"].drop_nulls().unique().to_list())
        if not steps:
            continue
        wide = t.pivot(on="step", index="rank", values="v", aggregate_function="sum").sort("rank")
        keys = [str(s) for s in steps]
        values = wide.select([pl.col(k) if k in wide.columns else pl.lit(None).alias(k) for k in keys]).to_numpy()
        rk = [int(r) for r in wide["rank"].to_list()]
        out.append(
            ctx.heatmap(
                [f"rank {r}" for r in rk],
                [f"step {s}" for s in steps],
                values.astype(float).tolist(),
                id=f"ranks-heat-{name}-{col}",
                title=title,
                unit="ms",
                x_label="step",
                y_label="rank",
                row_ranks=rk,
            )
        )
    return out
