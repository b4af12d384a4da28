"""Capture the real GPU traces in this folder (needs PyTorch with CUDA and one NVIDIA GPU).

    python tests/data/generated/h100/make.py OUTDIR

Each capture runs in its own process (``make.py OUTDIR --only NAME``) so that one that fails does
not take the others with it. What
each capture is, and the settings used, is in README.md beside this file. ranksight never imports
this script; the tests read the files it wrote.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import time

CAPTURES = (
    "train-eager",
    "train-compiled",
    "cudagraph-infer",
    "ddp-gloo-2ranks",
    "memory-snapshot",
    "train-near-capacity",
    "train-modules",
)
VOCAB, DIM, HEADS, LAYERS, SEQ, BATCH = 8192, 512, 8, 4, 256, 16


def _torch():
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(DIM), nn.LayerNorm(DIM)
            self.qkv, self.proj = nn.Linear(DIM, 3 * DIM), nn.Linear(DIM, DIM)
            self.fc1, self.fc2 = nn.Linear(DIM, 4 * DIM), nn.Linear(4 * DIM, DIM)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, HEADS, d // HEADS).permute(2, 0, 3, 1, 4)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(VOCAB, DIM), nn.Embedding(SEQ, DIM)
            self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
            self.ln = nn.LayerNorm(DIM)
            self.head = nn.Linear(DIM, VOCAB, bias=False)

        def forward(self, idx):
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln(x))

    class Batches(torch.utils.data.Dataset):
        """Random token batches; ``delay_s`` sleeps in ``__getitem__`` (a slow input pipeline)."""

        def __init__(self, n, delay_s=0.0):
            self.n, self.delay_s = n, delay_s

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            if self.delay_s:
                time.sleep(self.delay_s)
            g = torch.Generator().manual_seed(i)
            tokens = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=g)
            return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()

    return torch, F, GPT, Batches


def _train_step(torch, F, model, opt, x, y):
    from torch.profiler import record_function

    with record_function("forward"):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(x)
        loss = F.cross_entropy(logits.float().view(-1, VOCAB), y.view(-1))
    with record_function("backward"):
        loss.backward()
    with record_function("optimizer"):
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return loss.item()  # one host sync per step, as a training loop that logs its loss has


def _profile(torch, out, worker, activities=None, **kw):
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    return profile(
        activities=activities or [ProfilerActivity.CPU, ProfilerActivity.CUDA],
        schedule=schedule(wait=1, warmup=1, active=3, repeat=1),
        on_trace_ready=tensorboard_trace_handler(out, worker_name=worker, use_gzip=True),
        record_shapes=True,
        profile_memory=True,
        with_flops=True,
        **kw,
    )


def _train(out, compiled, **profile_kw):
    torch, F, GPT, Batches = _torch()
    torch.manual_seed(0)
    model = GPT().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    run = torch.compile(model) if compiled else model
    loader = torch.utils.data.DataLoader(Batches(64), batch_size=None, num_workers=2, pin_memory=True)
    it = iter(loader)
    for _ in range(3):  # warm-up (and, compiled, compilation) outside the profiler
        x, y = next(it)
        _train_step(torch, F, run, opt, x.cuda(non_blocking=True), y.cuda(non_blocking=True))
    with _profile(torch, out, "rank0", **profile_kw) as prof:
        for _ in range(5):
            x, y = next(it)
            _train_step(torch, F, run, opt, x.cuda(non_blocking=True), y.cuda(non_blocking=True))
            prof.step()


def _near_capacity(out):
    """Eager training next to a ballast tensor that takes 94.5 % of the GPU's memory: the peak
    reserved memory ends near 96 % of capacity."""
    torch, F, GPT, Batches = _torch()
    torch.manual_seed(0)
    total = torch.cuda.get_device_properties(0).total_memory
    ballast = torch.empty(int(0.945 * total), dtype=torch.uint8, device="cuda")  # noqa: F841 - held to fill the GPU
    model = GPT().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = Batches(16)
    for i in range(2):
        x, y = data[i]
        _train_step(torch, F, model, opt, x.cuda(non_blocking=True), y.cuda(non_blocking=True))
    with _profile(torch, out, "rank0") as prof:
        for i in range(2, 7):
            x, y = data[i]
            _train_step(torch, F, model, opt, x.cuda(non_blocking=True), y.cuda(non_blocking=True))
            prof.step()


def _cudagraph(out):
    torch, F, GPT, Batches = _torch()
    torch.manual_seed(0)
    model = GPT().cuda().eval()
    static_x = torch.randint(0, VOCAB, (BATCH, SEQ), device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        with torch.cuda.stream(side):
            for _ in range(3):
                model(static_x)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = model(static_x)
    host = torch.randint(0, VOCAB, (BATCH, SEQ)).pin_memory()
    with _profile(torch, out, "rank0") as prof:
        for _ in range(5):
            static_x.copy_(host, non_blocking=True)
            graph.replay()
            static_out.argmax(-1).cpu()
            prof.step()


def _ddp_rank(rank, out, world):
    torch, F, GPT, Batches = _torch()
    import torch.distributed as dist

    # gloo, not NCCL: NCCL refuses two ranks on one GPU ("Duplicate GPU detected")
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:29517", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(GPT().cuda(), device_ids=[0])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    # rank 1 has a slow input pipeline (30 ms per batch): the straggler the tests look for
    loader = torch.utils.data.DataLoader(
        Batches(64, delay_s=0.03 if rank == 1 else 0.0), batch_size=None, num_workers=0, pin_memory=True
    )
    it = iter(loader)
    for _ in range(2):
        x, y = next(it)
        _train_step(torch, F, model, opt, x.cuda(non_blocking=True), y.cuda(non_blocking=True))
    with _profile(torch, out, f"rank{rank}") as prof:
        for _ in range(5):
            x, y = next(it)
            _train_step(torch, F, model, opt, x.cuda(non_blocking=True), y.cuda(non_blocking=True))
            prof.step()
    dist.destroy_process_group()


def _ddp(out):
    import torch.multiprocessing as mp

    mp.spawn(_ddp_rank, args=(out, 2), nprocs=2, join=True)


def _snapshot(out):
    torch, F, GPT, Batches = _torch()
    torch.manual_seed(0)
    torch.cuda.memory._record_memory_history(max_entries=100_000)
    model = GPT().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = Batches(8)
    for i in range(2):
        x, y = data[i]
        _train_step(torch, F, model, opt, x.cuda(), y.cuda())
    path = os.path.join(out, "train_2steps.pickle")
    torch.cuda.memory._dump_snapshot(path)
    torch.cuda.memory._record_memory_history(enabled=None)
    with open(path, "rb") as src, gzip.open(path + ".gz", "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)
    os.remove(path)


def _environment(out):
    """``environment.json``: the versions README.md quotes (not kept in the repository: the test
    corpus globs take every ``*.json`` for a trace)."""
    import torch

    env = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(0),
        "nccl": ".".join(map(str, torch.cuda.nccl.version())),
    }
    try:
        env["driver"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    with open(os.path.join(out, "environment.json"), "w") as f:
        json.dump(env, f, indent=1, sort_keys=True)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--only", choices=CAPTURES)
    ap.add_argument("--timeout-s", type=int, default=240)
    a = ap.parse_args()
    if a.only:
        out = os.path.join(a.out, a.only)
        os.makedirs(out, exist_ok=True)
        {
            "train-eager": lambda: _train(out, compiled=False),
            "train-compiled": lambda: _train(out, compiled=True),
            "cudagraph-infer": lambda: _cudagraph(out),
            "ddp-gloo-2ranks": lambda: _ddp(out),
            "memory-snapshot": lambda: _snapshot(out),
            "train-near-capacity": lambda: _near_capacity(out),
            "train-modules": lambda: _train(out, compiled=False, with_stack=True, with_modules=True),
        }[a.only]()
        return
    os.makedirs(a.out, exist_ok=True)
    _environment(a.out)
    failed = []
    for name in CAPTURES:
        t0 = time.time()
        try:
            rc = subprocess.run([sys.executable, __file__, a.out, "--only", name], timeout=a.timeout_s).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
        print(f"{name}: rc={rc} in {time.time() - t0:.1f} s", flush=True)
        if rc != 0:
            failed.append(name)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
