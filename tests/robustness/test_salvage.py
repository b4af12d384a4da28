"""Salvage of truncated traces (issue 8): a real 15 MB trace cut at 20 random offsets.

The expected counts are computed independently of the decoder: Python's JSON decoder walks the
``traceEvents`` array element by element (``raw_decode``), giving each event's start and end
offset and its exact ``ts`` (``Decimal``). An event is complete when its closing brace lies
before the cut. For cuts of the *compressed* stream, the prefix that can be decompressed is
computed with Python's zlib.
"""

from __future__ import annotations

import gzip
import json
import random
import re
import zlib
from decimal import Decimal
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
from _helpers import cli

from ranksight.errors import TraceFormatError
from ranksight.io.kineto import decode

TRACE = (
    Path(__file__).resolve().parents[1] / "data/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
)
SEED = 8
CUTS = 20
WS = " \t\r\n"


@lru_cache(maxsize=1)
def reference() -> tuple[bytes, np.ndarray, np.ndarray, np.ndarray]:
    """The decompressed text, and per event: start offset, end offset, ts in ns (exact)."""
    text = gzip.decompress(TRACE.read_bytes())
    s = text.decode()
    assert s.isascii()  # byte offsets == character offsets
    dec = json.JSONDecoder(parse_float=Decimal)
    m = re.search(r'"traceEvents"\s*:\s*\[', s)
    assert m is not None
    i = m.end()
    starts, ends, ts = [], [], []
    while True:
        while s[i] in WS or s[i] == ",":
            i += 1
        if s[i] == "]":
            break
        obj, j = dec.raw_decode(s, i)
        starts.append(i)
        ends.append(j)
        t = obj.get("ts")
        ts.append(int(Decimal(t) * 1000) if t is not None else np.iinfo(np.int64).min)
        i = j
    return text, np.array(starts), np.array(ends), np.array(ts, dtype=np.int64)


@lru_cache(maxsize=1)
def compressed() -> bytes:
    return gzip.compress(reference()[0], compresslevel=6)


def expected(cut: int) -> tuple[int, int, int | None]:
    """(complete events, bytes lost after the last one, latest ts among them) for a cut."""
    _, starts, ends, ts = reference()
    n = int(np.searchsorted(ends, cut, side="right"))
    # the decoder resumes at the first event that is not complete (or after the separators)
    lost = cut - int(starts[n]) if n < len(starts) and starts[n] < cut else 0
    valid = ts[:n][ts[:n] != np.iinfo(np.int64).min]
    return n, lost, (int(valid.max()) if valid.size else None)


def offsets() -> list[int]:
    text, starts, ends, _ = reference()
    rng = random.Random(SEED)
    return sorted(rng.randrange(int(starts[0]), int(ends[-1])) for _ in range(CUTS))


def test_reference_is_sound():
    text, starts, ends, _ = reference()
    assert len(text) > 15_000_000 and len(starts) > 45_000
    d = decode(TRACE)
    assert d.stats["events"] == len(starts) and d.warnings == []


@pytest.mark.parametrize("cut", offsets())
def test_plain_cut_keeps_every_complete_event(tmp_path, cut):
    text, *_ = reference()
    n, lost, last_ts = expected(cut)
    p = tmp_path / "cut.json"
    p.write_bytes(text[:cut])
    d = decode(p)
    assert d.stats["events"] == n
    assert d.warnings[0] == (
        f"a truncated file: kept {n} complete events, lost {lost} bytes after the last one"
        f" (last complete event at ts {last_ts} ns)"
    )
    with pytest.raises(TraceFormatError, match="truncated JSON: the document ends early") as ei:
        decode(p, strict=True)
    assert ei.value.event_index == n


@pytest.mark.parametrize("cut", offsets())
def test_gzip_of_a_cut_file_keeps_every_complete_event(tmp_path, cut):
    text, *_ = reference()
    n, lost, _ = expected(cut)
    p = tmp_path / "cut.json.gz"
    p.write_bytes(gzip.compress(text[:cut], compresslevel=1))
    d = decode(p)
    assert d.stats["events"] == n
    assert f"kept {n} complete events, lost {lost} bytes" in d.warnings[0]


@pytest.mark.parametrize("frac", [i / CUTS for i in range(1, CUTS + 1)][:-1] + [0.999])
def test_cut_gzip_stream_keeps_every_complete_event(tmp_path, frac):
    """Cut the compressed bytes themselves (a profiler killed while writing the .gz)."""
    data = compressed()
    cut_c = int(len(data) * frac)
    p = tmp_path / "cut.json.gz"
    p.write_bytes(data[:cut_c])
    prefix = zlib.decompressobj(wbits=31).decompress(data[:cut_c])
    n, lost, last_ts = expected(len(prefix))
    d = decode(p)
    assert d.stats["events"] == n
    assert d.warnings[0] == (
        f"a truncated gzip stream: kept {n} complete events, lost {lost} bytes after the last one"
        f" (last complete event at ts {last_ts} ns)"
    )
    with pytest.raises(TraceFormatError, match="gzip stream ends early"):
        decode(p, strict=True)


def test_cli_salvages_and_strict_refuses(tmp_path):
    text, *_ = reference()
    cut = offsets()[10]
    n, lost, _ = expected(cut)
    p = tmp_path / "rank-0.json"
    p.write_bytes(text[:cut])
    r = cli("info", p, "--format", "json")
    assert r.rc == 0
    assert json.loads(r.out)["tables"]["files"][0]["events"] == n
    assert f"rank 0: a truncated file: kept {n} complete events, lost {lost} bytes" in r.err
    # the file is over 1 MiB, so the salvaged decode above went to the decoded-trace cache: the
    # cache must not let --strict or --max-size through
    r = cli("info", p, "--strict")
    assert r.rc == 2 and r.out == "" and len(r.err.splitlines()) == 1
    assert r.err.startswith(f"ranksight: error: {p}, byte ") and f"event {n}: truncated JSON" in r.err
    r = cli("info", p, "--max-size", "1MB")
    assert r.rc == 2 and "decompressed size exceeds the cap of 1048576 bytes" in r.err
