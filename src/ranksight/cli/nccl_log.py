"""``ranksight nccl-log FILES [--traces TRACES ...]``: NCCL_DEBUG=INFO/TRACE logs as tables, joined to
the traced collectives when traces are given."""

from __future__ import annotations

import argparse

import polars as pl

from ranksight.cli._common import Command, Context, add_format_arg, add_trace_args, load_run
from ranksight.report.terminal import print_tables

__all__ = ["COMMAND", "log_tables"]


def log_tables(log, *, all_ops: bool = False, topology: bool = False) -> tuple[dict[str, pl.DataFrame], list[str]]:  # noqa: ANN001
    """The tables shown for a parsed log: summary, communicators, topology, transports, operations."""
    from ranksight.analyses._nccl_join import logical_operations

    c = log.comms
    summary = pl.DataFrame({
        "files": [len(log.files)], "lines": [log.lines], "nccl_lines": [log.nccl_lines],
        "versions": [", ".join(log.versions) or None], "hosts": [c["host"].n_unique()], "processes": [c.select("host", "pid").n_unique()],
        "communicators": [c["comm_key"].n_unique()], "operations": [log.operations.height],
        "networks": [", ".join(sorted(set(log.networks["network"].to_list()))) or None],
    })
    comms = c.group_by("comm_key").agg(
        pl.col("nranks").first(), pl.col("host").n_unique().alias("hosts"), pl.len().alias("ranks_seen"),
        pl.col("global_rank").sort().cast(pl.String).str.join(",").alias("global_ranks"),
    ).sort(["nranks", "comm_key"], descending=[True, False])
    key = c.select("host", "pid", "comm", "comm_key", pl.col("rank").alias("comm_rank"), "global_rank")
    ch = log.channels.join(key, on=["host", "pid", "comm"], how="left").group_by("comm_key").agg(
        pl.col("coll_channels").max(), pl.col("collnet_channels").max(), pl.col("nvls_channels").max(), pl.col("p2p_channels").max(), pl.col("p2p_per_peer").max()
    )
    rings = log.rings.join(key, on=["host", "pid", "comm"], how="left").group_by("comm_key").agg(
        pl.col("channel").n_unique().alias("ring_channels"), pl.col("order").first().alias("ring_0")
    )
    trees = log.trees.join(key, on=["host", "pid", "comm"], how="left").group_by("comm_key").agg(pl.col("channel").n_unique().alias("tree_channels"))
    comms = comms.join(ch, on="comm_key", how="left").join(rings, on="comm_key", how="left").join(trees, on="comm_key", how="left")
    tr = log.transports.join(key, on=["host", "pid", "comm"], how="left").group_by("comm_key", "transport", "kind").agg(
        pl.len().alias("connections"), pl.col("via").unique().sort().str.join(" ").alias("via")
    ).sort(["comm_key", "transport", "kind"])
    ops = logical_operations(log.operations)
    op_sum = ops.group_by("comm_key", "nranks", "coll_type", "algorithm", "protocol").agg(
        pl.len().alias("operations"), pl.col("global_rank").n_unique().alias("ranks"), pl.col("bytes").median().alias("median_bytes"),
        pl.col("model_time_us").median().alias("median_model_time_us"),
    ).sort(["comm_key", "coll_type", "algorithm"], nulls_last=True)
    ranks = (
        c.sort("nranks", descending=True).unique(["host", "pid"], keep="first")
        .select("global_rank", "host", "pid", "cuda_dev", "nvml_dev", "bus_id", pl.col("nranks").alias("world_size"))
        .sort("global_rank")
    )
    tables = {"summary": summary, "ranks": ranks, "communicators": comms, "transports": tr, "operations": op_sum}
    if topology:
        cols = ["comm_key", "global_rank", "comm_rank"]
        tables["rings"] = log.rings.join(key, on=["host", "pid", "comm"], how="left").select(*cols, "channel", "n_channels", "order").sort(cols[:2] + ["channel"])
        tables["trees"] = log.trees.join(key, on=["host", "pid", "comm"], how="left").select(*cols, "channel", "tree").sort(cols[:2] + ["channel"])
        tables["connections"] = log.transports.join(key, on=["host", "pid", "comm"], how="left").select(
            *cols, "channel", "src_rank", "dst_rank", "direction", "via").sort(cols[:2] + ["channel"])
    if all_ops:
        tables["operation_log"] = ops
    notes = list(log.warnings)
    if log.operations.height and log.operations["algorithm"].null_count() == log.operations.height:
        notes.append("no tuning lines (NCCL_DEBUG_SUBSYS=TUNING or TRACE): algorithm and protocol unknown")
    if log.operations.height == 0:
        notes.append("no per-operation lines: set NCCL_DEBUG_SUBSYS=INIT,COLL (or NCCL_DEBUG=TRACE) to log each collective")
    return tables, notes


def _add(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILES", help="NCCL_DEBUG log files (plain or .gz) or folders of them")
    p.add_argument("--traces", nargs="+", metavar="TRACES", default=None, help="trace files/folders: join log operations to traced collectives")
    p.add_argument("--operations", action="store_true", help="also list every logical operation")
    p.add_argument("--topology", action="store_true", help="also list every ring, tree and transport connection")
    add_format_arg(p)


def _run(args: argparse.Namespace, ctx: Context) -> int:
    from ranksight.io.nccl_log import parse_nccl_logs

    log = parse_nccl_logs(args.files)
    tables, notes = log_tables(log, all_ops=args.operations, topology=args.topology)
    if args.traces:
        from ranksight.analyses._nccl_join import join_log_to_traces

        tp = argparse.ArgumentParser(add_help=False)
        add_trace_args(tp)
        run = load_run(tp.parse_args(args.traces), ctx)  # the shared trace options, at their defaults
        joined, jn = join_log_to_traces(log, run)
        tables["traced_collectives"] = joined
        matched = int(joined["bytes_match"].sum()) if joined.height else 0
        notes.append(f"{matched} of {joined.height} traced collectives matched a log operation of the same type and size")
        notes.extend(jn)
    print_tables(tables, args.format, notes=notes)
    return 0


COMMAND = Command("nccl-log", "parse NCCL_DEBUG logs (topology, transports, algorithm/protocol per op); join to traces", _add, _run, order=60)
