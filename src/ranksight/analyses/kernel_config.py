"""Kernels per name and launch configuration (the TensorBoard plugin's kernel views).

Every kernel event of a rank counts (no step window; memcpys/memsets excluded). Groups
(``--group-by``):

- ``config`` (default): kernel name, ``grid``, ``block``, ``registers_per_thread``,
  ``shared_memory_bytes`` (the launch configuration; a kernel without these args has them null);
- ``name``: kernel name only (the plugin's kernel table);
- ``op``: name, launching operator and configuration (the plugin's "kernel + op" table). The
  operator is the host node owning the kernel's runtime/driver call (:mod:`ranksight.views.tb_op_tree`),
  null when there is none.

Per group: ``calls``, ``total_us``, ``mean_us``, ``min_us``, ``max_us``, ``share_pct`` of the rank's
kernel time, ``mean_blocks_per_sm`` and ``mean_est_occupancy_pct`` (means weighted by kernel
duration over the calls that carry the arg; null when none does: a missing arg is not a zero,
unlike the plugin, which fills 0), and ``tensor_cores`` (name rule of
:mod:`ranksight.model.tensor_cores`). Sorted by total time, descending.

Python API: ``kernel_config(run, ranks=None, group_by="config", tensor_core_rules="current")``;
``kernels --view launch`` calls it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, Option, register
from ranksight.analyses._session import Session
from ranksight.errors import MissingDataError, UsageError
from ranksight.model.taxonomy import tensor_core_mask
from ranksight.model.tensor_cores import RULESETS
from ranksight.views.tb_op_tree import build_op_tree, kernel_owner_names

if TYPE_CHECKING:
    from ranksight.model.run import Run
    from ranksight.model.trace import Trace

__all__ = ["kernel_rows", "kernel_table", "kernel_config", "GROUPS"]

GROUPS = ("config", "name", "op")
CONFIG = ["grid", "block", "registers_per_thread", "shared_memory_bytes"]


def _triple(prefix: str) -> pl.Expr:
    x, y, z = (pl.col(f"{prefix}_{a}").cast(pl.String) for a in "xyz")
    return (
        pl.when(pl.col(f"{prefix}_x").is_not_null())
        .then(pl.concat_str([pl.lit("["), x, pl.lit(", "), y, pl.lit(", "), z, pl.lit("]")]))
        .otherwise(None)
    )


def kernel_rows(trace: Trace, *, tensor_core_rules: str = "current", with_op: bool = False) -> pl.DataFrame:
    """One row per kernel of one rank: ``row, name, dur_ns, grid, block, registers_per_thread,
    shared_memory_bytes, blocks_per_sm, est_occupancy_pct, tensor_cores`` (and ``op``)."""
    k = (
        trace.kind("kernel")
        .filter(pl.col("dur_ns").is_not_null())
        .select("row", pl.col("name").cast(pl.String), "dur_ns", "launch_row")
    )
    k = trace.with_args(k, "kernel")
    for c, t in (
        ("grid_x", pl.Int32),
        ("grid_y", pl.Int32),
        ("grid_z", pl.Int32),
        ("block_x", pl.Int32),
        ("block_y", pl.Int32),
        ("block_z", pl.Int32),
        ("registers_per_thread", pl.Int32),
        ("shared_memory_bytes", pl.Int64),
        ("blocks_per_sm", pl.Float64),
        ("est_occupancy_pct", pl.Float64),
    ):
        if c not in k.columns:
            k = k.with_columns(pl.lit(None, t).alias(c))
    out = k.select(
        "row",
        "name",
        "dur_ns",
        _triple("grid").alias("grid"),
        _triple("block").alias("block"),
        "registers_per_thread",
        "shared_memory_bytes",
        "blocks_per_sm",
        "est_occupancy_pct",
        tensor_core_mask(k["name"], tensor_core_rules),
    )
    if with_op:
        own = kernel_owner_names(trace, build_op_tree(trace, tensor_core_rules=tensor_core_rules))
        out = out.join(own, on="row", how="left", maintain_order="left")
    return out


def _wmean(col: str) -> pl.Expr:
    has = pl.col(col).is_not_null() & pl.col(col).is_not_nan()
    w = pl.col("dur_ns").filter(has).sum()
    weighted = (pl.col(col) * pl.col("dur_ns")).filter(has).sum() / w
    return pl.when(has.any().not_()).then(None).when(w > 0).then(weighted).otherwise(pl.col(col).filter(has).mean())


def kernel_table(trace: Trace, *, group_by: str = "config", tensor_core_rules: str = "current") -> pl.DataFrame:
    """The kernel table of one rank (module doc)."""
    if group_by not in GROUPS:
        raise UsageError(f"--group-by must be one of {', '.join(GROUPS)}")
    k = kernel_rows(trace, tensor_core_rules=tensor_core_rules, with_op=group_by == "op")
    keys = {"name": ["name"], "config": ["name", *CONFIG], "op": ["name", "op", *CONFIG]}[group_by]
    total = k["dur_ns"].sum()
    g = k.group_by(keys).agg(
        pl.len().cast(pl.Int64).alias("calls"),
        (pl.col("dur_ns").sum() / 1e3).alias("total_us"),
        (pl.col("dur_ns").mean() / 1e3).alias("mean_us"),
        (pl.col("dur_ns").min() / 1e3).alias("min_us"),
        (pl.col("dur_ns").max() / 1e3).alias("max_us"),
        (100 * pl.col("dur_ns").sum() / (total if total else 1)).alias("share_pct"),
        _wmean("blocks_per_sm").alias("mean_blocks_per_sm"),
        _wmean("est_occupancy_pct").alias("mean_est_occupancy_pct"),
        pl.col("tensor_cores").first(),
    )
    g = g.with_columns(pl.lit(trace.rank, dtype=pl.Int32).alias("rank"))
    cols = [
        "rank",
        *keys,
        "calls",
        "total_us",
        "mean_us",
        "min_us",
        "max_us",
        "share_pct",
        "mean_blocks_per_sm",
        "mean_est_occupancy_pct",
        "tensor_cores",
    ]
    # every key breaks ties: the hash group-by's order is arbitrary
    return g.sort(["total_us", "calls", *keys], descending=[True, True, *[False] * len(keys)], nulls_last=True).select(
        cols
    )


def kernel_config(
    run: Run, *, ranks: Sequence[int] | None = None, group_by: str = "config", tensor_core_rules: str = "current"
) -> AnalysisResult:
    """Kernels per name and launch configuration: calls, time stats, blocks per SM, occupancy,
    Tensor Core use."""
    if tensor_core_rules not in RULESETS:
        raise UsageError(f"--tensor-core-rules must be one of {', '.join(RULESETS)}")
    sess = Session.of(run, ranks)
    table = pl.concat(
        list(sess.map(kernel_table, group_by=group_by, tensor_core_rules=tensor_core_rules).values()),
        how="vertical_relaxed",
    )
    if table.height == 0:
        raise MissingDataError("kernel-config needs GPU kernel events; these traces have none (CPU-only)")
    notes = []
    if table["mean_blocks_per_sm"].null_count() == table.height:
        notes.append(
            "no kernel carries 'blocks per SM' / 'est. achieved occupancy %' (ROCm or old Kineto): those columns are "
            "empty"
        )
    if group_by != "name" and table["grid"].null_count() == table.height:
        notes.append("no kernel carries grid/block args: the configuration columns are empty")
    return AnalysisResult({"kernels": table}, notes)


register(
    AnalysisSpec(
        name="kernel-config",
        func=kernel_config,
        help="kernels per name and launch configuration: calls, time, blocks per SM, est. occupancy, Tensor Cores",
        options=(
            Option(
                "group_by", str, "config", "group by config (name + grid/block/registers/shared memory), name, or op"
            ),
            Option("tensor_core_rules", str, "current", "Tensor Core kernel rules: current or plugin (the 2019 list)"),
        ),
    )
)
