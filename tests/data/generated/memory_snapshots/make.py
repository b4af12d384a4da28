"""Build the memory-snapshot fixtures: PyTorch ``torch.cuda.memory._snapshot()`` dicts, pickled
as ``torch.cuda.memory._dump_snapshot`` writes them, from a small simulation of PyTorch's CUDA
caching allocator (no torch, no GPU needed). Run from the repository root:

    python tests/data/generated/memory_snapshots/make.py

Files (deterministic):

- ``train_step.pickle``: one GPU, two training steps of a 3-layer MLP with Adam (fp32), history
  recorded from the start; the snapshot is taken after ``optimizer.zero_grad()`` of step 2.
- ``oom_2gpu.pickle.gz``: two GPUs with 1.5 GiB each; the history is a ring buffer of the last
  120 actions per device; device 1 runs out of memory (an ``oom`` action ends its history).
- ``*.expected`` (JSON, named so that no trace corpus test picks it up): what the simulation
  knows (levels after every kept action, peaks, final sums), for the tests to compare with;
  computed here, independently of ranksight.

Structure followed: ``segments`` (``device, address, total_size, allocated_size, active_size,
requested_size, stream, segment_type, segment_pool_id, is_expandable, frames, blocks``), blocks
(``address, size, requested_size, state, frames``), ``device_traces`` (per device: ``action, addr,
size, stream, time_us, frames``, ``device_free`` on ``oom``), ``allocator_settings``. Allocator
rules simulated: sizes rounded up to 512 B; requests of at most 1 MiB come from 2 MiB "small"
segments, larger ones from 20 MiB segments (up to 10 MiB) or segments rounded up to 2 MiB; best
fit with splitting; freed blocks merge with free neighbours; ``empty_cache`` frees whole free
segments.
"""

from __future__ import annotations

import gzip
import json
import pickle
from pathlib import Path

HERE = Path(__file__).resolve().parent
MiB = 1 << 20
SMALL, SMALL_SEGMENT, LARGE_SEGMENT, MIN_LARGE_ALLOC = 1 * MiB, 2 * MiB, 20 * MiB, 10 * MiB

TORCH = "/opt/conda/lib/python3.11/site-packages/torch"
CPP = {
    "filename": "??",
    "line": 0,
    "name": "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(int, unsigned long, CUstream_st*)",
}


def frames(*user: tuple[str, int, str], torch_frame: tuple[str, int, str] | None = None) -> list[dict]:
    out = [CPP]
    if torch_frame:
        out.append({"filename": f"{TORCH}/{torch_frame[0]}", "line": torch_frame[1], "name": torch_frame[2]})
    out += [{"filename": f"/work/{f}", "line": ln, "name": n} for f, ln, n in user]
    return out


class Allocator:
    def __init__(self, device: int, capacity: int) -> None:
        self.device, self.capacity = device, capacity
        self.segments: list[dict] = []  # each: address, size, pool, blocks: [addr, size, req, active, frames]
        self.trace: list[dict] = []
        self.levels: list[tuple[int, int]] = []  # (allocated, reserved) after each action
        self.next_addr = 0x7F0000000000 + device * 0x10000000000
        self.t = 1_700_000_000_000_000 + device * 7
        self.allocated = self.reserved = 0

    def _act(self, action: str, addr: int, size: int, fr: list[dict], **extra: int) -> None:
        self.t += 37
        self.trace.append(
            {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": self.t, "frames": fr, **extra}
        )
        self.levels.append((self.allocated, self.reserved))

    def malloc(self, nbytes: int, fr: list[dict]) -> int | None:
        size = max(512, -(-nbytes // 512) * 512)
        pool = "small" if size <= SMALL else "large"
        best = None
        for s in self.segments:
            if s["pool"] != pool:
                continue
            for b in s["blocks"]:
                if not b["active"] and b["size"] >= size and (best is None or b["size"] < best[1]["size"]):
                    best = (s, b)
        if best is None:
            seg_size = (
                SMALL_SEGMENT
                if pool == "small"
                else (LARGE_SEGMENT if size < MIN_LARGE_ALLOC else -(-size // (2 * MiB)) * 2 * MiB)
            )
            if self.reserved + seg_size > self.capacity:
                self._act("oom", 0, size, fr, device_free=self.capacity - self.reserved)
                return None
            addr = self.next_addr
            self.next_addr += seg_size + 0x100000
            seg = {
                "address": addr,
                "size": seg_size,
                "pool": pool,
                "blocks": [{"addr": addr, "size": seg_size, "req": 0, "active": False, "frames": []}],
                "frames": fr,
            }
            self.segments.append(seg)
            self.reserved += seg_size
            self._act("segment_alloc", addr, seg_size, fr)
            best = (seg, seg["blocks"][0])
        seg, b = best
        rest = b["size"] - size
        if rest >= (512 if pool == "small" else SMALL + 1):
            i = seg["blocks"].index(b)
            seg["blocks"].insert(
                i + 1, {"addr": b["addr"] + size, "size": rest, "req": 0, "active": False, "frames": []}
            )
            b["size"] = size
        b.update(active=True, req=nbytes, frames=fr)
        self.allocated += b["size"]
        self._act("alloc", b["addr"], b["size"], fr)
        return b["addr"]

    def free(self, addr: int) -> None:
        for s in self.segments:
            for i, b in enumerate(s["blocks"]):
                if b["addr"] == addr and b["active"]:
                    self._act("free_requested", addr, b["size"], b["frames"])
                    b.update(active=False, req=0)
                    self.allocated -= b["size"]
                    self._act("free_completed", addr, b["size"], b["frames"])
                    b["frames"] = []
                    blocks = s["blocks"]
                    if i + 1 < len(blocks) and not blocks[i + 1]["active"]:
                        b["size"] += blocks.pop(i + 1)["size"]
                    if i > 0 and not blocks[i - 1]["active"]:
                        blocks[i - 1]["size"] += blocks.pop(i)["size"]
                    return
        raise KeyError(addr)

    def empty_cache(self) -> None:
        for s in list(self.segments):
            if all(not b["active"] for b in s["blocks"]):
                self.segments.remove(s)
                self.reserved -= s["size"]
                self._act("segment_free", s["address"], s["size"], s["frames"])

    def snapshot_segments(self) -> list[dict]:
        out = []
        for s in self.segments:
            blocks = [
                {
                    "address": b["addr"],
                    "size": b["size"],
                    "requested_size": b["req"],
                    "state": "active_allocated" if b["active"] else "inactive",
                    "frames": b["frames"],
                }
                for b in s["blocks"]
            ]
            alloc = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
            out.append(
                {
                    "device": self.device,
                    "address": s["address"],
                    "total_size": s["size"],
                    "allocated_size": alloc,
                    "active_size": alloc,
                    "requested_size": sum(b["requested_size"] for b in blocks),
                    "stream": 0,
                    "segment_type": s["pool"],
                    "segment_pool_id": (0, 0),
                    "is_expandable": False,
                    "frames": s["frames"],
                    "blocks": blocks,
                }
            )
        return out


def mlp_step(
    a: Allocator, params: dict[str, int], state: dict[str, int], dims: list[int], batch: int, step: int
) -> bool:
    """One training step; returns False when an allocation failed (OOM)."""
    F = lambda ln, n, tf=None: frames(("train.py", ln, "train_step"), ("train.py", 90, "<module>"), torch_frame=tf)  # noqa: E731
    x = a.malloc(batch * dims[0] * 4, F(31, "load_batch"))
    if x is None:
        return False
    acts = [x]
    for i in range(len(dims) - 1):
        h = a.malloc(batch * dims[i + 1] * 4, F(40 + i, "forward", ("nn/modules/linear.py", 125, "forward")))
        if h is None:
            return False
        acts.append(h)
    loss = a.malloc(4, F(48, "forward", ("nn/modules/loss.py", 610, "forward")))
    grads_act = []
    for i in reversed(range(len(dims) - 1)):
        for name, n in ((f"w{i}", dims[i] * dims[i + 1]), (f"b{i}", dims[i + 1])):
            if name + ".grad" not in state:
                g = a.malloc(n * 4, F(52, "backward", ("autograd/graph.py", 825, "_engine_run_backward")))
                if g is None:
                    return False
                state[name + ".grad"] = g
        ga = a.malloc(batch * dims[i] * 4, F(52, "backward", ("autograd/graph.py", 825, "_engine_run_backward")))
        if ga is None:
            return False
        grads_act.append(ga)
        a.free(acts.pop())
    for g in grads_act:
        a.free(g)
    a.free(acts.pop())
    a.free(loss)
    for name, n in params.items():  # Adam: exp_avg, exp_avg_sq on the first step, a temporary each step
        for k in ("exp_avg", "exp_avg_sq"):
            if f"{name}.{k}" not in state:
                s = a.malloc(n * 4, F(60, "optimizer_step", ("optim/adam.py", 421, "_single_tensor_adam")))
                if s is None:
                    return False
                state[f"{name}.{k}"] = s
        tmp = a.malloc(n * 4, F(60, "optimizer_step", ("optim/adam.py", 448, "_single_tensor_adam")))
        if tmp is None:
            return False
        a.free(tmp)
    for name in list(params):  # zero_grad(set_to_none=True)
        a.free(state.pop(name + ".grad"))
    return True


def run_device(a: Allocator, dims: list[int], batch: int, steps: int, *, empty_cache_after: int | None = None) -> None:
    params: dict[str, int] = {}
    state: dict[str, int] = {}
    for i in range(len(dims) - 1):
        for name, n in ((f"w{i}", dims[i] * dims[i + 1]), (f"b{i}", dims[i + 1])):
            params[name] = n
            if (
                a.malloc(
                    n * 4,
                    frames(
                        ("model.py", 12 + i, "__init__"),
                        ("train.py", 80, "<module>"),
                        torch_frame=("nn/modules/module.py", 1340, "to"),
                    ),
                )
                is None
            ):
                return
    for step in range(steps):
        if not mlp_step(a, params, state, dims, batch, step):
            return
        if empty_cache_after is not None and step == empty_cache_after:
            a.empty_cache()


def expected(a: Allocator, kept: int | None = None) -> dict:
    levels = a.levels[-kept:] if kept else a.levels
    blocks = [b for s in a.segments for b in s["blocks"]]
    return {
        "device": a.device,
        "actions": len(levels),
        "levels_allocated": [lv[0] for lv in levels],
        "levels_reserved": [lv[1] for lv in levels],
        "peak_allocated_bytes": max(lv[0] for lv in levels),
        "final_allocated_bytes": a.allocated,
        "final_reserved_bytes": a.reserved,
        "segments": len(a.segments),
        "blocks": len(blocks),
        "largest_live_block_bytes": max((b["size"] for b in blocks if b["active"]), default=0),
        "largest_free_block_bytes": max((b["size"] for b in blocks if not b["active"]), default=0),
        "allocs": sum(1 for e in a.trace[-kept if kept else 0 :] if e["action"] == "alloc"),
        "ooms": sum(1 for e in a.trace if e["action"] == "oom"),
    }


def snapshot(devs: list[Allocator], kept: int | None = None) -> dict:
    return {
        "segments": [s for a in devs for s in a.snapshot_segments()],
        "device_traces": [a.trace[-kept:] if kept else a.trace for a in devs],
        "allocator_settings": {
            "PYTORCH_CUDA_ALLOC_CONF": "",
            "max_split_size": -1,
            "garbage_collection_threshold": 0.0,
            "expandable_segments": False,
            "roundup_power2_divisions": {"1": 0},
        },
    }


def main() -> None:
    a = Allocator(0, 80 << 30)
    run_device(a, [2048, 2048, 2048, 512], batch=64, steps=2, empty_cache_after=0)
    (HERE / "train_step.pickle").write_bytes(pickle.dumps(snapshot([a]), protocol=4))
    (HERE / "train_step.expected").write_text(json.dumps([expected(a)], indent=1) + "\n")

    d0, d1 = Allocator(0, 1536 * MiB), Allocator(1, 1536 * MiB)
    run_device(d0, [2048, 2048, 1024], batch=32, steps=3)
    run_device(d1, [8192, 8192, 8192], batch=128, steps=3)
    kept = 120
    (HERE / "oom_2gpu.pickle.gz").write_bytes(
        gzip.compress(pickle.dumps(snapshot([d0, d1], kept), protocol=4), mtime=0)
    )
    (HERE / "oom_2gpu.expected").write_text(json.dumps([expected(d0, kept), expected(d1, kept)], indent=1) + "\n")


if __name__ == "__main__":
    main()
