"""Operator view per rank (the TensorBoard plugin's operator table).

Operators are the plugin's operator set of the host operator tree
(:mod:`ranksight.views.tb_op_tree`): ``cpu_op`` events on every thread, ProfilerSteps, DataLoader
and ``Optimizer.*`` nodes and ``(Distributed)DataParallel.forward`` excluded; an op whose only child
is an op of the same name absorbs it. Every operator in the file counts (not only inside steps).

Per group (``--group-by name`` or ``shape`` = name + ``Input Dims``):

- ``calls``;
- ``host_self_us`` = Σ (duration − children's durations − own runtime calls' durations),
  ``host_total_us`` = Σ duration;
- ``device_self_us`` = Σ duration of the GPU work (kernels, memcpys, memsets) launched by the op's
  own runtime/driver calls, ``device_total_us`` = the same including child ops' (plain sums);
- ``tc_eligible``: the op (or, for ops, a child) is Tensor-Core eligible by name, or launched a
  Tensor-Core kernel itself (:mod:`ranksight.model.tensor_cores`);
- ``tc_self_pct`` / ``tc_total_pct`` = 100 × Tensor-Core kernel time / device self (total) time
  (0 when the op has no device time, as in the plugin).

Sorted by device self time, then host self time (descending).

CUDA/HIP graph replays (``--capture``, ``docs/graphs.md``): the operators read are those of
:func:`ranksight.views.graph_attribution.attributed_operators`: a replayed kernel matched to a capture trace
counts for the capture-side operator that launched it; those operator calls took no host time in the
replay (``host_*`` 0 for them, and their parent's self time is not reduced by them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, Option, register
from ranksight.analyses._replay import CAPTURE_OPTION, replay_notes
from ranksight.analyses._session import Session
from ranksight.errors import MissingDataError, UsageError
from ranksight.model.tensor_cores import RULESETS
from ranksight.views.graph_attribution import ReplayShare, attributed_operators, replay_copy_start
from ranksight.views.tb_op_tree import build_op_tree

if TYPE_CHECKING:
    from ranksight.model.run import Run
    from ranksight.model.trace import Trace

__all__ = ["op_instances", "op_table", "ops"]

GROUPS = ("name", "shape")


def op_instances(trace: Trace, *, tensor_core_rules: str = "current", input_dims: bool = True) -> pl.DataFrame:
    """One row per operator call of one rank with its tree statistics and (unless told otherwise)
    ``input_dims``."""
    o = build_op_tree(trace, tensor_core_rules=tensor_core_rules).pop_operators()  # the whole tree is freed here
    copies = replay_copy_start(trace)
    if copies is not None:  # operators replayed from a graph: no host time (module doc)
        copy = pl.col("row") >= copies
        back = (
            o.filter(copy & (pl.col("parent_row") < copies)).group_by("parent_row").agg(pl.col("host_total_ns").sum())
        )
        o = o.join(back.rename({"parent_row": "row", "host_total_ns": "__back"}), on="row", how="left")
        o = o.with_columns(
            pl.when(copy)
            .then(0)
            .otherwise(pl.col("host_self_ns") + pl.col("__back").fill_null(0))
            .alias("host_self_ns"),
            pl.when(copy).then(0).otherwise(pl.col("host_total_ns")).alias("host_total_ns"),
        ).drop("__back")
    if not input_dims:
        return o
    dims = trace.table("op")
    if "input_dims" in dims.columns and dims.height:
        o = o.join(
            dims.select("row", pl.col("input_dims").cast(pl.String)), on="row", how="left", maintain_order="left"
        )
    else:
        o = o.with_columns(pl.lit(None, pl.String).alias("input_dims"))
    return o.with_columns(pl.col("input_dims").fill_null("[]"))


def op_table(trace: Trace, *, group_by: str = "name", tensor_core_rules: str = "current") -> pl.DataFrame:
    """The operator table of one rank (module doc)."""
    if group_by not in GROUPS:
        raise UsageError(f"--group-by must be one of {', '.join(GROUPS)}")
    o = op_instances(trace, tensor_core_rules=tensor_core_rules, input_dims=group_by == "shape")
    keys = ["name"] if group_by == "name" else ["name", "input_dims"]
    us = lambda c: pl.col(c).sum() / 1e3  # noqa: E731
    g = o.group_by(keys).agg(
        pl.len().cast(pl.Int64).alias("calls"),
        us("host_self_ns").alias("host_self_us"),
        us("host_total_ns").alias("host_total_us"),
        us("device_self_ns").alias("device_self_us"),
        us("device_total_ns").alias("device_total_us"),
        pl.col("tc_eligible").any().alias("tc_eligible"),
        pl.col("tc_self_ns").sum().alias("_tcs"),
        pl.col("tc_total_ns").sum().alias("_tct"),
        pl.col("device_self_ns").sum().alias("_ds"),
        pl.col("device_total_ns").sum().alias("_dt"),
    )
    g = g.with_columns(
        pl.when(pl.col("_ds") > 0).then(100 * pl.col("_tcs") / pl.col("_ds")).otherwise(0.0).alias("tc_self_pct"),
        pl.when(pl.col("_dt") > 0).then(100 * pl.col("_tct") / pl.col("_dt")).otherwise(0.0).alias("tc_total_pct"),
        pl.lit(trace.rank, dtype=pl.Int32).alias("rank"),
    )
    g = g.with_columns(pl.col("name").cast(pl.String))
    cols = [
        "rank",
        *keys,
        "calls",
        "host_self_us",
        "host_total_us",
        "device_self_us",
        "device_total_us",
        "tc_eligible",
        "tc_self_pct",
        "tc_total_pct",
    ]
    return g.sort(["device_self_us", "host_self_us", *keys], descending=[True, True, *([False] * len(keys))]).select(
        cols
    )


def _rank_ops(
    trace: Trace, group_by: str, tensor_core_rules: str, capture: str | None = None
) -> tuple[pl.DataFrame, bool, ReplayShare]:
    """One rank's operator table, whether it has host operator events, and the share of the GPU time replayed
    from graphs that the capture attributes."""
    has_ops = trace.kind("cpu_op", columns=["row"]).height > 0
    t, share = attributed_operators(trace, capture)
    return op_table(t, group_by=group_by, tensor_core_rules=tensor_core_rules), has_ops, share


def ops(
    run: Run,
    *,
    ranks: Sequence[int] | None = None,
    group_by: str = "name",
    tensor_core_rules: str = "current",
    capture: str | None = None,
) -> AnalysisResult:
    """Operator table per rank: calls, host/device self and total time, Tensor Core share."""
    if tensor_core_rules not in RULESETS:
        raise UsageError(f"--tensor-core-rules must be one of {', '.join(RULESETS)}")
    sess = Session.of(run, ranks)
    rs = sess.ranks
    per = sess.map(_rank_ops, group_by=group_by, tensor_core_rules=tensor_core_rules, capture=capture)
    table = pl.concat([per[r][0] for r in rs], how="vertical_relaxed")
    if table.height == 0 and not any(per[r][1] for r in rs):
        raise MissingDataError("ops needs host operator events (cpu_op); these traces have none")
    notes = []
    if table.height and table["device_total_us"].sum() == 0:
        notes.append(
            "no GPU work attributed to operators (CPU-only trace, or kernels without a launching runtime call)"
        )
    notes += replay_notes(
        (per[r][2] for r in rs), "; those calls took no host time in the replay (the graph launch holds it)"
    )
    return AnalysisResult({"ops": table}, notes)


register(
    AnalysisSpec(
        name="ops",
        func=ops,
        help="operator view: calls, host and device self/total time, Tensor Core share (TensorBoard plugin operator "
        "table)",
        options=(
            Option("group_by", str, "name", "group operators by name or shape (name + input dims)"),
            Option("tensor_core_rules", str, "current", "Tensor Core kernel rules: current or plugin (the 2019 list)"),
            CAPTURE_OPTION,
        ),
    )
)
