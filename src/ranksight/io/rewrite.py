"""Write a copy of a trace with some events' args patched and extra events appended.

The input text is never re-serialised: the copy is the original (decompressed) text with the
patched events replaced in place (by their byte spans from the decoder) and the extra events
inserted after the last element of ``traceEvents``, so every other byte, number and key order is
kept. Output is gzip when the name ends in ``.gz``. Writes are atomic (a temporary file in the
target folder, then a rename), never touch an input, and refuse an existing file unless ``force``.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ranksight.errors import TraceFormatError
from ranksight.io.output import atomic_path, check_output

__all__ = ["read_text", "rewrite_trace"]

_EVENTS_OPEN = re.compile(rb'"traceEvents"\s*:\s*\[')


def read_text(path: str) -> bytes:
    """The decompressed bytes of a trace file (gzip detected from the magic bytes)."""
    with open(path, "rb") as f:
        head = f.read(2)
        f.seek(0)
        data = f.read()
    return gzip.decompress(data) if head == b"\x1f\x8b" else data


def _atomic_write(dst: str, chunks: Sequence[bytes]) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(dst)) or ".", exist_ok=True)
    with atomic_path(dst) as tmp, open(tmp, "wb") as raw:
        if dst.endswith(".gz"):
            with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) as gz:
                for c in chunks:
                    gz.write(c)
        else:
            for c in chunks:
                raw.write(c)


def rewrite_trace(
    src: str,
    dst: str,
    *,
    offsets: Sequence[int],
    lengths: Sequence[int],
    patches: Mapping[int, Mapping[str, Any]] | None = None,
    extra_events: Sequence[str] = (),
    inputs: Iterable[str] = (),
    force: bool = False,
) -> int:
    """Copy ``src`` to ``dst`` with patched args and extra events; returns the bytes written.

    ``offsets``/``lengths`` are the byte spans of every event (by row, ``trace.spans``);
    ``patches`` maps a row to args merged into that event's ``args``; ``extra_events`` are JSON
    texts of complete events appended to ``traceEvents``.
    """
    check_output(dst, inputs=[src, *inputs], force=force)
    data = read_text(src)
    chunks: list[bytes] = []
    pos = 0
    for row in sorted(patches or {}, key=lambda r: offsets[r]):
        off, ln = int(offsets[row]), int(lengths[row])
        ev = json.loads(data[off : off + ln])
        args = ev.get("args")
        ev["args"] = {**(args if isinstance(args, dict) else {}), **patches[row]}  # type: ignore[index]
        chunks += [data[pos:off], json.dumps(ev, separators=(",", ":")).encode()]
        pos = off + ln
    if extra_events:
        if len(offsets):
            insert_at, sep = max(int(o) + int(n) for o, n in zip(offsets, lengths, strict=True)), b",\n"
        else:
            m = _EVENTS_OPEN.search(data)
            if m is None:
                raise TraceFormatError(f"{src}: no traceEvents array to add events to")
            insert_at, sep = m.end(), b"\n"
        if insert_at < pos:
            raise TraceFormatError(f"{src}: event spans out of order")
        extra = (
            sep
            + ",\n".join(extra_events).encode()
            + (b"" if len(offsets) else b",\n" if _has_more(data, insert_at) else b"")
        )
        chunks += [data[pos:insert_at], extra]
        pos = insert_at
    chunks.append(data[pos:])
    _atomic_write(dst, chunks)
    return sum(len(c) for c in chunks)


def _has_more(data: bytes, at: int) -> bool:
    """Whether a non-empty element follows ``at`` inside the array (for an array without spans)."""
    rest = data[at:].lstrip()
    return not rest.startswith(b"]")
