"""Bad values are data problems, not crashes (issue 24, item 2).

One kernel or one cpu_op whose ``ts`` or ``dur`` is missing, NaN, ±Infinity, ``1e308``,
``-5e20``, a 23-digit number or a string: the event is dropped at load with one warning naming it
and a count that ``ranksight health`` shows, and every analysis gives exactly what it gives on the
same trace without that event. Before: ``summary`` exited 0 without ``kernels``, ``gpu_span_ms``
and ``gpu_busy_pct`` (a note "analysis summary failed: ValueError: cannot convert float NaN to
integer"), numpy RuntimeWarnings reached stderr, ``diagnose`` exited 3 (``TypeError``), and
``run_analysis('summary', run)`` raised ``ValueError``.

The Python API runs every case (32: 8 values × {ts, dur} × {kernel, cpu_op}); the CLI runs every
case in child processes, one process per (field, event kind) with the 8 values as 8 ranks,
against the same command on 8 copies of the reference trace.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
import warnings
from pathlib import Path

import polars as pl
import pytest
from _fault_helpers import case, check_table
from _hostile import EVENTS, VARIANTS, VICTIM, bad_time_trace, reference_trace, run_child

import ranksight
from ranksight.analyses import run_analysis
from ranksight.cli import main
from ranksight.errors import RanksightWarning

ANALYSES = ("summary", "diagnose", "temporal", "idle-causes")
CASES = [(f, w, v) for f in ("ts", "dur") for w in ("kernel", "cpu_op") for v in VARIANTS]


def _analyse(path: Path) -> tuple[dict[str, dict[str, pl.DataFrame]], ranksight.Run, list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        run = ranksight.load(path, cache=False)
        out = {name: dict(run_analysis(name, run).tables) for name in ANALYSES}
    return out, run, list(w)


@pytest.fixture(scope="module")
def references(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, dict[str, pl.DataFrame]]]:
    d = tmp_path_factory.mktemp("ref")
    return {who: _analyse(reference_trace(d / f"{who}.json", who))[0] for who in VICTIM}


@case(
    "bad-times",
    "one kernel or one cpu_op whose `ts` or `dur` is missing, NaN, ±Infinity, 1e308, -5e20, 23 digits or a string "
    "(32 cases), through `ranksight.load` and `run_analysis`",
    "salvage with warning",
    "the event dropped with one RanksightWarning naming it, no other warning; `summary`, `diagnose`, `temporal`, "
    "`idle-causes` equal those of the trace without the event; `health` `dropped_events` 1",
)
@pytest.mark.parametrize(("field", "who", "variant"), CASES, ids=[f"{f}-{w}-{v}" for f, w, v in CASES])
def test_one_bad_time_is_dropped_and_the_rest_analysed_alike(tmp_path, references, field, who, variant):
    p = bad_time_trace(tmp_path / "t.json", field, who, variant)
    got, run, caught = _analyse(p)
    # only ranksight's own warnings: no RuntimeWarning from numpy, no analysis failure
    foreign = [f"{w.category.__name__}: {w.message}" for w in caught if not issubclass(w.category, RanksightWarning)]
    assert foreign == []
    dropped = [str(w.message) for w in caught if "dropped" in str(w.message)]
    victim = EVENTS[VICTIM[who]]
    assert len(dropped) == 1 and dropped[0].startswith(
        f"rank 0: 1 event dropped: ts or dur missing, not a number or out of range (event {VICTIM[who]} "
        f"'{victim['name']}' ({victim['cat']}): {field} "
    ), dropped
    t = run[0]
    assert (t.stats["dropped_events"], t.stats[f"dropped_{field}"]) == (1, 1)
    assert VICTIM[who] not in t.events["row"].to_list()
    for name in ANALYSES:
        want = references[who][name]
        assert got[name].keys() == want.keys(), name
        for table, df in want.items():
            if name == "diagnose" and table == "evidence":
                continue  # names the trace file
            assert got[name][table].equals(df), (name, table)
    # health shows the count
    checks = run_analysis("health", run).tables["checks"]
    row = checks.filter(pl.col("check") == "dropped_events").row(0, named=True)
    assert (row["status"], row["count"]) == ("warning", 1)


def _rank_files(d: Path, who: str, *, reference: bool = False) -> list[Path]:
    """The 16 cases of one event kind as 16 rank files (or 16 copies of the reference)."""
    d.mkdir()
    cases = [(f, v) for f in ("ts", "dur") for v in VARIANTS]
    return [
        reference_trace(d / f"rank{i}.json", who) if reference else bad_time_trace(d / f"rank{i}.json", f, who, v)
        for i, (f, v) in enumerate(cases)
    ]


def _cli_in_process(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rc = main(list(args))
    return rc, out.getvalue()


@case(
    "bad-times",
    "the same 32 cases through the CLI: `summary` and `diagnose --format json` in child processes, 16 ranks per "
    "event kind",
    "salvage with warning",
    "exit 0, one warning line per rank and nothing else on stderr; the JSON equals the same command's on copies "
    "of the trace without the event",
)
@pytest.mark.parametrize("who", list(VICTIM))
def test_the_cli_analyses_every_bad_time_like_its_reference(tmp_path, who):
    """One child process per command holds the 16 cases of one event kind as 16 ranks; its JSON
    output equals the in-process output of the same command on 16 copies of the reference."""
    n = len(_rank_files(tmp_path / "bad", who))
    _rank_files(tmp_path / "ref", who, reference=True)
    for cmd in ("summary", "diagnose"):
        c = run_child(cmd, "--no-cache", "--format", "json", tmp_path / "bad")
        assert c.rc == 0, c.err
        # one line per dropped event, nothing but ranksight's warnings on stderr
        assert all(ln.startswith("ranksight: warning: rank ") for ln in c.err_lines), c.err
        drops = [ln for ln in c.err_lines if "1 event dropped" in ln]
        assert sorted(int(re.search(r"rank (\d+)", ln).group(1)) for ln in drops) == list(range(n))
        rc, ref_out = _cli_in_process(cmd, "--no-cache", "--format", "json", str(tmp_path / "ref"))
        assert rc == 0
        got = json.loads(c.out.replace(str(tmp_path / "bad"), "DIR"))
        assert got == json.loads(ref_out.replace(str(tmp_path / "ref"), "DIR")), cmd


def test_docs_table():
    check_table(sys.modules[__name__], "bad-times")
