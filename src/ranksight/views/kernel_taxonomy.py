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

from collections.abc import Callable
from typing import TYPE_CHECKING

import polars as pl

from ranksight.model.kinds import GPU_KINDS
from ranksight.model.taxonomy import TAXONOMY_SCHEMA, kernel_taxonomy
from ranksight.views.enclosing import innermost_enclosing
from ranksight.views.event_source import THREAD_KEY_TIDS, EventSource, thread_key
from ranksight.views.peaks import DTYPE_PRECISION
from ranksight.views.rank_slices import RankSlices, rank_column, seed_memos

if TYPE_CHECKING:
    from ranksight.model.trace import Trace

__all__ = ["kernel_taxonomy_table", "seed_kernel_taxonomy", "SCHEMA", "DTYPE_PRECISION"]


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
    unknown = pl.DataFrame({"name": names}, schema={"name": pl.String})
    per = _op_precision_of(trace.scan(), _op_inputs([trace]), unknown, by=[])
    return {n: p for n, p in per.select("name", "__op").iter_rows()}


def _op_inputs(traces: list[Trace]) -> pl.DataFrame | None:
    """``rank, row, input_type`` of the traces' CPU operators (the ``op`` side table; no query:
    the columns are referenced), None when no trace records input types."""
    frames = []
    for t in traces:
        op = t.table("op")
        if "input_type" in op.columns:
            frames.append(
                pl.DataFrame(
                    {
                        "rank": rank_column(t.rank, op.height),
                        "row": op["row"],
                        "input_type": op["input_type"].cast(pl.String),
                    }
                )
            )
    if not frames:
        return None
    return frames[0] if len(frames) == 1 else pl.concat(frames, how="vertical_relaxed")


def _op_precision_of(
    ev: pl.LazyFrame, ops_in: pl.DataFrame | None, unknown: pl.DataFrame, by: list[str]
) -> pl.DataFrame:
    """``*by, name, __op``: for the ``(*by, name)`` of ``unknown`` (kernels without a precision in
    their name), the precision of the launching operators' first floating-point input, where every
    launch of the name has one and all agree (the ``op`` precision source). ``ev`` holds the events
    (with ``by``'s columns: ``["rank"]`` over stacked ranks), ``ops_in`` :func:`_op_inputs`."""
    empty = pl.DataFrame(schema={**{c: pl.Int32 for c in by}, "name": pl.String, "__op": pl.String})
    if unknown.height == 0 or ops_in is None:
        return empty
    k = (
        ev.filter(pl.col("kind").is_in(list(GPU_KINDS)))
        .select(*by, pl.col("name").cast(pl.String), "launch_row")
        .join(unknown.lazy(), on=[*by, "name"], how="semi")
        .drop_nulls("launch_row")
        .collect()
    )
    if k.height == 0:
        return empty
    want = k.select(*by, pl.col("launch_row").alias("row")).unique()
    launches = (
        ev.select(*by, "row", "tid", "ts_ns")
        .join(want.lazy(), on=[*by, "row"], how="semi")
        .rename({"row": "launch_row"})
        .collect()
    )
    ops_df = (
        ev.filter((pl.col("kind") == "cpu_op") & pl.col("dur_ns").is_not_null())
        .select(*by, "row", "tid", "ts_ns", "end_ns")
        .collect()
    )
    if ops_df.height == 0 or launches.height == 0:
        return empty
    if by:  # one thread key per (rank, tid): the sweep sees each rank's threads apart
        key = thread_key(by)
        ops_df = ops_df.with_columns(key.alias("__key"))
        launches = launches.with_columns(key.alias("__key"))
    kcol = "__key" if by else "tid"
    idx = innermost_enclosing(ops_df, launches.select(kcol, "ts_ns"), key=kcol)
    op_rows = launches.select(*by, "launch_row").with_columns(
        pl.Series("row", ops_df["row"].gather(idx.fill_null(0))), idx.is_null().alias("__none")
    )
    op_rows = op_rows.filter(~pl.col("__none")).drop("__none")
    inputs = ops_in.select(*by, "row", "input_type") if by else ops_in.select("row", "input_type")
    op_rows = op_rows.join(inputs, on=[*by, "row"], how="left", maintain_order="left")
    first = op_rows.select(
        *by,
        "launch_row",
        pl.col("input_type")
        .cast(pl.String)
        .str.extract_all(r'"[^"]*"')
        .list.eval(pl.element().str.strip_chars('"'))
        .list.eval(pl.element().filter(pl.element().is_in(list(DTYPE_PRECISION))))
        .list.first()
        .alias("dtype"),
    )
    j = k.join(first, on=[*by, "launch_row"], how="left")
    per = j.group_by(*by, "name").agg(
        pl.col("dtype").n_unique().alias("n"), pl.col("dtype").first(), pl.col("dtype").null_count().alias("nulls")
    )
    per = per.filter((pl.col("n") == 1) & (pl.col("nulls") == 0) & pl.col("dtype").is_in(list(DTYPE_PRECISION)))
    return per.select(
        *[pl.col(c).cast(pl.Int32) for c in by],
        "name",
        pl.col("dtype").replace_strict(DTYPE_PRECISION, return_dtype=pl.String).alias("__op"),
    )


def kernel_taxonomy_table(trace: Trace) -> pl.DataFrame:
    """The taxonomy of every distinct GPU activity of one rank (schema :data:`SCHEMA`). Cached per trace."""
    return trace.memo("kernel_taxonomy", lambda: _compute(trace))


def seed_kernel_taxonomy(traces: list[Trace], stacked: pl.DataFrame) -> None:
    """Give each trace its :func:`kernel_taxonomy_table` from one pass over their stacked events
    (``stacked``: a ``rank`` column, :meth:`Session.stacked_events
    <ranksight.analyses.Session.stacked_events>`): each distinct name is classified once for the
    run, not once per rank (issue 19); the tables are those of the per-rank computation. Traces
    that already have theirs keep it; a run whose thread ids are not 32-bit integers is left to
    the per-rank computation."""
    traces = [t for t in traces if not t.has_memo("kernel_taxonomy")]
    if not traces or stacked.schema.get("tid") not in THREAD_KEY_TIDS:
        return
    ev = EventSource.stacked(traces, stacked).ev
    tables = _tables(ev, lambda unknown: _op_precision_of(ev, _op_inputs(traces), unknown, by=["rank"]), by=["rank"])
    parts = RankSlices(tables)
    seed_memos(traces, "kernel_taxonomy", parts)


def _compute(trace: Trace) -> pl.DataFrame:
    def by_op(unknown: pl.DataFrame) -> pl.DataFrame:
        return _op_precision_of(trace.scan(), _op_inputs([trace]), unknown, by=[])

    return _tables(trace.scan(), by_op, by=[], rank=trace.rank)


def _tables(
    ev: pl.LazyFrame, by_op: Callable[[pl.DataFrame], pl.DataFrame], by: list[str], rank: int | None = None
) -> pl.DataFrame:
    """The taxonomy tables of the events ``ev`` (``by``: ``[]`` for one rank, whose number is
    ``rank``; ``["rank"]`` over stacked ranks, sorted by rank then as one rank's), ``by_op`` the op precisions of the
    ``(*by, name)`` without a precision in the name (:func:`_op_precision_of`)."""
    g = (
        ev.filter(pl.col("kind").is_in(list(GPU_KINDS)) & pl.col("dur_ns").is_not_null())
        .group_by(*by, pl.col("kind").cast(pl.String), pl.col("name").cast(pl.String))
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
    for kind in g["kind"].unique().sort().to_list():  # each distinct name classified once
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
    unknown = out.filter((pl.col("precision") == "unknown") & (pl.col("kind") == "kernel")).select(
        *[pl.col(c).cast(pl.Int32) for c in by], "name"
    )
    m = by_op(unknown)
    if m.height:
        # the name's op precision applies to every row of the name (as it always has)
        out = (
            out.join(m, on=[*by, "name"], how="left")
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
    if not by:
        out = out.with_columns(pl.lit(rank, dtype=pl.Int64).alias("rank"))
    return (
        out.select(list(SCHEMA))
        .cast(SCHEMA)  # type: ignore[arg-type]
        .sort([*by, "dur_ns", "name"], descending=[*([False] * len(by)), True, False])
    )
