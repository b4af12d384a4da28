"""Mutation fuzzing of the whole load path (issue 8): real traces with bytes flipped, cut,
duplicated, reordered, inserted, and events with fields of the wrong type.

For every mutated file, ``ranksight.load`` (discovery, the Rust decoder, derivation), the health
checks and ``info`` must either succeed or raise a :class:`~ranksight.errors.RanksightError`:
never another exception, never a hang (``faulthandler`` kills the run after 120 s), and the
process's peak memory must not grow by more than 1.5 GB over the whole run.

The suite runs a bounded number of examples (100, deterministic, ~15 s). For a longer run:

    RANKSIGHT_FUZZ_EXAMPLES=20000 python -m pytest tests/robustness/test_mutations.py -q -p no:cacheprovider
"""

from __future__ import annotations

import faulthandler
import gzip
import json
import os
import resource
import tempfile
import time
import warnings
from functools import cache
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ranksight
from ranksight.analyses.health import health
from ranksight.cli.info import info_tables
from ranksight.errors import RanksightError

DATA = Path(__file__).resolve().parents[1] / "data"
SOURCES = (
    "hta/triton_example/triton_example.json.gz",
    "hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
    "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "tracelens/torch_compile_triton/trace.json.gz",
)
EXAMPLES = int(os.environ.get("RANKSIGHT_FUZZ_EXAMPLES", "0")) or None
MAX_SECONDS_PER_EXAMPLE = 20.0
MAX_RSS_GROWTH_KB = 1_500_000

WEIRD: list[Any] = [
    None,
    "",
    "abc",
    "N/A",
    "0x1f",
    "-0x-1",
    "stream 7",
    "\u0000\u001b[31m",
    "[/]",
    -1,
    0,
    1,
    1.5,
    -2.25,
    1e308,
    -1e308,
    2**63,
    -(2**63) - 1,
    2**64,
    10**30,
    True,
    [],
    [1, [2]],
    {},
    {"a": {"b": [None]}},
]
FIELDS = ("ph", "cat", "name", "pid", "tid", "ts", "dur", "id", "bp", "args")
ARGS = ("correlation", "stream", "device", "External id", "Input Dims", "grid", "Collective name", "Bytes")


@cache
def source(i: int) -> bytes:
    return gzip.decompress((DATA / SOURCES[i]).read_bytes())


@cache
def source_doc(i: int) -> dict[str, Any]:
    return json.loads(source(i))


def apply_bytes(data: bytes, ops: list[tuple[str, int, int, int, bytes]]) -> bytes:
    b = bytearray(data)
    for kind, x, y, z, extra in ops:
        n = len(b)
        if n == 0:
            break
        a, c = x % n, y % n
        lo, hi = min(a, c), max(a, c)
        if kind == "flip":
            b[a] ^= (z % 255) + 1
        elif kind == "cut":
            del b[a:]
        elif kind == "dup":
            b[z % n : z % n] = b[lo:hi]
        elif kind == "swap":
            k = min(hi - lo, n - hi)
            b[lo : lo + k], b[hi : hi + k] = b[hi : hi + k], b[lo : lo + k]
        elif kind == "insert":
            b[a:a] = extra
        elif kind == "delete":
            del b[lo:hi]
    return bytes(b)


def apply_fields(i: int, edits: list[tuple[int, str, str, int]], reorder: int) -> bytes:
    doc = json.loads(json.dumps(source_doc(i)))
    ev = doc["traceEvents"]
    for k, field, arg, w in edits:
        e = ev[k % len(ev)]
        if not isinstance(e, dict):
            continue
        if field == "args":
            a = e.setdefault("args", {})
            if isinstance(a, dict):
                a[arg] = WEIRD[w % len(WEIRD)]
            continue
        e[field] = WEIRD[w % len(WEIRD)]
    if reorder:
        k = reorder % len(ev)
        ev[:] = ev[k:] + ev[:k] + ev[: reorder % 7]  # rotate and duplicate a few
    return json.dumps(doc).encode()


op = st.tuples(
    st.sampled_from(["flip", "cut", "dup", "swap", "insert", "delete"]),
    st.integers(0, 1 << 20),
    st.integers(0, 1 << 20),
    st.integers(0, 1 << 20),
    st.binary(max_size=24),
)
edit = st.tuples(st.integers(0, 1 << 16), st.sampled_from(FIELDS), st.sampled_from(ARGS), st.integers(0, 1 << 10))


@st.composite
def mutated(draw: st.DrawFn) -> tuple[bytes, str, str]:
    i = draw(st.integers(0, len(SOURCES) - 1))
    if draw(st.booleans()):
        data = apply_bytes(source(i), draw(st.lists(op, min_size=1, max_size=4)))
        how = "bytes"
    else:
        data = apply_fields(i, draw(st.lists(edit, min_size=1, max_size=12)), draw(st.integers(0, 50)))
        how = "fields"
    container = draw(st.sampled_from(["plain", "gzip", "gzip-cut"]))
    if container != "plain":
        data = gzip.compress(data, compresslevel=1)
        if container == "gzip-cut":
            data = data[: draw(st.integers(0, len(data)))]
    name = draw(st.sampled_from(["rank0.json", "rank0.json.gz", "trace.pt.trace.json"]))
    return data, name, f"{SOURCES[i]} {how} {container}"


_state: dict[str, Any] = {}


def _exercise(path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = ranksight.load(path, cache=False)
        health(run)
        info_tables(run)
        for t in run:
            t.steps  # noqa: B018
            if t.events.height:
                t.raw_events([t.events["row"][0], t.events["row"][-1]])


@settings(
    max_examples=EXAMPLES or 100,
    derandomize=EXAMPLES is None,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(mutated())
def _fuzz(case: tuple[bytes, str, str]) -> None:
    data, name, how = case
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / name
        p.write_bytes(data)
        t0 = time.monotonic()
        try:
            _exercise(p)
        except RanksightError as err:
            assert str(err), how
            _state["errors"] = _state.get("errors", 0) + 1
        except Exception as err:  # pragma: no cover - this is the failure we look for
            keep = Path(tempfile.gettempdir()) / f"ranksight-fuzz-failure-{os.getpid()}-{name}"
            keep.write_bytes(data)
            raise AssertionError(f"{type(err).__name__}: {err} ({how}; input kept in {keep})") from err
        dt = time.monotonic() - t0
        _state["max_s"] = max(_state.get("max_s", 0.0), dt)
        assert dt < MAX_SECONDS_PER_EXAMPLE, (dt, how)
        _state["n"] = _state.get("n", 0) + 1


def test_mutated_real_traces_load_or_raise_ranksight_error():
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    faulthandler.dump_traceback_later(120 if EXAMPLES is None else 3600 * 6, exit=True)
    try:
        _fuzz()
    finally:
        faulthandler.cancel_dump_traceback_later()
    grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0
    assert grew < MAX_RSS_GROWTH_KB, f"peak RSS grew by {grew} KB"
    # both outcomes are exercised: clean loads and clear refusals
    assert _state.get("errors", 0) > 0 and _state.get("n", 0) > _state.get("errors", 0), _state
