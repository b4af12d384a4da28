"""On every corpus trace, no finding contradicts the run's context (``run-context``).

The contradictions are written here independently of the rules' own checks, as statements about
what a finding may say:

- a capture-only trace (kernels recorded into a graph, not executed) gets no finding about GPU
  time (utilization, launches, Tensor Cores, communication, stragglers);
- an inference run gets no training remedy (activation checkpointing, FSDP/ZeRO, GradScaler,
  zero_grad, gradient accumulation, DDP buckets) and no "memory close to full" for its KV cache;
- a run whose matrix work is already in a low precision is not told to use autocast;
- a rank that already replays CUDA/HIP graphs is not told to capture the step in CUDA graphs;
- no text shows ``None``.
"""

from __future__ import annotations

import re
import warnings
from functools import cache
from pathlib import Path

import pytest
from tests.conftest import DATA, SHARED
from tests.unit.taxonomy_table import corpus_files

import ranksight
from ranksight.analyses.diagnose import findings
from ranksight.analyses.run_context import run_contexts
from ranksight.model.taxonomy import LOW_PRECISIONS

TIME_RULES = {
    "launch-bound",
    "low-gpu-utilization",
    "exposed-communication",
    "host-device-sync",
    "low-tensor-core-use",
    "full-launch-queue",
    "load-imbalance",
    "straggler",
    "memcpy-bound",
    "allocator-sync",
    "unfused-attention",
}
TRAINING_REMEDY = re.compile(
    r"checkpoint|FSDP|ZeRO|GradScaler|zero_grad|gradient accumulation|no_sync|bucket_cap", re.I
)


def _inputs() -> list[Path]:
    found = corpus_files(SHARED / "traces") if (SHARED / "traces").exists() else []
    local = [p for p in DATA.glob("generated/h100/*") if p.is_dir() and p.name != "memory-snapshot"]
    return [*found, *local, Path(ranksight.__file__).parent / "data" / "examples" / "dlrm"]


@cache
def _diagnosed(path: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = ranksight.load(path)
        return run_contexts(run), findings(run)


@pytest.mark.parametrize("path", [str(p) for p in _inputs()], ids=lambda p: str(p).split("traces/")[-1][-70:])
def test_no_finding_contradicts_the_run_context(path):
    ctxs, (found, _rules, notes) = _diagnosed(path)
    for f in found:
        text = " ".join([f.summary, *f.fixes])
        assert "None" not in f.summary and "None" not in f.title, (f.rule, f.summary)
        for r in f.ranks:
            c = ctxs.get(r)
            if c is None:
                continue
            if c.graphs == "capture":
                assert f.rule not in TIME_RULES, (f.rule, "on a capture trace")
            if c.mode == "inference":
                assert f.rule != "memory-near-capacity", "KV cache preallocation reported as a problem"
                assert not TRAINING_REMEDY.search(" ".join(f.fixes)), (f.rule, "training remedy for inference")
            if c.precision in LOW_PRECISIONS:
                assert "autocast" not in text, (f.rule, f"autocast advice on a {c.precision} run")
            if c.graphs in ("replay", "capture+replay"):
                assert not any(x.startswith("capture the step in CUDA graphs") for x in f.fixes), f.rule
    for n in notes:
        assert "None" not in n, n


def test_the_walk_covers_the_contexts_that_matter():
    """The corpus has inference runs, capture traces, graph replays and low-precision runs (else the
    walk above proves little)."""
    if not (SHARED / "traces").exists():
        pytest.skip(f"SKIPPED LOUDLY: {SHARED / 'traces'} is absent; this test needs ../shared beside the checkout")
    seen = {"inference": 0, "capture": 0, "replay": 0, "low": 0}
    for p in _inputs():
        for c in _diagnosed(str(p))[0].values():
            seen["inference"] += c.mode == "inference"
            seen["capture"] += c.graphs in ("capture", "capture+replay")
            seen["replay"] += c.graphs in ("replay", "capture+replay")
            seen["low"] += c.precision in LOW_PRECISIONS
    assert all(v > 0 for v in seen.values()), seen
