"""Make the derived test traces of this folder from ../shared/traces (see README.md beside this file).

Run from the repository root: ``python tests/data/derived/make.py``. Deterministic: the same source
file gives the same bytes (gzip without a timestamp).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent
SHARED = ROOT.parents[3] / "shared" / "traces"

#: derived file -> (source under shared/traces, sha256 of the source as MANIFEST.tsv lists it)
SOURCES = {
    "tracelens/inference/sglang_decode/capture_traces/bs_32_rank0.no_python.json.gz": (
        "tracelens/inference/sglang_decode/capture_traces/bs_32_rank0.json.gz",
        "e1c0549a6a9e4eebc83a5e4b9e9f83e52cb03197729c72ec8f2db8e786094b46",
    ),
    "tracelens/inference/vllm_prefilldecode_piecewise/capture_traces/"
    "graph_capture_rank_0.1773709679453551615.no_python.json.gz": (
        "tracelens/inference/vllm_prefilldecode_piecewise/capture_traces/"
        "graph_capture_rank_0.1773709679453551615.pt.trace.json.gz",
        "86e9df6ffa16c973ec94ab256b35ed1c66c1dd7a7b0c61938cd45fc0add7f36c",
    ),
}

#: Python frames kept: graph capture and the SGLang model executor (the run-context evidence)
KEEP_FRAMES = re.compile(r"(?:^|/)torch/cuda/graphs\.py\(|(?:^|/)sglang/srt/model_executor/")
#: Python frames kept where another set is needed: the vLLM capture keeps its ``nn.Module`` frames (graph
#: attribution's module column, docs/graphs.md) and the model runner's frames (the run-context evidence)
KEEP_FRAMES_FOR = {
    "tracelens/inference/vllm_prefilldecode_piecewise/capture_traces/"
    "graph_capture_rank_0.1773709679453551615.no_python.json.gz": re.compile(
        r"^nn\.Module: |(?:^|/)torch/cuda/graphs\.py\(|(?:^|/)vllm/(?:v1/)?worker/\w*model_runner\.py\("
    ),
}


def no_python(src: Path, keep: re.Pattern[str] = KEEP_FRAMES) -> bytes:
    """The trace without its ``python_function`` events (54,073 of 61,713 here), except the frames of
    :data:`KEEP_FRAMES`; every other event and top-level key unchanged."""
    doc = json.loads(gzip.decompress(src.read_bytes()))
    doc["traceEvents"] = [
        e for e in doc["traceEvents"] if e.get("cat") != "python_function" or keep.search(str(e.get("name", "")))
    ]
    return gzip.compress(json.dumps(doc, separators=(",", ":")).encode(), compresslevel=9, mtime=0)


def main() -> None:
    for rel, (src_rel, sha) in SOURCES.items():
        src = SHARED / src_rel
        if hashlib.sha256(src.read_bytes()).hexdigest() != sha:
            raise SystemExit(f"{src}: not the file this derivation was made from (sha256 differs)")
        out = ROOT / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        data = no_python(src, KEEP_FRAMES_FOR.get(rel, KEEP_FRAMES))
        out.write_bytes(data)
        print(rel, len(data), hashlib.sha256(data).hexdigest())


if __name__ == "__main__":
    main()
