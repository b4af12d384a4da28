"""Build large single-rank (and multi-rank) Kineto traces by replicating a real trace.

Each copy of the source's events is shifted in time by the source's span (plus a gap) and gets
fresh correlation / External id / flow ids, so links stay one-to-one. ProfilerStep numbers are
renumbered so every copy adds new steps. Output is plain JSON (what the load benchmarks read).

    python benchmarks/make_trace.py SOURCE OUT.json --size 1GB [--rank 3 --world-size 8]
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
from pathlib import Path
from typing import Any

ID_ARGS = ("correlation", "External id", "external id")


def _load(src: str) -> dict[str, Any]:
    raw = Path(src).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    doc = json.loads(raw)
    if isinstance(doc, list):
        doc = {"traceEvents": doc}
    return doc


def _parse_size(s: str) -> int:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMG]?)B?", s.strip().upper())
    if not m:
        raise SystemExit(f"bad size {s!r}")
    return int(float(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2)])


def build(
    src: str, out: str, size: int, rank: int | None = None, world_size: int | None = None, exact: bool = False
) -> int:
    """Write copies of SOURCE's events until OUT holds SIZE bytes. With ``exact`` the last copy is
    cut where SIZE is reached (in the source's event order), so a set of small ranks can be smaller
    than one copy of its source; the cut leaves some flows and nestings open, as a profiler window
    does."""
    doc = _load(src)
    events = [e for e in doc["traceEvents"] if isinstance(e, dict)]
    timed = [e for e in events if isinstance(e.get("ts"), (int, float)) and e.get("ph") != "M"]
    t0 = min(e["ts"] for e in timed)
    t1 = max(e["ts"] + (e.get("dur") or 0) for e in timed)
    period = (t1 - t0) + 1000.0
    max_id = 0
    for e in events:
        a = e.get("args") or {}
        for k in ID_ARGS:
            if isinstance(a.get(k), int):
                max_id = max(max_id, a[k])
        if isinstance(e.get("id"), int):
            max_id = max(max_id, e["id"])
    stride = max_id + 1
    meta = {k: v for k, v in doc.items() if k != "traceEvents"}
    if rank is not None:
        info = dict(meta.get("distributedInfo") or {})
        info["rank"] = rank
        if world_size is not None:
            info["world_size"] = world_size
        meta["distributedInfo"] = info
    head = json.dumps(meta)[:-1] + (", " if meta else "") + '"traceEvents": [\n'
    body_events = [e for e in events if e.get("ph") != "M"]
    meta_events = [e for e in events if e.get("ph") == "M"]
    written = 0
    copies = 0
    step_re = re.compile(r"^(ProfilerStep#)(\d+)$")
    n_steps = (
        sum(1 for e in body_events if step_re.match(str(e.get("name", ""))) and e.get("cat") != "gpu_user_annotation")
        or 1
    )
    with open(out, "w") as f:
        f.write(head)
        first = True
        for e in meta_events:
            f.write(("" if first else ",\n") + json.dumps(e))
            first = False
        written = f.tell()
        while written < size:
            shift = copies * period
            idshift = copies * stride
            parts = []
            for e in body_events:
                c = dict(e)
                if "ts" in c and isinstance(c["ts"], (int, float)):
                    c["ts"] = round(c["ts"] + shift, 3)
                if isinstance(c.get("id"), int):
                    c["id"] = c["id"] + idshift
                m = step_re.match(str(c.get("name", "")))
                if m:
                    c["name"] = f"ProfilerStep#{int(m.group(2)) + copies * n_steps}"
                a = c.get("args")
                if a:
                    a = dict(a)
                    for k in ID_ARGS:
                        if isinstance(a.get(k), int) and a[k] >= 0:
                            a[k] = a[k] + idshift
                    c["args"] = a
                parts.append(json.dumps(c))
                if exact and written + sum(len(x) + 2 for x in parts) >= size:
                    break
            chunk = ("" if first else ",\n") + ",\n".join(parts)
            first = False
            f.write(chunk)
            written += len(chunk)
            copies += 1
        f.write("\n]}\n")
    return copies


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("source")
    ap.add_argument("out")
    ap.add_argument("--size", default="100MB")
    ap.add_argument("--rank", type=int, default=None)
    ap.add_argument("--world-size", type=int, default=None)
    a = ap.parse_args()
    n = build(a.source, a.out, _parse_size(a.size), a.rank, a.world_size)
    print(f"wrote {a.out}: {Path(a.out).stat().st_size / 1e6:.1f} MB, {n} copies")


if __name__ == "__main__":
    main()
