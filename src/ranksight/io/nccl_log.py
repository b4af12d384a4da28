"""Parser for NCCL_DEBUG=INFO / TRACE output (NCCL 2.10 – 2.2x line formats).

Every NCCL line starts with ``host:pid:tid [cudaDev]`` followed (TRACE) by an elapsed time and
``func:line``, then ``NCCL INFO`` / ``NCCL WARN`` / ``NCCL TRACE`` and the message. Lines of
several processes may be interleaved (torchrun merges their output); everything is keyed by
``(host, pid)``. Recognised messages:

- ``NCCL version 2.18.3+cuda12.2``;
- communicator init: ``comm 0x.. rank R nranks N cudaDev D [nvmlDev D] busId B [commId 0x..] -
  Init START|COMPLETE`` (also with a ``ncclCommInitRank`` prefix, and ``nRanks``/``nNodes``/
  ``localRanks``); lines about rings, trees, transports and channels that come before ``Init
  COMPLETE`` belong to that communicator (to the one opened by ``Init START`` when present);
- rings ``Channel 00/02 :    0   1   2 ...``, trees ``Trees [0] 1/-1/-1->0->-1 [1] ...``;
- transports ``Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read``, ``... [send] via NET/IB/0/GDRDMA``,
  ``via SHM/direct/direct``, ``via NET/Socket/0``;
- channel counts ``8 coll channels, 0 collnet channels, 0 nvls channels, 8 p2p channels, 2 p2p
  channels per peer`` (older: no collnet/nvls);
- networks ``Using network IB``, ``NET/IB : Using [0]mlx5_0:1/IB ...``;
- operations (``NCCL_DEBUG_SUBSYS=COLL``): ``AllReduce: opCount 1a sendbuff .. recvbuff .. count N
  datatype T op O root R comm 0x.. [nranks=N] stream 0x..`` (opCount in hex);
- tuning: ``AllReduce: 4194304 Bytes -> Algo 1 proto 2 time 61.84`` (attached to the previous
  operation of the same thread and name).
"""

from __future__ import annotations

import gzip
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from ranksight.errors import TraceNotFoundError, UsageError

__all__ = ["NcclLog", "parse_nccl_logs", "DATATYPES", "ALGORITHMS", "PROTOCOLS", "OP_TYPES"]

#: ncclDataType_t: code → (name, bytes)
DATATYPES = {
    0: ("int8", 1),
    1: ("uint8", 1),
    2: ("int32", 4),
    3: ("uint32", 4),
    4: ("int64", 8),
    5: ("uint64", 8),
    6: ("float16", 2),
    7: ("float32", 4),
    8: ("float64", 8),
    9: ("bfloat16", 2),
    10: ("float8e4m3", 1),
    11: ("float8e5m2", 1),
}
#: NCCL_ALGO_* indices
ALGORITHMS = {0: "TREE", 1: "RING", 2: "COLLNET_DIRECT", 3: "COLLNET_CHAIN", 4: "NVLS", 5: "NVLS_TREE", 6: "PAT"}
#: NCCL_PROTO_* indices
PROTOCOLS = {0: "LL", 1: "LL128", 2: "SIMPLE"}
#: operation name in the log → canonical collective type
OP_TYPES = {
    "AllReduce": "all_reduce",
    "AllGather": "all_gather",
    "ReduceScatter": "reduce_scatter",
    "Broadcast": "broadcast",
    "Reduce": "reduce",
    "Send": "send",
    "Recv": "recv",
    "AllToAll": "all_to_all",
    "Gather": "gather",
    "Scatter": "scatter",
}

_PREFIX = re.compile(
    r"^(?P<host>[^\s:]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>[^\]]*)\](?: [\d.]+ \S+:\d+)? NCCL (?P<level>INFO|WARN|TRACE) (?P<msg>.*)$"
)
_VERSION = re.compile(r"NCCL version (?P<v>\d+\.\d+\.\d+[\w.+-]*)")
_LOG_SUFFIXES = {".log", ".txt", ".out", ".err", ".gz", ""}
_INIT = re.compile(
    r"(?:ncclCommInitRank(?:Config)?:? )?comm (?P<comm>0x[0-9a-f]+) rank (?P<rank>\d+) n[Rr]anks (?P<nranks>\d+)"
    r"(?: cudaDev (?P<dev>\d+))?(?: nvmlDev (?P<nvml>\d+))?(?: busId (?P<bus>[0-9a-fA-F]+))?(?: commId (?P<cid>0x[0-9a-f]+))?"
    r"(?: localSize \d+)? - Init (?P<phase>START|COMPLETE)"
)
_NODES = re.compile(
    r"comm (?P<comm>0x[0-9a-f]+) rank (?P<rank>\d+) nRanks (?P<nranks>\d+) nNodes (?P<nodes>\d+) localRanks (?P<local>\d+)"
)
_RING = re.compile(r"^Channel (?P<c>\d+)/(?P<n>\d+) :\s+(?P<order>[\d\s]+)$")
_TREES = re.compile(r"^Trees (?P<body>(?:\[\d+\] \S+\s*)+)$")
_TREE_ITEM = re.compile(r"\[(?P<c>\d+)\] (?P<t>\S+)")
_TRANSPORT = re.compile(
    r"^Channel (?P<c>\d+)(?:/(?P<sub>\d+))? : (?P<src>\d+)\[(?P<sdev>[^\]]*)\] -> (?P<dst>\d+)\[(?P<ddev>[^\]]*)\]"
    r"(?: \[(?P<dir>send|receive)\])? via (?P<via>\S+)"
)
_CHANNELS = re.compile(
    r"^(?P<coll>\d+) coll channels,(?: (?P<collnet>\d+) collnet channels,)?(?: (?P<nvls>\d+) nvls channels,)?"
    r" (?P<p2p>\d+) p2p channels, (?P<per>\d+) p2p channels per peer"
)
_NETWORK = re.compile(r"^Using network (?P<net>\S+)")
_NETDEV = re.compile(r"^NET/(?P<net>\w+) : Using (?P<devs>.*?)(?: ; OOB .*)?$")
_OP = re.compile(
    r"^(?P<op>[A-Za-z]+): opCount (?P<oc>[0-9a-fA-F]+) sendbuff (?P<sb>\S+) recvbuff (?P<rb>\S+) count (?P<count>\d+)"
    r" datatype (?P<dt>\d+) op (?P<redop>\d+) root (?P<root>-?\d+) comm (?P<comm>0x[0-9a-f]+) \[nranks=(?P<nranks>\d+)\](?: stream (?P<stream>\S+))?"
)
_TUNE = re.compile(
    r"^\s*(?P<op>[A-Za-z]+): (?P<bytes>\d+) Bytes -> Algo (?P<algo>\d+) proto (?P<proto>\d+) time (?P<t>[\d.]+)"
)


@dataclass
class NcclLog:
    """What one or more NCCL logs say, as tables (see :func:`parse_nccl_logs`)."""

    files: list[str]
    lines: int
    nccl_lines: int
    versions: list[str]
    comms: pl.DataFrame
    rings: pl.DataFrame
    trees: pl.DataFrame
    transports: pl.DataFrame
    channels: pl.DataFrame
    networks: pl.DataFrame
    operations: pl.DataFrame
    warnings: list[str] = field(default_factory=list)


def _open_text(path: Path) -> Iterator[str]:
    with open(path, "rb") as fh:
        magic = fh.read(2)
    opener: Any = gzip.open if magic == b"\x1f\x8b" else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
        yield from fh


class _State:
    """Accumulates rows while scanning lines; lines before ``Init COMPLETE`` wait for their comm."""

    def __init__(self) -> None:
        self.rows: dict[str, list[dict[str, Any]]] = {
            k: [] for k in ("comms", "rings", "trees", "transports", "channels", "networks", "operations")
        }
        self.current: dict[tuple[str, int], str] = {}
        self.pending: dict[tuple[str, int], list[tuple[str, dict[str, Any]]]] = {}
        self.last_op: dict[tuple[str, int, int], dict[str, Any]] = {}
        self.versions: list[str] = []
        self.warnings: list[str] = []

    def attach(self, key: tuple[str, int], table: str, row: dict[str, Any]) -> None:
        comm = self.current.get(key)
        if comm is not None:
            self.rows[table].append({**row, "comm": comm})
        else:
            self.pending.setdefault(key, []).append((table, row))

    def flush(self, key: tuple[str, int], comm: str) -> None:
        for table, row in self.pending.pop(key, []):
            self.rows[table].append({**row, "comm": comm})


def _handle(st: _State, m: re.Match[str], src: str) -> None:
    host, pid, tid = m["host"], int(m["pid"]), int(m["tid"])
    key = (host, pid)
    msg = m["msg"].strip()
    base = {"host": host, "pid": pid}
    if m["level"] == "WARN":
        st.warnings.append(f"{src}: {host}:{pid}: {msg}")
        return
    if (v := _VERSION.search(msg)) and msg.startswith("NCCL version"):
        st.versions.append(v["v"])
    elif i := _INIT.search(msg):
        row = {
            **base,
            "comm": i["comm"],
            "comm_id": i["cid"],
            "rank": int(i["rank"]),
            "nranks": int(i["nranks"]),
            "cuda_dev": int(i["dev"]) if i["dev"] else None,
            "nvml_dev": int(i["nvml"]) if i["nvml"] else None,
            "bus_id": i["bus"],
        }
        if i["phase"] == "START":
            st.current[key] = i["comm"]
            st.flush(key, i["comm"])
        else:
            st.flush(key, i["comm"])
            st.current.pop(key, None)
            st.rows["comms"].append(row)
    elif r := _RING.match(msg):
        st.attach(
            key,
            "rings",
            {**base, "channel": int(r["c"]), "n_channels": int(r["n"]), "order": " ".join(r["order"].split())},
        )
    elif t := _TREES.match(msg):
        for it in _TREE_ITEM.finditer(t["body"]):
            st.attach(key, "trees", {**base, "channel": int(it["c"]), "tree": it["t"]})
    elif t := _TRANSPORT.match(msg):
        via = t["via"]
        parts = via.split("/")
        kind = parts[1] if parts[0] == "NET" and len(parts) > 1 else parts[0]
        st.attach(
            key,
            "transports",
            {
                **base,
                "channel": int(t["c"]),
                "src_rank": int(t["src"]),
                "src_dev": t["sdev"],
                "dst_rank": int(t["dst"]),
                "dst_dev": t["ddev"],
                "direction": t["dir"] or "send",
                "transport": parts[0],
                "kind": kind,
                "via": via,
            },
        )
    elif c := _CHANNELS.match(msg):
        st.attach(
            key,
            "channels",
            {
                **base,
                "coll_channels": int(c["coll"]),
                "collnet_channels": int(c["collnet"]) if c["collnet"] else None,
                "nvls_channels": int(c["nvls"]) if c["nvls"] else None,
                "p2p_channels": int(c["p2p"]),
                "p2p_per_peer": int(c["per"]),
            },
        )
    elif n := _NETWORK.match(msg):
        st.rows["networks"].append({**base, "network": n["net"], "devices": None})
    elif n := _NETDEV.match(msg):
        st.rows["networks"].append({**base, "network": n["net"], "devices": n["devs"].strip()})
    elif o := _OP.match(msg):
        dt = int(o["dt"])
        name, size = DATATYPES.get(dt, (f"type{dt}", None))
        row = {
            **base,
            "tid": tid,
            "cuda_dev": m["dev"],
            "op": o["op"],
            "coll_type": OP_TYPES.get(o["op"], "unknown"),
            "op_count": int(o["oc"], 16),
            "count": int(o["count"]),
            "datatype": dt,
            "dtype": name,
            "elem_bytes": size,
            "redop": int(o["redop"]),
            "root": int(o["root"]),
            "comm": o["comm"],
            "nranks": int(o["nranks"]),
            "stream": o["stream"],
            "tuned_bytes": None,
            "algorithm": None,
            "protocol": None,
            "model_time_us": None,
        }
        st.rows["operations"].append(row)
        st.last_op[(host, pid, tid)] = row
    elif t := _TUNE.match(msg):
        last = st.last_op.get((host, pid, tid))
        if last is not None and last["op"] == t["op"] and last["algorithm"] is None:
            last.update(
                tuned_bytes=int(t["bytes"]),
                algorithm=ALGORITHMS.get(int(t["algo"]), t["algo"]),
                protocol=PROTOCOLS.get(int(t["proto"]), t["proto"]),
                model_time_us=float(t["t"]),
            )
    elif m2 := _NODES.search(msg):
        st.rows["comms"].append(
            {
                **base,
                "comm": m2["comm"],
                "rank": int(m2["rank"]),
                "nranks": int(m2["nranks"]),
                "n_nodes": int(m2["nodes"]),
                "local_ranks": int(m2["local"]),
                "_extra": True,
            }
        )


_SCHEMAS: dict[str, dict[str, Any]] = {
    "comms": {
        "host": pl.String,
        "pid": pl.Int64,
        "comm": pl.String,
        "comm_id": pl.String,
        "rank": pl.Int64,
        "nranks": pl.Int64,
        "cuda_dev": pl.Int64,
        "nvml_dev": pl.Int64,
        "bus_id": pl.String,
    },
    "rings": {
        "host": pl.String,
        "pid": pl.Int64,
        "comm": pl.String,
        "channel": pl.Int64,
        "n_channels": pl.Int64,
        "order": pl.String,
    },
    "trees": {"host": pl.String, "pid": pl.Int64, "comm": pl.String, "channel": pl.Int64, "tree": pl.String},
    "transports": {
        "host": pl.String,
        "pid": pl.Int64,
        "comm": pl.String,
        "channel": pl.Int64,
        "src_rank": pl.Int64,
        "src_dev": pl.String,
        "dst_rank": pl.Int64,
        "dst_dev": pl.String,
        "direction": pl.String,
        "transport": pl.String,
        "kind": pl.String,
        "via": pl.String,
    },
    "channels": {
        "host": pl.String,
        "pid": pl.Int64,
        "comm": pl.String,
        "coll_channels": pl.Int64,
        "collnet_channels": pl.Int64,
        "nvls_channels": pl.Int64,
        "p2p_channels": pl.Int64,
        "p2p_per_peer": pl.Int64,
    },
    "networks": {"host": pl.String, "pid": pl.Int64, "network": pl.String, "devices": pl.String},
    "operations": {
        "host": pl.String,
        "pid": pl.Int64,
        "tid": pl.Int64,
        "cuda_dev": pl.String,
        "op": pl.String,
        "coll_type": pl.String,
        "op_count": pl.Int64,
        "count": pl.Int64,
        "datatype": pl.Int64,
        "dtype": pl.String,
        "elem_bytes": pl.Int64,
        "redop": pl.Int64,
        "root": pl.Int64,
        "comm": pl.String,
        "nranks": pl.Int64,
        "stream": pl.String,
        "tuned_bytes": pl.Int64,
        "algorithm": pl.String,
        "protocol": pl.String,
        "model_time_us": pl.Float64,
    },
}


def _frame(name: str, rows: list[dict[str, Any]]) -> pl.DataFrame:
    schema = _SCHEMAS[name]
    return pl.DataFrame([{k: r.get(k) for k in schema} for r in rows], schema=schema)


def _expand(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            out.extend(sorted(q for q in path.iterdir() if q.is_file() and q.suffix.lower() in _LOG_SUFFIXES))
        elif path.exists():
            out.append(path)
        else:
            raise TraceNotFoundError(f"no such NCCL log: {path}", path=path)
    if not out:
        raise UsageError("no NCCL log given")
    return out


def parse_nccl_logs(paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> NcclLog:
    """Parse NCCL_DEBUG logs (plain or gzip; files, or folders of ``.log/.txt/.out/.err/.gz``
    files) into tables.

    Tables: ``comms`` (one row per process and communicator: host, pid, comm pointer, commId, rank
    in the communicator, nranks, cudaDev, nvmlDev, busId, and ``comm_key`` grouping the same
    communicator across processes), ``rings``, ``trees``, ``transports``, ``channels``,
    ``networks``, ``operations`` (with ``bytes`` = count × element size, × nranks for
    AllGather/ReduceScatter as in nccl-tests, and the tuning line's algorithm and protocol).
    """
    files = _expand([paths] if isinstance(paths, (str, os.PathLike)) else paths)
    st = _State()
    lines = nccl = 0
    for f in files:
        for line in _open_text(f):
            lines += 1
            m = _PREFIX.match(line.rstrip("\n"))
            if m is None:
                if line.lstrip().startswith("NCCL version") and (v := _VERSION.search(line)):
                    st.versions.append(v["v"])
                continue
            nccl += 1
            _handle(st, m, str(f))
    for key, pend in st.pending.items():
        if pend:
            st.warnings.append(
                f"{key[0]}:{key[1]}: {len(pend)} topology lines without a communicator (log cut before Init COMPLETE?)"
            )
    comms = _comms(st)
    ops = _frame("operations", st.rows["operations"])
    ops = _with_ranks(ops, comms)
    return NcclLog(
        files=[str(f) for f in files],
        lines=lines,
        nccl_lines=nccl,
        versions=sorted(set(st.versions)),
        comms=comms,
        rings=_frame("rings", st.rows["rings"]),
        trees=_frame("trees", st.rows["trees"]),
        transports=_frame("transports", st.rows["transports"]),
        channels=_frame("channels", st.rows["channels"]),
        networks=_frame("networks", st.rows["networks"]).unique(maintain_order=True),
        operations=ops,
        warnings=st.warnings,
    )


def _comms(st: _State) -> pl.DataFrame:
    rows = [r for r in st.rows["comms"] if not r.get("_extra")]
    df = _frame("comms", rows).unique(["host", "pid", "comm"], keep="last", maintain_order=True)
    # the same communicator across processes: by commId, else by (nranks, creation order per process)
    df = df.with_columns(pl.int_range(pl.len()).over(["host", "pid", "nranks"]).alias("__k"))
    df = df.with_columns(
        pl.coalesce(
            pl.col("comm_id"),
            pl.concat_str([pl.lit("n"), pl.col("nranks").cast(pl.String), pl.lit("#"), pl.col("__k").cast(pl.String)]),
        ).alias("comm_key")
    ).drop("__k")
    # the global rank of a process: its rank in the largest communicator it belongs to
    world = (
        df.sort("nranks", descending=True)
        .unique(["host", "pid"], keep="first")
        .select("host", "pid", pl.col("rank").alias("global_rank"))
    )
    return df.join(world, on=["host", "pid"], how="left")


def _with_ranks(ops: pl.DataFrame, comms: pl.DataFrame) -> pl.DataFrame:
    ops = ops.join(
        comms.select("host", "pid", "comm", "comm_key", pl.col("rank").alias("comm_rank"), "global_rank"),
        on=["host", "pid", "comm"],
        how="left",
    )
    mult = pl.when(pl.col("op").is_in(["AllGather", "ReduceScatter"])).then(pl.col("nranks")).otherwise(1)
    return ops.with_columns((pl.col("count") * pl.col("elem_bytes") * mult).alias("bytes"))
