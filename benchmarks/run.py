"""ranksight vs HTA, side by side in one run: load speed, memory, analyses, cache, report.

    python benchmarks/run.py --sets 100m,1g            # issue-2 load benchmark (single rank)
    python benchmarks/run.py --sets 8x100m,64x20m,512x2m,1g --all
    python benchmarks/run.py --quick                   # a 20 MB smoke run
    python benchmarks/run.py --fuzz 300                # the decoder's cargo-fuzz targets, 300 s each

Every measurement runs in a fresh subprocess; peak RSS is sampled (psutil, every 50 ms) over the
whole process tree. HTA (v0.6 from PyPI as ``traceinsight``, or v0.5 as
``HolisticTraceAnalysis``) runs from the Python given by ``--hta-python`` (a separate virtualenv,
since HTA pins its own pandas); it is skipped when that Python cannot import it. HTA runs get a
time limit (``--hta-timeout``) and a memory cap (``--hta-max-gb``); a run that hits either is
reported as such. Results go to benchmarks/out/results.json and a Markdown table on stdout.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = HERE / "out"
sys.path.insert(0, str(HERE))
from make_trace import build  # noqa: E402

SOURCE_SINGLE = ROOT / "tests/data/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
SOURCE_MULTI = ROOT / "src/ranksight/data/examples/dlrm"

#: HTA-equivalent analyses (issue 3) and the HTA calls they correspond to.
HTA_EQUIVALENT = [
    "temporal",
    "idle",
    "kernel-types",
    "kernels",
    "overlap",
    "launches",
    "queue",
    "memcpy-bw",
    "steps",
    "annotations",
    "late-start",
]
HTA_CALLS = {
    "temporal": "a.get_temporal_breakdown(visualize=False)",
    "idle": "a.get_idle_time_breakdown(ranks=ranks, visualize=False)",
    "kernel-types": "a.get_gpu_kernel_breakdown(visualize=False)",
    "kernels": None,  # same call as kernel-types
    "overlap": "a.get_comm_comp_overlap(visualize=False)",
    "launches": "a.get_cuda_kernel_launch_stats(ranks=ranks, visualize=False)",
    "queue": "a.get_queue_length_summary(ranks=ranks)",
    "memcpy-bw": "a.get_memory_bw_summary(ranks=ranks)",
    "steps": "a.get_profiler_steps()",
    "annotations": None,
    "late-start": "a.get_potential_stragglers()",
}

SETS = {
    "100m": (1, 100 << 20),
    "1g": (1, 1 << 30),
    "3g": (1, 3 << 30),
    "8x100m": (8, 100 << 20),
    "64x20m": (64, 20 << 20),
    "512x2m": (512, 2 << 20),
    "256x1m": (256, 1 << 20),
    "1024x1m": (1024, 1 << 20),
    "4096x256k": (4096, 256 << 10),
    # one file of the same trace as the many-rank sets (DLRM rank 0 replicated): what a many-rank
    # load is compared with (issue 19: N files of X MB within 1.5x of one X MB file)
    "256m-dlrm": (1, 256 << 20),
    "1g-dlrm": (1, 1 << 30),
    "20m": (1, 20 << 20),
}

EXACT_SETS = {"256x1m", "1024x1m", "4096x256k"}


def make_set(name: str) -> Path:
    nranks, size = SETS[name]
    d = OUT / "data" / name
    done = d / ".done"
    if done.exists():
        return d
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    if nranks == 1:
        src = sorted(SOURCE_MULTI.glob("*.json.gz"))[0] if name.endswith("-dlrm") else SOURCE_SINGLE
        build(str(src), str(d / "rank-0.json"), size, rank=0, world_size=1)
    else:
        sources = sorted(SOURCE_MULTI.glob("*.json.gz"))
        first = d / "proto-{}.json"
        protos = []
        for i, s in enumerate(sources):
            p = Path(str(first).format(i))
            # the small-rank sets of issue 19 are cut to their size; the older ones keep whole copies
            build(str(s), str(p), size, rank=i, world_size=nranks, exact=name in EXACT_SETS)
            protos.append(p)
        for r in range(nranks):
            src = protos[r % len(protos)]
            text = src.read_text()
            # rewrite the rank: the prototype's distributedInfo says rank r % 8
            text = text.replace(f'"rank": {r % len(protos)},', f'"rank": {r},', 1)
            (d / f"rank-{r}.json").write_text(text)
        for p in protos:
            p.unlink()
    done.write_text("ok")
    return d


def warm_page_cache(files: list[Path]) -> None:
    """Read the files once so that every measurement (ranksight's first, HTA's after it) starts
    from the same warm page cache instead of the first one paying for the disk."""
    for f in files:
        with open(f, "rb") as fh:
            while fh.read(64 << 20):
                pass


def gz_copy(src: Path) -> Path:
    dst = src.with_suffix(".json.gz")
    if not dst.exists():
        with open(src, "rb") as f, gzip.open(dst, "wb", compresslevel=6) as g:
            shutil.copyfileobj(f, g, 16 << 20)
    return dst


def measure(cmd: list[str], timeout: float, max_rss: float | None = None, env: dict[str, str] | None = None) -> dict:
    """Run a command; return its JSON result plus wall time and peak RSS of the process tree."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})}
    )
    peak = 0
    killed = None
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak, killed
        p = psutil.Process(proc.pid)
        while not stop.is_set():
            try:
                rss = p.memory_info().rss + sum(c.memory_info().rss for c in p.children(recursive=True))
            except psutil.Error:
                rss = 0
            peak = max(peak, rss)
            if max_rss and rss > max_rss and killed is None:
                killed = f"killed at {rss / 2**30:.1f} GiB (cap {max_rss / 2**30:.0f} GiB)"
                for c in p.children(recursive=True):
                    c.kill()
                p.kill()
            time.sleep(0.05)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        for c in psutil.Process(proc.pid).children(recursive=True):
            c.kill()
        proc.kill()
        out, err = proc.communicate()
        killed = killed or f"timed out after {timeout:.0f} s"
    stop.set()
    th.join()
    wall = time.perf_counter() - t0
    res: dict = {"wall_s": round(wall, 3), "peak_rss_mb": round(peak / 2**20, 1)}
    if killed:
        res["failed"] = killed
        return res
    if proc.returncode != 0:
        res["failed"] = (err.strip().splitlines() or [f"exit {proc.returncode}"])[-1][:300]
        return res
    try:
        res.update(json.loads(out.strip().splitlines()[-1]))
    except (ValueError, IndexError):
        res["failed"] = "no result line"
    return res


RS_LOAD = """
import json, sys, time, polars as pl, ranksight
t = time.perf_counter()
run = ranksight.load(sys.argv[1], cache={cache})
n = 0; rows = 0; core = 0
for tr in run:
    n += tr.stats.get("events", tr.events.height)  # every element of traceEvents (flow events included)
    rows += tr.events.height  # rows of the events table (flow events are in the flow table)
    core += tr.events.select(["ph","cat","name","pid","tid","ts_ns","dur_ns","correlation","external_id","stream","device"]).estimated_size()
print(json.dumps({{"load_s": round(time.perf_counter() - t, 3), "events": n, "event_rows": rows, "core_bytes_per_event": round(core / max(rows, 1), 1)}}))
"""

RS_ANALYSES = """
import json, sys, time, ranksight
from ranksight.analyses import run_analysis, names
t = time.perf_counter()
run = ranksight.load(sys.argv[1], cache={cache})
load = time.perf_counter() - t
per = {{}}
for name in {names}:
    if name not in names():
        per[name] = None; continue
    t1 = time.perf_counter()
    try:
        run_analysis(name, run)
        per[name] = round(time.perf_counter() - t1, 3)
    except ranksight.RanksightError as e:
        per[name] = "n/a: " + str(e)[:60]
print(json.dumps({{"load_s": round(load, 3), "analyses_s": round(time.perf_counter() - t - load, 3), "per_analysis_s": per}}))
"""

RS_EVERY = """
import json, resource, sys, time, ranksight
from ranksight.analyses import run_analysis, names
t = time.perf_counter()
run = ranksight.load(sys.argv[1], cache=(sys.argv[2] if len(sys.argv) > 2 else False))
load = time.perf_counter() - t
after_load = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
per = {}
for name in names():
    t1 = time.perf_counter()
    try:
        run_analysis(name, run)
        per[name] = round(time.perf_counter() - t1, 3)
    except ranksight.RanksightError as e:
        per[name] = "n/a: " + type(e).__name__
print(json.dumps({"load_s": round(load, 3), "load_peak_rss_mb": round(after_load, 1), "analyses_s": round(time.perf_counter() - t - load, 3), "per_analysis_s": per}))
"""

RS_REPORT = """
import json, sys, time, subprocess
t = time.perf_counter()
r = subprocess.run([sys.executable, "-m", "ranksight", "-q", "report", sys.argv[1], "-o", sys.argv[2], "--force"] + sys.argv[3:], capture_output=True, text=True)
if r.returncode: raise SystemExit(r.stderr)
print(json.dumps({"report_s": round(time.perf_counter() - t, 3)}))
"""

RS_CACHE_CHECKSUM = """
import json, sys, time, ranksight
from ranksight.model import cache as C
spent = {"verify_s": 0.0, "verified_bytes": 0}
real = C._verify_file
def timed(d, fname, meta):
    t = time.perf_counter()
    if sys.argv[3] != "unverified":
        real(d, fname, meta)
    spent["verify_s"] += time.perf_counter() - t
    spent["verified_bytes"] += (d / fname).stat().st_size
C._verify_file = timed
t = time.perf_counter()
run = ranksight.load(sys.argv[1], cache=sys.argv[2])
load = time.perf_counter() - t
at_load = dict(spent)
t1 = time.perf_counter()
for tr in run:  # every side table and the spans read back (each checked on first use)
    for n in list(tr.tables):
        tr.table(n)
    tr.spans
print(json.dumps({"load_s": round(load, 3), "verify_s": round(at_load["verify_s"], 3),
    "verified_mb": round(at_load["verified_bytes"] / 1e6, 1), "tables_s": round(time.perf_counter() - t1, 3),
    "tables_verify_s": round(spent["verify_s"] - at_load["verify_s"], 3),
    "tables_verified_mb": round((spent["verified_bytes"] - at_load["verified_bytes"]) / 1e6, 1)}))
"""

HTA_LOAD = """
import json, sys, time, logging
logging.disable(logging.WARNING)
try:
    from hta.trace_analysis import TraceAnalysis
except ImportError:
    from traceinsight.trace_analysis import TraceAnalysis
t = time.perf_counter()
a = TraceAnalysis(trace_dir=sys.argv[1])
load = time.perf_counter() - t
ranks = sorted(a.t.traces.keys())
per = {}
for name, call in %s.items():
    if call is None or sys.argv[2] == "load":
        continue
    t1 = time.perf_counter()
    try:
        eval(call)
        per[name] = round(time.perf_counter() - t1, 3)
    except Exception as e:
        per[name] = "error: " + type(e).__name__
print(json.dumps({"load_s": round(load, 3), "analyses_s": round(time.perf_counter() - t - load, 3), "per_analysis_s": per}))
"""


def hta_available(py: str) -> bool:
    if not py or not Path(py).exists():
        return False
    r = subprocess.run([py, "-c", "import hta"], capture_output=True)
    return r.returncode == 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", default="100m,1g")
    ap.add_argument("--all", action="store_true", help="also analyses, cached re-run and report")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--append", action="store_true", help="keep the sets already in out/results.json")
    ap.add_argument("--hta-python", default=os.environ.get("HTA_PYTHON", "/tmp/hta-venv/bin/python"))
    ap.add_argument("--hta-timeout", type=float, default=900)
    ap.add_argument("--hta-max-gb", type=float, default=17)
    ap.add_argument("--no-hta", action="store_true")
    ap.add_argument(
        "--only-load",
        action="store_true",
        help="re-measure only ranksight's load rows of sets already in out/results.json (keeps the rest)",
    )
    ap.add_argument("--no-hta-over-gb", type=float, default=None, help="skip HTA on sets larger than this (GB of JSON)")
    ap.add_argument(
        "--every",
        action="store_true",
        help="also load plus every registered analysis: no cache by default and with RANKSIGHT_LOW_MEMORY=1, and a "
        "first run with the cache on (memory)",
    )
    ap.add_argument(
        "--only-every",
        action="store_true",
        help="re-measure only the memory rows (--every) of sets already in out/results.json (keeps the rest)",
    )
    ap.add_argument(
        "--cache-checksum",
        action="store_true",
        help="measure only what the cache's checksums cost (decode, first cached load, re-open verified and not) on "
        "the sets, kept with the rows already in out/results.json",
    )
    ap.add_argument(
        "--hta-mode",
        choices=("load", "all"),
        default=None,
        help="what HTA runs: load only, or load plus its analyses (default: as --all)",
    )
    ap.add_argument(
        "--fuzz",
        type=int,
        metavar="SECONDS",
        default=None,
        help="run only the Rust decoder's cargo-fuzz targets, SECONDS each (benchmarks/fuzz.py), kept with the rows "
        "already in out/results.json; skipped with a message when cargo-fuzz is missing",
    )
    a = ap.parse_args()
    sets = ["20m"] if a.quick else a.sets.split(",")
    OUT.mkdir(exist_ok=True)
    if a.fuzz is not None:
        import fuzz

        out_json = OUT / "results.json"
        kept = json.loads(out_json.read_text()) if out_json.exists() else {"sets": {}}
        kept["fuzz"] = fuzz.run_all(a.fuzz, keep=OUT / "fuzz")
        out_json.write_text(json.dumps(kept, indent=1))
        print(fuzz.render(kept["fuzz"]))
        return
    use_hta = not a.no_hta and hta_available(a.hta_python)
    out_json = OUT / "results.json"
    results = {
        "machine": {"cores": os.cpu_count(), "ram_gb": round(psutil.virtual_memory().total / 2**30, 1)},
        "hta": use_hta,
        "sets": {},
    }
    if a.append and out_json.exists():
        results["sets"] = json.loads(out_json.read_text()).get("sets", {})
    py = sys.executable
    for name in sets:
        d = make_set(name)
        files = sorted(d.glob("rank-*.json"))
        json_mb = sum(f.stat().st_size for f in files) / 1e6
        target = str(files[0]) if len(files) == 1 else str(d)
        row: dict = {"ranks": len(files), "json_mb": round(json_mb, 1)}
        print(f"== {name}: {len(files)} rank(s), {json_mb:.0f} MB", file=sys.stderr)
        warm_page_cache(files)
        if a.cache_checksum:
            row = results["sets"].get(name, row)
            cache_checksum(row, py, target)
            results["sets"][name] = row
            out_json.write_text(json.dumps(results, indent=1))
            continue
        if a.only_every:
            row = results["sets"].get(name, row)
            every(row, py, target)
            results["sets"][name] = row
            out_json.write_text(json.dumps(results, indent=1))
            continue
        if a.only_load:
            row = results["sets"].get(name, row)
            r = measure([py, "-c", RS_LOAD.format(cache="False"), target], 3600)
            if "load_s" in r:
                r["mb_per_s"] = round(json_mb / r["load_s"], 1)
                r["events_per_s"] = round(r["events"] / r["load_s"])
            row["ranksight_load"] = r
            h = row.get("hta", {})
            if "load_s" in h and "load_s" in r:
                row["load_speedup_x"] = round(h["load_s"] / r["load_s"], 1)
            results["sets"][name] = row
            out_json.write_text(json.dumps(results, indent=1))
            continue
        with tempfile.TemporaryDirectory() as cache:
            r = measure([py, "-c", RS_LOAD.format(cache="False"), target], 3600)
            row["ranksight_load"] = r
            if "load_s" in r:
                r["mb_per_s"] = round(json_mb / r["load_s"], 1)
                r["events_per_s"] = round(r["events"] / r["load_s"])
            if len(files) == 1 and name in ("100m", "1g", "20m"):
                gz = gz_copy(files[0])
                g = measure([py, "-c", RS_LOAD.format(cache="False"), str(gz)], 3600)
                if "load_s" in g:
                    g["json_mb_per_s"] = round(json_mb / g["load_s"], 1)
                row["ranksight_load_gzip"] = g
            if a.all:
                names = json.dumps(HTA_EQUIVALENT)
                row["ranksight_analyses"] = measure(
                    [py, "-c", RS_ANALYSES.format(cache=repr(cache), names=names), target], 3600
                )
                row["ranksight_cached_rerun"] = measure(
                    [py, "-c", RS_ANALYSES.format(cache=repr(cache), names=names), target], 3600
                )
                html = Path(cache) / "report.html"
                row["ranksight_report_first"] = measure([py, "-c", RS_REPORT, target, str(html), "--no-cache"], 3600)
                row["ranksight_report_cached"] = measure(
                    [py, "-c", RS_REPORT, target, str(html), "--cache-dir", cache], 3600
                )
                row["ranksight_report_cached_rerun"] = measure(
                    [py, "-c", RS_REPORT, target, str(html), "--cache-dir", cache], 3600
                )
        if a.every:
            every(row, py, target)
        if use_hta and not (a.no_hta_over_gb and json_mb > a.no_hta_over_gb * 1000):
            hdir = d if len(files) > 1 else Path(tempfile.mkdtemp(prefix="hta-"))
            if len(files) == 1:
                os.symlink(files[0], hdir / files[0].name)
            mode = a.hta_mode or ("all" if a.all else "load")
            row["hta"] = measure(
                [a.hta_python, "-c", HTA_LOAD % repr(HTA_CALLS), str(hdir), mode], a.hta_timeout, a.hta_max_gb * 2**30
            )
            h, rs = row["hta"], row["ranksight_load"]
            if "load_s" in h and "load_s" in rs:
                h["mb_per_s"] = round(json_mb / h["load_s"], 1)
                row["load_speedup_x"] = round(h["load_s"] / rs["load_s"], 1)
            if a.all and "analyses_s" in h and "ranksight_analyses" in row and "load_s" in row["ranksight_analyses"]:
                ra = row["ranksight_analyses"]
                row["load_plus_analyses_speedup_x"] = round(
                    (h["load_s"] + h["analyses_s"]) / (ra["load_s"] + ra["analyses_s"]), 1
                )
        results["sets"][name] = row
        out_json.write_text(json.dumps(results, indent=1))
    print(table(results))


def every(row: dict, py: str, target: str) -> None:
    """The memory rows: load plus every registered analysis without the cache (by default and with
    RANKSIGHT_LOW_MEMORY=1), and as a user's first run does it (cache on, a fresh directory: the
    load writes the entry, the side tables are then read back from it)."""
    row["ranksight_every"] = measure([py, "-c", RS_EVERY, target], 3600)
    row["ranksight_every_low_memory"] = measure([py, "-c", RS_EVERY, target], 3600, env={"RANKSIGHT_LOW_MEMORY": "1"})
    with tempfile.TemporaryDirectory() as cache:
        row["ranksight_every_cache"] = measure([py, "-c", RS_EVERY, target, cache], 3600)


def cache_checksum(row: dict, py: str, target: str) -> None:
    """What the cache's checksums cost: the load without the cache (decode), the first load with it
    (the entry written: XXH3-128 of every file while writing, fsync of files and folders), and the
    re-open from the entry, verified (the default) and with the verification switched off; each
    re-open then reads every side table and the spans back (each verified on first use). Issue 24:
    the verified re-open must stay >= 10x faster than decoding."""
    out: dict = {"decode": measure([py, "-c", RS_LOAD.format(cache="False"), target], 3600)}
    with tempfile.TemporaryDirectory() as cache:
        out["first_cached"] = measure([py, "-c", RS_CACHE_CHECKSUM, target, cache, "verified"], 3600)
        for mode in ("verified", "unverified", "verified"):  # the verified one twice: the second is reported
            out[f"reopen_{mode}"] = measure([py, "-c", RS_CACHE_CHECKSUM, target, cache, mode], 3600)
    d, r = out["decode"].get("load_s"), out["reopen_verified"].get("load_s")
    if d and r:
        out["decode_over_reopen_x"] = round(d / r, 1)
    row["cache_checksum"] = out


def table(res: dict) -> str:
    lines = [
        "| set | JSON MB | ranksight load s (MB/s) | peak RSS MB | HTA load s (MB/s) | HTA peak RSS MB | speed-up |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, r in res["sets"].items():
        if "ranksight_load" not in r:  # a set measured for another table only (--cache-checksum)
            continue
        rl = r["ranksight_load"]
        h = r.get("hta", {})
        hl = f"{h['load_s']} ({h.get('mb_per_s')})" if "load_s" in h else h.get("failed", "not run")
        lines.append(
            f"| {name} | {r['json_mb']} | {rl.get('load_s')} ({rl.get('mb_per_s')}) | {rl.get('peak_rss_mb')} | {hl} | "
            f"{h.get('peak_rss_mb', '')} | {r.get('load_speedup_x', '')} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
