"""Time graph attribution on the largest shared replay/capture pair (benchmarks/README.md, "Graph attribution").

``python benchmarks/graph_attribution.py [REPLAY]``: in a fresh process each, with an empty cache, (1) loading
the replay, (2) :func:`ranksight.views.graph_attribution.graph_attribution` (loads the capture trace found
beside the replay and matches the kernels) plus :func:`operator_trace`, (3) ``ops`` on the result; then the
same again with the cache the first run wrote (replay and capture decoded once). Prints one JSON line per mode.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT.parent / "shared/traces/tracelens/inference/vllm_prefilldecode_piecewise/graph_execution.json.gz"

CHILD = """
import json, sys, time
t0 = time.perf_counter()
import ranksight
from ranksight.analyses.ops import op_table
from ranksight.views.graph_attribution import graph_attribution, operator_trace
t1 = time.perf_counter()
run = ranksight.load(sys.argv[1])
tr = run[run.ranks[0]]
t2 = time.perf_counter()
a = graph_attribution(tr)
ot = operator_trace(tr)
t3 = time.perf_counter()
ops = op_table(ot)
t4 = time.perf_counter()
print(json.dumps({"import_s": round(t1 - t0, 3), "load_s": round(t2 - t1, 3), "attribution_s": round(t3 - t2, 3),
    "ops_s": round(t4 - t3, 3), "replayed_kernels": a.kernels.height,
    "attributed_pct": round(100 * a.matched_ns / a.replayed_ns, 2)}))
"""


def main() -> None:
    replay = sys.argv[1] if len(sys.argv) > 1 else str(DEFAULT)
    with tempfile.TemporaryDirectory() as cache_dir:
        env = {"RANKSIGHT_CACHE_DIR": cache_dir, "PATH": "/usr/bin:/bin"}
        for mode in ("empty cache", "warm cache"):
            out = subprocess.run(
                [sys.executable, "-c", CHILD, replay], capture_output=True, text=True, env=env, check=True
            )
            print(json.dumps({"mode": mode, **json.loads(out.stdout)}))


if __name__ == "__main__":
    main()
