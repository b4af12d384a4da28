"""Steps: the engine steps of an inference server (``serving``), shown when the traces carry vLLM or SGLang
step annotations."""

from __future__ import annotations

from typing import Any

import polars as pl

from ranksight.report.html.sections import Ctx, Skip, section, wide

#: Steps drawn one by one in the step chart (the table has all of them).
MAX_STEPS_CHARTED = 400
_UNITS = {
    "cpu_ms": "ms",
    "gpu_ms": "ms",
    "gpu_busy_ms": "ms",
    "step_ms": "ms",
    "host_gap_ms": "ms",
    "gpu_idle_between_ms": "ms",
    "period_ms": "ms",
    "tpot_ms": "ms",
    "step_ms_mean": "ms",
    "step_ms_p50": "ms",
    "host_gap_ms_mean": "ms",
    "tpot_ms_mean": "ms",
    "intercept_ms": "ms",
}


@section(
    "serving",
    "Serving",
    needs=("serving",),
    group="Steps",
    order=5,
    help="One row per engine step from the step annotations vLLM (execute_…) and SGLang (step[…]) write: phase, "
    "batch size, tokens, the step's CPU and GPU time, how busy the GPU was in it, and the host time between steps "
    "(scheduler overhead); step time by batch size and phase, and a least-squares model of step time against "
    "tokens and context length. Definitions: docs/serving.md.",
)
def serving(ctx: Ctx) -> list[dict[str, Any]]:
    tabs = ctx.result("serving").tables
    steps, by_phase, by_batch, model = tabs["steps"], tabs["by_phase"], tabs["by_batch"], tabs["model"]
    if steps.height == 0:
        raise Skip("`serving`: no engine step annotation in these traces")
    m = model.row(0, named=True)
    period_ms = float(steps.select(pl.coalesce("period_ms", "step_ms")).to_series().sum())
    tokens = int((steps["prefill_tokens"] + steps["decode_tokens"]).sum())
    facts: list[tuple[str, Any]] = [
        ("steps", steps.height),
        ("phases", ", ".join(sorted({p for p in steps["phase"].to_list() if p is not None})) or "unknown"),
        ("mean step (ms)", steps["step_ms"].mean()),
        ("mean GPU busy in a step (%)", steps["gpu_busy_pct"].mean()),
    ]
    if steps["host_gap_ms"].drop_nulls().len():
        facts.append(("mean host time between steps (ms)", steps["host_gap_ms"].mean()))
    if tokens and period_ms:
        facts.append(("tokens/s over the steps", tokens / (period_ms / 1e3)))
    if m["r2"] is not None:
        facts.append((f"step-time model R² ({m['terms']})", m["r2"]))
    blocks: list[dict[str, Any]] = [ctx.kv(facts, id="serving-facts", title="Engine steps")]
    sized = by_batch.filter(pl.col("batch_size").is_not_null())
    if sized.height:
        sized = sized.with_columns(pl.col("phase").fill_null("unknown"))
        mean = sized.group_by("batch_size", "phase").agg(pl.col("step_ms_mean").mean())
        cats, bars = wide(mean, "batch_size", "phase", "step_ms_mean")
        blocks.append(
            ctx.bar(
                [f"bs {b}" for b in cats],
                bars,
                id="serving-batch-chart",
                title="Mean step time by batch size and phase",
                stacked=False,
                unit="ms",
                y_label="ms",
            )
        )
    shown = steps.head(MAX_STEPS_CHARTED)
    idle_in = (shown["step_ms"] - shown["gpu_busy_ms"].fill_null(0)).clip(lower_bound=0)
    blocks.append(
        ctx.bar(
            [f"r{r} s{s}" for r, s in shown.select("rank", "step").iter_rows()],
            {
                "GPU busy": shown["gpu_busy_ms"].fill_null(0).to_list(),
                "GPU idle in the step": idle_in.to_list(),
                "host time to the next step": shown["host_gap_ms"].fill_null(0).to_list(),
            },
            id="serving-steps-chart",
            title="Each step: GPU busy, GPU idle and the host time before the next step"
            + (f" (first {MAX_STEPS_CHARTED} of {steps.height})" if steps.height > MAX_STEPS_CHARTED else ""),
            unit="ms",
            y_label="ms",
        )
    )
    blocks.append(ctx.table(by_phase, id="serving-phases", title="By phase", units=_UNITS))
    blocks.append(ctx.table(by_batch, id="serving-batches", title="By phase and batch size", units=_UNITS))
    blocks.append(ctx.table(model, id="serving-model", title="Step time against tokens (least squares)", units=_UNITS))
    blocks.append(ctx.table(steps, id="serving-steps", title="Steps", units=_UNITS))
    if tabs["unknown"].height:
        blocks.append(
            ctx.table(
                tabs["unknown"], id="serving-unknown", title="Step-like annotations of no known form (not parsed)"
            )
        )
    return blocks
