"""Hand-built multi-rank Kineto traces for the distributed analyses (times in µs).

``rank_events(...)`` returns the event list of one rank: a ProfilerStep, compute kernels and
collectives, each collective as ``record_param_comms`` (optionally with collective args) →
``cudaLaunchKernel`` → NCCL kernel, linked by correlation; every time is moved by ``shift_us``
(a rank whose clock is off).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CPU_TID = 100
STREAM = 7


def _x(
    name: str, cat: str, ts: float, dur: float, *, pid: int = 1, tid: int = CPU_TID, args: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": pid,
        "tid": tid,
        "ts": round(ts, 3),
        "dur": round(dur, 3),
        "args": args or {},
    }


class Corr:
    def __init__(self) -> None:
        self.n = 1000

    def __call__(self) -> int:
        self.n += 1
        return self.n


def coll_args(c: dict[str, Any]) -> dict[str, Any]:
    a = {
        "Collective name": c.get("name", "allreduce"),
        "In msg nelems": c.get("nelems", 1024),
        "Out msg nelems": c.get("out_nelems", c.get("nelems", 1024)),
        "dtype": c.get("dtype", "Float"),
        "Group size": c.get("group_size", 4),
        "Process Group Name": c.get("pg", "0"),
        "Process Group Description": "default_pg",
        "Process Group Ranks": c.get("ranks", "[0, 1, 2, 3]"),
        "In split size": c.get("in_split", "[]"),
        "Out split size": c.get("out_split", "[]"),
    }
    if c.get("seq") is not None:
        a["Seq"] = c["seq"]
    return a


def rank_events(
    *,
    colls: list[dict[str, Any]],
    kernels: list[dict[str, Any]] = (),
    steps: list[tuple[int, float, float]] = (),
    shift_us: float = 0.0,
) -> list[dict[str, Any]]:
    corr = Corr()
    ev: list[dict[str, Any]] = []
    for n, s, e in steps:
        ev.append(_x(f"ProfilerStep#{n}", "user_annotation", s, e - s))
    for k in kernels:
        cid = corr()
        launch = k.get("launch", k["start"] - 10)
        ev.append(_x("cudaLaunchKernel", "cuda_runtime", launch, 2, args={"correlation": cid}))
        ev.append(
            _x(
                k["name"],
                "kernel",
                k["start"],
                k["end"] - k["start"],
                pid=0,
                tid=STREAM,
                args={"correlation": cid, "stream": STREAM, "device": 0},
            )
        )
    for c in colls:
        cid = corr()
        launch = c.get("launch", c["start"] - 20)
        where = c.get("args_on", "rpc")
        rpc_args = coll_args(c) if where == "rpc" else {}
        ev.append(_x("record_param_comms", "cpu_op", launch - 5, 15, args=rpc_args))
        if c.get("annotation"):
            ev.append(
                _x(
                    c["annotation"],
                    "user_annotation",
                    launch - 2,
                    8,
                    args={"Input Dims": [[c.get("nelems", 1024)]], "Input type": ["float"]},
                )
            )
        ev.append(_x("cudaLaunchKernel", "cuda_runtime", launch, 2, args={"correlation": cid}))
        kargs = {"correlation": cid, "stream": STREAM, "device": 0}
        if where == "kernel":
            kargs.update(coll_args(c))
        ev.append(
            _x(
                c.get("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL"),
                "kernel",
                c["start"],
                c["end"] - c["start"],
                pid=0,
                tid=STREAM,
                args=kargs,
            )
        )
    for e in ev:
        e["ts"] = round(e["ts"] + shift_us, 3)
    return ev


def write_rank(
    dirpath: Path,
    rank: int,
    events: list[dict[str, Any]],
    *,
    world: int = 4,
    host: str | None = None,
    backend: str = "nccl",
) -> Path:
    doc: dict[str, Any] = {
        "schemaVersion": 1,
        "distributedInfo": {"backend": backend, "rank": rank, "world_size": world},
        "traceEvents": events,
    }
    if host is not None:
        doc["host_name"] = host
    p = dirpath / f"rank{rank}.json"
    p.write_text(json.dumps(doc))
    return p


# ---- the reference scenario used by several tests ------------------------------------------

#: per collective: starts of ranks 0..3 (true clock), common end; rank 3 never joins collective 2
STARTS = [(1000, 1010, 1020, 1030), (2000, 2300, 2010, 2020), (3000, 3005, 3010, 3015)]
ENDS = [1100, 2400, 3100]
SHIFT_RANK2_US = 500.0


def scenario(
    dirpath: Path,
    *,
    seq: bool = True,
    shift: bool = True,
    hosts: tuple[str | None, ...] = ("a", "a", "b", "a"),
    sizes: tuple[int, int, int] = (1024, 1024, 1024),
    skip: tuple[int, int] = (3, 2),
) -> Path:
    """4 ranks, 3 all-reduces. Rank 1 starts collective 1 late (a 240 µs ``slow_gemm`` kernel
    ahead of it on its stream, launched on time); rank ``skip[0]`` never joins collective
    ``skip[1]``; rank 2's clock reads 500 µs ahead (on its own host)."""
    for r in range(4):
        colls = []
        for i, (starts, end) in enumerate(zip(STARTS, ENDS)):
            s = starts[r]
            if (r, i) == skip:
                continue
            launch = 1985.0 if (r == 1 and i == 1) else s - 20
            colls.append({"start": s, "end": end, "launch": launch, "seq": i if seq else None, "nelems": sizes[i]})
        gemm = (
            {"name": "slow_gemm", "start": 2050, "end": 2290, "launch": 1960}
            if r == 1
            else {"name": "slow_gemm", "start": 1900, "end": 1940, "launch": 1850}
        )
        kernels = [gemm, {"name": "fast_relu", "start": 1200, "end": 1250}]
        ev = rank_events(
            colls=colls, kernels=kernels, steps=[(1, 900, 3200)], shift_us=SHIFT_RANK2_US if (shift and r == 2) else 0.0
        )
        write_rank(dirpath, r, ev, host=hosts[r])
    return dirpath
