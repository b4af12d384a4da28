"""``alignment``: per-rank clock offsets estimated from matched collective end times.

The same collective ends at nearly the same time on every participant, so for every matched
instance with at least two ranks ``d = end − median(end over its ranks)``; a clock's offset is the
median of ``d`` over its ranks and instances (robust to a few odd collectives). Ranks that share a
``host_name`` share one clock and one offset (never aligned differently); a rank without
``host_name`` is its own clock. An estimate within the noise floor (twice the median residual) is
not applied. Every cross-rank analysis subtracts these offsets from its times unless
``--no-align`` is given. ``residual_us`` is the median ``|d − offset|`` of a rank after
alignment (what the offsets cannot explain: real end-time differences and noise).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, register
from ranksight.analyses.collectives import comm_data

if TYPE_CHECKING:
    from ranksight.model.run import Run

__all__ = ["alignment"]


def alignment(run: Run, *, ranks: Sequence[int] | None = None) -> AnalysisResult:
    """Per-rank offsets (µs, subtracted from that rank's times), instances used, residuals, spread."""
    cd = comm_data(run, ranks, align=True)
    off = cd.offsets
    table = off.select(
        "rank",
        "host",
        "clock",
        (pl.col("offset_ns") / 1e3).alias("offset_us"),
        (pl.col("estimated_ns") / 1e3).alias("estimated_us"),
        "instances_used",
        (pl.col("residual_ns") / 1e3).alias("residual_us"),
    )
    used = off.filter(pl.col("instances_used") > 0)
    spread = (int(used["estimated_ns"].max()) - int(used["estimated_ns"].min())) if used.height else 0  # type: ignore[arg-type]
    clocks = off["clock"].n_unique()
    summary = pl.DataFrame(
        {
            "ranks": [len(cd.ranks)],
            "clocks": [clocks],
            "matched_instances": [int((cd.instances["ranks_present"] >= 2).sum()) if cd.instances.height else 0],
            "spread_us": [spread / 1e3],
            "max_abs_offset_us": [float(used["offset_ns"].abs().max()) / 1e3 if used.height else 0.0],  # type: ignore[arg-type]
            "noise_floor_us": [2 * float(used["residual_ns"].median() or 0) / 1e3 if used.height else 0.0],  # type: ignore[arg-type]
        }
    )
    notes = [n for n in cd.notes if not n.startswith("times in")]
    hosts = {h for h in off["host"].to_list() if h}
    if hosts and off["host"].null_count() == 0 and len(hosts) == 1:
        notes.append(f"all ranks report host {next(iter(hosts))!r}: one clock, one offset")
    elif not hosts:
        notes.append("no host_name in the traces: each rank is treated as its own clock")
    notes.append(
        "estimated = median over matched collectives of (end − median end of its ranks); applied offset = estimated "
        "when above "
        "the noise floor (2 × median residual), else 0; aligned time = time − offset"
    )
    return AnalysisResult({"offsets": table, "summary": summary}, notes)


register(
    AnalysisSpec(
        name="alignment",
        func=alignment,
        help="per-rank clock offsets from matched collective end times (robust median), with their spread",
    )
)
