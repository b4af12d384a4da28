"""Critical path: ranksight beside HTA v0.6 on the benchmark sets (issue 20).

    python benchmarks/critical_path.py --sets 100m,8x100m          # ranksight and HTA
    python benchmarks/critical_path.py --sets 1g --no-hta           # ranksight only
    python benchmarks/critical_path.py --sets 100m --hta-timeout 900 --hta-python /tmp/htavenv/bin/python

The sets are ``run.py``'s (built by ``make_trace.py`` into benchmarks/out/data on first use).
Each measurement is a fresh process (``run.measure``: wall time, peak RSS of the process tree).

- ranksight, per rank: ``ranksight.load(path, cache=False)`` then the critical path of rank 0
  over the whole trace (``rank_breakdown(trace, annotation="")``: HTA's window ``annotation=""``),
  once with the fixed model and once with ``hta_compat=True``;
- ranksight, across ranks (multi-rank sets): the job-wide path of the default step
  (``job_path``: every rank's graph, matched collectives, the walk and the what-if replays);
- ranksight's HTA facade: ``TraceAnalysis(trace_dir=..., hta_compat=True)`` (HTA's last-step
  filter, HTA's numbers) then ``critical_path_analysis(rank=0, annotation="", instance_id=None)``;
- HTA: ``TraceAnalysis(trace_dir=...)`` then ``critical_path_analysis(rank=0, annotation="",
  instance_id=None)`` and ``get_critical_path_breakdown()``, with a time limit (``--hta-timeout``,
  default 900 s: the issue's 15 minutes) and a memory cap (``--hta-max-gb``).

Results are appended to benchmarks/out/critical_path.json and printed as a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from run import OUT, hta_available, make_set, measure, warm_page_cache  # noqa: E402

RESULTS = OUT / "critical_path.json"

OURS = r"""
import json, sys, time, resource
import ranksight
from ranksight.analyses import Session
from ranksight.analyses.critical_path import job_path, rank_breakdown
t = time.perf_counter()
run = ranksight.load(sys.argv[1], cache=False)
load = time.perf_counter() - t
sess = Session.of(run)
trace = sess.trace(sess.ranks[0])
out = {"load_s": round(load, 3), "events_rank0": trace.scan().select("row").collect().height}
for mode, compat in (("fixed", False), ("hta_compat", True)):
    t1 = time.perf_counter()
    bd, _ = rank_breakdown(trace, annotation="", hta_compat=compat)
    out[f"rank0_{mode}_s"] = round(time.perf_counter() - t1, 3)
    out[f"rank0_{mode}_edges"] = bd.height
# the facade: HTA's call on HTA's run (its last-step filter), HTA's numbers
from ranksight.hta import TraceAnalysis
t1 = time.perf_counter()
a = TraceAnalysis(trace_dir=sys.argv[1], hta_compat=True)
cp, ok = a.critical_path_analysis(rank=sess.ranks[0], annotation="", instance_id=None)
bd = cp.get_critical_path_breakdown()
out["facade_s"] = round(time.perf_counter() - t1, 3)
out["facade_edges"] = len(bd)
if sys.argv[2]:
    bd.to_csv(sys.argv[2] + "/ranksight_breakdown.csv", index=False)
if len(sess.ranks) > 1:
    t1 = time.perf_counter()
    jp = job_path(sess)
    out["job_s"] = round(time.perf_counter() - t1, 3)
    out["job_step"] = jp.step
    out["job_segments"] = jp.segments.height
    out["job_ranks_on_path"] = sorted(set(jp.segments["rank"].to_list()))
out["maxrss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
print(json.dumps(out))
"""

HTA = r"""
import json, sys, time, logging
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
t = time.perf_counter()
a = TraceAnalysis(trace_dir=sys.argv[1])
load = time.perf_counter() - t
t1 = time.perf_counter()
res = a.critical_path_analysis(rank=0, annotation="", instance_id=None)
cp_s = time.perf_counter() - t1
out = {"load_s": round(load, 3), "critical_path_s": round(cp_s, 3)}
if res is not None:
    g, ok = res
    t2 = time.perf_counter()
    bd = g.get_critical_path_breakdown()
    out["breakdown_s"] = round(time.perf_counter() - t2, 3)
    if sys.argv[2] and bd is not None:
        bd.to_csv(sys.argv[2] + "/hta_breakdown.csv", index=False)
    out["success"] = bool(ok)
    out["edges"] = None if bd is None else len(bd)
print(json.dumps(out))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", default="100m,8x100m")
    ap.add_argument("--hta-python", default="/tmp/htavenv/bin/python")
    ap.add_argument("--hta-timeout", type=float, default=900)
    ap.add_argument("--hta-max-gb", type=float, default=17)
    ap.add_argument("--no-hta", action="store_true")
    ap.add_argument("--timeout", type=float, default=3600, help="ranksight's time limit per set")
    ap.add_argument(
        "--dump", action="store_true", help="write both breakdowns (HTA's columns) to out/critical_path_SET/ to compare"
    )
    a = ap.parse_args()
    res = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    use_hta = not a.no_hta and hta_available(a.hta_python)
    for name in a.sets.split(","):
        d = make_set(name)
        files = sorted(d.glob("rank-*.json"))
        warm_page_cache(files)
        row: dict = {
            "set": name,
            "ranks": len(files),
            "json_mb": round(sum(f.stat().st_size for f in files) / 1e6, 1),
            "date": time.strftime("%Y-%m-%d"),
        }
        dump = ""
        if a.dump:
            dump = str(OUT / f"critical_path_{name}")
            Path(dump).mkdir(parents=True, exist_ok=True)
        row["ranksight"] = measure([sys.executable, "-c", OURS, str(d), dump], a.timeout)
        if use_hta:  # HTA loads every rank of the folder, as ranksight does
            row["hta"] = measure([a.hta_python, "-c", HTA, str(d), dump], a.hta_timeout, a.hta_max_gb * 2**30)
        else:
            row["hta"] = {"status": "not run"}
        res[name] = row
        RESULTS.write_text(json.dumps(res, indent=1))
        print(json.dumps(row), flush=True)
    print(table(res))


def _cell(v: object) -> str:
    return "" if v is None else str(v)


def table(res: dict) -> str:
    head = (
        "| set | JSON MB | events (rank 0) | ranksight load s | rank 0 critical path s (fixed / hta_compat) "
        "| path edges (fixed) | facade s (edges) | job-wide path s (ranks on it) | peak RSS MB | HTA load s "
        "| HTA critical_path_analysis s | HTA edges | HTA peak RSS MB |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for name, r in res.items():
        o, h = r["ranksight"], r["hta"]
        if "load_s" not in o:
            lines.append(f"| {name} | {r['json_mb']} | ranksight: {o.get('failed', o)} |")
            continue
        job = f"{o['job_s']} ({', '.join(map(str, o['job_ranks_on_path']))})" if "job_s" in o else ""
        if "load_s" in h:
            hta_load, hta_cp, hta_rss = h["load_s"], h.get("critical_path_s"), h.get("peak_rss_mb")
            hta_edges = f"{h['edges']:,}" if h.get("edges") is not None else ""
        else:
            hta_load, hta_cp, hta_rss = h.get("failed", h.get("status", "not run")), "", h.get("peak_rss_mb")
            hta_edges = ""
        lines.append(
            f"| {name} | {r['json_mb']} | {o['events_rank0']:,} | {o['load_s']} | "
            f"{o['rank0_fixed_s']} / {o['rank0_hta_compat_s']} | {o['rank0_fixed_edges']:,} | "
            f"{_cell(o.get('facade_s'))} ({o.get('facade_edges', 0):,}) | {job} | "
            f"{_cell(o.get('peak_rss_mb'))} | {_cell(hta_load)} | {_cell(hta_cp)} | {hta_edges} | {_cell(hta_rss)} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
