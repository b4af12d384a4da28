"""The headline numbers per rank and the top findings: what ``ranksight summary`` prints.

Each :class:`Headline` takes a few per-rank columns from one analysis; a headline whose analysis is
not registered, or whose data the traces lack, is left out with a note. The JSON form
(``ranksight summary --format json``) follows ``docs/summary-schema.json`` (``SCHEMA_VERSION``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import polars as pl

__all__ = ["Headline", "HEADLINES", "SummaryDoc", "build_summary", "SCHEMA_NAME", "SCHEMA_VERSION", "FINDING_COLUMNS"]

SCHEMA_NAME = "ranksight-summary"
SCHEMA_VERSION = 1

#: Columns of the findings table, in order (whatever ``diagnose`` calls them).
FINDING_COLUMNS = ("severity", "rank", "title", "detail", "evidence")


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


HEADLINES: list[Headline] = [
    Headline(
        "summary",
        {
            "kernels": "kernel launches on the GPU",
            "gpu_span_ms": "first start to last end of GPU work (kernels, memcpy, memset)",
            "gpu_busy_pct": "union of GPU work over all streams / GPU span × 100",
        },
        lambda res: res.tables["gpu"].select(
            pl.col("rank").cast(pl.Int64),
            pl.col("kernels"),
            (pl.col("span_us") / 1e3).alias("gpu_span_ms"),
            pl.col("busy_pct").alias("gpu_busy_pct"),
        ),
        {"top": 5},
    ),
]


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
            "version": SCHEMA_VERSION,
            "generator": f"ranksight {__version__}",
            "ranks": self.ranks,
            "columns": self.columns,
            "tables": {
                n: [{k: _jsonable(v) for k, v in r.items()} for r in df.iter_rows(named=True)] for n, df in self.tables.items()
            },
            "notes": self.notes,
        }


def _run(name: str, run: Any, ranks: Any, options: Mapping[str, Any], notes: list[str]) -> Any:
    from ranksight.analyses import REGISTRY, names
    from ranksight.errors import RanksightError

    if name not in names():
        return None
    try:
        return REGISTRY[name].func(run, ranks=ranks, **options)
    except RanksightError as err:
        notes.append(f"{name}: {err}")
    except Exception as err:  # one analysis' bug must not hide the others
        msg = f"analysis {name} failed: {type(err).__name__}: {err}"
        warnings.warn(msg, stacklevel=2)
        notes.append(msg)
    return None


def findings_table(res: Any, top: int | None = None) -> pl.DataFrame:
    """Findings of ``diagnose`` in :data:`FINDING_COLUMNS` order (missing columns null)."""
    df = res.main if res is not None and res.tables else pl.DataFrame()
    cols = []
    for c in FINDING_COLUMNS:
        if c in df.columns:
            cols.append(pl.col(c).cast(pl.Int64 if c == "rank" else pl.String))
        else:
            cols.append(pl.lit(None, dtype=pl.Int64 if c == "rank" else pl.String).alias(c))
    out = df.select(cols) if df.height else pl.DataFrame(schema={c: (pl.Int64 if c == "rank" else pl.String) for c in FINDING_COLUMNS})
    return out.head(top) if top is not None else out


def build_summary(run: Any, *, ranks: Any = None, top: int = 5, findings: int = 5) -> SummaryDoc:
    """Headline numbers per rank from every available analysis, the top kernels, the top findings."""
    from ranksight.analyses._base import selected

    rs = selected(run, ranks)
    notes: list[str] = []
    per_rank = pl.DataFrame({"rank": rs}, schema={"rank": pl.Int64})
    columns: dict[str, str] = {"rank": "rank"}
    top_kernels = None
    for hl in HEADLINES:
        opts = dict(hl.options)
        if hl.analysis == "summary":
            opts["top"] = top
        res = _run(hl.analysis, run, ranks, opts, notes)
        if res is None:
            continue
        if hl.analysis == "summary":
            top_kernels = res.tables.get("top_kernels")
        try:
            cols = hl.extract(res)
        except (KeyError, pl.exceptions.ColumnNotFoundError) as err:
            notes.append(f"{hl.analysis}: headline columns missing ({err})")
            continue
        cols = cols.select([c for c in cols.columns if c == "rank" or c not in per_rank.columns])
        per_rank = per_rank.join(cols, on="rank", how="left")
        columns.update({c: f"{hl.columns.get(c, c)} [{hl.analysis}]" for c in cols.columns if c != "rank"})
        for n in res.notes:
            if n not in notes:
                notes.append(n)
    tables: dict[str, pl.DataFrame] = {"per_rank": per_rank}
    if top_kernels is not None:
        tables["top_kernels"] = top_kernels
    diag = _run("diagnose", run, ranks, {}, notes)
    if diag is not None:
        tables["findings"] = findings_table(diag, findings)
    return SummaryDoc(tables, columns, notes, list(rs))
