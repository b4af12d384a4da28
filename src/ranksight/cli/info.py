"""``ranksight info TRACES``: what the traces hold."""

from __future__ import annotations

import argparse
import os

import polars as pl

from ranksight.cli._common import Command, Context, add_format_arg, add_trace_args, load_run
from ranksight.model.kinds import KINDS
from ranksight.report.terminal import print_tables

__all__ = ["COMMAND", "info_tables"]


def info_tables(run) -> tuple[dict[str, pl.DataFrame], list[str]]:  # noqa: ANN001
    rows = []
    kinds = []
    for t in run:
        m = t.meta
        steps = t.steps
        span = t.span_ns
        step_txt = (
            f"{steps.height} (#{steps['step'].min()}–#{steps['step'].max()})" if steps.height else "0"
        )
        rows.append(
            {
                "rank": t.rank,
                "file": os.path.basename(t.path),
                "rank_from": m.rank_source,
                "json_mb": round(m.json_bytes / 1e6, 2),
                "events": t.stats.get("events", t.n_events),
                "gpu": m.gpu_model or (m.gpu_vendor or "none"),
                "devices": ",".join(str(d) for d in m.devices_used),
                "world_size": m.world_size,
                "steps": step_txt,
                "span_ms": round((span[1] - span[0]) / 1e6, 3) if span else None,
                "time_base": ("nsys session start" if "nsys" in m.raw else "baseTimeNanoseconds") if m.base_time_ns is not None
                else ("nsys capture start" if "nsys" in m.raw else "epoch µs"),
            }
        )
        counts = t.scan().group_by("kind").len().collect()
        d = {k: 0 for k in KINDS}
        for k, n in counts.iter_rows():
            d[k] = n
        kinds.append({"rank": t.rank, **{k: v for k, v in d.items() if v or k in ("kernel", "cpu_op")}})
    files = pl.DataFrame(rows)
    by_kind = pl.DataFrame(kinds).fill_null(0)
    notes = list(run.warnings)
    ws = {t.meta.world_size for t in run if t.meta.world_size}
    if len(ws) > 1:
        notes.append(f"ranks disagree on the world size: {sorted(ws)} (runs mixed in one folder?)")
    elif ws and len(run) < max(ws):
        notes.append(f"{len(run)} of {max(ws)} ranks loaded")
    notes.append(_health_hint(run))
    return {"files": files, "events by kind": by_kind}, notes


def _health_hint(run) -> str:  # noqa: ANN001
    """One line from the health checks (details: ``ranksight health``)."""
    from ranksight.analyses.health import health

    line = health(run).notes[0]
    return line + ("; details: ranksight health TRACES" if "no warnings" not in line else "")


def _add(p: argparse.ArgumentParser) -> None:
    add_trace_args(p)
    add_format_arg(p)


def _run(args: argparse.Namespace, ctx: Context) -> int:
    run = load_run(args, ctx)
    tables, notes = info_tables(run)
    print_tables(tables, args.format, notes=notes)
    return 0


COMMAND = Command("info", "files, ranks, GPUs, events by kind, steps, time span, warnings", _add, _run, order=10)
