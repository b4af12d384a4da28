"""Per-operator performance model (``analyze op-perf``) on the benchmark sets (issue 22).

    python benchmarks/op_perf.py --sets 3g,8x100m          # the acceptance rows
    python benchmarks/op_perf.py --sets 100m                # a quick one

The sets are ``run.py``'s (built by ``make_trace.py`` into benchmarks/out/data on first use).
Each set runs in a fresh process (``run.measure``: wall time, peak RSS of the process tree):
``ranksight.load(path, cache=False)``, then ``run_analysis("op-perf", run)`` (every rank), then the
same with the TraceLens sheets (``tracelens_csv``) and writing them as CSV files
(:func:`ranksight.report.tracelens.write_tracelens_csv`, what ``--tracelens-csv DIR`` does).

TraceLens is not installable on this machine (it is not on PyPI); the issue's reference time is
TraceLens's 6.3 s on the corpus's owlv2 MI300X trace, and ``--corpus`` times op-perf on that same
trace for the comparison. Results are appended to benchmarks/out/op_perf.json and printed as a
Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from run import OUT, make_set, measure, warm_page_cache  # noqa: E402

RESULTS = OUT / "op_perf.json"
#: the trace TraceLens's 6.3 s was measured on (issue 22)
OWLV2 = Path(__file__).resolve().parents[2] / "shared" / "traces"

OURS = r"""
import json, sys, time, resource, os
import polars as pl
import ranksight
from ranksight.analyses import run_analysis
from ranksight.report.tracelens import split_tables, write_tracelens_csv
t = time.perf_counter()
run = ranksight.load(sys.argv[1], cache=False)
out = {"load_s": round(time.perf_counter() - t, 3)}
t1 = time.perf_counter()
res = run_analysis("op-perf", run)
out["op_perf_s"] = round(time.perf_counter() - t1, 3)
ops, attr = res.tables["ops"], res.tables["attribution"]
out["op_groups"] = ops.height
out["no_model_groups"] = ops.filter(pl.col("model").str.starts_with("no model")).height
total = ops["kernel_us_sum"].sum()
modelled = ops.filter(~pl.col("model").str.starts_with("no model"))["kernel_us_sum"].sum()
out["modelled_share_pct"] = round(100 * modelled / total, 2) if total else None
t2 = time.perf_counter()
res2 = run_analysis("op-perf", run, tracelens_csv=sys.argv[2])
_, sheets = split_tables(res2.tables)
written = write_tracelens_csv(sheets, sys.argv[2], force=True)
out["tracelens_csv_s"] = round(time.perf_counter() - t2, 3)
out["tracelens_files"] = len(written)
out["maxrss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
print(json.dumps(out))
"""


def owlv2_trace() -> Path | None:
    """The corpus's owlv2 MI300X trace (TraceLens's 6.3 s reference), when ../shared is there."""
    root = OWLV2
    if not root.is_dir():
        return None
    hits = sorted(p for p in root.rglob("*") if p.is_file() and "owlv2" in p.name.lower() and ".json" in p.name)
    return hits[0] if hits else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", default="3g,8x100m")
    ap.add_argument("--corpus", action="store_true", help="also the corpus's owlv2 MI300X trace (TraceLens: 6.3 s)")
    ap.add_argument("--timeout", type=float, default=3600, help="time limit per set")
    a = ap.parse_args()
    res = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    targets: list[tuple[str, str, list[Path]]] = []
    for name in [s for s in a.sets.split(",") if s]:
        d = make_set(name)
        files = sorted(d.glob("rank-*.json"))
        targets.append((name, str(files[0]) if len(files) == 1 else str(d), files))
    if a.corpus:
        owl = owlv2_trace()
        if owl is None:
            print("owlv2 trace not found under ../shared/traces: --corpus skipped", file=sys.stderr)
        else:
            targets.append(("owlv2-mi300x", str(owl), [owl]))
    for name, target, files in targets:
        warm_page_cache(files)
        load_avg = os.getloadavg()[0]
        with tempfile.TemporaryDirectory(prefix="op-perf-bench-") as tmp:
            r = measure([sys.executable, "-c", OURS, target, tmp], a.timeout)
        r.update(
            set=name,
            ranks=len(files),
            input_mb=round(sum(f.stat().st_size for f in files) / 1e6, 1),
            load_avg_at_start=round(load_avg, 1),
        )
        res[name] = r
        RESULTS.write_text(json.dumps(res, indent=1))
        print(f"== {name}: {json.dumps(r)}", file=sys.stderr)
    print(
        "| set | ranks | input MB | load s | op-perf s | with TraceLens sheets + CSV s | op groups (no model) |"
        " kernel time modelled | peak RSS MB | load avg |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, r in res.items():
        print(
            f"| {name} | {r.get('ranks')} | {r.get('input_mb')} | {r.get('load_s')} | {r.get('op_perf_s')} | "
            f"{r.get('tracelens_csv_s')} | {r.get('op_groups')} ({r.get('no_model_groups')}) | "
            f"{r.get('modelled_share_pct')} % | {r.get('peak_rss_mb', r.get('maxrss_mb'))} | "
            f"{r.get('load_avg_at_start')} |"
        )


if __name__ == "__main__":
    main()
