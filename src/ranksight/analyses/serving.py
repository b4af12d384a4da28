"""``serving``: one row per engine step of an inference server (vLLM, SGLang), from the step annotations the
engines write (:mod:`ranksight.views.serving_steps`; ``docs/serving.md`` has every definition).

Per step (table ``steps``): ``phase``, ``batch_size``, ``prefill_tokens``, ``decode_tokens``, ``kv_tokens``
(as annotated), ``cpu_ms`` (the annotation), ``gpu_ms`` (first start to last end of the GPU work launched in
it), ``gpu_busy_ms`` (union of that work), ``step_ms`` (from the annotation's start to the later of its end
and its GPU work's end), ``gpu_busy_pct`` (= 100 × busy / step), ``host_gap_ms`` (from this step's CPU end
to the next step's CPU start: the host time between steps, 0 when they overlap), ``gpu_idle_between_ms``
(from this step's last GPU end to the next step's first GPU start, 0 when they overlap), ``period_ms``
(start to next start), ``tokens_per_s`` (= (prefill + decode tokens) / period, the step's own time for
the last step), ``tpot_ms`` (time per output token: the period of a step that decodes, one token per decode
request per step), ``activities`` (GPU activities launched in the step), ``graph_launches``.

Summaries: ``by_phase`` and ``by_batch`` (phase and batch size): steps, mean batch, tokens, mean and median
step, mean GPU busy share, mean host gap, tokens/s (Σ tokens / Σ period), mean TPOT. ``model``: least-squares
fit of ``step_ms`` against ``prefill_tokens``, ``decode_tokens`` and ``kv_tokens`` (terms without variance
left out) over every step with them, with its R². ``unknown``: annotations that look like step annotations
but are no known form (reported, never guessed).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, register
from ranksight.analyses._session import Session
from ranksight.errors import MissingDataError
from ranksight.views.serving_steps import serving_steps, unknown_step_names

if TYPE_CHECKING:
    from ranksight.model.run import Run
    from ranksight.model.trace import Trace

__all__ = ["serving", "rank_serving", "step_table", "fit_step_time", "MODEL_TERMS"]

#: the fitted model's terms (each left out when it has no variance or no value)
MODEL_TERMS = ("prefill_tokens", "decode_tokens", "kv_tokens")

STEP_COLUMNS = {
    "rank": pl.Int32,
    "step": pl.Int64,
    "phase": pl.String,
    "form": pl.String,
    "mode": pl.String,
    "batch_size": pl.Int64,
    "prefill_tokens": pl.Int64,
    "decode_tokens": pl.Int64,
    "kv_tokens": pl.Int64,
    "cpu_ms": pl.Float64,
    "gpu_ms": pl.Float64,
    "gpu_busy_ms": pl.Float64,
    "step_ms": pl.Float64,
    "gpu_busy_pct": pl.Float64,
    "host_gap_ms": pl.Float64,
    "gpu_idle_between_ms": pl.Float64,
    "period_ms": pl.Float64,
    "tokens_per_s": pl.Float64,
    "tpot_ms": pl.Float64,
    "activities": pl.Int64,
    "graph_launches": pl.Int64,
    "name": pl.String,
}
MODEL_SCHEMA = {
    "steps": pl.Int64,
    "r2": pl.Float64,
    "intercept_ms": pl.Float64,
    "ms_per_prefill_token": pl.Float64,
    "ms_per_decode_token": pl.Float64,
    "ms_per_kv_token": pl.Float64,
    "terms": pl.String,
    "note": pl.String,
}


def step_table(steps: pl.DataFrame, rank: int) -> pl.DataFrame:
    """The ``steps`` table of one rank from :func:`~ranksight.views.serving_steps.serving_steps` (module doc)."""
    ms = 1e6
    end = pl.max_horizontal("cpu_end_ns", "gpu_end_ns")
    nxt_cpu = pl.col("cpu_start_ns").shift(-1)
    nxt_gpu = pl.col("gpu_start_ns").shift(-1)
    s = steps.sort("cpu_start_ns").with_columns(
        pl.lit(rank, pl.Int32).alias("rank"),
        ((pl.col("cpu_end_ns") - pl.col("cpu_start_ns")) / ms).alias("cpu_ms"),
        ((pl.col("gpu_end_ns") - pl.col("gpu_start_ns")) / ms).alias("gpu_ms"),
        (pl.col("gpu_busy_ns") / ms).alias("gpu_busy_ms"),
        ((end - pl.col("cpu_start_ns")) / ms).alias("step_ms"),
        (100 * pl.col("gpu_busy_ns").fill_null(0) / (end - pl.col("cpu_start_ns"))).alias("gpu_busy_pct"),
        ((nxt_cpu - pl.col("cpu_end_ns")).clip(lower_bound=0) / ms).alias("host_gap_ms"),
        ((nxt_gpu - pl.col("gpu_end_ns")).clip(lower_bound=0) / ms).alias("gpu_idle_between_ms"),
        ((nxt_cpu - pl.col("cpu_start_ns")) / ms).alias("period_ms"),
        (pl.col("prefill_tokens") + pl.col("decode_tokens")).alias("__tokens"),
    )
    period = pl.coalesce("period_ms", "step_ms")
    s = s.with_columns(
        (pl.col("__tokens") / (period / 1e3)).alias("tokens_per_s"),
        pl.when(pl.col("decode_tokens") > 0).then(period).otherwise(None).alias("tpot_ms"),
    )
    return s.select(list(STEP_COLUMNS)).cast(STEP_COLUMNS)  # type: ignore[arg-type]


def fit_step_time(steps: pl.DataFrame) -> dict[str, Any]:
    """Least squares ``step_ms ≈ intercept + Σ coef × term`` over the steps with every term (module doc)."""
    out: dict[str, Any] = {k: None for k in MODEL_SCHEMA}
    usable = [t for t in MODEL_TERMS if steps[t].null_count() < steps.height]
    d = steps.drop_nulls(["step_ms", *usable]) if usable else steps.drop_nulls(["step_ms"])
    terms = [t for t in usable if d.height and d[t].n_unique() > 1]
    out["steps"] = d.height
    out["terms"] = ", ".join(terms) if terms else None
    if not terms:
        out["note"] = "no term varies across the steps: nothing to fit"
        return out
    if d.height < len(terms) + 2:
        out["note"] = f"{d.height} steps: too few for {len(terms) + 1} coefficients and a residual"
        return out
    x = np.column_stack([np.ones(d.height), *[d[t].cast(pl.Float64).to_numpy() for t in terms]])
    y = d["step_ms"].to_numpy()
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    resid = y - x @ coef
    ss_tot = float(((y - y.mean()) ** 2).sum())
    out["r2"] = 1 - float((resid**2).sum()) / ss_tot if ss_tot > 0 else None
    out["intercept_ms"] = float(coef[0])
    names = {
        "prefill_tokens": "ms_per_prefill_token",
        "decode_tokens": "ms_per_decode_token",
        "kv_tokens": "ms_per_kv_token",
    }
    for t, c in zip(terms, coef[1:], strict=True):
        out[names[t]] = float(c)
    return out


def rank_serving(trace: Trace) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One rank's ``steps`` table and its unknown step annotations."""
    return step_table(serving_steps(trace), trace.rank), unknown_step_names(trace)


def _summary(steps: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    tokens = pl.col("prefill_tokens") + pl.col("decode_tokens")
    period = pl.coalesce("period_ms", "step_ms")
    return (
        steps.group_by(by)
        .agg(
            pl.len().cast(pl.Int64).alias("steps"),
            pl.col("batch_size").mean().alias("batch_size_mean"),
            tokens.sum().alias("tokens"),
            pl.col("step_ms").mean().alias("step_ms_mean"),
            pl.col("step_ms").median().alias("step_ms_p50"),
            pl.col("gpu_busy_pct").mean().alias("gpu_busy_pct_mean"),
            pl.col("host_gap_ms").mean().alias("host_gap_ms_mean"),
            (tokens.sum() / (period.filter(tokens.is_not_null()).sum() / 1e3)).alias("tokens_per_s"),
            pl.col("tpot_ms").mean().alias("tpot_ms_mean"),
        )
        .sort(by, nulls_last=True)
    )


def serving(run: Run, *, ranks: Sequence[int] | None = None) -> AnalysisResult:
    """Engine steps of vLLM / SGLang servers with per-phase and per-batch-size summaries (module doc)."""
    sess = Session.of(run, ranks)
    per = sess.map(rank_serving)
    steps = pl.concat([per[r][0] for r in sess.ranks]) if sess.ranks else pl.DataFrame(schema=STEP_COLUMNS)
    unknown = pl.concat(
        [per[r][1].with_columns(pl.lit(r, pl.Int32).alias("rank")).select("rank", "name", "count") for r in sess.ranks]
    )
    if not steps.height:
        extra = ""
        if unknown.height:
            extra = f"; {unknown.height} annotation form(s) look like steps but are not known: " + ", ".join(
                f"`{n[:60]}`" for n in unknown["name"].unique().sort().to_list()[:3]
            )
        raise MissingDataError(
            "serving needs engine step annotations (vLLM execute_…, SGLang step[…]); these traces have none" + extra
        )
    notes = []
    by_rank = steps.group_by("rank").len()
    notes.append("steps per rank: " + ", ".join(f"rank {r}: {n}" for r, n in by_rank.sort("rank").iter_rows()))
    if unknown.height:
        notes.append(
            f"{unknown['count'].sum()} annotation(s) look like step annotations but are no known form (table unknown): "
            "not parsed, not guessed"
        )
    fit = fit_step_time(steps)
    if fit["note"]:
        notes.append(f"model: {fit['note']}")
    model = pl.DataFrame([fit], schema=MODEL_SCHEMA, orient="row")
    notes.append(
        "host_gap_ms: CPU end of a step to CPU start of the next; gpu_idle_between_ms: last GPU end to the next "
        "step's first GPU start; tpot_ms: the period of a step that decodes (one token per decode request)"
    )
    return AnalysisResult(
        {
            "steps": steps,
            "by_phase": _summary(steps, ["rank", "phase"]),
            "by_batch": _summary(steps, ["rank", "phase", "batch_size"]),
            "model": model,
            "unknown": unknown,
        },
        notes,
    )


register(
    AnalysisSpec(
        name="serving",
        func=serving,
        help="inference server steps (vLLM execute_…, SGLang step[…]): phase, batch, tokens, CPU/GPU step time, GPU "
        "busy share, host time between steps, tokens/s, TPOT; summaries by phase and batch size; step-time model",
    )
)
