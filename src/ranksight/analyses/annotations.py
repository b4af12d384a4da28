"""Time per user annotation (``record_function`` ranges), on the CPU and on the GPU.

Definitions (per rank and annotation name; µs): ``cpu`` rows come from ``user_annotation``
events (CPU ranges, ProfilerStep#N included, as in HTA), ``gpu`` rows from
``gpu_user_annotation`` events (Kineto's GPU-side copies spanning the GPU work of the range).
Per name: ``count``, ``sum_us``, ``max_us``, ``min_us``, ``std_us`` (ddof 1; 0 for one
event, as HTA fills it) and ``mean_us``. Nested annotations each count their whole duration.
With ``top`` > 0, names beyond the ``top`` largest by ``sum_us`` (per rank and side) are merged
into one ``others`` row whose statistics are computed over the merged events (HTA instead puts
the per-name sums into the stats columns).
"""

# no ``from __future__ import annotations`` here: this module defines a function named ``annotations``

from collections.abc import Sequence
from typing import TYPE_CHECKING

import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, Option, register
from ranksight.analyses._session import Session

if TYPE_CHECKING:
    from ranksight.model.run import Run
    from ranksight.model.trace import Trace

__all__ = ["annotation_events", "annotation_stats", "annotations"]

_SIDE = {"cpu": "user_annotation", "gpu": "gpu_user_annotation"}
_SCHEMA = {
    "rank": pl.Int32,
    "side": pl.String,
    "name": pl.String,
    "count": pl.Int64,
    "sum_us": pl.Float64,
    "max_us": pl.Float64,
    "min_us": pl.Float64,
    "std_us": pl.Float64,
    "mean_us": pl.Float64,
}


def annotation_events(trace: "Trace", side: str) -> pl.DataFrame:
    """``rank, side, name, dur_ns`` of one rank's CPU (``side="cpu"``) or GPU annotations."""
    return (
        trace.kind(_SIDE[side])
        .filter(pl.col("dur_ns").is_not_null())
        .select(
            pl.lit(trace.rank, pl.Int32).alias("rank"),
            pl.lit(side).alias("side"),
            pl.col("name").cast(pl.String),
            "dur_ns",
        )
    )


def _stats(ev: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    d = pl.col("dur_ns") / 1e3
    return ev.group_by(keys).agg(
        pl.len().cast(pl.Int64).alias("count"),
        d.sum().alias("sum_us"),
        d.max().alias("max_us"),
        d.min().alias("min_us"),
        d.std().fill_null(0.0).alias("std_us"),
        d.mean().alias("mean_us"),
    )


def annotation_stats(ev: pl.DataFrame, top: int = 0) -> pl.DataFrame:
    """Per (rank, side, name) statistics; with ``top`` > 0 the rest become ``others``."""
    if ev.height == 0:
        return pl.DataFrame(schema=_SCHEMA)
    keys = ["rank", "side", "name"]
    st = _stats(ev, keys)
    if top > 0:
        ranked = st.with_columns(pl.col("sum_us").rank("ordinal", descending=True).over("rank", "side").alias("__r"))
        keep = ranked.filter(pl.col("__r") <= top).select(keys)
        ev = ev.join(keep.with_columns(pl.lit(True).alias("__keep")), on=keys, how="left").with_columns(
            pl.when(pl.col("__keep")).then(pl.col("name")).otherwise(pl.lit("others")).alias("name")
        )
        st = _stats(ev, keys)
    return (
        st.sort(["rank", "side", "sum_us", "name"], descending=[False, False, True, False])
        .select(list(_SCHEMA))
        .cast(_SCHEMA)  # type: ignore[arg-type]
    )


def _rank_annotations(trace: "Trace", sides: Sequence[str]) -> pl.DataFrame:
    return pl.concat([annotation_events(trace, s) for s in sides])


def annotations(run: "Run", *, ranks: Sequence[int] | None = None, side: str = "both", top: int = 0) -> AnalysisResult:
    """Time per CPU and GPU user annotation, per rank."""
    sess = Session.of(run, ranks)
    rs = sess.ranks
    sides = ["cpu", "gpu"] if side == "both" else [side]
    if any(s not in _SIDE for s in sides):
        from ranksight.errors import UsageError

        raise UsageError(f"--side must be cpu, gpu or both, not {side!r}")
    per = sess.map(_rank_annotations, sides=sides)
    ev = pl.concat([per[r] for r in rs])
    table = annotation_stats(ev, top)
    notes = []
    for s in sides:
        if ev.filter(pl.col("side") == s).height == 0:
            notes.append(f"no {_SIDE[s]} events in these traces")
    return AnalysisResult({"annotations": table}, notes)


register(
    AnalysisSpec(
        name="annotations",
        func=annotations,
        help="time per CPU and GPU user annotation (count, sum, max, min, std, mean)",
        options=(
            Option("side", str, "both", "cpu, gpu or both"),
            Option("top", int, 0, "keep the N largest names per rank and side, merge the rest into 'others' (0 = all)"),
        ),
    )
)
