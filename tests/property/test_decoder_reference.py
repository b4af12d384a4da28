"""Random valid traces decode to the same columns as a reference decoder written in plain Python.

The reference uses ``json.loads`` with ``Decimal`` for numbers (exact), so any difference in
time parsing, string unescaping, id handling or arg typing shows up as a mismatch.
"""

from __future__ import annotations

import json
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ranksight.io.kineto import decode

NAMES = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
PHASES = st.sampled_from(["X", "i", "s", "f", "M", "C", "B", "E"])
CATS = st.sampled_from(["cpu_op", "kernel", "cuda_runtime", "user_annotation", "gpu_memcpy", "ac2g", "", "Kernel"])
# µs with up to 3 decimals, up to epoch scale, as decimal text
US = st.builds(
    lambda i, f, nd: Decimal(i) + (Decimal(f) / (10**nd) if nd else 0),
    st.integers(0, 2 * 10**15),
    st.integers(0, 999),
    st.integers(0, 3),
).map(lambda d: d if d.as_tuple().exponent >= -3 else d.quantize(Decimal("0.001")))
IDS = st.one_of(st.integers(-1, 2**31 - 1), st.sampled_from(["Spans", "Traces", ""]))


@st.composite
def events(draw):
    ev = {"ph": draw(PHASES), "cat": draw(CATS), "name": draw(NAMES), "pid": draw(IDS), "tid": draw(IDS)}
    if draw(st.booleans()):
        ev["ts"] = draw(US)
    if ev["ph"] == "X" and draw(st.booleans()):
        ev["dur"] = draw(US.filter(lambda d: d < 10**9))
    args = {}
    if draw(st.booleans()):
        args["correlation"] = draw(st.integers(0, 2**40))
    if draw(st.booleans()):
        args["External id"] = draw(st.integers(0, 2**40))
    if draw(st.booleans()):
        args["stream"] = draw(st.one_of(st.integers(0, 2**32), st.sampled_from(["0x0", "0x1f"])))
    if draw(st.booleans()):
        args["grid"] = draw(st.lists(st.integers(1, 65535), min_size=3, max_size=3))
    if draw(st.booleans()):
        args["blocks per SM"] = draw(st.floats(0, 1e6, allow_nan=False, width=32))
    if draw(st.booleans()):
        args["Input Dims"] = draw(st.lists(st.lists(st.integers(0, 4096), max_size=3), max_size=3))
    if draw(st.booleans()):
        args["unknown key"] = draw(st.one_of(NAMES, st.integers(), st.lists(st.integers(), max_size=3)))
    if args or draw(st.booleans()):
        ev["args"] = args
    return ev


def _ns(d: Decimal | None) -> int | None:
    if d is None:
        return None
    return int((d * 1000).quantize(Decimal(1), rounding=ROUND_HALF_EVEN))


def _to_text(ev: dict) -> str:
    def default(o):
        raise TypeError

    # Decimal → raw number text
    parts = []
    for k, v in ev.items():
        if isinstance(v, Decimal):
            parts.append(f"{json.dumps(k)}: {v}")
        else:
            parts.append(f"{json.dumps(k)}: {json.dumps(v, default=default)}")
    return "{" + ", ".join(parts) + "}"


def reference(path: Path) -> dict[str, list]:
    doc = json.loads(path.read_text(), parse_float=Decimal, parse_int=Decimal)
    names: dict[str, int] = {}
    synth = -(1 << 30)

    def ident(v):
        if isinstance(v, Decimal) and -(1 << 29) <= v <= 2**31 - 1 and v == v.to_integral_value():
            return int(v)
        s = str(v)
        if s not in names:
            names[s] = synth - len(names)
        return names[s]

    out: dict[str, list] = {
        k: [] for k in ("ph", "cat", "name", "pid", "tid", "ts_ns", "dur_ns", "correlation", "external_id", "stream")
    }
    for ev in doc["traceEvents"]:
        a = ev.get("args") or {}
        out["ph"].append(ev["ph"])
        out["cat"].append(ev["cat"])
        out["name"].append(ev["name"])
        out["pid"].append(ident(ev["pid"]))
        out["tid"].append(ident(ev["tid"]))
        out["ts_ns"].append(_ns(ev.get("ts")))
        out["dur_ns"].append(_ns(ev.get("dur")))
        out["correlation"].append(int(a["correlation"]) if "correlation" in a else None)
        out["external_id"].append(int(a["External id"]) if "External id" in a else None)
        s = a.get("stream")
        out["stream"].append(int(s, 16) if isinstance(s, str) else (int(s) if s is not None else None))
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(evs=st.lists(events(), min_size=1, max_size=25), compact=st.booleans())
def test_decoder_matches_reference(tmp_path, evs, compact):
    sep = "," if compact else ",\n  "
    text = '{"schemaVersion": 1, "traceEvents": [' + sep.join(_to_text(e) for e in evs) + "]}"
    p = tmp_path / "t.json"
    p.write_text(text, encoding="utf-8")
    d = decode(p)
    ref = reference(p)
    # flow events (ph s/t/f) are rows of the flow table, every other event a row of events; an
    # event without ts (all but metadata) or without dur (ph X) is dropped (issue 24)
    is_flow = [p in ("s", "t", "f") for p in ref["ph"]]
    usable = [
        (ph == "M" or ts is not None) and (ph != "X" or dur is not None)
        for ph, ts, dur in zip(ref["ph"], ref["ts_ns"], ref["dur_ns"], strict=True)
    ]
    assert d.stats["events"] == len(ref["ph"])
    assert d.stats["dropped_events"] == usable.count(False)
    for ev, sel in (
        (d.events, [not f and u for f, u in zip(is_flow, usable, strict=True)]),
        (
            d.tables["flow"].filter(pl.col("ph").is_in(["s", "t", "f"])),
            [f and u for f, u in zip(is_flow, usable, strict=True)],
        ),
    ):
        _same_events(
            d,
            p,
            ev,
            {c: [v for v, s in zip(vals, sel) if s] for c, vals in ref.items()},
            [i for i, s in enumerate(sel) if s],
        )
    # typed side columns
    k = d.tables["kernel"]
    for row, e in enumerate(evs):
        if not usable[row]:
            continue
        g = (e.get("args") or {}).get("grid")
        if g is not None:
            r = k.filter(pl.col("row") == row)
            assert (r["grid_x"][0], r["grid_y"][0], r["grid_z"][0]) == tuple(g)
        dims = (e.get("args") or {}).get("Input Dims")
        if dims is not None:
            op = d.tables["op"].filter(pl.col("row") == row)
            assert op["input_dims"].cast(pl.String)[0] == json.dumps(dims, separators=(",", ":"))


def _same_events(d, p, ev, ref, rows):  # noqa: ANN001
    assert ev["row"].to_list() == rows
    for col in ("ph", "cat", "name"):
        assert ev[col].cast(pl.String).to_list() == ref[col], col
    for col in ("pid", "tid"):
        got = ev[col].to_list()
        # synthetic ids are numbered per first appearance in both decoders; compare through the names
        want = ref[col]
        assert [g if g >= -(1 << 29) else d.id_names[g] for g in got] == [
            w if w >= -(1 << 29) else next(k for k, v in _names(ref_path=p).items() if v == w) for w in want
        ], col
    for col in ("ts_ns", "dur_ns", "correlation", "external_id", "stream"):
        if col in ev.columns:
            assert ev[col].to_list() == ref[col], col


def _names(ref_path: Path) -> dict[str, int]:
    doc = json.loads(ref_path.read_text(), parse_float=Decimal, parse_int=Decimal)
    names: dict[str, int] = {}
    for ev in doc["traceEvents"]:
        for key in ("pid", "tid"):
            v = ev[key]
            if isinstance(v, Decimal) and -(1 << 29) <= v <= 2**31 - 1 and v == v.to_integral_value():
                continue
            s = str(v)
            if s not in names:
                names[s] = -(1 << 30) - len(names)
    return names
