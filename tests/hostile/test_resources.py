"""Bounded resources (issue 24, item 1): memory follows what is kept, not what the input holds.

A string longer than the per-string cap (1 MiB) is cut to it with a marker and one warning naming
the event; an event still longer than the per-event cap (64 MiB) is a one-line error (exit 2);
``--max-size`` counts every decompressed byte. The big cases run the real CLI in a child process
and assert its peak RSS (``ru_maxrss`` from ``os.wait4``). Before: the 2 GiB-string gzip ran 38 s,
peaked at 12.4 GB and ended in a Rust panic (offset overflow); ``info`` on a 200 MB name took
26 s and 1.15 GB.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest
from _fault_helpers import case, check_table
from _hostile import MARKER, gzip_big_event, long_string_json, run_child

import ranksight
from ranksight.analyses.health import health
from ranksight.errors import InputTooLargeError, RanksightWarning

MiB = 1 << 20
CAP = MiB  # the default per-string cap
KEPT = CAP - 64  # the prefix a cut string keeps (64 bytes of room for the marker)
MAX_RSS_MB = 1024
MAX_SECONDS = 30  # measured ~1.5 s; a loaded 2-core machine gets slack, a hang or a 38 s decode does not


def _load(path: Path, **opts) -> tuple[ranksight.Run, list[str]]:  # noqa: ANN003
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        run = ranksight.load(path, cache=False, **opts)
    assert all(issubclass(x.category, RanksightWarning) for x in w), [str(x.message) for x in w]
    return run, [str(x.message) for x in w]


def _name(run: ranksight.Run, row: int) -> str:
    ev = run[0].events
    return str(ev.filter(ev["row"] == row)["name"].cast(str)[0])


@case(
    "resources",
    "one 2 GiB name in a 2.1 MB gzip, `info` in a child process",
    "salvage with warning",
    "exit 0, one warning naming event 1 and its 2,147,483,648 bytes, peak RSS < 1 GB, < 30 s (was 38 s, 12.4 GB, a Rust panic)",
)
def test_a_2gib_string_in_a_gzip_is_cut_in_seconds_under_1gb(gzip_2gib_string):
    assert gzip_2gib_string.stat().st_size < 2_300_000
    c = run_child("info", "--no-cache", gzip_2gib_string)
    assert c.rc == 0, c.err
    assert "Traceback" not in c.err and "panic" not in c.err
    warns = [ln for ln in c.err_lines if ln.startswith("ranksight: warning:")]
    assert len(warns) == 1 and "event 1 ('aaaa" in warns[0] and "2,147,483,648 bytes" in warns[0], c.err
    assert "RANKSIGHT_MAX_STRING" in warns[0]
    assert c.peak_rss_mb < MAX_RSS_MB, c.peak_rss_mb
    assert c.seconds < MAX_SECONDS, c.seconds


@case("resources", "the same, `summary` writing the cache", "salvage with warning", "exit 0, peak RSS < 1 GB, < 30 s")
def test_a_2gib_string_summary_through_the_cache_stays_bounded(gzip_2gib_string, tmp_path):
    c = run_child("summary", "--cache-dir", tmp_path / "cache", gzip_2gib_string)
    assert c.rc == 0, c.err
    assert c.peak_rss_mb < MAX_RSS_MB and c.seconds < MAX_SECONDS, (c.peak_rss_mb, c.seconds)


@case(
    "resources",
    "the same through `ranksight.load`",
    "salvage with warning",
    "the name is 1,048,512 `a` + `…[truncated: 2147483648 bytes]`; one RanksightWarning; `cut_strings` 1 in stats and `health`; `raw_events` of it refused with InputTooLargeError",
)
def test_a_2gib_string_in_python_is_kept_as_its_prefix_and_a_marker(gzip_2gib_string):
    run, warns = _load(gzip_2gib_string)
    assert _name(run, 1) == "a" * KEPT + MARKER.format(n=2 << 30)
    assert _name(run, 0) == "k0"
    t = run[0]
    assert (t.stats["cut_strings"], t.stats["max_string_bytes"]) == (1, CAP)
    assert t.meta.json_bytes > 2 << 30  # every decompressed byte was read and counted
    assert len(warns) == 1 and warns[0].startswith("rank 0: 1 string longer than 1 MiB cut to that")
    checks = health(run)["checks"]
    row = checks.filter(checks["check"] == "cut_strings").row(0, named=True)
    assert (row["status"], row["count"]) == ("warning", 1)
    # the event is 2 GiB in the file: reading it back is refused, not attempted
    with pytest.raises(InputTooLargeError, match=r"the event is 2\.0 GiB long, more than the 64 MiB"):
        t.raw_events([1])


@case(
    "resources",
    "the same with `--max-size 256MB`",
    "clear error",
    "exit 2, one line: decompressed size exceeds the cap of 268435456 bytes; peak RSS < 0.5 GB",
)
def test_size_cap_stops_the_2gib_gzip_early(gzip_2gib_string):
    c = run_child("info", "--no-cache", "--max-size", "256MB", gzip_2gib_string)
    assert c.rc == 2 and c.out == ""
    assert c.err_lines == [
        f"ranksight: error: {gzip_2gib_string}: decompressed size exceeds the cap of 268435456 bytes; "
        "raise it with --max-size (or max_bytes=) if the file is trusted"
    ]
    assert c.peak_rss_mb < 512 and c.seconds < MAX_SECONDS


@case(
    "resources",
    "a 200 MB name in plain JSON, `info` and `summary` in child processes",
    "salvage with warning",
    "exit 0 with the warning, `summary` counts 2 kernels, peak RSS < 1 GB, < 30 s each (was 26 s / 1.15 GB and 236 s / 3.0 GB)",
)
def test_a_200mb_name_in_plain_json(json_200mb_name):
    c = run_child("info", "--no-cache", json_200mb_name)
    assert c.rc == 0 and "200,000,000 bytes" in c.err, c.err
    assert c.peak_rss_mb < MAX_RSS_MB and c.seconds < MAX_SECONDS, (c.peak_rss_mb, c.seconds)
    c = run_child("summary", "--no-cache", "--format", "json", json_200mb_name)
    assert c.rc == 0 and '"kernels": 2' in c.out, c.err
    assert c.peak_rss_mb < MAX_RSS_MB and c.seconds < MAX_SECONDS, (c.peak_rss_mb, c.seconds)


@case(
    "resources",
    "one 100 MiB event (an args array, no long string) in a gzip",
    "clear error",
    "exit 2, one line: byte 106, event 1: the event is longer than the per-event cap of 64 MiB ...; peak RSS < 0.5 GB; with `RANKSIGHT_MAX_EVENT=128MB` it loads",
)
def test_an_event_over_the_event_cap_is_one_error_and_the_cap_can_be_raised(tmp_path):
    p = gzip_big_event(tmp_path / "big.json.gz", 100)  # 100 MiB of args, no long string
    c = run_child("info", "--no-cache", p)
    assert c.rc == 2 and c.out == "", c.err
    assert c.err_lines == [
        f"ranksight: error: {p}, byte 106, event 1: the event is longer than the per-event cap of 64 MiB once "
        "its strings are cut to 1 MiB; raise it with RANKSIGHT_MAX_EVENT=SIZE (or max_event_bytes=) if the "
        "file is trusted"
    ]
    assert c.peak_rss_mb < 512
    c = run_child("info", "--no-cache", p, env={"RANKSIGHT_MAX_EVENT": "128MB"})
    assert c.rc == 0 and c.peak_rss_mb < MAX_RSS_MB, (c.rc, c.err, c.peak_rss_mb)


@case(
    "resources",
    "a 3 MiB name with the cap set by option, environment, or off",
    "correct result",
    "cut at 1 MiB (default) or 2 MiB (`max_string_bytes=`), whole with `0` or `RANKSIGHT_MAX_STRING=4MB`; `RANKSIGHT_MAX_STRING=lots` is one error line, exit 2",
)
def test_the_string_cap_is_configurable(tmp_path, monkeypatch):
    p = long_string_json(tmp_path / "t.json", 3 * MiB)
    run, warns = _load(p)
    assert _name(run, 1) == "b" * KEPT + MARKER.format(n=3 * MiB) and len(warns) == 1
    run, warns = _load(p, max_string_bytes=2 * MiB)
    assert _name(run, 1) == "b" * (2 * MiB - 64) + MARKER.format(n=3 * MiB)
    run, warns = _load(p, max_string_bytes=0)  # no cap
    assert _name(run, 1) == "b" * 3 * MiB and warns == []
    monkeypatch.setenv("RANKSIGHT_MAX_STRING", "4MB")
    run, warns = _load(p)
    assert _name(run, 1) == "b" * 3 * MiB and warns == [] and run[0].stats["max_string_bytes"] == 4 * MiB
    c = run_child("info", "--no-cache", p, env={"RANKSIGHT_MAX_STRING": "lots"})
    assert c.rc == 2 and c.err_lines == [
        "ranksight: error: RANKSIGHT_MAX_STRING: not a size: 'lots' (e.g. 4MB, 1GiB, 0 for no cap)"
    ]


@case(
    "resources",
    "3 MiB strings as a name, category, string pid, typed and untyped args, top-level key and value",
    "salvage with warning",
    "all 7 cut alike, one warning; `spans` equal those decoded without a cap; `raw_events` reads the events after the cuts whole",
)
def test_every_kind_of_string_is_cut_and_spans_stay_the_files(tmp_path):
    """Names, categories, typed and untyped args, string ids, top-level keys and values: each is
    cut alike, and the events after a cut are still read back from their place in the file."""
    big = "x" * (3 * MiB)
    text = (
        '{"' + big + '": 1, "deviceProperties": "' + big + '", "traceEvents": ['
        '{"ph":"X","cat":"cpu_op","name":"first","pid":1,"tid":1,"ts":1,"dur":1},'
        '{"ph":"X","cat":"' + big + '","name":"' + big + '","pid":"' + big + '","tid":1,"ts":2,"dur":1,'
        '"args":{"Collective name":"' + big + '","other":"' + big + '"}},'
        '{"ph":"X","cat":"cpu_op","name":"after","pid":1,"tid":1,"ts":3,"dur":1,"args":{"k":"v"}}]}'
    )
    p = tmp_path / "t.json"
    p.write_text(text)
    run, warns = _load(p)
    t = run[0]
    cut = "x" * KEPT + MARKER.format(n=3 * MiB)
    ev = t.events.sort("row")
    assert ev["name"].cast(str).to_list() == ["first", cut, "after"]
    assert ev["cat"].cast(str)[1] == cut and t.meta.id_names[ev["pid"][1]] == cut
    assert t.meta.raw["deviceProperties"] == cut and cut in t.meta.raw
    assert t.stats["cut_strings"] == 7 and len(warns) == 1 and warns[0].startswith("rank 0: 7 strings longer than")
    plain, _ = _load(p, max_string_bytes=0)
    assert t.spans.equals(plain[0].spans)  # the file's offsets, whatever was cut
    assert t.raw_events([2]) == [
        {"ph": "X", "cat": "cpu_op", "name": "after", "pid": 1, "tid": 1, "ts": 3, "dur": 1, "args": {"k": "v"}}
    ]
    assert t.raw_events([1])[0]["args"]["other"] == big  # read back whole: 15 MiB is under the 64 MiB cap


@case(
    "resources",
    "`raw_events` of a 3 MiB event with `RANKSIGHT_MAX_EVENT=2MB`",
    "clear error",
    "InputTooLargeError naming the 2 MiB read-back cap; a small event of the same trace is read back",
)
def test_reading_back_respects_the_event_cap(tmp_path, monkeypatch):
    p = long_string_json(tmp_path / "t.json", 3 * MiB)
    monkeypatch.setenv("RANKSIGHT_MAX_EVENT", "2MB")
    run, _ = _load(p)
    assert run[0].raw_events([0])[0]["name"] == "k0"
    with pytest.raises(InputTooLargeError, match="more than the 2 MiB an event is read back at most; raise RANKSIGHT"):
        run[0].raw_events([1])


def test_docs_table():
    check_table(sys.modules[__name__], "resources")
