"""The benchmark's cargo-fuzz runner (benchmarks/fuzz.py, issue 24 item 6): what it reads from
libFuzzer's output, on logs captured from real runs of the decoder's targets (trimmed: the
hundreds of ``NEW``/``REDUCE`` lines in between are left out). No fuzzing here."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
import fuzz  # noqa: E402

#: plain mode (no -fork), stopped by a panic in the target (an older decode.rs whose row check
#: did not know dropped events)
PLAIN_CRASH = """\
WARNING: Failed to find function "__sanitizer_acquire_crash_state".
INFO: Running with entropic power schedule (0xFF, 100).
INFO: Seed: 3113228655
INFO: Loaded 1 modules   (7876 inline 8-bit counters): 7876 [0x55a9c53f5528, 0x55a9c53f73ec),
INFO:        0 files found in c
INFO: A corpus is not provided, starting from an empty corpus
#2	INITED cov: 105 ft: 106 corp: 1/1b exec/s: 0 rss: 28Mb
	NEW_FUNC[1/4]: 0x55a9c5306341
#27348	NEW    cov: 606 ft: 993 corp: 232/1767b lim: 25 exec/s: 0 rss: 28Mb L: 24/25 MS: 1 InsertRepeatedBytes-
#27796	REDUCE cov: 609 ft: 1035 corp: 237/1850b lim: 25 exec/s: 0 rss: 31Mb L: 23/25 MS: 1 CopyPart-
#27869	REDUCE cov: 609 ft: 1035 corp: 237/1840b lim: 25 exec/s: 0 rss: 28Mb L: 12/25 MS: 3 ShuffleBytes-InsertByte-

thread '<unnamed>' (24055) panicked at fuzz_targets/decode.rs:60:13:
assertion failed: rows <= part.n && rows + f.len() >= part.n
stack backtrace:
   0: __rustc::rust_begin_unwind
             at /rustc/59807616e1fa2540724bfbac14d7976d7e4a3860/library/std/src/panicking.rs:689:5
   6: run
             at /work/main/rust/fuzz/fuzz_targets/decode.rs:40:15
note: Some details are omitted, run with `RUST_BACKTRACE=full` for a verbose backtrace.
==24055== ERROR: libFuzzer: deadly signal
NOTE: libFuzzer has rudimentary signal handlers.
SUMMARY: libFuzzer: deadly signal
MS: 3 CrossOver-ChangeByte-EraseBytes-; base unit: ce6cc616e2294879a50daa1824942a2843878522
0x2b,0x5b,0x7b,0x7d,0xf9,0x1d,0x2f,0xa,0xa,0xa,0x30,
+[{}\\371\\035/\\012\\012\\0120
artifact_prefix='/tmp/p/a/'; Test unit written to /tmp/p/a/crash-87861477a17bfcbacf95dad0931eb7b5761b9ae3
Base64: K1t7ffkdLwoKCjA=
stat::number_of_executed_units: 27877
stat::average_exec_per_sec:     0
stat::new_units_added:          326
stat::slowest_unit_time_sec:    0
stat::peak_rss_mb:              29
"""

#: plain mode, ran its whole time
PLAIN_CLEAN = """\
INFO: -max_total_time=20
#2	INITED cov: 105 ft: 106 corp: 1/1b exec/s: 0 rss: 41Mb
#1994783	REDUCE cov: 1262 ft: 4988 corp: 2004/244Kb lim: 2512 exec/s: 99739 rss: 42Mb L: 85/2338 MS: 5 CopyPart-
#1994859	NEW    cov: 1262 ft: 4989 corp: 2005/247Kb lim: 2512 exec/s: 94993 rss: 42Mb L: 2244/2338 MS: 1 CopyPart-
#1994859	DONE   cov: 1262 ft: 4989 corp: 2005/247Kb lim: 2512 exec/s: 94993 rss: 42Mb
###### Recommended dictionary. ######
"VUUUUUU\\005" # Uses: 20
###### End of recommended dictionary. ######
Done 1994859 runs in 21 second(s)
stat::number_of_executed_units: 1994859
stat::average_exec_per_sec:     94993
stat::new_units_added:          8357
stat::slowest_unit_time_sec:    0
stat::peak_rss_mb:              42
"""

#: fork mode (-fork=1 -ignore_crashes=1): the inner processes' panics are not printed
FORK_CRASHES = """\
INFO: Seed: 3525620302
INFO: -fork=1: fuzzing in separate process(s)
INFO: -fork=1: 117 seed inputs, starting to fuzz in /tmp/libFuzzerTemp.FuzzWithFork21444.dir
==21451== ERROR: libFuzzer: deadly signal
#6810: cov: 1691 ft: 4989 corp: 598 exec/s: 0 oom/timeout/crash: 0/0/32 time: 18s job: 33 dft_time: 0
==22148== ERROR: libFuzzer: deadly signal
#7073: cov: 1692 ft: 5009 corp: 610 exec/s: 0 oom/timeout/crash: 1/2/34 time: 20s job: 35 dft_time: 0
==22243== ERROR: libFuzzer: deadly signal
INFO: fuzzed for 20 seconds, wrapping up soon
INFO: exiting: 77 time: 21s
"""


def test_plain_mode_stopped_by_a_panic() -> None:
    r = fuzz.parse_log(PLAIN_CRASH)
    assert r["mode"] == "plain"
    assert r["executions"] == 27877  # the final stats, not the last status line (#27869)
    assert (r["cov"], r["ft"], r["corpus"]) == (609, 1035, 237)
    assert (r["crashes"], r["timeouts"], r["ooms"]) == (1, 0, 0)
    assert r["panics"] == ["fuzz_targets/decode.rs:60: assertion failed: rows <= part.n && rows + f.len() >= part.n"]
    assert r["artifacts"] == ["/tmp/p/a/crash-87861477a17bfcbacf95dad0931eb7b5761b9ae3"]
    assert r["peak_rss_mb"] == 31  # the largest seen, status lines included
    # no "Done N runs in S second(s)": the time is unknown, and so is the rate (never a 0)
    assert r["seconds"] is None and r["exec_per_s"] is None
    # a deadly signal whose input was not written still counts as one crash
    unsaved = fuzz.parse_log("\n".join(ln for ln in PLAIN_CRASH.splitlines() if "Test unit written" not in ln))
    assert (unsaved["crashes"], unsaved["artifacts"]) == (1, [])


def test_plain_mode_whole_run() -> None:
    r = fuzz.parse_log(PLAIN_CLEAN)
    assert r["mode"] == "plain"
    assert (r["executions"], r["seconds"], r["exec_per_s"]) == (1994859, 21, 94993)
    assert (r["cov"], r["ft"], r["corpus"]) == (1262, 4989, 2005)
    assert (r["crashes"], r["timeouts"], r["ooms"]) == (0, 0, 0)
    assert r["panics"] == [] and r["artifacts"] == []


def test_fork_mode_counts_every_finding() -> None:
    r = fuzz.parse_log(FORK_CRASHES)
    assert r["mode"] == "fork"
    # the last status line's totals; the time from the exit line
    assert (r["executions"], r["cov"], r["ft"], r["corpus"]) == (7073, 1692, 5009, 610)
    assert (r["ooms"], r["timeouts"], r["crashes"]) == (1, 2, 34)
    assert (r["seconds"], r["exec_per_s"]) == (21, 337)
    assert r["panics"] == []


def test_nothing_parsed_is_none_not_zero() -> None:
    r = fuzz.parse_log("error: could not compile `ranksight-core-fuzz`\n")
    assert r["mode"] is None
    assert all(r[k] is None for k in ("executions", "exec_per_s", "cov", "ft", "corpus", "crashes", "seconds"))


def test_render_row_and_skip_message() -> None:
    run = {
        "seconds_per_target": 20,
        "sanitizer": "none",
        "toolchain": {"rustc": "rustc 1.95.0", "cargo_fuzz": "cargo-fuzz 0.13.2"},
        "cores": 2,
        "date": "2026-11-28",
        "targets": {
            "decode": {
                **fuzz.parse_log(FORK_CRASHES),
                "corpus_files": 600,
                "loadavg_before": [1.5, 1, 1],
                "loadavg_after": [2.0, 1, 1],
            }
        },
    }
    text = fuzz.render(run)
    assert "rustc 1.95.0, cargo-fuzz 0.13.2, sanitizer none, 20 s per target" in text
    assert "| decode | 7,073 | 337 | 1,692 | 5,009 | 610 (600) | 34 / 2 / 1 | none | 1.5 → 2.0 |" in text
    assert (
        fuzz.render({"skipped": "cargo-fuzz is not installed"}) == "cargo-fuzz: skipped (cargo-fuzz is not installed)"
    )


def test_missing_cargo_fuzz_is_a_clear_skip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a cargo without the fuzz subcommand answers as cargo does
    cargo = tmp_path / "cargo"
    cargo.write_text("#!/bin/sh\necho 'error: no such command: `fuzz`' >&2\nexit 101\n")
    cargo.chmod(cargo.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(tmp_path))
    why = fuzz.cargo_fuzz_missing()
    assert why is not None and why.startswith("cargo-fuzz is not installed (cargo install cargo-fuzz)")
    assert "no such command" in why
    assert fuzz.run_all(1) == {"skipped": why}
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert fuzz.cargo_fuzz_missing() == "cargo is not on PATH"


def test_seeds_are_small_trace_documents(tmp_path: Path) -> None:
    docs = fuzz.seed_documents()
    assert len(docs) >= 40
    for d in docs:
        assert len(d) < fuzz.MAX_LEN
        assert json.loads(d)["traceEvents"]
    n = fuzz.write_seeds(tmp_path)
    files = sorted(tmp_path.iterdir())
    assert n == len(files) == len(docs) * len(fuzz.SEED_MODES)
    assert {f.read_bytes()[0] for f in files} == set(fuzz.SEED_MODES)
