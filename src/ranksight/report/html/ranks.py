"""The report of a run with many ranks: distributions across ranks, outlier ranks, the ranks shown
in full, the size budget of per-rank tables, and the compressed payload.

Up to :data:`MANY_RANKS` ranks the report shows each rank (a bar per rank, every row of every
table); beyond, per-rank charts become distributions across ranks and per-rank tables embed every
rank's rows while they fit the size budget (:data:`TABLE_BUDGET_BYTES`), else the rows of the
*focus ranks* (the worst ranks, the outliers and the ranks with the minimum and maximum of each
headline). Definitions (docs/report.md, "Many ranks"):

- percentiles are nearest-rank: ``pXX`` is the value of the rank at position ``ceil(XX/100 · n)``
  in ascending order, so every number shown is some rank's value;
- the robust z-score of a rank's value ``x`` is ``(x − median) / (1.4826 · MAD)`` (MAD: median
  absolute deviation from the median); when more than half the ranks share the median (MAD = 0)
  it is ``(x − median) / (1.2533 · mean absolute deviation)``, and 0 when every rank has the median;
- an outlier has ``|z| > OUTLIER_Z`` (3.5, Iglewicz and Hoaglin);
- a rank's badness is its largest z on the bad side of a headline (``HIGHER_IS_WORSE``); the worst
  ranks are the :data:`WORST_RANKS` with the largest badness (ties: the lower rank).
"""

from __future__ import annotations

import base64
import gzip
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

__all__ = [
    "MANY_RANKS",
    "DETAIL_ANALYSES",
    "DETAIL_RANKS_MAX",
    "PARTIAL_DETAIL",
    "OUTLIER_Z",
    "WORST_RANKS",
    "HIGHER_IS_WORSE",
    "Spread",
    "spread",
    "robust_z",
    "nearest_rank",
    "Focus",
    "focus_of",
    "pack_json",
    "unpack_json",
    "rank_ranges",
]

#: Runs with more ranks than this get the many-rank report.
MANY_RANKS = 32
#: Operator-level analyses: one row per operator, kernel configuration or module of each rank,
#: ~100 ms per rank and read by no headline or finding. A report of more than
#: :data:`DETAIL_RANKS_MAX` ranks computes them for the focus ranks (and the ranks asked for with
#: ``ranksight report --detail-ranks``), not every rank; ``--detail-ranks all`` for every rank.
DETAIL_ANALYSES = frozenset({"ops", "op-perf", "op-kernels", "kernel-config", "modules"})
DETAIL_RANKS_MAX = 64
#: Analyses with operator-level per-rank tables beside tables over every rank: the option that
#: restricts the former to some ranks, and those tables. ``critical-path``: each rank's own path
#: (HTA's model; ~50 ms per rank); its job-wide path joins every rank.
PARTIAL_DETAIL: dict[str, tuple[str, frozenset[str]]] = {
    "critical-path": ("path_ranks", frozenset({"summary", "by_type", "by_operator", "breakdown"})),
}
#: |robust z| above which a rank's value is an outlier.
OUTLIER_Z = 3.5
#: Ranks shown in full as "the worst ranks".
WORST_RANKS = 3
#: Outlier ranks named per metric (the rest are counted).
NAMED_OUTLIERS = 10
#: Focus ranks at most (worst ranks first, then outliers by |z|, then minimum and maximum ranks).
MAX_FOCUS = 24
#: Estimated compressed bytes of all per-rank tables embedded with every rank's rows; tables beyond
#: keep the focus ranks' rows (smallest tables per rank first).
TABLE_BUDGET_BYTES = 3_000_000
#: Estimated compressed bytes of one per-rank table embedded with every rank's rows, at most.
TABLE_MAX_BYTES = 1_000_000
#: Estimated JSON bytes (before compression: what the browser parses) of all per-rank tables
#: embedded with every rank's rows, and of one: a page that compresses well still opens fast.
TABLE_BUDGET_RAW_BYTES = 24_000_000
TABLE_MAX_RAW_BYTES = 8_000_000
#: Rows of one per-rank table embedded with every rank's rows, at most.
TABLE_MAX_ROWS = 250_000
#: Ranks sampled to estimate a per-rank table's size.
SIZE_SAMPLE_RANKS = 16
#: The payload is compressed in the page when its JSON is larger than this (many ranks only).
PACK_MIN_BYTES = 1_000_000

#: Headlines of ``ranksight summary`` (report/headline.py) and the direction that is bad: +1 when
#: a higher value is worse, -1 when a lower one is; others (counts) are not judged.
HIGHER_IS_WORSE: dict[str, int] = {
    "gpu_span_ms": 1,
    "gpu_busy_pct": -1,
    "step_ms": 1,
    "gpu_busy_pct_of_steps": -1,
    "compute_pct": -1,
    "idle_pct": 1,
    "exposed_comm_pct": 1,
    "overlap_efficiency": -1,
    "launch_delay_p50_us": 1,
    "mfu_pct": -1,
    "peak_mem_gib": 1,
    "times_last": 1,
    "wait_caused_ms": 1,
}


def nearest_rank(sorted_values: np.ndarray, pct: float) -> float:
    """The nearest-rank percentile of ascending ``sorted_values`` (not empty)."""
    n = len(sorted_values)
    i = min(n - 1, max(0, math.ceil(pct / 100.0 * n) - 1))
    return float(sorted_values[i])


def robust_z(values: np.ndarray) -> np.ndarray:
    """Robust z-scores of finite ``values`` (see the module docstring)."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return v
    med = float(np.median(v))
    dev = np.abs(v - med)
    mad = float(np.median(dev))
    if mad > 0:
        return (v - med) / (1.4826 * mad)
    mean_ad = float(dev.mean())
    if mean_ad > 0:
        return (v - med) / (1.2533 * mean_ad)
    return np.zeros_like(v)


@dataclass
class Spread:
    """One metric across ranks (rows with a value only)."""

    n: int
    p50: float
    p90: float
    p99: float
    min: float
    min_label: Any
    max: float
    max_label: Any
    #: (label, z) of the outliers, largest |z| first (ties: label order)
    outliers: list[tuple[Any, float]] = field(default_factory=list)


def spread(labels: Sequence[Any], values: Sequence[Any]) -> Spread | None:
    """The distribution of ``values`` over the rows named ``labels`` (ranks, or (rank, device)
    labels); None and non-finite values are left out; None when no value is left."""
    pairs = [(lab, float(v)) for lab, v in zip(labels, values, strict=True) if v is not None and math.isfinite(v)]
    if not pairs:
        return None
    labs = [p[0] for p in pairs]
    v = np.array([p[1] for p in pairs])
    order = np.lexsort((np.arange(len(v)), v))  # ascending, ties by position
    s = v[order]
    z = robust_z(v)
    out = [(labs[i], round(float(z[i]), 2)) for i in range(len(v)) if abs(z[i]) > OUTLIER_Z]
    out.sort(key=lambda t: (-abs(t[1]), t[0]))
    return Spread(
        n=len(v),
        p50=nearest_rank(s, 50),
        p90=nearest_rank(s, 90),
        p99=nearest_rank(s, 99),
        min=float(s[0]),
        min_label=labs[int(order[0])],
        max=float(s[-1]),
        max_label=labs[int(order[-1])],
        outliers=out,
    )


def outlier_text(sp: Spread, unit_label: str = "rank") -> str:
    """``13 (z +31.2), 7 (z −4.0)`` for the first :data:`NAMED_OUTLIERS` outliers, then ``… and N more``."""
    parts = [f"{lab} (z {z:+.1f})" for lab, z in sp.outliers[:NAMED_OUTLIERS]]
    more = len(sp.outliers) - NAMED_OUTLIERS
    if more > 0:
        parts.append(f"… and {more} more")
    return ", ".join(parts)


def spread_frame(rows: Sequence[tuple[str, str, Spread | None]]) -> pl.DataFrame:
    """The distribution table: one row per ``(metric, unit, spread)``."""
    cols: dict[str, list[Any]] = {
        c: []
        for c in (
            "metric",
            "unit",
            "ranks",
            "p50",
            "p90",
            "p99",
            "min",
            "min_rank",
            "max",
            "max_rank",
            "outliers",
            "outlier_ranks",
        )
    }
    for name, unit, sp in rows:
        if sp is None:
            continue
        cols["metric"].append(name)
        cols["unit"].append(unit)
        cols["ranks"].append(sp.n)
        for k in ("p50", "p90", "p99", "min", "max"):
            cols[k].append(getattr(sp, k))
        cols["min_rank"].append(str(sp.min_label))
        cols["max_rank"].append(str(sp.max_label))
        cols["outliers"].append(len(sp.outliers))
        cols["outlier_ranks"].append(outlier_text(sp))
    schema = {
        "metric": pl.String,
        "unit": pl.String,
        "ranks": pl.Int64,
        "p50": pl.Float64,
        "p90": pl.Float64,
        "p99": pl.Float64,
        "min": pl.Float64,
        "min_rank": pl.String,
        "max": pl.Float64,
        "max_rank": pl.String,
        "outliers": pl.Int64,
        "outlier_ranks": pl.String,
    }
    return pl.DataFrame(cols, schema=schema)


@dataclass
class Focus:
    """The ranks shown in full: the worst ranks, the outliers, the minimum and maximum ranks."""

    worst: list[int]
    outliers: list[int]
    extremes: list[int]
    #: per rank: its badness (largest z on a headline's bad side)
    badness: dict[int, float] = field(default_factory=dict)

    @property
    def ranks(self) -> list[int]:
        out: list[int] = []
        for r in (*self.worst, *self.outliers, *self.extremes):
            if r not in out and len(out) < MAX_FOCUS:
                out.append(r)
        return out


def focus_of(per_rank: pl.DataFrame, ranks: Sequence[int]) -> Focus:
    """The focus ranks from the headline table (``rank`` and one column per headline)."""
    ranks = [int(r) for r in ranks]
    if per_rank.height == 0 or "rank" not in per_rank.columns:
        return Focus(worst=ranks[:WORST_RANKS], outliers=[], extremes=[])
    rk = [int(r) for r in per_rank["rank"].to_list()]
    badness = dict.fromkeys(rk, -math.inf)
    out_z: dict[int, float] = {}
    extremes: list[int] = []
    for col in per_rank.columns:
        if col == "rank" or not per_rank[col].dtype.is_numeric():
            continue
        sp = spread(rk, per_rank[col].to_list())
        if sp is None:
            continue
        for lab, oz in sp.outliers:
            out_z[lab] = max(out_z.get(lab, 0.0), abs(oz))
        for lab in (sp.max_label, sp.min_label):
            if lab not in extremes:
                extremes.append(lab)
        sign = HIGHER_IS_WORSE.get(col)
        if sign is None:
            continue
        vals = per_rank[col].to_list()
        ok = [(r, float(v)) for r, v in zip(rk, vals, strict=True) if v is not None and math.isfinite(v)]
        if not ok:
            continue
        zs = robust_z(np.array([v for _, v in ok]))
        for (r, _), zz in zip(ok, zs, strict=True):
            badness[r] = max(badness[r], sign * float(zz))
    judged = {r: b for r, b in badness.items() if b != -math.inf}
    pool = judged if judged else dict.fromkeys(rk, 0.0)
    worst = [r for r, _ in sorted(pool.items(), key=lambda t: (-t[1], t[0]))[:WORST_RANKS]]
    outliers = [r for r, _ in sorted(out_z.items(), key=lambda t: (-t[1], t[0]))]
    return Focus(worst=worst, outliers=outliers, extremes=extremes, badness={r: round(b, 2) for r, b in judged.items()})


def rank_ranges(ranks: Sequence[int]) -> str:
    """``0–3,7,9–12``: sorted ranks with runs collapsed."""
    rs = sorted({int(r) for r in ranks})
    runs: list[list[int]] = []
    for r in rs:
        if runs and r == runs[-1][-1] + 1:
            runs[-1].append(r)
        else:
            runs.append([r])
    return ",".join(f"{x[0]}–{x[-1]}" if len(x) > 1 else str(x[0]) for x in runs)


# ---- compression in the page -----------------------------------------------------------------

PACKED = "gzip-base64"


def pack_json(text: str) -> dict[str, Any]:
    """``text`` (JSON) gzip-compressed and base64-encoded, as the page's packed payload. The
    browser decompresses it with its own ``DecompressionStream`` (no library)."""
    raw = gzip.compress(text.encode("utf-8"), compresslevel=6, mtime=0)
    return {"packed": PACKED, "bytes": len(text.encode("utf-8")), "data": base64.b64encode(raw).decode("ascii")}


def unpack_json(obj: Mapping[str, Any]) -> Any:
    """The document of a packed payload (:func:`pack_json`), or ``obj`` itself when not packed."""
    if obj.get("packed") != PACKED:
        return obj
    return json.loads(gzip.decompress(base64.b64decode(obj["data"])).decode("utf-8"))


def json_sizes(obj: Any) -> tuple[int, int]:
    """Bytes of ``obj`` as compact JSON after gzip, and before (the size estimates of the table
    budget)."""
    raw = json.dumps(obj, separators=(",", ":"), allow_nan=False, default=str).encode("utf-8")
    return len(gzip.compress(raw, compresslevel=6, mtime=0)), len(raw)


def compressed_size(obj: Any) -> int:
    """Bytes of ``obj`` as compact JSON after gzip."""
    return json_sizes(obj)[0]
