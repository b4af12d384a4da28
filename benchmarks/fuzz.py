"""The Rust decoder's cargo-fuzz (libFuzzer) targets, each run for a fixed time (issue 24, item 6).

    python benchmarks/fuzz.py --seconds 300                  # both targets, 300 s each
    python benchmarks/fuzz.py --seconds 60 --targets decode
    python benchmarks/run.py --fuzz 300                      # the same, kept in out/results.json

The targets are ``rust/fuzz/fuzz_targets/{decode,decode_file}.rs`` (docs/robustness.md). They are
built with ``cargo fuzz build`` into their own target directory (``--target-dir``, default
``$RANKSIGHT_FUZZ_TARGET_DIR`` or ``/tmp/ranksight-fuzz-target``: the decoder's own build is never
touched) and then run as plain
libFuzzer binaries, which is what ``cargo fuzz run`` does, without the folders it creates in the
repository. On the stable toolchain the build has no sanitizer (``-s none``: libFuzzer's coverage
instrumentation is stable, ``-Zsanitizer`` is not); it is optimised with debug assertions and
overflow checks on (cargo-fuzz's default). ``--sanitizer address`` needs a nightly toolchain
(``--toolchain nightly``).

Each run starts from a fresh corpus seeded with small documents cut from a few real traces in
tests/data (a header and a few consecutive events, compact and pretty-printed, at most
``MAX_LEN`` bytes, each behind three mode bytes), in libFuzzer's fork mode with crashes, timeouts
and out-of-memory inputs ignored, so that one run lasts its whole time and lists every finding.
Recorded per target: executions, exec/s, corpus size, coverage (libFuzzer's ``cov:`` and
``ft:``), crashes / timeouts / out-of-memory inputs (and the distinct panic messages), the build
and run flags, the toolchain, and the load average (the machine is shared). Results go to
benchmarks/out/fuzz.json and a Markdown table on stdout; each target's corpus, findings
(``artifacts/``) and log stay in benchmarks/out/fuzz/TARGET. Without cargo-fuzz the run is skipped
with a message saying so (``cargo install cargo-fuzz``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = HERE / "out"
FUZZ_DIR = ROOT / "rust" / "fuzz"
TARGETS = ("decode", "decode_file")
#: the traces the seeds are cut from (small, varied: CUDA, ROCm, CPU only, flows, distributedInfo)
SEED_SOURCES = (
    "hta/triton_example/triton_example.json.gz",
    "tracelens/torch_compile_triton/trace.json.gz",
    "hta/critical_path/cuda_event_sync/event_sync_trace.json.gz",
    "hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
    "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
)
#: the first byte of every input is the target's mode byte: decode.rs reads it as a chunk size,
#: decode_file.rs as bits (0: plain; 1: gzip; 0x48: strict with a 300-byte string cap)
SEED_MODES = (0x00, 0x01, 0x48)
MAX_LEN = 4096
WINDOWS_PER_SOURCE = 8
EVENTS_PER_WINDOW = 3
LIBFUZZER_FLAGS = (
    "-fork=1",
    "-ignore_crashes=1",
    "-ignore_timeouts=1",
    "-ignore_ooms=1",
    f"-max_len={MAX_LEN}",
    "-rss_limit_mb=2048",
    "-timeout=10",
    "-print_final_stats=1",
)
DEFAULT_TARGET_DIR = os.environ.get("RANKSIGHT_FUZZ_TARGET_DIR", "/tmp/ranksight-fuzz-target")
#: findings run once more to name their panic (fork mode does not print them)
MAX_REPRODUCED = 50


# -- seeds ---------------------------------------------------------------------------------------


def _doc(header: list[tuple[str, object]], events: list, indent: int | None) -> bytes:
    """A trace document: the header keys in the file's order, ``traceEvents`` where it was."""
    obj = {k: (events if k == "traceEvents" else v) for k, v in header}
    return json.dumps(obj, indent=indent, separators=None if indent else (",", ":")).encode()


def seed_documents(data_dir: Path = ROOT / "tests" / "data") -> list[bytes]:
    """Small documents cut from the seed traces: each trace's short header keys (the long ones,
    e.g. a full ``deviceProperties``, are left out) around a few consecutive events taken at evenly
    spaced places, compact and pretty-printed; windows are shortened until the document fits in
    ``MAX_LEN - 1`` bytes (the mode byte). Deterministic."""
    docs: list[bytes] = []
    for rel in SEED_SOURCES:
        path = data_dir / rel
        if not path.exists():
            continue
        trace = json.loads(gzip.decompress(path.read_bytes()) if rel.endswith(".gz") else path.read_bytes())
        events = [e for e in trace.get("traceEvents", []) if isinstance(e, dict)]
        header = [
            (k, v) for k, v in trace.items() if k == "traceEvents" or len(json.dumps(v, separators=(",", ":"))) <= 200
        ]
        if not events:
            continue
        step = max(1, len(events) // WINDOWS_PER_SOURCE)
        for start in range(0, len(events), step)[:WINDOWS_PER_SOURCE]:
            for indent in (None, 1):
                n = EVENTS_PER_WINDOW
                while n > 0:
                    doc = _doc(header, events[start : start + n], indent)
                    if len(doc) < MAX_LEN:
                        docs.append(doc)
                        break
                    n -= 1
    return list(dict.fromkeys(docs))


def write_seeds(dest: Path, data_dir: Path = ROOT / "tests" / "data") -> int:
    """Write every seed document behind each mode byte into ``dest``; return how many files."""
    dest.mkdir(parents=True, exist_ok=True)
    n = 0
    for i, doc in enumerate(seed_documents(data_dir)):
        for mode in SEED_MODES:
            (dest / f"seed-{i:03d}-{mode:02x}").write_bytes(bytes([mode]) + doc)
            n += 1
    return n


# -- libFuzzer's output --------------------------------------------------------------------------

#: a status line, plain mode: ``#1048576\tpulse  cov: 2837 ft: 9000 corp: 1583/200Kb lim: 4096 exec/s: 3200 rss: 400Mb``
_PLAIN = re.compile(
    r"^#(?P<execs>\d+)\s+(?P<kind>[A-Z_]+)\s+cov: (?P<cov>\d+) ft: (?P<ft>\d+) corp: (?P<corp>\d+)/\S+.*?"
    r"exec/s: (?P<eps>\d+)(?: rss: (?P<rss>\d+)Mb)?"
)
#: a status line, fork mode:
#: ``#86117: cov: 1454 ft: 2529 corp: 305 exec/s: 2191 oom/timeout/crash: 0/0/0 time: 28s job: 6``
_FORK = re.compile(
    r"^#(?P<execs>\d+): cov: (?P<cov>\d+) ft: (?P<ft>\d+) corp: (?P<corp>\d+) exec/s: (?P<eps>\d+) "
    r"oom/timeout/crash: (?P<oom>\d+)/(?P<timeout>\d+)/(?P<crash>\d+) time: (?P<time>\d+)s"
)
_STAT = re.compile(r"^stat::(\w+):\s+(\d+)")
_DONE = re.compile(r"^Done (\d+) runs in (\d+) second")
_EXIT = re.compile(r"^INFO: exiting: \d+ time: (\d+)s")
_PANIC = re.compile(r"panicked at (\S+?):(\d+):\d+:\s*$")
_ARTIFACT = re.compile(r"Test unit written to (\S+)")
_DEADLY = re.compile(
    r"ERROR: libFuzzer: (deadly signal|timeout|out-of-memory|fuzz target exited)|ERROR: AddressSanitizer"
)


def parse_log(text: str) -> dict:
    """What a libFuzzer run printed, as numbers: executions, exec/s, coverage (``cov``: covered
    code edges, ``ft``: features), corpus entries, crashes / timeouts / out-of-memory inputs, peak
    RSS, seconds, and the distinct panics (``file:line: message``) and artifact files named in the
    log. Reads plain mode (status lines ``#N  KIND cov: …``, ``Done N runs in S second(s)``,
    ``stat::…`` with ``-print_final_stats=1``) and fork mode (``#N: cov: … oom/timeout/crash:
    a/b/c time: Ss``, ``INFO: exiting: … time: Ss``). A value the log does not give is None."""
    res: dict = {
        "mode": None,
        "executions": None,
        "seconds": None,
        "exec_per_s": None,
        "cov": None,
        "ft": None,
        "corpus": None,
        "crashes": None,
        "timeouts": None,
        "ooms": None,
        "peak_rss_mb": None,
        "panics": [],
        "artifacts": [],
    }
    lines = text.splitlines()
    deadly = 0
    for i, line in enumerate(lines):
        if m := _FORK.match(line):
            res["mode"] = "fork"
            res["executions"] = int(m["execs"])
            res["cov"], res["ft"], res["corpus"] = int(m["cov"]), int(m["ft"]), int(m["corp"])
            res["ooms"], res["timeouts"], res["crashes"] = int(m["oom"]), int(m["timeout"]), int(m["crash"])
            res["seconds"] = int(m["time"])
        elif m := _PLAIN.match(line):
            res["mode"] = res["mode"] or "plain"
            res["executions"] = int(m["execs"])
            res["cov"], res["ft"], res["corpus"] = int(m["cov"]), int(m["ft"]), int(m["corp"])
            if m["rss"]:
                res["peak_rss_mb"] = max(res["peak_rss_mb"] or 0, int(m["rss"]))
        elif m := _STAT.match(line):
            key, val = m[1], int(m[2])
            if key == "number_of_executed_units":
                res["executions"] = val
            elif key == "peak_rss_mb":
                res["peak_rss_mb"] = max(res["peak_rss_mb"] or 0, val)
        elif m := _DONE.match(line):
            res["executions"], res["seconds"] = int(m[1]), int(m[2])
        elif m := _EXIT.match(line):
            res["seconds"] = int(m[1])
        elif m := _PANIC.search(line):
            msg = lines[i + 1].strip() if i + 1 < len(lines) else ""
            panic = f"{m[1]}:{m[2]}: {msg}"
            if panic not in res["panics"]:
                res["panics"].append(panic)
        elif (m := _ARTIFACT.search(line)) and m[1] not in res["artifacts"]:
            res["artifacts"].append(m[1])
        if _DEADLY.search(line):
            deadly += 1
    if res["mode"] == "plain":
        # plain mode stops at its first finding: the kind comes from the artifact's name
        kinds = [Path(a).name.split("-", 1)[0] for a in res["artifacts"]]
        res["crashes"] = sum(k == "crash" for k in kinds) or (1 if deadly and not kinds else 0)
        res["timeouts"] = sum(k == "timeout" for k in kinds)
        res["ooms"] = sum(k == "oom" for k in kinds)
    if res["executions"] is not None and res["seconds"]:
        res["exec_per_s"] = round(res["executions"] / res["seconds"])
    return res


# -- running -------------------------------------------------------------------------------------


def _cargo(toolchain: str | None) -> list[str]:
    return ["cargo", f"+{toolchain}"] if toolchain else ["cargo"]


def cargo_fuzz_missing(toolchain: str | None = None) -> str | None:
    """Why cargo-fuzz cannot run here (None when it can)."""
    if shutil.which("cargo") is None:
        return "cargo is not on PATH"
    r = subprocess.run([*_cargo(toolchain), "fuzz", "--version"], capture_output=True, text=True, cwd=FUZZ_DIR.parent)
    if r.returncode != 0:
        why = (r.stderr.strip().splitlines() or ["no output"])[-1][:200]
        return f"cargo-fuzz is not installed (cargo install cargo-fuzz): {why}"
    return None


def toolchain_info(toolchain: str | None) -> dict:
    def out(cmd: list[str]) -> str:
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=FUZZ_DIR.parent)
        return r.stdout.strip() if r.returncode == 0 else f"unknown ({(r.stderr.strip() or 'no output')[:100]})"

    rustc = ["rustc", f"+{toolchain}"] if toolchain else ["rustc"]
    return {"rustc": out([*rustc, "--version"]), "cargo_fuzz": out([*_cargo(toolchain), "fuzz", "--version"])}


def build(targets: tuple[str, ...], target_dir: str, sanitizer: str, toolchain: str | None) -> tuple[dict, str | None]:
    """``cargo fuzz build`` of the targets; returns (what was built, error or None)."""
    cmd = [*_cargo(toolchain), "fuzz", "build", "-s", sanitizer, "--target-dir", target_dir]
    if len(targets) == 1:  # cargo fuzz build takes one target, or builds them all
        cmd.append(targets[0])
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=FUZZ_DIR.parent)
    info = {"command": " ".join(cmd), "build_s": round(time.perf_counter() - t0, 1)}
    if r.returncode != 0:
        err = [ln for ln in r.stderr.splitlines() if ln.startswith("error")] or r.stderr.strip().splitlines()[-1:]
        return info, "; ".join(err)[:500] or f"exit {r.returncode}"
    return info, None


def binary(target_dir: str, target: str) -> Path:
    triple = "x86_64-unknown-linux-gnu"
    r = subprocess.run(["rustc", "-vV"], capture_output=True, text=True)
    for line in r.stdout.splitlines():
        if line.startswith("host: "):
            triple = line.split(": ", 1)[1]
    return Path(target_dir) / triple / "release" / target


def reproduce(exe: Path, artifact: Path) -> list[str]:
    """The panics (``file:line: message``) one saved input gives when run once by the target;
    ``"no panic (…)"`` when it does not reproduce one (a timeout, an out-of-memory input)."""
    try:
        r = subprocess.run(
            [str(exe), "-rss_limit_mb=2048", "-timeout=10", str(artifact)],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=60,
        )
    except subprocess.TimeoutExpired:
        return [f"no panic ({artifact.name.split('-', 1)[0]}: still running after 60 s)"]
    panics = parse_log(r.stdout + r.stderr)["panics"]
    return panics or [f"no panic ({artifact.name.split('-', 1)[0]}, exit {r.returncode})"]


def run_target(exe: Path, seconds: int, work: Path) -> dict:
    """One fixed-time run of a built target from a fresh corpus and the seeds; its parsed log."""
    seeds, corpus, artifacts = work / "seeds", work / "corpus", work / "artifacts"
    for d in (corpus, artifacts):
        d.mkdir(parents=True)
    n_seeds = write_seeds(seeds)
    cmd = [str(exe), f"-max_total_time={seconds}", *LIBFUZZER_FLAGS, f"-artifact_prefix={artifacts}/"]
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    proc = subprocess.run([*cmd, str(corpus), str(seeds)], capture_output=True, text=True, errors="replace")
    wall = time.perf_counter() - t0
    log = proc.stdout + proc.stderr
    (work / "log.txt").write_text(log)
    res = parse_log(log)
    found = sorted(p.name for p in artifacts.iterdir())
    # fork mode does not print the inner processes' panics: each finding is run once more
    for p in found[:MAX_REPRODUCED]:
        for panic in reproduce(exe, artifacts / p):
            if panic not in res["panics"]:
                res["panics"].append(panic)
    res.update(
        {
            "exit_code": proc.returncode,
            "wall_s": round(wall, 1),
            "seeds": n_seeds,
            "corpus_files": sum(1 for _ in corpus.iterdir()),
            "artifact_files": found,
            "loadavg_before": [round(x, 2) for x in load_before],
            "loadavg_after": [round(x, 2) for x in os.getloadavg()],
            "flags": " ".join([f"-max_total_time={seconds}", *LIBFUZZER_FLAGS]),
        }
    )
    if res["crashes"] is None and res["executions"] is None:
        res["failed"] = (log.strip().splitlines() or [f"exit {proc.returncode}"])[-1][:300]
    return res


def run_all(
    seconds: int,
    targets: tuple[str, ...] = TARGETS,
    *,
    target_dir: str = DEFAULT_TARGET_DIR,
    sanitizer: str = "none",
    toolchain: str | None = None,
    keep: Path | None = None,
) -> dict:
    """Build and run every target for ``seconds``; a dict for results.json (``skipped`` with the
    reason when cargo-fuzz cannot run). ``keep``: a folder to keep each target's corpus,
    artifacts and log in (a temporary folder otherwise)."""
    missing = cargo_fuzz_missing(toolchain)
    if missing:
        print(f"fuzz: skipped: {missing}", file=sys.stderr)
        return {"skipped": missing}
    res: dict = {
        "seconds_per_target": seconds,
        "sanitizer": sanitizer,
        "toolchain": toolchain_info(toolchain),
        "cores": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d"),
        "targets": {},
    }
    print(f"fuzz: building {', '.join(targets)} ({res['toolchain']['rustc']}, sanitizer {sanitizer})", file=sys.stderr)
    res["build"], err = build(targets, target_dir, sanitizer, toolchain)
    if err:
        print(f"fuzz: build failed: {err}", file=sys.stderr)
        res["build"]["failed"] = err
        return res
    for t in targets:
        print(f"fuzz: {t}, {seconds} s", file=sys.stderr)
        if keep is not None:
            work = keep / t
            shutil.rmtree(work, ignore_errors=True)
            res["targets"][t] = run_target(binary(target_dir, t), seconds, work)
        else:
            with tempfile.TemporaryDirectory(prefix="ranksight-fuzz-") as tmp:
                res["targets"][t] = run_target(binary(target_dir, t), seconds, Path(tmp))
    return res


def render(res: dict) -> str:
    """The Markdown table of one :func:`run_all` result."""
    if "skipped" in res:
        return f"cargo-fuzz: skipped ({res['skipped']})"
    if "failed" in res.get("build", {}):
        return f"cargo-fuzz: build failed ({res['build']['failed']})"
    tc = res["toolchain"]
    out = [
        f"{tc['rustc']}, {tc['cargo_fuzz']}, sanitizer {res['sanitizer']}, {res['seconds_per_target']} s per "
        f"target, {res['cores']} cores ({res['date']})\n",
        "| target | executions | exec/s | cov | ft | corpus (files) | crashes / timeouts / OOM | distinct panics | "
        "load avg (1 min, before → after) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in res["targets"].items():
        if "failed" in r:
            out.append(f"| {name} | failed: {r['failed']} |||||||")
            continue
        panics = "; ".join(r["panics"]) or "none"
        out.append(
            f"| {name} | {r['executions']:,} | {r['exec_per_s']:,} | {r['cov']:,} | {r['ft']:,} | "
            f"{r['corpus']:,} ({r['corpus_files']:,}) | {r['crashes']} / {r['timeouts']} / {r['ooms']} | {panics} | "
            f"{r['loadavg_before'][0]} → {r['loadavg_after'][0]} |"
        )
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=int, default=300, help="how long each target runs (default 300)")
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--target-dir", default=DEFAULT_TARGET_DIR, help="cargo's target directory for the fuzz build")
    ap.add_argument("--sanitizer", default="none", choices=("none", "address"), help="address needs nightly")
    ap.add_argument("--toolchain", default=None, help="rustup toolchain, e.g. nightly (default: the active one)")
    ap.add_argument("--keep", type=Path, default=OUT / "fuzz", help="where each target's corpus, findings and log stay")
    a = ap.parse_args()
    res = run_all(
        a.seconds,
        tuple(a.targets.split(",")),
        target_dir=a.target_dir,
        sanitizer=a.sanitizer,
        toolchain=a.toolchain,
        keep=a.keep,
    )
    OUT.mkdir(exist_ok=True)
    (OUT / "fuzz.json").write_text(json.dumps(res, indent=1))
    print(render(res))


if __name__ == "__main__":
    main()
