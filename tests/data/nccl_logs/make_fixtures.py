"""Write the synthetic NCCL_DEBUG logs in this folder (deterministic; run to regenerate).

The line formats follow NCCL's own INFO/TRACE messages (src/init.cc, src/enqueue.cc,
src/transport/*.cc, src/graph/*.cc of NCCL 2.14 and 2.18): the ``host:pid:tid [cudaDev] NCCL INFO``
prefix, ``comm ... rank ... nranks ... - Init START/COMPLETE``, ring ``Channel xx/yy :`` orders,
``Trees [c] d0/d1/d2->r->up``, transport ``Channel xx/y : a[d] -> b[d] [send] via NET/IB/0``,
channel counts, per-operation ``AllReduce: opCount ...`` (NCCL_DEBUG_SUBSYS=COLL) and tuning
``AllReduce: N Bytes -> Algo a proto p time t`` lines. No real log was available.
"""

from __future__ import annotations

import gzip
from pathlib import Path

HERE = Path(__file__).resolve().parent
DT = {
    "int8": 0,
    "uint8": 1,
    "int32": 2,
    "uint32": 3,
    "int64": 4,
    "uint64": 5,
    "float16": 6,
    "float32": 7,
    "float64": 8,
    "bfloat16": 9,
}
SIZE = {0: 1, 1: 1, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2}


class Proc:
    """One process (one rank) writing NCCL lines."""

    def __init__(self, host: str, pid: int, dev: int, bus: str, old: bool) -> None:
        self.host, self.pid, self.dev, self.bus, self.old = host, pid, dev, bus, old
        self.lines: list[str] = []
        self.op_count: dict[str, int] = {}
        self.ptr = 0

    def info(self, msg: str) -> None:
        self.lines.append(f"{self.host}:{self.pid}:{self.pid} [{self.dev}] NCCL INFO {msg}")

    def coll(
        self, name: str, comm: str, nranks: int, count: int, dtype: int, root: int = 0, op: int = 0, bump: bool = True
    ) -> None:
        oc = self.op_count.get(comm, 0)
        self.ptr += 0x200000
        buf = 0x7F3A40000000 + self.ptr
        self.info(
            f"{name}: opCount {oc:x} sendbuff 0x{buf:x} recvbuff 0x{buf + 0x100000:x} count {count} datatype {dtype} "
            f"op {op} root {root} comm {comm} [nranks={nranks}] stream 0x55d6f8{self.dev:02x}e0a0"
        )
        if bump:
            self.op_count[comm] = oc + 1

    def tune(self, name: str, nbytes: int, algo: int, proto: int, t: float) -> None:
        self.info(f"{name:>10}: {nbytes} Bytes -> Algo {algo} proto {proto} time {t:f}")


def interleave(procs: list[Proc]) -> list[str]:
    """Lines of several processes merged round-robin (as torchrun's shared stdout does)."""
    out: list[str] = []
    n = max(len(p.lines) for p in procs)
    for i in range(n):
        for p in procs:
            if i < len(p.lines):
                out.append(p.lines[i])
    return out


def ring(n: int, shift: int) -> list[int]:
    return [(i + shift) % n for i in range(n)]


# ---- cluster: 2 hosts x 4 GPUs, NCCL 2.18, world + tensor-parallel + pipeline communicators ----


def cluster() -> None:
    hosts = ["gpu-node-a", "gpu-node-b"]
    buses = ["18000", "2a000", "3a000", "5d000"]
    procs = [Proc(hosts[r // 4], 41000 + r, r % 4, buses[r % 4], old=False) for r in range(8)]
    world = {r: f"0x55d6f{r}a1c0" for r in range(8)}
    tp = {r: f"0x55d6f{r}b2c0" for r in range(8)}
    pp = {r: f"0x55d6f{r}c3d0" for r in range(8)}
    for r, p in enumerate(procs):
        if r == 0:
            p.info("NCCL version 2.18.3+cuda12.2")
        p.info("cudaDriverVersion 12020")
        p.info(f"Bootstrap : Using eth0:10.1.0.{1 + r // 4}<0>")
        p.info(
            "NET/Plugin : Plugin load (libnccl-net.so) returned 2 : libnccl-net.so: cannot open shared object file: No "
            "such file or directory"
        )
        p.info(f"NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:10.1.0.{1 + r // 4}<0>")
        p.info("Using network IB")
        # world communicator, 8 ranks over 2 nodes
        p.info(
            f"comm {world[r]} rank {r} nranks 8 cudaDev {p.dev} nvmlDev {p.dev} busId {p.bus} commId "
            "0x9a3c51e07b2d4f10 - Init START"
        )
        p.info(
            f"Setting affinity for GPU {p.dev} to ffffffff,00000000"
            if p.dev >= 2
            else f"Setting affinity for GPU {p.dev} to ffffffff"
        )
        for c in range(2):
            p.info(f"Channel {c:02d}/02 :    " + "   ".join(str(x) for x in ring(8, 0)))
        down = r + 1 if r % 4 != 3 else -1
        up = r - 1 if r % 4 != 0 else (-1 if r == 0 else 0)
        p.info(f"Trees [0] {down}/-1/-1->{r}->{up} [1] {down}/-1/-1->{r}->{up}")
        p.info("P2P Chunksize set to 131072")
        for c in range(2):
            nxt, prv = (r + 1) % 8, (r - 1) % 8
            if r // 4 != nxt // 4:
                p.info(f"Channel {c:02d}/0 : {r}[{p.dev}] -> {nxt}[{nxt % 4}] [send] via NET/IB/{c}/GDRDMA")
            else:
                p.info(f"Channel {c:02d}/0 : {r}[{p.dev}] -> {nxt}[{nxt % 4}] via P2P/IPC/read")
            if r // 4 != prv // 4:
                p.info(f"Channel {c:02d}/0 : {prv}[{prv % 4}] -> {r}[{p.dev}] [receive] via NET/IB/{c}/GDRDMA")
        p.info("Connected all rings")
        p.info("Connected all trees")
        p.info("threadThresholds 8/8/64 | 64/8/64 | 512 | 512")
        p.info("2 coll channels, 0 collnet channels, 0 nvls channels, 2 p2p channels, 2 p2p channels per peer")
        p.info(
            f"comm {world[r]} rank {r} nranks 8 cudaDev {p.dev} nvmlDev {p.dev} busId {p.bus} commId "
            "0x9a3c51e07b2d4f10 - Init COMPLETE"
        )
        # tensor-parallel communicator: the 4 GPUs of a node (NVLink P2P only)
        tid = "0x1f0e2d3c4b5a6978" if r < 4 else "0x2e1d3c4b5a697887"
        lr = r % 4
        p.info(
            f"comm {tp[r]} rank {lr} nranks 4 cudaDev {p.dev} nvmlDev {p.dev} busId {p.bus} commId {tid} - Init START"
        )
        for c in range(4):
            p.info(f"Channel {c:02d}/04 :    0   1   2   3")
        p.info(
            f"Trees [0] {lr + 1 if lr < 3 else -1}/-1/-1->{lr}->{lr - 1} [1] "
            f"{lr + 1 if lr < 3 else -1}/-1/-1->{lr}->{lr - 1}"
        )
        for c in range(4):
            p.info(f"Channel {c:02d}/0 : {lr}[{p.dev}] -> {(lr + 1) % 4}[{(p.dev + 1) % 4}] via P2P/IPC/read")
        p.info("Connected all rings")
        p.info("Connected all trees")
        p.info("4 coll channels, 0 collnet channels, 0 nvls channels, 4 p2p channels, 1 p2p channels per peer")
        p.info(
            f"comm {tp[r]} rank {lr} nranks 4 cudaDev {p.dev} nvmlDev {p.dev} busId {p.bus} commId {tid} - Init "
            "COMPLETE"
        )
        # pipeline communicator: rank r with r±4 across nodes (NET/IB)
        pr = r // 4
        peer = (r + 4) % 8
        pid_ = f"0x3c4b5a69788796a{r % 4}"
        p.info(
            f"comm {pp[r]} rank {pr} nranks 2 cudaDev {p.dev} nvmlDev {p.dev} busId {p.bus} commId {pid_} - Init START"
        )
        p.info("Channel 00/02 :    0   1")
        p.info("Channel 01/02 :    0   1")
        p.info(f"Channel 00/0 : {pr}[{p.dev}] -> {1 - pr}[{peer % 4}] [send] via NET/IB/{p.dev % 2}")
        p.info(f"Channel 00/0 : {1 - pr}[{peer % 4}] -> {pr}[{p.dev}] [receive] via NET/IB/{p.dev % 2}")
        p.info("2 coll channels, 0 collnet channels, 0 nvls channels, 2 p2p channels, 2 p2p channels per peer")
        p.info(
            f"comm {pp[r]} rank {pr} nranks 2 cudaDev {p.dev} nvmlDev {p.dev} busId {p.bus} commId {pid_} - Init "
            "COMPLETE"
        )
    # two training steps: TP all-reduces, pipeline send/recv of activations, world all-reduce and all-gather
    for _step in range(2):
        for r, p in enumerate(procs):
            for _ in range(2):
                p.coll("AllReduce", tp[r], 4, 4194304, DT["bfloat16"])
                p.tune("AllReduce", 8388608, 1, 2, 61.84)
            if r < 4:
                p.coll("Send", pp[r], 2, 2097152, DT["bfloat16"], root=1)
            else:
                p.coll("Recv", pp[r], 2, 2097152, DT["bfloat16"], root=0)
            p.coll("AllReduce", world[r], 8, 25165824, DT["float32"])
            p.tune("AllReduce", 100663296, 1, 2, 812.5)
            p.coll("AllGather", world[r], 8, 131072, DT["bfloat16"])
            p.tune("AllGather", 2097152, 1, 1, 38.2)
            p.coll("AllReduce", world[r], 8, 1, DT["float32"])
            p.tune("AllReduce", 4, 0, 0, 9.6)
    for h in hosts:
        text = "\n".join(interleave([p for p in procs if p.host == h])) + "\n"
        (HERE / f"cluster-{h}.log").write_text(text)


# ---- dlrm: 1 host x 8 GPUs, NCCL 2.14 (old-style lines), operations of the traced DLRM steps ----

DLRM_A2A_RECV = [768, 1792, 2304, 13312, 4736, 768, 1536, 1920]  # out elements of the 4th all-to-all per rank


def dlrm() -> None:
    buses = ["7000", "b000", "48000", "4c000", "88000", "8b000", "c9000", "cb000"]
    procs = [Proc("dlrm-host", 59800 + 7 * r, r, buses[r], old=True) for r in range(8)]
    comms = {r: f"0x5612d4{r}e4f90" for r in range(8)}
    for r, p in enumerate(procs):
        if r == 0:
            p.info("NCCL version 2.14.3+cuda11.7")
        p.info("Bootstrap : Using eth0:172.31.7.12<0>")
        p.info("NET/Plugin : No plugin found (libnccl-net.so), using internal implementation")
        p.info("NET/Socket : Using [0]eth0:172.31.7.12<0>")
        p.info("Using network Socket")
        p.info(f"Setting affinity for GPU {r} to ffffff")
        for c in range(2):
            p.info(f"Channel {c:02d}/02 :    0   1   2   3   4   5   6   7")
        p.info(
            f"Trees [0] {r + 1 if r < 7 else -1}/-1/-1->{r}->{r - 1} [1] {r + 1 if r < 7 else -1}/-1/-1->{r}->{r - 1}"
        )
        for c in range(2):
            p.info(f"Channel {c:02d}/0 : {r}[{buses[r]}] -> {(r + 1) % 8}[{buses[(r + 1) % 8]}] via P2P/IPC/read")
        p.info("Connected all rings")
        p.info("Connected all trees")
        p.info("threadThresholds 8/8/64 | 64/8/64 | 512 | 512")
        p.info("2 coll channels, 2 p2p channels, 2 p2p channels per peer")
        p.info(f"comm {comms[r]} rank {r} nranks 8 cudaDev {r} busId {buses[r]} - Init COMPLETE")
        # the log was cut here (lines of steps 0..8 removed); opCount continues at 0x48
        p.op_count[comms[r]] = 0x48

    def a2a(per_peer_send: list[int], per_peer_recv: list[int], dt: int) -> None:
        for r, p in enumerate(procs):
            for peer in range(8):
                p.coll("Send", comms[r], 8, per_peer_send[peer], dt, root=peer, bump=False)
            for peer in range(8):
                p.coll("Recv", comms[r], 8, per_peer_recv[r], dt, root=peer, bump=False)
            p.op_count[comms[r]] += 1

    def ar(count: int, nbytes: int, t: float) -> None:
        for r, p in enumerate(procs):
            p.coll("AllReduce", comms[r], 8, count, DT["float32"])
            p.tune("AllReduce", nbytes, 1, 0, t)

    for _step in (9, 10, 11):
        a2a([768] * 8, [768] * 8, DT["float32"])
        a2a([3] * 8, [3] * 8, DT["int64"])
        a2a([48] * 8, [48] * 8, DT["int32"])
        recv = [n // 8 for n in DLRM_A2A_RECV]
        for r, p in enumerate(procs):
            for peer in range(8):
                p.coll("Send", comms[r], 8, recv[peer], DT["int32"], root=peer, bump=False)
            for peer in range(8):
                p.coll("Recv", comms[r], 8, recv[r], DT["int32"], root=peer, bump=False)
            p.op_count[comms[r]] += 1
        ar(394241, 1576964, 81.2)
        a2a([768] * 8, [768] * 8, DT["float32"])
        ar(112, 448, 11.9)
        ar(226960, 907840, 52.7)
    text = "\n".join(interleave(procs)) + "\n"
    (HERE / "dlrm-8ranks.log.gz").write_bytes(gzip.compress(text.encode(), mtime=0))


if __name__ == "__main__":
    cluster()
    dlrm()
