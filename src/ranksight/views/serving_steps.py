"""Serving engine steps of one rank, from the step annotations vLLM and SGLang write into the trace.

Forms parsed (``docs/serving.md`` has each with its evidence); anything else that starts like a step
annotation (``execute_…``, ``step[…``) is **reported as unknown, never guessed**:

- ``vllm-stats``: ``execute_<T>_context_<Nc>(sq<a>sk<b>sqsq<c>sqsk<d>)_generation_<Ng>(sq<e>sk<f>sqsq<g>sqsk<h>)``
  (the vLLM and SGLang traces of TraceLens): ``T`` scheduled tokens; ``Nc`` context (prefill) requests with
  Σ query tokens ``a``, Σ sequence (KV) lengths ``b``, Σ query² ``c``, Σ query·sequence ``d``; ``Ng``
  generation (decode) requests likewise. Checked on every name: ``T = a + e``; a form whose sums disagree is
  reported as unknown.
- ``vllm``: ``execute_context_<Nc>(<tokens>[_<x>])_generation_<Ng>(<tokens>[_<x>])`` (vLLM's step ranges):
  requests and new tokens of each side; the second number ``x`` is kept uninterpreted.
- ``sglang``: ``step[<MODE> bs=<N>[ toks=<T>]]``: SGLang's forward mode and batch size (and tokens for
  extend steps).

Per step (``steps``): ``phase`` — ``decode`` (generation requests only), ``prefill`` (context requests only,
every sequence new), ``chunked prefill`` (context requests only, some continuing earlier KV: Σ sequence >
Σ query; a later prefill chunk or a prefix-cache hit, which the annotation cannot tell apart), ``mixed``
(both); SGLang ``DECODE`` → decode, ``EXTEND`` → prefill, ``MIXED`` → mixed, other modes → null with the
mode kept — ``batch_size`` (requests), ``prefill_tokens``, ``decode_tokens``, ``kv_tokens`` (Σ sequence
lengths, as annotated; null when the form has none). Annotations nested in another step annotation on the
same thread (SGLang's ``step[…]`` inside TraceLens's ``execute_…``) describe the same step: their fields
fill what the outer one lacks.

Timing per step: the CPU span of the (outermost) annotation; its GPU work = the activities launched by
runtime/driver calls of the same process that start inside that span; ``gpu_busy_ns`` their union.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import polars as pl

from ranksight.model.kinds import GPU_KINDS, LAUNCH_KINDS
from ranksight.views.enclosing import parent_spans

if TYPE_CHECKING:
    from ranksight.model.trace import Trace

__all__ = ["parse_step_name", "serving_steps", "unknown_step_names", "STEP_SCHEMA", "FORMS", "PHASES"]

FORMS = ("vllm-stats", "vllm", "sglang")
PHASES = ("prefill", "chunked prefill", "decode", "mixed")

_CANDIDATE = re.compile(r"^(?:execute_|step\[)")
_VLLM_STATS = re.compile(
    r"^execute_(\d+)_context_(\d+)\(sq(\d+)sk(\d+)sqsq(\d+)sqsk(\d+)\)"
    r"_generation_(\d+)\(sq(\d+)sk(\d+)sqsq(\d+)sqsk(\d+)\)$"
)
_VLLM = re.compile(r"^execute_context_(\d+)\((\d+)(?:_(\d+))?\)_generation_(\d+)\((\d+)(?:_(\d+))?\)$")
_SGLANG = re.compile(r"^step\[([A-Z][A-Z_]*) bs=(\d+)(?: toks=(\d+))?\]$")
_SGLANG_PHASE = {"DECODE": "decode", "EXTEND": "prefill", "MIXED": "mixed"}

#: fields a parsed name gives (None: not annotated by this form)
FIELDS = ("form", "phase", "mode", "batch_size", "prefill_tokens", "decode_tokens", "kv_tokens", "continued")


def _phase(nc: int, ng: int, continued: bool | None) -> str | None:
    if nc and ng:
        return "mixed"
    if nc:
        return "chunked prefill" if continued else "prefill"
    if ng:
        return "decode"
    return None


def parse_step_name(name: str) -> dict[str, Any] | None:
    """The fields of one step annotation (:data:`FIELDS`), or None when it is no known form (module doc)."""
    m = _VLLM_STATS.match(name)
    if m:
        t, nc, c_sq, c_sk, _c_sqsq, _c_sqsk, ng, g_sq, g_sk, _g_sqsq, _g_sqsk = (int(x) for x in m.groups())
        if t != c_sq + g_sq:
            return None  # the sums disagree: not the form we know
        continued = c_sk > c_sq
        return {
            "form": "vllm-stats",
            "phase": _phase(nc, ng, continued),
            "mode": None,
            "batch_size": nc + ng,
            "prefill_tokens": c_sq,
            "decode_tokens": g_sq,
            "kv_tokens": c_sk + g_sk,
            "continued": continued,
        }
    m = _VLLM.match(name)
    if m:
        nc, ct, ng, gt = int(m.group(1)), int(m.group(2)), int(m.group(4)), int(m.group(5))
        return {
            "form": "vllm",
            "phase": _phase(nc, ng, None),
            "mode": None,
            "batch_size": nc + ng,
            "prefill_tokens": ct,
            "decode_tokens": gt,
            "kv_tokens": None,
            "continued": None,
        }
    m = _SGLANG.match(name)
    if m:
        mode, bs = m.group(1), int(m.group(2))
        toks = int(m.group(3)) if m.group(3) is not None else None
        phase = _SGLANG_PHASE.get(mode)
        return {
            "form": "sglang",
            "phase": phase,
            "mode": mode,
            "batch_size": bs,
            "prefill_tokens": toks if phase == "prefill" else (0 if phase == "decode" else None),
            "decode_tokens": bs if phase == "decode" else (0 if phase == "prefill" else None),
            "kv_tokens": None,
            "continued": None,
        }
    return None


STEP_SCHEMA = {
    "step": pl.Int64,
    "name": pl.String,
    "form": pl.String,
    "phase": pl.String,
    "mode": pl.String,
    "batch_size": pl.Int64,
    "prefill_tokens": pl.Int64,
    "decode_tokens": pl.Int64,
    "kv_tokens": pl.Int64,
    "continued": pl.Boolean,
    "pid": pl.Int32,
    "tid": pl.Int32,
    "cpu_start_ns": pl.Int64,
    "cpu_end_ns": pl.Int64,
    "gpu_start_ns": pl.Int64,
    "gpu_end_ns": pl.Int64,
    "gpu_busy_ns": pl.Int64,
    "activities": pl.Int64,
    "graph_launches": pl.Int64,
}


def _candidates(trace: Trace) -> list[str]:
    return [n for n in trace.distinct_names() if _CANDIDATE.match(n)]


def unknown_step_names(trace: Trace) -> pl.DataFrame:
    """``name, count`` of the annotations that start like a step annotation and are no known form."""
    names = [n for n in _candidates(trace) if parse_step_name(n) is None]
    if not names:
        return pl.DataFrame(schema={"name": pl.String, "count": pl.Int64})
    return (
        trace.scan()
        .filter(pl.col("kind").is_in(["user_annotation", "cpu_op"]) & pl.col("name").is_in(names))
        .group_by(pl.col("name").cast(pl.String))
        .agg(pl.len().cast(pl.Int64).alias("count"))
        .collect()
        .sort("name")
    )


def _compute(trace: Trace) -> pl.DataFrame:
    names = _candidates(trace)
    parsed = {n: p for n in names if (p := parse_step_name(n)) is not None}
    if not parsed:
        return pl.DataFrame(schema=STEP_SCHEMA)
    ann = (
        trace.scan()
        .filter(
            pl.col("kind").is_in(["user_annotation", "cpu_op"])
            & pl.col("name").is_in(list(parsed))
            & pl.col("dur_ns").is_not_null()
        )
        .select("row", "pid", "tid", pl.col("name").cast(pl.String), "ts_ns", "end_ns")
        .collect()
    )
    fields = pl.DataFrame(
        [{"name": n, **p} for n, p in parsed.items()],
        schema={"name": pl.String, **{f: STEP_SCHEMA[f] for f in FIELDS}},
        orient="row",
    )
    ann = ann.join(fields, on="name").with_columns(
        (pl.col("pid").cast(pl.Int64) * (1 << 32) + pl.col("tid").cast(pl.Int64)).alias("thread")
    )
    ann = ann.sort("thread", "ts_ns", pl.col("end_ns"), descending=[False, False, True])
    parent = parent_spans(ann, key="thread").cast(pl.Int64)
    ann = ann.with_columns(parent.alias("parent")).with_row_index("i").with_columns(pl.col("i").cast(pl.Int64))
    # the outermost step annotation of each nest is the step; nested ones fill its missing fields
    top = ann["i"].to_numpy().copy()
    par = ann["parent"].fill_null(-1).to_numpy()
    while True:  # walk up one level per round (nests are shallow)
        up = par[top]
        moved = up >= 0
        if not moved.any():
            break
        top = top.copy()
        top[moved] = up[moved]
    ann = ann.with_columns(pl.Series("top", top))
    info = (
        ann.sort("top", "ts_ns")
        .group_by("top", maintain_order=True)
        .agg(
            *[pl.col(f).drop_nulls().first() for f in FIELDS],
        )
    )
    outer = ann.filter(pl.col("i") == pl.col("top")).select(
        "top", "name", "pid", "tid", pl.col("ts_ns").alias("cpu_start_ns"), pl.col("end_ns").alias("cpu_end_ns")
    )
    steps = outer.join(info, on="top").sort("cpu_start_ns", "pid", "tid")
    steps = steps.with_row_index("step").with_columns(pl.col("step").cast(pl.Int64))
    # GPU work launched inside each step's CPU span, by launch calls of the same process
    launches = (
        trace.scan()
        .filter(pl.col("kind").is_in(list(LAUNCH_KINDS)) & (pl.col("gpu_count") > 0))
        .select(pl.col("row").alias("launch_row"), "pid", "ts_ns", pl.col("name").cast(pl.String).alias("api"))
        .collect()
        .sort("ts_ns")
    )
    win = steps.select("step", "pid", pl.col("cpu_start_ns").alias("__s"), pl.col("cpu_end_ns").alias("__e")).sort(
        "__s"
    )
    inside = launches.join_asof(
        win, left_on="ts_ns", right_on="__s", by="pid", strategy="backward", check_sortedness=False
    ).filter(pl.col("step").is_not_null() & (pl.col("ts_ns") <= pl.col("__e")))
    acts = (
        trace.scan()
        .filter(pl.col("kind").is_in(list(GPU_KINDS)) & pl.col("launch_row").is_in(inside["launch_row"].implode()))
        .select("launch_row", "ts_ns", "end_ns")
        .collect()
        .join(inside.select("launch_row", "step"), on="launch_row")
        .sort("step", "ts_ns", "end_ns")
    )
    prev_end = pl.col("end_ns").cum_max().shift(1).over("step")
    blocks = acts.with_columns((prev_end.is_null() | (pl.col("ts_ns") > prev_end)).cum_sum().over("step").alias("b"))
    busy = (
        blocks.group_by("step", "b")
        .agg(pl.col("ts_ns").min(), pl.col("end_ns").max())
        .group_by("step")
        .agg((pl.col("end_ns") - pl.col("ts_ns")).sum().alias("gpu_busy_ns"))
    )
    gpu = acts.group_by("step").agg(
        pl.col("ts_ns").min().alias("gpu_start_ns"),
        pl.col("end_ns").max().alias("gpu_end_ns"),
        pl.len().cast(pl.Int64).alias("activities"),
    )
    graph = (
        inside.filter(pl.col("api").str.contains(r"^(?:cuda|hip|cu)GraphLaunch"))
        .group_by("step")
        .agg(pl.len().cast(pl.Int64).alias("graph_launches"))
    )
    steps = (
        steps.join(gpu, on="step", how="left")
        .join(busy, on="step", how="left")
        .join(graph, on="step", how="left")
        .with_columns(pl.col("activities", "graph_launches").fill_null(0))
    )
    return steps.select(list(STEP_SCHEMA)).cast(STEP_SCHEMA)  # type: ignore[arg-type]


def serving_steps(trace: Trace) -> pl.DataFrame:
    """One row per engine step (:data:`STEP_SCHEMA`, module doc), in CPU start order; memoised per trace."""
    out: pl.DataFrame = trace.memo("serving_steps", lambda: _compute(trace))
    return out
