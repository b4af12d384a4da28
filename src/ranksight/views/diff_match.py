"""Matching kernels between two runs, also when their names differ.

A kernel key is ``(kind, name, op)``: the normalised kernel name and the normalised name of the op
that launched it (see :mod:`ranksight.views.diff_profile`). Keys are matched in phases; each
phase looks only at keys that no earlier phase matched, groups them by the phase's columns, and
matches every group that has keys on both sides (all keys of a group, from both sides, become one
row of the kernel table):

1. ``name``: same kernel name and same launching op;
2. ``name, other op``: same kernel name, launched by a differently named op, when that name is
   left unmatched exactly once on each side (a generic kernel such as
   ``vectorized_elementwise_kernel`` left over under many ops is not lumped together);
3. ``op + shapes``: same launching op, same input shapes of that op (the most frequent ``Input
   Dims`` of the key's launches) and same position among the op call's GPU activities: the same
   GEMM of ``aten::addmm`` at one shape is ``sm90_xmma_gemm_…`` on an H100 and ``Cijk_…`` on an
   MI300X, or another cuBLAS heuristic after an upgrade;
4. ``op + position``: same launching op and position, shapes unknown or different.

Keys left over are ``added`` (test only) or ``removed`` (base only). Keys without a launching op
are matched by name only.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

__all__ = ["PHASES", "kernel_key_table", "match_keys"]

KEY = ["kind", "name", "op"]

#: (label, columns) in order.
PHASES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("name", ("kind", "name", "op")),
    ("name, other op", ("kind", "name")),
    ("op + shapes", ("kind", "op", "dims", "pos")),
    ("op + position", ("kind", "op", "pos")),
)


def kernel_key_table(per_step: pl.DataFrame, sigs: pl.DataFrame) -> pl.DataFrame:
    """One row per key with its most frequent (dims, pos) and its most frequent pos."""
    keys = per_step.select(KEY).unique()
    s = sigs.group_by([*KEY, "dims", "pos"]).agg(pl.col("count").sum())
    best = (
        s.sort([*KEY, "count", "dims", "pos"], descending=[False, False, False, True, False, False], nulls_last=True)
        .group_by(KEY, maintain_order=True)
        .first()
        .select(*KEY, "dims", pl.col("pos").alias("pos_dims"))
    )
    p = s.group_by([*KEY, "pos"]).agg(pl.col("count").sum())
    best_pos = (
        p.sort([*KEY, "count", "pos"], descending=[False, False, False, True, False], nulls_last=True)
        .group_by(KEY, maintain_order=True)
        .first()
    )
    out = keys.join(best, on=KEY, how="left", nulls_equal=True).join(
        best_pos.select(*KEY, "pos"), on=KEY, how="left", nulls_equal=True
    )
    # shapes only count together with the position they were seen at
    return out.with_columns(
        pl.when(pl.col("dims").is_not_null()).then(pl.col("pos_dims")).otherwise(None).alias("pos_dims")
    )


def _phase_cols(cols: Sequence[str]) -> list[pl.Expr]:
    exprs = []
    for c in cols:
        src = "pos_dims" if (c == "pos" and "dims" in cols) else c
        exprs.append(pl.col(src).cast(pl.String).alias(c))
    return exprs


def match_keys(base: pl.DataFrame, test: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Add ``row_id`` (a string shared by matched keys) and ``match`` (the phase label, null for
    added/removed keys) to the key tables of both sides (from :func:`kernel_key_table`)."""
    b = base.with_columns(pl.lit(None, dtype=pl.String).alias("row_id"), pl.lit(None, dtype=pl.String).alias("match"))
    t = test.with_columns(pl.lit(None, dtype=pl.String).alias("row_id"), pl.lit(None, dtype=pl.String).alias("match"))
    for label, cols in PHASES:
        gb, gt = _groups(b, label, cols), _groups(t, label, cols)
        if label == "name, other op":  # unambiguous pairs only
            gb = gb.filter(pl.len().over("gid") == 1)
            gt = gt.filter(pl.len().over("gid") == 1)
        common = gb.select("gid").unique().join(gt.select("gid").unique(), on="gid")
        if common.height == 0:
            continue
        gb = gb.join(common, on="gid").select(*KEY, "gid")
        gt = gt.join(common, on="gid").select(*KEY, "gid")
        b = _assign(b, gb, label)
        t = _assign(t, gt, label)
    b = b.with_columns(
        pl.coalesce(
            "row_id", pl.concat_str([pl.lit("base"), *[pl.col(c).fill_null("∅") for c in KEY]], separator="\x1f")
        ).alias("row_id")
    )
    t = t.with_columns(
        pl.coalesce(
            "row_id", pl.concat_str([pl.lit("test"), *[pl.col(c).fill_null("∅") for c in KEY]], separator="\x1f")
        ).alias("row_id")
    )
    return b, t


def _groups(df: pl.DataFrame, label: str, cols: Sequence[str]) -> pl.DataFrame:
    """Unmatched keys with their group id for one phase (keys lacking a needed column dropped)."""
    g = df.filter(pl.col("row_id").is_null()).select(
        *KEY, *[e.alias(f"g_{c}") for e, c in zip(_phase_cols(cols), cols, strict=True)]
    )
    through_op = "pos" in cols  # phases 3-4 match through the launching op: it must be known
    for c in cols:
        if c in ("dims", "pos") or (c == "op" and through_op):
            g = g.filter(pl.col(f"g_{c}").is_not_null())
    parts = [pl.col(f"g_{c}").fill_null("∅") for c in cols]
    return g.with_columns(pl.concat_str([pl.lit(label), *parts], separator="\x1f").alias("gid"))


def _assign(df: pl.DataFrame, hits: pl.DataFrame, label: str) -> pl.DataFrame:
    j = df.join(hits, on=KEY, how="left", nulls_equal=True, maintain_order="left")
    return j.with_columns(
        pl.coalesce("row_id", "gid").alias("row_id"),
        pl.when(pl.col("match").is_null() & pl.col("gid").is_not_null())
        .then(pl.lit(label))
        .otherwise(pl.col("match"))
        .alias("match"),
    ).drop("gid")
