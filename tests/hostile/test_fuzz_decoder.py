"""Hypothesis fuzz of the decoder (issue 24, item 6): random mutations of small real traces.

Each example takes a real trace from tests/data and applies up to three mutations: a cut at any
byte, byte flips, a number replaced by an edge value (NaN, ±Infinity, 1e308, -5e20, 23 digits,
i64 limits, text, ...), a string made long (up to 150 KB, past the reader's filter threshold),
then stores it as plain JSON, gzip, or a gzip cut short. With small caps (a 256-byte string cap,
a 100 KB event cap) so that the cut strings and the event cap are reached:

- ``ranksight.load`` gives a run or raises a :class:`~ranksight.errors.RanksightError` subclass,
  never another exception (a Rust panic arrives as ``_core.InternalError``, a failure here);
- the decoder gives the same result, or the same error, whether it reads the input in 4 KiB
  chunks or in one: same stats, cut strings, dropped events and columns (the string filter and
  the item cap do not depend on where the chunks end).

Bounded and deterministic in the suite (``RANKSIGHT_FUZZ_EXAMPLES`` overrides the count and
draws at random).
"""

from __future__ import annotations

import gzip
import os
import re
import warnings
from functools import cache
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ranksight
from ranksight import _core
from ranksight.errors import RanksightError
from ranksight.io import kineto

DATA = Path(__file__).resolve().parents[1] / "data"
SOURCES = ("hta/triton_example/triton_example.json.gz", "tracelens/torch_compile_triton/trace.json.gz")
EXAMPLES = int(os.environ.get("RANKSIGHT_FUZZ_EXAMPLES", "0")) or None
STRING_CAP = 256
EVENT_CAP = 100_000

EDGE = [
    "NaN",
    "Infinity",
    "-Infinity",
    "1e308",
    "-1e308",
    "-5e20",
    "12345678901234567890123",
    "9223372036854775807",
    "-9223372036854775808",
    "9.3e15",
    "4611686018427387.904",
    "1e-400",
    "-0",
    "0.0005",
    '"soon"',
    '"12.5"',
    "null",
    "true",
    "[]",
    "{}",
    "",
    "0x1f",
]
NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')


@cache
def source(i: int) -> bytes:
    return gzip.decompress((DATA / SOURCES[i]).read_bytes())


@st.composite
def mutated(draw: st.DrawFn) -> tuple[bytes, str]:
    text = bytearray(source(draw(st.integers(0, len(SOURCES) - 1))))
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["cut", "flip", "number", "long"]))
        if kind == "cut":
            text = text[: draw(st.integers(0, len(text)))]
        elif kind == "flip" and text:
            for _ in range(draw(st.integers(1, 8))):
                i = draw(st.integers(0, len(text) - 1))
                text[i] ^= draw(st.integers(1, 255))
        elif kind == "number":
            spans = [m.span() for m in NUMBER.finditer(text)]
            if spans:
                a, b = spans[draw(st.integers(0, len(spans) - 1))]
                text[a:b] = draw(st.sampled_from(EDGE)).encode()
        elif kind == "long":
            spans = [m.span() for m in STRING.finditer(text)]
            if spans:
                a, b = spans[draw(st.integers(0, len(spans) - 1))]
                n = draw(st.sampled_from([STRING_CAP - 1, STRING_CAP + 1, 5_000, 70_000, 150_000]))
                fill = draw(st.sampled_from([b"x", b"\\u00e9", "é".encode(), b'\\"']))
                text[a:b] = b'"' + (fill * (n // len(fill) + 1))[:n] + b'"'
    how = draw(st.sampled_from(["plain", "gzip", "gzip-cut"]))
    data = bytes(text)
    if how != "plain":
        data = gzip.compress(data, compresslevel=1)
        if how == "gzip-cut":
            data = data[: draw(st.integers(0, len(data)))]
    return data, ".json.gz" if how != "plain" else ".json"


def _decode_core(path: str, chunk: int) -> tuple:  # noqa: ANN401
    """The decoder's whole result (or its error) read in chunks of ``chunk`` bytes."""
    try:
        d = _core.decode_file(
            path, chunk_bytes=chunk, max_string_bytes=STRING_CAP, max_event_bytes=EVENT_CAP, max_bytes=1 << 30
        )
    except _core.DecodeError as e:
        kind, message, _offset, index = e.args
        return ("error", kind, message, index)
    tables = {name: kineto._table(d, name).to_dicts() for name in kineto.SCHEMA}
    return ("ok", d.stats(), d.cut_strings(), d.dropped_events(), d.meta(), d.id_names(), tables)


@settings(
    max_examples=EXAMPLES or 60,
    derandomize=EXAMPLES is None,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(case=mutated())
def test_the_decoder_survives_mutations_alike_in_any_chunking(tmp_path, case):
    data, suffix = case
    p = tmp_path / f"t{suffix}"
    p.write_bytes(data)
    small = _decode_core(str(p), 1 << 12)
    whole = _decode_core(str(p), 1 << 25)
    assert small[:2] == whole[:2] if small[0] == "error" else small[0] == whole[0]
    if small[0] == "ok":
        for what, a, b in zip(("stats", "cuts", "drops", "meta", "id_names", "tables"), small[1:], whole[1:]):
            if what == "stats":
                assert {k: (v, b[k]) for k, v in a.items() if v != b[k]} == {}
            elif what == "tables":
                for name in a:
                    assert a[name] == b[name], name
            else:
                assert a == b, what
    assert small == whole
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            run = ranksight.load(p, cache=False, max_string_bytes=STRING_CAP, max_event_bytes=EVENT_CAP)
        except RanksightError:  # a decoder error, or a decoded document that is not a trace
            return
    assert whole[0] == "ok"
    assert run[0].stats["cut_strings"] == whole[1]["cut_strings"]


def test_device_properties_of_the_wrong_type_load(make_trace):
    """Found by the fuzz: a ``deviceProperties`` id that is a list made ``load`` raise TypeError."""
    ev = [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 1, "args": {"device": 0}}]
    props = [{"id": [], "name": ["A100"]}, {"id": 0, "name": "A100"}]
    run = ranksight.load(make_trace(ev, deviceProperties=props), cache=False)
    assert run[0].meta.gpu_model == "A100"
