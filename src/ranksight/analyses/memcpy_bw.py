"""Memory copy and memset bandwidth: time series and summary per copy kind (and per stream).

Definitions (per rank):

- rows: GPU memcpy and memset activities (by category). Copy kind: ``Memset``; ``Memcpy XtoY``
  from the first 11 characters of the name (``Memcpy DtoH``, ``Memcpy HtoD``, ``Memcpy DtoD``,
  ``Memcpy PtoP``, ...), else from the ROCm ``kind`` arg, else ``Memcpy Unknown``.
- bandwidth of one activity (``bw_gbps``, GB/s = 10⁹ B/s): Kineto's ``memory bandwidth (GB/s)``
  arg when present, else ``bytes / dur_ns`` (bytes from ``bytes`` or ROCm ``size``); unknown
  (null) when neither bytes nor a positive duration exist.
- series: each activity adds ``+bw`` at its start and ``−bw`` at its end (a zero duration counts
  as 1 µs, as in HTA); the cumulative sum per copy kind gives the bandwidth in use (overlapping
  copies of one kind add up). Points are ordered by time, starts before ends at equal times.
- summary per copy kind: HTA's ``describe()`` over the series points with bandwidth > 0
  (``count, mean, std, min, p25, p50, p75, max``), plus ``copies``, ``bytes``, ``busy_us`` (union
  of the kind's activity intervals), ``tw_mean_gbps`` = Σ(bwᵢ·durᵢ) / busy time (the time-weighted
  mean of the series while it is non-zero; equal to bytes / busy time when computed from bytes) and
  ``peak_gbps`` (largest series value).
- per stream: the same ``copies, bytes, busy_us, tw_mean_gbps`` per (stream, copy kind).

``hta_compat=True`` selects rows the way HTA does (GPU rows whose name starts with ``Memcpy``,
``Memset`` or ``dma``) and uses only the Kineto bandwidth arg.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, Option, register
from ranksight.analyses._session import Session
from ranksight.model.kinds import GPU_KINDS
from ranksight.views.intervals import union_length_by
from ranksight.views.names import trace_values_matching

if TYPE_CHECKING:
    from ranksight.model.run import Run
    from ranksight.model.trace import Trace

__all__ = ["copies", "bw_series", "bw_summary", "bw_per_stream", "memcpy_bw"]

_COPY_SCHEMA = {
    "rank": pl.Int32,
    "row": pl.UInt32,
    "name": pl.String,
    "copy_kind": pl.String,
    "pid": pl.Int64,
    "stream": pl.Int64,
    "ts_ns": pl.Int64,
    "dur_ns": pl.Int64,
    "bytes": pl.Int64,
    "bw_gbps": pl.Float64,
    "bw_source": pl.String,
}
_SERIES_SCHEMA = {"rank": pl.Int32, "copy_kind": pl.String, "ts_ns": pl.Int64, "pid": pl.Int64, "bw_gbps": pl.Float64}
_HTA_MEMORY_NAME = r"^(Memcpy|Memset|dma)"


def _copy_kind() -> pl.Expr:
    name = pl.col("name")
    return (
        pl.when(name.str.starts_with("Memset"))
        .then(pl.lit("Memset"))
        .when(name.str.starts_with("Memcpy ") & (name.str.len_chars() >= 11))
        .then(name.str.slice(0, 11))
        .when(pl.col("__rocm_kind").is_not_null())
        .then(pl.lit("Memcpy ") + pl.col("__rocm_kind"))
        .when(pl.col("kind") == "memset")
        .then(pl.lit("Memset"))
        .otherwise(pl.lit("Memcpy Unknown"))
    )


def _hta_copy_kind() -> pl.Expr:
    name = pl.col("name")
    return (
        pl.when(name.str.starts_with("Memset"))
        .then(pl.lit("Memset"))
        .when(name.str.starts_with("Memcpy"))
        .then(name.str.slice(0, 11))
        .otherwise(pl.lit("Memcpy Unknown"))
    )


def copies(trace: Trace, *, hta_compat: bool = False) -> pl.DataFrame:
    """One row per memcpy/memset activity with its copy kind, bytes and bandwidth."""
    ev = trace.scan()
    if hta_compat:
        q = ev.filter(
            pl.col("kind").is_in(list(GPU_KINDS)) & pl.col("name").is_in(trace_values_matching(trace, _HTA_MEMORY_NAME))
        )
    else:
        q = ev.filter(pl.col("kind").is_in(["memcpy", "memset"]))
    g = (
        q.filter(pl.col("dur_ns").is_not_null())
        .select("row", pl.col("name").cast(pl.String), "kind", "pid", "stream", "ts_ns", "dur_ns")
        .collect()
    )
    if g.height == 0:
        return pl.DataFrame(schema=_COPY_SCHEMA)
    g = trace.with_args(g, "transfer")
    g = g.with_columns(
        pl.col("copy_kind").cast(pl.String).alias("__rocm_kind"), pl.coalesce("bytes", "size_bytes").alias("__bytes")
    )
    if hta_compat:
        # HTA's parser gives a copy without Kineto's bandwidth arg its default, 0.0 GB/s
        # (hta/configs/default_event_args.py: memory_bw_gbps, default_value 0.0)
        bw = pl.col("mem_bw_gbps").fill_null(0.0)
        src = pl.when(pl.col("mem_bw_gbps").is_not_null()).then(pl.lit("arg")).otherwise(None)
        kind = _hta_copy_kind()
    else:
        computed = pl.when(pl.col("dur_ns") > 0).then(pl.col("__bytes") / pl.col("dur_ns")).otherwise(None)
        bw = pl.coalesce(pl.col("mem_bw_gbps"), computed)
        src = (
            pl.when(pl.col("mem_bw_gbps").is_not_null())
            .then(pl.lit("arg"))
            .when(computed.is_not_null())
            .then(pl.lit("bytes/dur"))
            .otherwise(None)
        )
        kind = _copy_kind()
    return g.select(
        pl.lit(trace.rank, pl.Int32).alias("rank"),
        "row",
        "name",
        kind.alias("copy_kind"),
        "pid",
        "stream",
        "ts_ns",
        "dur_ns",
        pl.col("__bytes").alias("bytes"),
        bw.alias("bw_gbps"),
        src.alias("bw_source"),
    ).cast(_COPY_SCHEMA)  # type: ignore[arg-type]


def bw_series(cp: pl.DataFrame, *, hta_order: bool = False) -> pl.DataFrame:
    """Bandwidth in use per copy kind: one point per start and end (see module docstring).

    ``hta_order`` orders equal-time points the way HTA's ``sort_values`` does (numpy's
    quicksort over all starts, then all ends): only for matching HTA's change-point statistics.
    """
    if cp.height == 0:
        return pl.DataFrame(schema=_SERIES_SCHEMA)
    dur = pl.when(pl.col("dur_ns") == 0).then(pl.lit(1000, pl.Int64)).otherwise(pl.col("dur_ns"))
    a = cp.select("rank", "copy_kind", "ts_ns", "pid", "bw_gbps", pl.lit(0, pl.Int8).alias("__o"), "row")
    b = cp.select(
        "rank",
        "copy_kind",
        (pl.col("ts_ns") + dur).alias("ts_ns"),
        "pid",
        (-pl.col("bw_gbps")).alias("bw_gbps"),
        pl.lit(1, pl.Int8).alias("__o"),
        "row",
    )
    s = pl.concat([a, b])
    if hta_order:
        order = np.argsort(s["ts_ns"].to_numpy(), kind="quicksort")
        s = s[order]
        key = pl.int_range(0, s.height).alias("__k")
        s = s.with_columns(key).sort(["rank", "copy_kind", "__k"])
    else:
        s = s.sort(["rank", "copy_kind", "ts_ns", "__o", "row"])
    # cumulative sum that skips unknown bandwidths (null stays null at its own point)
    return s.select(
        "rank",
        "copy_kind",
        "ts_ns",
        "pid",
        pl.when(pl.col("bw_gbps").is_null())
        .then(None)
        .otherwise(pl.col("bw_gbps").fill_null(0.0).cum_sum().over("rank", "copy_kind"))
        .alias("bw_gbps"),
    )


def _per_key(cp: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Per ``keys``: copies, bytes (null when no copy has them), busy time (union of the copies'
    intervals) and the time-weighted bandwidth over the copies of known bandwidth; one pass over
    every key (every rank at once), not a query per key."""
    ids = cp.select(keys).unique(maintain_order=True).with_row_index("__k")
    k = cp.join(ids, on=keys, how="left", nulls_equal=True, maintain_order="left").with_columns(
        (pl.col("ts_ns") + pl.col("dur_ns")).alias("end_ns")
    )
    known = k.filter(pl.col("bw_gbps").is_not_null())
    busy_all = union_length_by(k.select("__k", "ts_ns", "end_ns"), "__k")
    busy_known = union_length_by(known.select("__k", "ts_ns", "end_ns"), "__k").rename({"covered_ns": "__bk"})
    work = known.group_by("__k").agg((pl.col("bw_gbps") * pl.col("dur_ns")).sum().alias("__w"))
    agg = k.group_by("__k").agg(
        pl.len().cast(pl.Int64).alias("copies"),
        pl.when(pl.col("bytes").null_count() < pl.len()).then(pl.col("bytes").sum()).alias("bytes"),
    )
    out = (
        ids.join(agg, on="__k", how="left")
        .join(busy_all, on="__k", how="left")
        .join(busy_known, on="__k", how="left")
        .join(work, on="__k", how="left")
        .select(
            *keys,
            "copies",
            "bytes",
            pl.col("covered_ns").fill_null(0),
            pl.when(pl.col("__bk") > 0).then(pl.col("__w").fill_null(0.0) / pl.col("__bk")).alias("tw_mean_gbps"),
        )
    )
    schema = {k: cp.schema[k] for k in keys} | {
        "copies": pl.Int64,
        "bytes": pl.Int64,
        "busy_us": pl.Float64,
        "tw_mean_gbps": pl.Float64,
    }
    # ns -> µs in numpy: correctly rounded (polars' Int64 / 1e3 can land one ulp off: 585.4350000000001)
    busy_us = pl.Series("busy_us", out["covered_ns"].to_numpy() / 1e3, dtype=pl.Float64)
    return out.with_columns(busy_us).select(list(schema)).cast(schema).sort(keys)  # type: ignore[arg-type]


def bw_summary(cp: pl.DataFrame, series: pl.DataFrame) -> pl.DataFrame:
    """Per (rank, copy kind): HTA's statistics over positive points and the time-weighted ones."""
    v = pl.col("bw_gbps")
    pos = series.filter(v > 0)
    desc = pos.group_by("rank", "copy_kind").agg(
        pl.len().alias("count"),
        v.mean().alias("mean"),
        v.std().alias("std"),
        v.min().alias("min"),
        v.quantile(0.25, "linear").alias("p25"),
        v.quantile(0.5, "linear").alias("p50"),
        v.quantile(0.75, "linear").alias("p75"),
        v.max().alias("max"),
    )
    tw = (
        _per_key(cp, ["rank", "copy_kind"])
        if cp.height
        else pl.DataFrame(
            schema={
                "rank": pl.Int32,
                "copy_kind": pl.String,
                "copies": pl.Int64,
                "bytes": pl.Int64,
                "busy_us": pl.Float64,
                "tw_mean_gbps": pl.Float64,
            }
        )
    )
    peak = series.group_by("rank", "copy_kind").agg(v.max().alias("peak_gbps"))
    return (
        tw.join(desc, on=["rank", "copy_kind"], how="left")
        .join(peak, on=["rank", "copy_kind"], how="left")
        .sort(["rank", "copy_kind"])
    )


def bw_per_stream(cp: pl.DataFrame) -> pl.DataFrame:
    """Per (rank, stream, copy kind): copies, bytes, busy time and time-weighted bandwidth."""
    if cp.height == 0:
        return pl.DataFrame(
            schema={
                "rank": pl.Int32,
                "stream": pl.Int64,
                "copy_kind": pl.String,
                "copies": pl.Int64,
                "bytes": pl.Int64,
                "busy_us": pl.Float64,
                "tw_mean_gbps": pl.Float64,
            }
        )
    return _per_key(cp, ["rank", "stream", "copy_kind"])


def memcpy_bw(run: Run, *, ranks: Sequence[int] | None = None, hta_compat: bool = False) -> AnalysisResult:
    """Memcpy/memset bandwidth summary per copy kind and per stream, and the series."""
    sess = Session.of(run, ranks)
    parts = list(sess.map(copies, hta_compat=hta_compat).values())
    cp = pl.concat(parts) if parts else pl.DataFrame(schema=_COPY_SCHEMA)
    series = bw_series(cp)
    notes = []
    if cp.height == 0:
        notes.append("no memcpy or memset activity in these traces")
    unknown = cp.filter(pl.col("bw_gbps").is_null())
    if unknown.height:
        notes.append(
            f"{unknown.height} of {cp.height} copies have neither a bandwidth arg nor bytes: bandwidth unknown"
        )
    computed = cp.filter(pl.col("bw_source") == "bytes/dur").height
    if computed:
        notes.append(f"{computed} copies lack Kineto's bandwidth arg: bandwidth computed as bytes / duration")
    return AnalysisResult(
        {"summary": bw_summary(cp, series), "per_stream": bw_per_stream(cp), "series": series, "copies": cp}, notes
    )


register(
    AnalysisSpec(
        name="memcpy-bw",
        func=memcpy_bw,
        help="memcpy/memset bandwidth per copy kind and stream (computed from bytes when the arg is absent)",
        options=(Option("hta_compat", bool, False, "HTA's row selection and Kineto's bandwidth arg only", flag=True),),
    )
)
