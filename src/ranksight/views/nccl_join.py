"""Join NCCL log operations to traced collectives.

1. Grouped point-to-point calls (``Send``/``Recv`` lines of one process, communicator and
   opCount) become one logical operation: an ``all_to_all`` when it sends to every rank of the
   communicator, else ``send_recv``, ``send`` or ``recv`` (bytes = the bytes it sends; for a
   receive-only group the bytes it receives).
2. Per global rank (its rank in the largest communicator of its process) and group size, the
   sequence of logical operations (type, bytes) is aligned with the rank's traced collectives of
   that group size: the offset into the log with the most equal (type, bytes) positions wins (a
   trace covers a window of the run, the log the whole run).
3. Each traced collective gets the log's opCount, algorithm, protocol and tuning-model time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

if TYPE_CHECKING:
    from ranksight.io.nccl_log import NcclLog

__all__ = ["logical_operations", "join_log_to_traces"]

JOIN_SCHEMA = {
    "rank": pl.Int32,
    "idx": pl.Int64,
    "coll_type": pl.String,
    "bytes": pl.Int64,
    "group_size": pl.Int64,
    "op_count": pl.Int64,
    "log_bytes": pl.Int64,
    "bytes_match": pl.Boolean,
    "algorithm": pl.String,
    "protocol": pl.String,
    "model_time_us": pl.Float64,
    "dur_us": pl.Float64,
    "kernel_algorithm": pl.String,
    "kernel_protocol": pl.String,
}


def logical_operations(ops: pl.DataFrame) -> pl.DataFrame:
    """One row per logical operation (grouped send/recv collapsed), in log order per process."""
    if ops.height == 0:
        return ops.with_columns(pl.lit(None, dtype=pl.Int64).alias("seq"))
    ops = ops.with_row_index("__line")
    p2p = ops.filter(pl.col("op").is_in(["Send", "Recv"]))
    other = ops.filter(~pl.col("op").is_in(["Send", "Recv"]))
    grouped = (
        p2p.group_by("host", "pid", "comm", "op_count")
        .agg(
            pl.col("__line").min(),
            pl.col("global_rank").first(),
            pl.col("comm_key").first(),
            pl.col("nranks").first(),
            pl.col("dtype").first(),
            pl.col("root").filter(pl.col("op") == "Send").n_unique().alias("__peers"),
            pl.col("bytes").filter(pl.col("op") == "Send").sum().alias("__sent"),
            pl.col("bytes").filter(pl.col("op") == "Recv").sum().alias("__received"),
            pl.col("algorithm").drop_nulls().first(),
            pl.col("protocol").drop_nulls().first(),
            pl.col("model_time_us").drop_nulls().first(),
            (pl.col("op") == "Send").any().alias("__send"),
            (pl.col("op") == "Recv").any().alias("__recv"),
        )
        .with_columns(
            pl.when(pl.col("__peers") == pl.col("nranks"))
            .then(pl.lit("all_to_all"))
            .when(pl.col("__send") & pl.col("__recv"))
            .then(pl.lit("send_recv"))
            .when(pl.col("__send"))
            .then(pl.lit("send"))
            .otherwise(pl.lit("recv"))
            .alias("coll_type"),
            pl.when(pl.col("__send")).then(pl.col("__sent")).otherwise(pl.col("__received")).alias("bytes"),
        )
    )
    cols = [
        "__line",
        "host",
        "pid",
        "comm",
        "comm_key",
        "global_rank",
        "nranks",
        "op_count",
        "coll_type",
        "dtype",
        "bytes",
        "algorithm",
        "protocol",
        "model_time_us",
    ]
    both = pl.concat([other.select(cols), grouped.select(cols)], how="vertical_relaxed").sort("__line")
    return both.with_columns(pl.int_range(pl.len()).over(["host", "pid", "comm"]).alias("seq")).drop("__line")


def _best_offset(trace_keys: list[str], log_keys: list[str]) -> tuple[int, int, int]:
    """``(offset, matches, ties)``: where the trace sequence lines up best inside the log
    sequence (the first of ``ties`` equally good offsets).

    Candidate offsets put one of the trace's first three keys on an equal log key."""
    t = np.array(trace_keys, dtype=object)
    lg = np.array(log_keys, dtype=object)
    cands = {0}
    for j in range(min(3, len(t))):
        cands.update((np.flatnonzero(lg == t[j]) - j).tolist())
    best, ties = (0, -1), 0
    for off in sorted(cands):
        lo, hi = max(0, -off), min(len(t), len(lg) - off)
        if hi <= lo:
            continue
        n = int((t[lo:hi] == lg[lo + off : hi + off]).sum())
        if n > best[1]:
            best, ties = (off, n), 1
        elif n == best[1]:
            ties += 1
    return best[0], best[1], ties


def join_log_to_traces(log: NcclLog, colls: Mapping[int, pl.DataFrame]) -> tuple[pl.DataFrame, list[str]]:
    """Every traced collective with the matching log operation (schema ``JOIN_SCHEMA``), from
    each rank's :func:`~ranksight.views.comm_extract.rank_collectives` table."""
    ops = logical_operations(log.operations)
    notes: list[str] = []
    rows = []
    for r in sorted(colls):
        tc = colls[r]
        mine = ops.filter(pl.col("global_rank") == r)
        if tc.height == 0 or mine.height == 0:
            if mine.height == 0:
                notes.append(f"rank {r}: no operation of this rank in the log")
            continue
        for n in tc["group_size"].unique().drop_nulls().to_list():
            t = tc.filter(pl.col("group_size") == n)
            lg = mine.filter(pl.col("nranks") == n)
            if lg.height == 0:
                continue
            key = pl.concat_str([pl.col("coll_type"), pl.col("bytes").cast(pl.String).fill_null("?")], separator="|")
            tk = t.select(key).to_series().to_list()
            lk = lg.select(key).to_series().to_list()
            off, hits, ties = _best_offset(tk, lk)
            if hits <= 0:
                notes.append(f"rank {r}, group size {n}: no traced collective agrees with the log in type and size")
                continue
            if ties > 1:
                notes.append(
                    f"rank {r}, group size {n}: the traced sequence fits {ties} places in the log equally well "
                    "(repeated steps); the earliest is used"
                )
            pos = np.arange(t.height) + off
            ok = (pos >= 0) & (pos < lg.height)
            picked = lg[pos[ok].tolist()] if ok.any() else lg.head(0)
            tt = t.filter(pl.Series(ok))
            rows.append(
                pl.DataFrame(
                    {
                        "rank": tt["rank"],
                        "idx": tt["idx"],
                        "coll_type": tt["coll_type"],
                        "bytes": tt["bytes"],
                        "group_size": tt["group_size"],
                        "op_count": picked["op_count"],
                        "log_bytes": picked["bytes"],
                        "bytes_match": (tt["bytes"] == picked["bytes"]) & (tt["coll_type"] == picked["coll_type"]),
                        "algorithm": picked["algorithm"],
                        "protocol": picked["protocol"],
                        "model_time_us": picked["model_time_us"],
                        "dur_us": tt["dur_ns"] / 1e3,
                        "kernel_algorithm": tt["algorithm"],
                        "kernel_protocol": tt["protocol"],
                    },
                    schema=JOIN_SCHEMA,
                )
            )
            if hits < t.height:
                notes.append(
                    f"rank {r}, group size {n}: {hits} of {t.height} traced collectives agree with the log in type and "
                    "size"
                )
    out = pl.concat(rows) if rows else pl.DataFrame(schema=JOIN_SCHEMA)
    return out.sort(["rank", "idx"]), notes
