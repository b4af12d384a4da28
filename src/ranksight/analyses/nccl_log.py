"""``nccl-log``: NCCL_DEBUG=INFO/TRACE logs as tables (communicators, ranks, topology, transports,
algorithm and protocol per operation), joined to the traced collectives when traces are given.

Tables: ``summary`` (files, lines, versions, hosts, processes, communicators, operations, networks),
``ranks``, ``communicators`` (size, hosts, channels, ring and tree channels), ``transports``
(connections per transport and kind), ``operations`` (per communicator, collective type,
algorithm and protocol: count, ranks, median bytes and model time); with ``topology``: ``rings``,
``trees``, ``connections``; with ``operations``: ``operation_log`` (every logical operation); with
traces: ``traced_collectives`` (each traced collective and the log operation it matched).
The log is parsed by :func:`ranksight.io.nccl_log.parse_nccl_logs`; the join is
:func:`ranksight.views.nccl_join.join_log_to_traces`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, Option, register
from ranksight.analyses._session import Session
from ranksight.analyses.collectives import seed_collectives
from ranksight.errors import UsageError
from ranksight.views.comm_extract import rank_collectives
from ranksight.views.nccl_join import join_log_to_traces, logical_operations

if TYPE_CHECKING:
    from ranksight.model.run import Run

__all__ = ["log_tables", "nccl_log"]


def log_tables(log: Any, *, all_ops: bool = False, topology: bool = False) -> tuple[dict[str, pl.DataFrame], list[str]]:
    """The tables shown for a parsed log: summary, communicators, topology, transports, operations."""
    c = log.comms
    summary = pl.DataFrame(
        {
            "files": [len(log.files)],
            "lines": [log.lines],
            "nccl_lines": [log.nccl_lines],
            "versions": [", ".join(log.versions) or None],
            "hosts": [c["host"].n_unique()],
            "processes": [c.select("host", "pid").n_unique()],
            "communicators": [c["comm_key"].n_unique()],
            "operations": [log.operations.height],
            "networks": [", ".join(sorted(set(log.networks["network"].to_list()))) or None],
        }
    )
    comms = (
        c.group_by("comm_key")
        .agg(
            pl.col("nranks").first(),
            pl.col("host").n_unique().alias("hosts"),
            pl.len().alias("ranks_seen"),
            pl.col("global_rank").sort().cast(pl.String).str.join(",").alias("global_ranks"),
        )
        .sort(["nranks", "comm_key"], descending=[True, False])
    )
    key = c.select("host", "pid", "comm", "comm_key", pl.col("rank").alias("comm_rank"), "global_rank")
    ch = (
        log.channels.join(key, on=["host", "pid", "comm"], how="left")
        .group_by("comm_key")
        .agg(
            pl.col("coll_channels").max(),
            pl.col("collnet_channels").max(),
            pl.col("nvls_channels").max(),
            pl.col("p2p_channels").max(),
            pl.col("p2p_per_peer").max(),
        )
    )
    rings = (
        log.rings.join(key, on=["host", "pid", "comm"], how="left")
        .group_by("comm_key")
        .agg(pl.col("channel").n_unique().alias("ring_channels"), pl.col("order").first().alias("ring_0"))
    )
    trees = (
        log.trees.join(key, on=["host", "pid", "comm"], how="left")
        .group_by("comm_key")
        .agg(pl.col("channel").n_unique().alias("tree_channels"))
    )
    comms = (
        comms.join(ch, on="comm_key", how="left")
        .join(rings, on="comm_key", how="left")
        .join(trees, on="comm_key", how="left")
    )
    tr = (
        log.transports.join(key, on=["host", "pid", "comm"], how="left")
        .group_by("comm_key", "transport", "kind")
        .agg(pl.len().alias("connections"), pl.col("via").unique().sort().str.join(" ").alias("via"))
        .sort(["comm_key", "transport", "kind"])
    )
    ops = logical_operations(log.operations)
    op_sum = (
        ops.group_by("comm_key", "nranks", "coll_type", "algorithm", "protocol")
        .agg(
            pl.len().alias("operations"),
            pl.col("global_rank").n_unique().alias("ranks"),
            pl.col("bytes").median().alias("median_bytes"),
            pl.col("model_time_us").median().alias("median_model_time_us"),
        )
        .sort(["comm_key", "coll_type", "algorithm"], nulls_last=True)
    )
    ranks = (
        c.sort("nranks", descending=True)
        .unique(["host", "pid"], keep="first")
        .select("global_rank", "host", "pid", "cuda_dev", "nvml_dev", "bus_id", pl.col("nranks").alias("world_size"))
        .sort("global_rank")
    )
    tables = {"summary": summary, "ranks": ranks, "communicators": comms, "transports": tr, "operations": op_sum}
    if topology:
        cols = ["comm_key", "global_rank", "comm_rank"]
        tables["rings"] = (
            log.rings.join(key, on=["host", "pid", "comm"], how="left")
            .select(*cols, "channel", "n_channels", "order")
            .sort(cols[:2] + ["channel"])
        )
        tables["trees"] = (
            log.trees.join(key, on=["host", "pid", "comm"], how="left")
            .select(*cols, "channel", "tree")
            .sort(cols[:2] + ["channel"])
        )
        tables["connections"] = (
            log.transports.join(key, on=["host", "pid", "comm"], how="left")
            .select(*cols, "channel", "src_rank", "dst_rank", "direction", "via")
            .sort(cols[:2] + ["channel"])
        )
    if all_ops:
        tables["operation_log"] = ops
    notes = list(log.warnings)
    if log.operations.height and log.operations["algorithm"].null_count() == log.operations.height:
        notes.append("no tuning lines (NCCL_DEBUG_SUBSYS=TUNING or TRACE): algorithm and protocol unknown")
    if log.operations.height == 0:
        notes.append(
            "no per-operation lines: set NCCL_DEBUG_SUBSYS=INIT,COLL (or NCCL_DEBUG=TRACE) to log each collective"
        )
    return tables, notes


def nccl_log(
    run: Run | Session | None,
    *,
    ranks: Sequence[int] | None = None,
    logs: Sequence[str] | None = None,
    operations: bool = False,
    topology: bool = False,
) -> AnalysisResult:
    """The tables of the NCCL logs ``logs`` (files or folders), joined to the run's traced
    collectives when there is a run."""
    from ranksight.io.nccl_log import parse_nccl_logs

    if not logs:
        raise UsageError("nccl-log needs NCCL_DEBUG log files: --logs FILE ...")
    log = parse_nccl_logs(list(logs))
    tables, notes = log_tables(log, all_ops=operations, topology=topology)
    sess = Session.of(run, ranks)
    if sess.run is not None:
        seed_collectives(sess)  # many small ranks: one pass over all of them
        joined, jn = join_log_to_traces(log, sess.map(rank_collectives))
        tables["traced_collectives"] = joined
        matched = int(joined["bytes_match"].sum()) if joined.height else 0
        notes.append(
            f"{matched} of {joined.height} traced collectives matched a log operation of the same type and size"
        )
        notes.extend(jn)
    return AnalysisResult(tables, notes)


register(
    AnalysisSpec(
        name="nccl-log",
        func=nccl_log,
        help="NCCL_DEBUG logs as tables (topology, transports, algorithm/protocol per op), joined to traced "
        "collectives",
        options=(
            Option(
                "logs", str, None, "NCCL_DEBUG log file (plain or .gz) or folder; repeat for several", multiple=True
            ),
            Option("operations", bool, False, "also list every logical operation", flag=True),
            Option("topology", bool, False, "also list every ring, tree and transport connection", flag=True),
        ),
        standalone=("logs",),
    )
)
