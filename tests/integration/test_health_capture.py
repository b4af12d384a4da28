"""health on a CUDA/HIP graph capture trace: kernels launched under capture are recorded into the
graph, not executed, so they own no GPU event — that is not a dropped GPU record (issue 17, item 8).

The trace is the SGLang decode capture trace (bs 32, MI300X) with its Python frames removed
(tests/data/derived/README.md): 544 kernel launches between hipStreamBeginCapture and
hipStreamEndCapture, none with a GPU record.
"""

from __future__ import annotations

import polars as pl
from tests.conftest import DATA

import ranksight
from ranksight.analyses import run_analysis

CAPTURE = DATA / "derived/tracelens/inference/sglang_decode/capture_traces/bs_32_rank0.no_python.json.gz"


def test_captured_launches_are_not_dropped_records():
    h = run_analysis("health", ranksight.load(str(CAPTURE))).main
    rows = {c: (s, n) for c, s, n in h.select("check", "status", "count").iter_rows()}
    assert rows["captured_launches"] == ("info", 544)
    assert rows.get("launch_without_gpu", ("ok", None))[0] == "ok"  # nothing left to call dropped
    assert not h.filter((pl.col("status") == "warning") & pl.col("detail").str.contains("dropped GPU records")).height
