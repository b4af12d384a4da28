"""``ranksight info`` on every trace in ../shared/traces: exit 0 and exactly the events the file holds.

The oracle is Python's own ``json`` module: ``trace.stats["events"]`` counts every element of
``traceEvents`` (docs/trace-model.md; a trace may also be a bare JSON array of events), so
``info``'s ``events`` must equal that length, and its kernel + memcpy + memset counts must equal the
complete (``ph`` X) events whose category names GPU work. MANIFEST.tsv has no "valid" or event-count
column, so the few files in the corpus that are not profiler traces are named here, with the exit
code and the one line they must give; every other file must load.

``info`` runs in-process (``ranksight.cli.main``): a subprocess per file costs ~2 s of interpreter
start-up, three minutes over the corpus; in-process the whole corpus takes about one.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import SHARED

from ranksight.cli import main

TRACES = SHARED / "traces"
FILES = (
    sorted(p for p in TRACES.rglob("*") if p.is_file() and p.name.endswith((".json", ".json.gz")))
    if TRACES.exists()
    else []
)

#: Files that are not profiler traces: path → (exit code, text the one-line error must contain).
REJECTED = {
    # a PyTorch execution trace (ExecutionTraceObserver): nodes, no traceEvents
    "hta/execution_trace/benchmark_simple_add_et.json.gz": (2, "not a trace: the JSON has no 'traceEvents' list"),
}
#: Categories of GPU work (docs/trace-model.md, `kind`: kernel, memcpy, memset; 2021 names, MTIA).
GPU_CATEGORIES = {"kernel", "gpu_memcpy", "memcpy", "gpu_memset", "memset", "mtia_ccp_events"}


def _events(path: Path) -> list[Any]:
    raw = gzip.decompress(path.read_bytes()) if path.name.endswith(".gz") else path.read_bytes()
    doc = json.loads(raw)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def _gpu_work(events: list[Any]) -> int:
    return sum(
        1
        for e in events
        if isinstance(e, dict) and e.get("ph") == "X" and str(e.get("cat", "")).lower() in GPU_CATEGORIES
    )


@pytest.mark.shared
def test_manifest_traces_are_all_tested(shared_traces):
    """Every trace the manifest lists is a case here (a file lost from the corpus fails, not skips)."""
    rows = [line.split("\t")[0] for line in (shared_traces / "MANIFEST.tsv").read_text().splitlines()[1:] if line]
    listed = {r for r in rows if r.endswith((".json", ".json.gz"))}
    assert len(listed) > 40
    assert listed <= {str(p.relative_to(TRACES)) for p in FILES}
    assert set(REJECTED) <= listed


@pytest.mark.shared
@pytest.mark.parametrize("path", FILES or [None], ids=[str(p.relative_to(TRACES)) for p in FILES] or ["absent"])
def test_info_every_shared_trace(path: Path | None, shared_traces, capsys):
    assert path is not None
    rel = str(path.relative_to(TRACES))
    rc = main(["info", str(path), "--format", "json"])
    out, err = capsys.readouterr()
    if rel in REJECTED:
        code, text = REJECTED[rel]
        assert rc == code, err
        assert err.count("\n") == 1 and err.startswith("ranksight: error: ") and text in err, err
        return
    assert rc == 0, err
    tables = json.loads(out)["tables"]
    events = _events(path)
    (row,) = tables["files"]
    assert row["events"] == len(events)
    (kinds,) = tables["events by kind"]
    gpu = _gpu_work(events)
    assert sum(kinds.get(k, 0) for k in ("kernel", "memcpy", "memset")) == gpu
    if gpu:
        assert row["gpu"] not in ("", "none", None), row
