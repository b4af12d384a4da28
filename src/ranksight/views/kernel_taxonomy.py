"""The kernel taxonomy of one rank: every distinct GPU activity with what it is and how long it ran.

One row per distinct (kind, name) of the rank's GPU work (kernels, memcpys, memsets with a
duration): ``count``, ``dur_ns`` (sum), the taxonomy's answers
(:func:`ranksight.model.taxonomy.classify`) and ``kernel_class`` as stored on the events (which
also counts a kernel carrying collective arguments as communication, whatever its name).

``precision_source`` says where ``precision`` comes from: ``name`` (the kernel's name), ``op`` (no
precision in the name; the dtype of the first floating-point input of the CPU operator that
launched it, when every launch of the name agrees), or ``none``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from ranksight.model.kinds import GPU_KINDS
from ranksight.model.taxonomy import TAXONOMY_SCHEMA, kernel_taxonomy
from ranksight.views.enclosing import innermost_enclosing
from ranksight.views.peaks import DTYPE_PRECISION

if TYPE_CHECKING:
    from ranksight.model.trace import Trace

__all__ = ["kernel_taxonomy_table", "SCHEMA", "DTYPE_PRECISION"]


SCHEMA = {
    "rank": pl.Int64,
    "kind": pl.String,
    "count": pl.Int64,
    "dur_ns": pl.Int64,
    **TAXONOMY_SCHEMA,
    "precision_source": pl.String,
}


def _op_precision(trace: Trace, names: list[str]) -> dict[str, str]:
    """name → precision from the launching operator's first floating-point input, where all agree."""
    if not names:
        return {}
    ev = trace.scan()
    k = (
        ev.filter(pl.col("kind").is_in(list(GPU_KINDS)) & pl.col("name").cast(pl.String).is_in(names))
        .select(pl.col("name").cast(pl.String), "launch_row")
        .drop_nulls("launch_row")
        .collect()
    )
    if k.height == 0:
        return {}
    launches = (
        ev.filter(pl.col("row").is_in(k["launch_row"].unique().implode()))
        .select(pl.col("row").alias("launch_row"), "tid", "ts_ns")
        .collect()
    )
    ops = ev.filter((pl.col("kind") == "cpu_op") & pl.col("dur_ns").is_not_null()).select(
        "row", "tid", "ts_ns", "end_ns"
    )
    ops_df = ops.collect()
    if ops_df.height == 0 or launches.height == 0:
        return {}
    idx = innermost_enclosing(ops_df, launches.select("tid", "ts_ns"))
    op_rows = launches.select("launch_row").with_columns(
        pl.Series("row", ops_df["row"].gather(idx.fill_null(0))).alias("row"), idx.is_null().alias("__none")
    )
    op_rows = trace.with_args(op_rows.filter(~pl.col("__none")).drop("__none"), "op")
    if "input_type" not in op_rows.columns:
        return {}
    first = op_rows.select(
        "launch_row",
        pl.col("input_type")
        .cast(pl.String)
        .str.extract_all(r'"[^"]*"')
        .list.eval(pl.element().str.strip_chars('"'))
        .list.eval(pl.element().filter(pl.element().is_in(list(DTYPE_PRECISION))))
        .list.first()
        .alias("dtype"),
    )
    j = k.join(first, on="launch_row", how="left")
    per = j.group_by("name").agg(
        pl.col("dtype").n_unique().alias("n"), pl.col("dtype").first(), pl.col("dtype").null_count().alias("nulls")
    )
    per = per.filter((pl.col("n") == 1) & (pl.col("nulls") == 0))
    return {n: DTYPE_PRECISION[d] for n, d in per.select("name", "dtype").iter_rows() if d in DTYPE_PRECISION}


def kernel_taxonomy_table(trace: Trace) -> pl.DataFrame:
    """The taxonomy of every distinct GPU activity of one rank (schema :data:`SCHEMA`). Cached per trace."""
    return trace.memo("kernel_taxonomy", lambda: _compute(trace))


def _compute(trace: Trace) -> pl.DataFrame:
    g = (
        trace.scan()
        .filter(pl.col("kind").is_in(list(GPU_KINDS)) & pl.col("dur_ns").is_not_null())
        .group_by(pl.col("kind").cast(pl.String), pl.col("name").cast(pl.String))
        .agg(
            pl.len().cast(pl.Int64).alias("count"),
            pl.col("dur_ns").sum().cast(pl.Int64),
            pl.col("kernel_class").cast(pl.String).mode().first().alias("__stored"),
        )
        .collect()
    )
    if g.height == 0:
        return pl.DataFrame(schema=SCHEMA)
    parts = []
    for kind in g["kind"].unique().sort().to_list():
        sub = g.filter(pl.col("kind") == kind)
        tx = kernel_taxonomy(sub["name"], kind)
        parts.append(sub.join(tx, on="name", how="left"))
    out = pl.concat(parts).with_columns(
        pl.coalesce("__stored", "kernel_class").alias("kernel_class"),
        pl.when(pl.col("precision") != "unknown")
        .then(pl.lit("name"))
        .otherwise(pl.lit("none"))
        .alias("precision_source"),
    )
    unknown = out.filter((pl.col("precision") == "unknown") & (pl.col("kind") == "kernel"))["name"].to_list()
    by_op = _op_precision(trace, unknown)
    if by_op:
        m = pl.DataFrame({"name": list(by_op), "__op": list(by_op.values())})
        out = (
            out.join(m, on="name", how="left")
            .with_columns(
                pl.when(pl.col("__op").is_not_null() & (pl.col("precision") == "unknown"))
                .then(pl.col("__op"))
                .otherwise(pl.col("precision"))
                .alias("precision"),
                pl.when(pl.col("__op").is_not_null() & (pl.col("precision") == "unknown"))
                .then(pl.lit("op"))
                .otherwise(pl.col("precision_source"))
                .alias("precision_source"),
            )
            .drop("__op")
        )
    return (
        out.with_columns(pl.lit(trace.rank, dtype=pl.Int64).alias("rank"))
        .select(list(SCHEMA))
        .cast(SCHEMA)  # type: ignore[arg-type]
        .sort(["dur_ns", "name"], descending=[True, False])
    )
