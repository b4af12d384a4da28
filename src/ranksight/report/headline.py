"""The headline numbers per rank and the top findings: what ``ranksight summary`` prints.

Each :class:`Headline` takes a few per-rank columns from one analysis; a headline whose analysis is
not registered, or whose data the traces lack, is left out with a note. The JSON form
(``ranksight summary --format json``) follows ``docs/summary-schema.json`` (``SCHEMA_VERSION``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import polars as pl

__all__ = ["Headline", "HEADLINES", "SummaryDoc", "build_summary", "SCHEMA_NAME", "SCHEMA_VERSION", "FINDING_COLUMNS"]

SCHEMA_NAME = "ranksight-summary"
SCHEMA_VERSION = 1

#: Kernels per rank that the ``summary`` analysis is asked for, by this module and the report
#: alike (one computation serves both; fewer are then taken per rank).
SUMMARY_TOP = 10

#: Columns of the findings table, in order.
FINDING_COLUMNS = ("severity", "rule", "title", "ranks", "impact", "summary", "fix")


@dataclass(frozen=True)
class Headline:
    """Per-rank columns taken from one analysis: ``extract(result) -> DataFrame(rank, cols...)``.

    ``columns`` maps each output column to its one-line definition (shown in ``--format json``).
    """

    analysis: str
    columns: Mapping[str, str]
    extract: Callable[[Any], pl.DataFrame]
    options: Mapping[str, Any] = field(default_factory=dict)


def _pick(table: str, rename: Mapping[str, str]) -> Callable[[Any], pl.DataFrame]:
    """Take ``rank`` and the renamed columns of one table with one row per rank."""

    def f(res: Any) -> pl.DataFrame:
        df = res.tables[table]
        return df.select(pl.col("rank").cast(pl.Int64), *[pl.col(a).alias(b) for a, b in rename.items()])

    return f


def _per_rank_mean(table: str, exprs: Mapping[str, pl.Expr]) -> Callable[[Any], pl.DataFrame]:
    """Mean over the rows of each rank (steps, devices) of the given expressions."""

    def f(res: Any) -> pl.DataFrame:
        df = res.tables[table]
        return df.group_by(pl.col("rank").cast(pl.Int64)).agg(e.alias(n) for n, e in exprs.items()).sort("rank")

    return f


def _temporal_headline(res: Any) -> pl.DataFrame:
    """``temporal``'s headlines: the step time and GPU busy over the step windows, and the compute and
    idle shares of the GPU span; ``note`` says why a value is empty."""
    t = res.tables["temporal"].select(pl.col("rank").cast(pl.Int64), "compute_pct", "idle_pct")
    ps = res.tables.get("per_step")
    ov = res.tables.get("over_steps")
    steps = (
        ps.group_by(pl.col("rank").cast(pl.Int64)).agg((pl.col("step_time_us").mean() / 1e3).alias("step_ms"))
        if ps is not None and ps.height
        else pl.DataFrame(schema={"rank": pl.Int64, "step_ms": pl.Float64})
    )
    busy = (
        ov.select(pl.col("rank").cast(pl.Int64), pl.col("busy_pct_of_steps").alias("gpu_busy_pct_of_steps"))
        if ov is not None
        else pl.DataFrame(schema={"rank": pl.Int64, "gpu_busy_pct_of_steps": pl.Float64})
    )
    out = t.join(steps, on="rank", how="left").join(busy, on="rank", how="left")
    note = (
        pl.when(pl.col("idle_pct").is_null())
        .then(pl.lit("no GPU work on the rank (CPU-only trace)"))
        .when(pl.col("step_ms").is_null())
        .then(pl.lit("no ProfilerStep in the trace: no step windows"))
    )
    return out.select("rank", "step_ms", "gpu_busy_pct_of_steps", "compute_pct", "idle_pct", note.alias("note"))


#: The step window, GPU busy and GPU idle have one definition each (``docs/metrics.md``); a column's
#: definition says which window it is over: the GPU span (first to last GPU work of the rank) or
#: the step windows (each ProfilerStep extended to the GPU work it launched, contiguous).
HEADLINES: list[Headline] = [
    Headline(
        "summary",
        {
            "kernels": "kernel launches on the GPU",
            "gpu_span_ms": "GPU span: first start to last end of GPU work (kernels, memcpy, memset)",
            "gpu_busy_pct": "GPU busy over the GPU span: union of GPU work (kernels, memcpy, memset) over all "
            "streams / GPU span × 100 (= 100 − idle_pct)",
        },
        lambda res: res.tables["gpu"].select(
            pl.col("rank").cast(pl.Int64),
            pl.col("kernels"),
            (pl.col("span_us") / 1e3).alias("gpu_span_ms"),
            pl.col("busy_pct").alias("gpu_busy_pct"),
        ),
        {"top": SUMMARY_TOP},
    ),
    Headline(
        "temporal",
        {
            "step_ms": "mean step window: ProfilerStep extended to the GPU work it launched (contiguous windows)",
            "gpu_busy_pct_of_steps": "GPU busy over the step windows: union of GPU work (kernels, memcpy, memset) "
            "inside them / their length × 100 (what low-gpu-utilization judges)",
            "compute_pct": "compute kernels / GPU span × 100 (HTA temporal breakdown)",
            "idle_pct": "GPU idle over the GPU span: GPU span − GPU busy, / GPU span × 100 (HTA temporal breakdown)",
        },
        _temporal_headline,
        {"per_step": True},  # the options summary, the report and diagnose read: one computation
    ),
    Headline(
        "exposed-comm",
        {
            "exposed_comm_pct": "exposed communication over the step windows: communication with no compute kernel "
            "under it / step windows × 100",
            "overlap_efficiency": "communication hidden under compute / communication, over the step windows (0–1)",
        },
        lambda res: res.tables["per_rank"].select(
            pl.col("rank").cast(pl.Int64),
            (pl.col("exposed_share_of_step") * 100).alias("exposed_comm_pct"),
            pl.col("overlap_efficiency"),
        ),
    ),
    Headline(
        "launches",
        {"launch_delay_p50_us": "median launch delay (launch call start → GPU start)"},
        _pick("summary", {"delay_p50_us": "launch_delay_p50_us"}),
    ),
    Headline(
        "mfu",
        {"mfu_pct": "mean model FLOPs utilization over steps × 100 (empty when unknown, a note says why)"},
        _per_rank_mean("steps", {"mfu_pct": pl.col("mfu").mean() * 100, "note": pl.col("note").drop_nulls().first()}),
    ),
    Headline(
        "memory",
        {"peak_mem_gib": "peak allocated device memory (GiB)"},
        _per_rank_mean("peaks", {"peak_mem_gib": pl.col("peak_allocated_bytes").max() / 2**30}),
    ),
    Headline(
        "stragglers",
        {
            "times_last": "collectives this rank arrived at last",
            "wait_caused_ms": "wait this rank caused the others by arriving last",
        },
        lambda res: res.tables["ranks"].select(
            pl.col("rank").cast(pl.Int64),
            pl.col("times_last"),
            (pl.col("wait_caused_us") / 1e3).alias("wait_caused_ms"),
        ),
    ),
    Headline(
        "run-context",
        {
            "context": "training or inference, dominant matrix precision, torch.compile, CUDA/HIP graph capture "
            "or replay, parallel hints (evidence: ranksight analyze run-context)"
        },
        _pick("run context", {"context": "context"}),
    ),
]


def _why_empty(analysis: str, df: pl.DataFrame) -> list[str]:
    """``df``: ``rank``, headline columns and ``note`` (why a value of the row is empty): one note
    per reason, naming the empty columns and the ranks (runs of ranks as ``a–b``)."""
    vals = [c for c in df.columns if c not in ("rank", "note")]
    empty = df.filter(pl.any_horizontal(pl.col(vals).is_null()) & pl.col("note").is_not_null())
    out = []
    for (why,), g in empty.group_by(["note"], maintain_order=True):
        rs = sorted(int(r) for r in g["rank"].to_list())
        runs: list[list[int]] = []
        for r in rs:
            if runs and r == runs[-1][-1] + 1:
                runs[-1].append(r)
            else:
                runs.append([r])
        ranks = ",".join(f"{x[0]}–{x[-1]}" if len(x) > 1 else str(x[0]) for x in runs)
        cols = ", ".join(c for c in vals if g[c].null_count())
        out.append(f"`{analysis}`: {cols} empty on rank{'s' if len(rs) > 1 else ''} {ranks}: {why}")
    return out


@dataclass
class SummaryDoc:
    """Tables of the summary: ``per_rank``, ``top_kernels``, ``findings``; plus notes and the
    definition of every per-rank column."""

    tables: dict[str, pl.DataFrame]
    columns: dict[str, str]
    notes: list[str]
    ranks: list[int]

    def to_json_doc(self) -> dict[str, Any]:
        from ranksight import __version__
        from ranksight.report.terminal import _jsonable

        return {
            "schema": SCHEMA_NAME,
            "schema_version": SCHEMA_VERSION,
            "version": SCHEMA_VERSION,  # the name of schema_version before every document had one; kept
            "generator": f"ranksight {__version__}",
            "ranks": self.ranks,
            "columns": self.columns,
            "tables": {
                n: [{k: _jsonable(v) for k, v in r.items()} for r in df.iter_rows(named=True)]
                for n, df in self.tables.items()
            },
            "notes": self.notes,
        }


def findings_table(found: list[Any], top: int | None = None) -> pl.DataFrame:
    """``diagnose`` findings (worst first) as rows of :data:`FINDING_COLUMNS`."""
    rows = [
        {
            "severity": f.severity,
            "rule": f.rule,
            "title": f.title,
            "ranks": ",".join(str(r) for r in f.ranks),
            "impact": None if f.impact != f.impact else round(float(f.impact), 4),
            "summary": f.summary,
            "fix": f.fixes[0] if f.fixes else None,
        }
        for f in found[: top if top is not None else len(found)]
    ]
    schema = {c: (pl.Float64 if c == "impact" else pl.String) for c in FINDING_COLUMNS}
    return pl.DataFrame(rows, schema=schema)


def build_summary(run: Any, *, ranks: Any = None, top: int = 5, findings: int = 5) -> SummaryDoc:
    """Headline numbers per rank from every available analysis, the top kernels, the top findings.

    ``run`` is a run or a :class:`~ranksight.analyses.Session`: a report built afterwards from
    the same session does not run the analyses again. Headlines are read on the whole run and
    filtered to ``ranks``.
    """
    from ranksight.analyses import Missing, Session

    session = Session.of(run)
    rs = Session.of(session, ranks).ranks
    notes: list[str] = []
    per_rank = pl.DataFrame({"rank": rs}, schema={"rank": pl.Int64})
    columns: dict[str, str] = {"rank": "rank"}
    top_kernels = None
    for hl in HEADLINES:
        opts = dict(hl.options)
        if hl.analysis == "summary":
            opts["top"] = max(top, SUMMARY_TOP)
        res = session.try_result(hl.analysis, **opts)
        if isinstance(res, Missing):
            if res.kind != "unknown":
                notes.append(res.reason if res.kind == "failed" else f"`{hl.analysis}`: {res.reason}")
            continue
        if hl.analysis == "summary" and "top_kernels" in res.tables:
            top_kernels = res.tables["top_kernels"].group_by("rank", maintain_order=True).head(top)
        if all(df.height == 0 for df in res.tables.values()):
            notes.append(f"`{hl.analysis}`: " + (res.notes[0] if res.notes else "nothing found in these traces"))
            continue
        try:
            cols = hl.extract(res)
        except (KeyError, pl.exceptions.ColumnNotFoundError) as err:
            notes.append(f"{hl.analysis}: headline columns missing ({err})")
            continue
        if "note" in cols.columns:  # why a value is empty on a rank: a note per reason
            notes += _why_empty(hl.analysis, cols)
            cols = cols.drop("note")
        cols = cols.select([c for c in cols.columns if c == "rank" or c not in per_rank.columns])
        per_rank = per_rank.join(cols, on="rank", how="left")
        columns.update({c: f"{hl.columns.get(c, c)} [{hl.analysis}]" for c in cols.columns if c != "rank"})
    per_rank = per_rank.filter(pl.col("rank").is_in(rs))
    tables: dict[str, pl.DataFrame] = {"per_rank": per_rank}
    if top_kernels is not None:
        tables["top_kernels"] = top_kernels.filter(pl.col("rank").is_in(rs))
    from ranksight.analyses.diagnose import findings as all_findings

    got = session.try_memo(("report", "findings"), lambda: all_findings(session), "diagnose")
    if isinstance(got, Missing):
        notes.append(got.reason if got.kind == "failed" else f"`diagnose`: {got.reason}")
    else:
        found = got[0]
        if ranks is not None:
            found = [f for f in found if not f.ranks or set(f.ranks) & set(rs)]
        tables["findings"] = findings_table(found, findings)
    return SummaryDoc(tables, columns, notes, list(rs))


# ---- idle-causes headline (docs/idle-causes.md) ---------------------------------------------------

#: Causes named per rank in the ``idle_causes`` headline, and the smallest share named.
IDLE_CAUSES_SHOWN = 3
IDLE_CAUSES_MIN_PCT = 1.0


def _idle_causes_headline(res: Any) -> pl.DataFrame:
    """Per rank: the largest causes of GPU idle inside the GPU span with their share of the idle,
    e.g. ``cpu_op 62% · collective_wait 27% · launch_latency 8%``."""
    df = res.tables["by_rank"].filter(pl.col("share_pct") >= IDLE_CAUSES_MIN_PCT)
    text = pl.format("{} {}%", pl.col("cause"), pl.col("share_pct").round(0).cast(pl.Int64))
    return (
        df.sort(["rank", "idle_us", "cause"], descending=[False, True, False])
        .group_by(pl.col("rank").cast(pl.Int64), maintain_order=True)
        .agg(text.head(IDLE_CAUSES_SHOWN).str.join(" · ").alias("idle_causes"))
    )


HEADLINES.append(
    Headline(
        "idle-causes",
        {"idle_causes": "largest causes of GPU idle inside the GPU span, % of the idle (analyze idle-causes)"},
        _idle_causes_headline,
    )
)
