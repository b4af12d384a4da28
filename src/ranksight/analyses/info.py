"""``info``: what the traces hold, one row per rank (``ranksight info`` and the report's run overview).

Tables:

- ``files``: ``rank, file, rank_from, json_mb, events, gpu, devices, world_size, steps, first_step,
  last_step, span_ms, time_base, warnings``. ``json_mb`` is the decompressed JSON size (MB, 2
  decimals); ``events`` the events decoded; ``gpu`` the device model (or vendor, or ``none``);
  ``steps`` the number of ProfilerSteps, ``first_step``/``last_step`` their numbers;
  ``span_ms`` first start to last end of timed events; ``time_base`` how timestamps are anchored;
  ``warnings`` the trace's own warnings.
- ``events by kind``: ``rank`` and the count of each event kind present (``kernel`` and
  ``cpu_op`` always shown).
- ``run``: one row for the whole run: ``ranks, world_size, gpus, steps, first_step, last_step,
  span_ms`` (first start to last end over every rank), ``events``, ``warnings`` (load warnings),
  ``context`` (the ``run-context`` line: training or inference, dominant precision, torch.compile,
  CUDA/HIP graphs, parallel hints; null with a note when it cannot be had).

Notes: the load warnings, ranks that disagree on the world size or a partial run, the run context
(``context: …``) and one line from the ``health`` analysis. Ranks
whose span and event durations are ~1000× the others' (timestamps in ns where the others have
µs: :mod:`ranksight.views.time_units`) get a ``time unit: …`` note.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, register
from ranksight.analyses._session import Missing, Session
from ranksight.analyses.run_context import run_context_line, run_contexts
from ranksight.model.kinds import KINDS
from ranksight.views.time_units import time_facts, time_unit_note, time_unit_outliers

if TYPE_CHECKING:
    from ranksight.model.run import Run
    from ranksight.model.trace import Trace

__all__ = ["info", "rank_info", "FILES_SCHEMA"]

FILES_SCHEMA = {
    "rank": pl.Int64,
    "file": pl.String,
    "rank_from": pl.String,
    "json_mb": pl.Float64,
    "events": pl.Int64,
    "gpu": pl.String,
    "devices": pl.String,
    "world_size": pl.Int64,
    "steps": pl.Int64,
    "first_step": pl.Int64,
    "last_step": pl.Int64,
    "span_ms": pl.Float64,
    "time_base": pl.String,
    "warnings": pl.Int64,
}


def rank_info(trace: Trace) -> dict[str, Any]:
    """One rank's row of ``files``, its event counts by kind, span and step numbers."""
    m = trace.meta
    steps = trace.steps["step"].to_list()
    span = trace.span_ns
    nsys = "nsys" in m.raw
    row = {
        "rank": trace.rank,
        "file": os.path.basename(trace.path),
        "rank_from": m.rank_source,
        "json_mb": round(m.json_bytes / 1e6, 2),
        "events": trace.stats.get("events", trace.n_events),
        "gpu": m.gpu_model or (m.gpu_vendor or "none"),
        "devices": ",".join(str(d) for d in m.devices_used),
        "world_size": m.world_size,
        "steps": len(steps),
        "first_step": min(steps) if steps else None,
        "last_step": max(steps) if steps else None,
        "span_ms": round((span[1] - span[0]) / 1e6, 3) if span else None,
        "time_base": ("nsys session start" if nsys else "baseTimeNanoseconds")
        if m.base_time_ns is not None
        else ("nsys capture start" if nsys else "epoch µs"),
        "warnings": len(trace.warnings),
    }
    counts = dict(trace.scan().group_by("kind").len().collect().iter_rows())
    return {"row": row, "kinds": counts, "span": span, "steps": steps}


def info(run: Run | Session, *, ranks: Sequence[int] | None = None) -> AnalysisResult:
    """Files, ranks, GPUs, events by kind, steps and time span per rank, and for the whole run."""
    sess = Session.of(run, ranks)
    per = sess.map(rank_info)
    rs = sess.ranks
    files = pl.DataFrame([per[r]["row"] for r in rs], schema=FILES_SCHEMA)
    kinds = []
    for r in rs:
        d = {k: per[r]["kinds"].get(k, 0) for k in KINDS}
        kinds.append({"rank": r, **{k: v for k, v in d.items() if v or k in ("kernel", "cpu_op")}})
    by_kind = pl.DataFrame(kinds).fill_null(0) if kinds else pl.DataFrame(schema={"rank": pl.Int64})
    spans = [per[r]["span"] for r in rs if per[r]["span"]]
    steps = sorted({s for r in rs for s in per[r]["steps"]})
    ws = sorted({int(w) for w in files["world_size"].drop_nulls().to_list()})
    load_warnings = list(sess.run.warnings) if sess.run is not None else []
    run_row = pl.DataFrame(
        [
            {
                "ranks": len(rs),
                "world_size": ", ".join(map(str, ws)) if ws else None,
                "gpus": ", ".join(sorted({g for g in files["gpu"].to_list() if g})) or "none",
                "steps": len(steps),
                "first_step": steps[0] if steps else None,
                "last_step": steps[-1] if steps else None,
                "span_ms": (max(s[1] for s in spans) - min(s[0] for s in spans)) / 1e6 if spans else None,
                "events": int(files["events"].sum()),
                "warnings": len(load_warnings),
                "context": None,
            }
        ],
        schema={
            "ranks": pl.Int64,
            "world_size": pl.String,
            "gpus": pl.String,
            "steps": pl.Int64,
            "first_step": pl.Int64,
            "last_step": pl.Int64,
            "span_ms": pl.Float64,
            "events": pl.Int64,
            "warnings": pl.Int64,
            "context": pl.String,
        },
    )
    notes = list(load_warnings)
    # run context (training/inference, precision, compile, graphs): its own guarded analysis
    rc = sess.try_result("run-context")
    if isinstance(rc, Missing):
        notes.append(f"context: unknown ({rc.reason})")
    else:
        line = run_context_line(run_contexts(sess))
        run_row = run_row.with_columns(pl.lit(line, dtype=pl.String).alias("context"))
        notes.append(f"context: {line}")
    if len(ws) > 1:
        notes.append(f"ranks disagree on the world size: {ws} (runs mixed in one folder?)")
    elif ws and len(rs) < ws[0]:
        notes.append(f"{len(rs)} of {ws[0]} ranks loaded")
    times = sess.map(time_facts) if len(rs) > 1 else {}
    odd = time_unit_outliers(times)
    if odd:
        notes.append(time_unit_note(odd, times))
    h = sess.try_result("health")
    if not isinstance(h, Missing) and h.notes:
        line = h.notes[0]
        notes.append(line + ("; details: ranksight health TRACES" if "no warnings" not in line else ""))
    return AnalysisResult({"files": files, "events by kind": by_kind, "run": run_row}, notes)


register(AnalysisSpec(name="info", func=info, help="files, ranks, GPUs, events by kind, steps, time span, warnings"))
