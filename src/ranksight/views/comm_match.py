"""Cross-rank reduction of the per-rank collective tables: matching into instances, clock
offsets, and per-instance metrics. Inputs and outputs are compact tables (one row per collective
per rank at most); no event table of any rank is touched here.

Matching key (first that applies):
1. ``(pg_name, seq)`` when the collective carries a sequence number;
2. point-to-point ``send``/``recv`` with a known peer: ``(pg_name, src, dst, k)``, the k-th
   transfer from src to dst;
3. otherwise ``(pg_name, step, coll_type, size, dtype, k)``: the k-th collective of that type and
   dtype (and, for types whose size is the same on every participant, of that size) in that
   ProfilerStep of the group. Step, size and dtype narrow the damage a collective missing on one
   rank can do to one (step, type, size, dtype) sequence.
Send/recv without a known peer stay unmatched (``instance`` null).

Clock offsets (``estimate_offsets``): ``d = end − median(end over the instance's ranks)`` for every
rank of every instance with at least two ranks; a host's offset is the median of ``d`` over its
ranks and instances; ranks that share a ``host_name`` share one offset (one clock); a rank without
``host_name`` is its own host. An estimate no larger than twice the typical residual (median over
ranks of ``median |d − offset|``) cannot be told from end-time noise and is not applied
(``offset_ns`` 0, ``estimated_ns`` kept). Aligned time = time − offset.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from ranksight.views.comm_types import P2P_TYPES, SIZE_BUCKETS, SIZE_CONSISTENT_TYPES, parse_int_list

__all__ = ["match_instances", "estimate_offsets", "apply_offsets", "instance_metrics", "CommData", "OFFSET_SCHEMA"]

OFFSET_SCHEMA = {
    "rank": pl.Int32,
    "host": pl.String,
    "clock": pl.String,
    "offset_ns": pl.Int64,
    "estimated_ns": pl.Int64,
    "instances_used": pl.Int64,
    "residual_ns": pl.Int64,
}


def match_instances(per_rank: pl.DataFrame) -> pl.DataFrame:
    """``per_rank`` (concatenated per-rank tables) with ``key`` and ``instance`` columns added.

    ``instance`` numbers matched instances 0.. in order of their earliest start."""
    if per_rank.height == 0:
        return per_rank.with_columns(
            pl.lit(None, dtype=pl.String).alias("key"), pl.lit(None, dtype=pl.Int64).alias("instance")
        )
    df = per_rank.sort(["rank", "start_ns", "idx"])
    t = pl.col("coll_type")
    is_p2p = t.is_in(list(P2P_TYPES))
    src = (
        pl.when(t == "send")
        .then(pl.coalesce(pl.col("src_rank"), pl.col("rank").cast(pl.Int64)))
        .otherwise(pl.col("src_rank"))
    )
    dst = (
        pl.when(t == "recv")
        .then(pl.coalesce(pl.col("dst_rank"), pl.col("rank").cast(pl.Int64)))
        .otherwise(pl.col("dst_rank"))
    )
    df = df.with_columns(src.alias("__src"), dst.alias("__dst"))
    p2p_known = is_p2p & pl.col("__src").is_not_null() & pl.col("__dst").is_not_null()
    size_key = (
        pl.when(t.is_in(list(SIZE_CONSISTENT_TYPES)))
        .then(pl.col("bytes").cast(pl.String).fill_null("?"))
        .otherwise(pl.lit("*"))
    )
    step_key = pl.col("step").cast(pl.String).fill_null("-")
    df = df.with_columns(
        pl.when(pl.col("seq").is_not_null())
        .then(pl.concat_str([pl.col("pg_name"), pl.lit("seq"), pl.col("seq").cast(pl.String)], separator="|"))
        .when(p2p_known)
        .then(
            pl.concat_str(
                [pl.col("pg_name"), pl.lit("p2p"), pl.col("__src").cast(pl.String), pl.col("__dst").cast(pl.String)],
                separator="|",
            )
        )
        .when(is_p2p)
        .then(pl.lit(None, dtype=pl.String))
        .otherwise(
            pl.concat_str([pl.col("pg_name"), step_key, t, size_key, pl.col("dtype").fill_null("?")], separator="|")
        )
        .alias("__base")
    )
    k = pl.int_range(pl.len()).over(["rank", "__base"])
    df = df.with_columns(
        pl.when(pl.col("seq").is_not_null())
        .then(pl.col("__base"))
        .otherwise(pl.concat_str([pl.col("__base"), k.cast(pl.String)], separator="|"))
        .alias("key")
    )
    first = df.filter(pl.col("key").is_not_null()).group_by("key").agg(pl.col("start_ns").min().alias("__first"))
    first = first.sort(["__first", "key"]).with_columns(pl.int_range(pl.len(), dtype=pl.Int64).alias("instance"))
    df = df.join(first.select("key", "instance"), on="key", how="left", maintain_order="left")
    return df.drop("__src", "__dst", "__base")


def _dev(col: str, over: str) -> pl.Expr:
    """``col − median(col) over over``, exact: the median is taken of small offsets from the
    group's minimum (float64 cannot hold epoch nanoseconds exactly)."""
    rel = pl.col(col) - pl.col(col).min().over(over)
    return (rel - rel.median().over(over)).round(0).cast(pl.Int64)


def _median_abs(col: str, over: str) -> pl.Expr:
    """The median of an absolute-ns column per group, exact (see :func:`_dev`)."""
    base = pl.col(col).min()
    return (base + (pl.col(col) - base).median().round(0).cast(pl.Int64)).alias(col.replace("_ns", "") + "_median")


def _clock(rank: pl.Expr, host: pl.Expr) -> pl.Expr:
    return (
        pl.when(host.is_not_null())
        .then(pl.concat_str([pl.lit("host "), host]))
        .otherwise(pl.concat_str([pl.lit("rank "), rank.cast(pl.String)]))
    )


def estimate_offsets(matched: pl.DataFrame, ranks: list[int], hosts: dict[int, str | None]) -> pl.DataFrame:
    """Per-rank clock offsets (ns) from matched end times (see module doc)."""
    base = pl.DataFrame(
        {"rank": ranks, "host": [hosts.get(r) for r in ranks]}, schema={"rank": pl.Int32, "host": pl.String}
    )
    base = base.with_columns(_clock(pl.col("rank"), pl.col("host")).alias("clock"))
    m = matched.filter(pl.col("instance").is_not_null())
    m = m.with_columns(pl.len().over("instance").alias("__n")).filter(pl.col("__n") >= 2)
    if m.height == 0:
        return base.with_columns(
            pl.lit(0, dtype=pl.Int64).alias("offset_ns"),
            pl.lit(0, dtype=pl.Int64).alias("estimated_ns"),
            pl.lit(0, dtype=pl.Int64).alias("instances_used"),
            pl.lit(None, dtype=pl.Int64).alias("residual_ns"),
        ).select(list(OFFSET_SCHEMA))
    m = m.with_columns(
        _dev("end_ns", "instance").alias("__d"),
        _clock(pl.col("rank"), pl.col("host")).alias("clock"),
    )
    per_clock = m.group_by("clock").agg(pl.col("__d").median().round(0).cast(pl.Int64).alias("offset_ns"))
    m = m.join(per_clock, on="clock", how="left")
    per_rank = m.group_by("rank").agg(
        pl.len().cast(pl.Int64).alias("instances_used"),
        (pl.col("__d") - pl.col("offset_ns")).abs().median().round(0).cast(pl.Int64).alias("residual_ns"),
    )
    out = base.join(per_clock, on="clock", how="left").join(per_rank, on="rank", how="left")
    out = out.with_columns(
        pl.col("offset_ns").fill_null(0).alias("estimated_ns"), pl.col("instances_used").fill_null(0)
    )
    noise = out["residual_ns"].drop_nulls().median()
    floor = 2 * float(noise) if noise is not None else 0.0  # type: ignore[arg-type]
    out = out.with_columns(
        pl.when(pl.col("estimated_ns").abs() > floor).then(pl.col("estimated_ns")).otherwise(0).alias("offset_ns")
    )
    return out.select(list(OFFSET_SCHEMA)).sort("rank")


def apply_offsets(
    df: pl.DataFrame, offsets: pl.DataFrame, cols: tuple[str, ...] = ("start_ns", "end_ns", "launch_ns")
) -> pl.DataFrame:
    """Subtract each rank's offset from the time columns ``cols``."""
    j = df.join(
        offsets.select("rank", pl.col("offset_ns").alias("__off")), on="rank", how="left", maintain_order="left"
    )
    return j.with_columns([(pl.col(c) - pl.col("__off").fill_null(0)).alias(c) for c in cols if c in df.columns]).drop(
        "__off"
    )


def instance_metrics(matched: pl.DataFrame, loaded: list[int]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``(instances, participants)`` from aligned, matched per-rank rows.

    Per participant: ``wait_ns = last_start − start`` (time spent waiting for the last peer),
    ``transfer_ns = max(0, end − last_start)``, ``lateness_ns = start − median start``,
    ``launch_lateness_ns = launch − median launch``. Per instance: ``skew_ns = last_start −
    first_start``; ``late_rank`` the rank that started last (lowest rank on ties);
    ``transfer_ns`` the median participant transfer; ``algbw_gbps = bytes / transfer_ns`` (bytes
    the largest over participants); ``busbw_gbps = algbw × busbw_factor(type, group_size)``.
    Cross-rank values are null for instances seen on one rank only.
    """
    m = matched.filter(pl.col("instance").is_not_null())
    over = pl.col("instance")
    n = pl.len().over(over)
    multi = n >= 2
    last = pl.col("start_ns").max().over(over)
    p = m.with_columns(
        n.cast(pl.Int64).alias("ranks_present"),
        pl.when(multi).then(last - pl.col("start_ns")).alias("wait_ns"),
        pl.when(multi).then((pl.col("end_ns") - last).clip(0)).alias("transfer_ns"),
        pl.when(multi).then(_dev("start_ns", "instance")).alias("lateness_ns"),
        pl.when(multi).then(_dev("launch_ns", "instance")).alias("launch_lateness_ns"),
        (pl.col("start_ns") == last).alias("__is_last"),
    )
    late = p.filter(pl.col("__is_last")).group_by("instance").agg(pl.col("rank").min().alias("late_rank"))
    p = (
        p.join(late, on="instance", how="left")
        .with_columns(((pl.col("rank") == pl.col("late_rank")) & (pl.col("ranks_present") >= 2)).alias("is_last"))
        .drop("__is_last", "late_rank")
    )
    inst = p.group_by("instance").agg(
        pl.col("key").first(),
        pl.col("pg_name").first(),
        pl.col("coll_type").mode().sort().first(),
        pl.col("group_size").max(),
        pl.col("group_ranks").drop_nulls().first(),
        pl.col("seq").first(),
        pl.col("step").min(),
        pl.col("bytes").max(),
        pl.col("dtype").drop_nulls().first(),
        pl.col("algorithm").drop_nulls().first(),
        pl.col("protocol").drop_nulls().first(),
        pl.len().cast(pl.Int64).alias("ranks_present"),
        pl.col("rank").sort().alias("ranks"),
        pl.col("start_ns").min().alias("first_start_ns"),
        pl.col("start_ns").max().alias("last_start_ns"),
        _median_abs("start_ns", "instance").alias("median_start_ns"),
        _median_abs("end_ns", "instance").alias("median_end_ns"),
        pl.col("wait_ns").sum().alias("total_wait_ns"),
        pl.col("wait_ns").max().alias("max_wait_ns"),
        pl.col("transfer_ns").median().cast(pl.Int64).alias("transfer_ns"),
        pl.col("dur_ns").min().alias("min_dur_ns"),
        pl.col("dur_ns").max().alias("max_dur_ns"),
        (pl.col("launch_ns").max() - pl.col("launch_ns").min()).alias("launch_skew_ns"),
        pl.col("rank").filter(pl.col("is_last")).first().alias("late_rank"),
    )
    multi_i = pl.col("ranks_present") >= 2
    inst = inst.with_columns(
        pl.when(multi_i).then(pl.col("last_start_ns") - pl.col("first_start_ns")).alias("skew_ns"),
        pl.when(multi_i).then(pl.col("total_wait_ns")).alias("total_wait_ns"),
        pl.when(multi_i).then(pl.col("launch_skew_ns")).alias("launch_skew_ns"),
    )
    inst = _missing(inst, loaded)
    inst = _bandwidth(inst)
    return inst.sort("instance"), p.sort(["instance", "rank"])


def _missing(inst: pl.DataFrame, loaded: list[int]) -> pl.DataFrame:
    """``ranks_expected`` (the group's ranks among the loaded ones; all loaded ranks when the group
    is unknown) and ``missing_ranks`` (expected ranks without a row)."""
    texts = [t for t in inst["group_ranks"].unique().drop_nulls().to_list()]
    groups = {t: [r for r in loaded if r in set(parse_int_list(t) or loaded)] for t in texts}
    exp = (
        pl.col("group_ranks").replace_strict(groups, default=None, return_dtype=pl.List(pl.Int32))
        if groups
        else pl.lit(None, dtype=pl.List(pl.Int32))
    )
    inst = inst.with_columns(pl.coalesce(exp, pl.lit(loaded, dtype=pl.List(pl.Int32))).alias("__exp"))
    return inst.with_columns(
        pl.col("__exp").list.len().cast(pl.Int64).alias("ranks_expected"),
        pl.col("__exp").list.set_difference(pl.col("ranks").cast(pl.List(pl.Int32))).list.sort().alias("missing_ranks"),
    ).drop("__exp")


def _bandwidth(inst: pl.DataFrame) -> pl.DataFrame:
    """``busbw_factor`` (nccl-tests), its formula, ``size_bucket``, ``algbw_gbps``, ``busbw_gbps``."""
    t, n = pl.col("coll_type"), pl.col("group_size").cast(pl.Float64)
    ring = ["all_gather", "reduce_scatter", "all_to_all", "gather", "scatter"]
    one = ["broadcast", "reduce", "send", "recv", "send_recv"]
    factor = (
        pl.when(n.is_null() | (n < 1))
        .then(None)
        .when(t == "all_reduce")
        .then(2.0 * (n - 1) / n)
        .when(t.is_in(ring))
        .then((n - 1) / n)
        .when(t.is_in(one))
        .then(pl.lit(1.0))
        .otherwise(None)
    )
    formula = (
        pl.when(t == "all_reduce")
        .then(pl.lit("2(n-1)/n"))
        .when(t.is_in(ring))
        .then(pl.lit("(n-1)/n"))
        .when(t.is_in(one))
        .then(pl.lit("1"))
        .otherwise(None)
    )
    b = pl.col("bytes")
    bucket = pl.lit("unknown")
    for limit, label in reversed(SIZE_BUCKETS):
        bucket = pl.when(b < limit).then(pl.lit(label)).otherwise(bucket)
    bucket = (
        pl.when(b.is_null())
        .then(pl.lit("unknown"))
        .when(b >= SIZE_BUCKETS[-1][0])
        .then(pl.lit(">=256MiB"))
        .otherwise(bucket)
    )
    inst = inst.with_columns(factor.alias("busbw_factor"), formula.alias("factor_formula"), bucket.alias("size_bucket"))
    algbw = pl.when((pl.col("transfer_ns") > 0) & b.is_not_null()).then(b / pl.col("transfer_ns"))
    return inst.with_columns(algbw.alias("algbw_gbps")).with_columns(
        (pl.col("algbw_gbps") * pl.col("busbw_factor")).alias("busbw_gbps")
    )


@dataclass
class CommData:
    """Everything the distributed analyses share: per-rank rows (aligned), offsets, instances."""

    per_rank: pl.DataFrame
    offsets: pl.DataFrame
    instances: pl.DataFrame
    participants: pl.DataFrame
    ranks: list[int]
    aligned: bool
    notes: list[str] = field(default_factory=list)

    def offset_map(self) -> dict[int, int]:
        """``{rank: offset_ns}`` of :attr:`offsets` (what a per-rank map is handed)."""
        return {int(r): int(o) for r, o in self.offsets.select("rank", "offset_ns").iter_rows()}
