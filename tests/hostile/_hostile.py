"""Helpers for the hostile-input battery (issue 24): generated inputs (never committed blobs) and the
CLI in a child process with its peak memory.

- :func:`gzip_one_string`: a gzip file holding one event whose string is ``n`` bytes long (2 GiB
  in ~2 MB, built in well under a second: the deflate block of 1 MiB of one byte, after a full
  flush, is the same every time, so it is made once and repeated);
- :func:`long_string_json`: the same as plain JSON;
- :func:`bad_time_trace`: a small valid trace with one kernel or one cpu_op whose ``ts`` or
  ``dur`` is replaced by a hostile value (``VARIANTS``);
- :func:`run_child`: ``ranksight ARGS`` in a child process: exit code, stdout, stderr, wall time
  and the child's own peak RSS (``os.wait4``'s ``ru_maxrss``).

The case tables of docs/robustness.md come from ``_fault_helpers.case`` / ``check_table``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The marker that ends a cut string (rust/src/limits.rs).
MARKER = "\u2026[truncated: {n} bytes]"

#: A small valid trace: a step, two launches with their kernels, two CPU ops (one of them, or one
#: of the kernels, gets the hostile value). Times in µs; the time base makes them epoch ns.
EVENTS: list[dict[str, Any]] = [
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 10, "tid": 11, "ts": 100.0, "dur": 200.0},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 10, "tid": 11, "ts": 101.5, "dur": 10.25},
    {
        "ph": "X",
        "cat": "cuda_runtime",
        "name": "cudaLaunchKernel",
        "pid": 10,
        "tid": 11,
        "ts": 102.0,
        "dur": 3.0,
        "args": {"correlation": 55},
    },
    {
        "ph": "X",
        "cat": "kernel",
        "name": "sgemm",
        "pid": 0,
        "tid": 7,
        "ts": 110.0,
        "dur": 20.0,
        "args": {"correlation": 55, "stream": 7, "device": 0},
    },
    {
        "ph": "X",
        "cat": "cuda_runtime",
        "name": "cudaLaunchKernel",
        "pid": 10,
        "tid": 11,
        "ts": 120.0,
        "dur": 3.0,
        "args": {"correlation": 56},
    },
    {
        "ph": "X",
        "cat": "kernel",
        "name": "victim_kernel",
        "pid": 0,
        "tid": 7,
        "ts": 140.0,
        "dur": 5.0,
        "args": {"correlation": 56, "stream": 7, "device": 0},
    },
    {"ph": "X", "cat": "cpu_op", "name": "victim_op", "pid": 10, "tid": 11, "ts": 150.0, "dur": 4.0},
]
#: Which event gets the hostile value.
VICTIM = {"kernel": 5, "cpu_op": 6}
BASE_TIME = 1_700_000_000_000_000_000

#: Hostile values as JSON text (None: the field is left out).
VARIANTS: dict[str, str | None] = {
    "missing": None,
    "NaN": "NaN",
    "Infinity": "Infinity",
    "-Infinity": "-Infinity",
    "1e308": "1e308",
    "-5e20": "-5e20",
    "23 digits": "12345678901234567890123",
    "string": '"soon"',
}


def _doc(events_text: list[str]) -> str:
    return '{"traceEvents": [' + ",".join(events_text) + f'], "baseTimeNanoseconds": {BASE_TIME}}}'


def bad_time_trace(path: Path, field: str, who: str, variant: str) -> Path:
    """The trace of :data:`EVENTS` with the ``field`` (``ts`` / ``dur``) of the ``who``
    (``kernel`` / ``cpu_op``) victim replaced by ``VARIANTS[variant]``."""
    texts = [json.dumps(e) for e in EVENTS]
    ev = {k: v for k, v in EVENTS[VICTIM[who]].items() if k != field}
    text = json.dumps(ev)
    value = VARIANTS[variant]
    if value is not None:
        text = text[:-1] + f', "{field}": {value}}}'
    texts[VICTIM[who]] = text
    path.write_text(_doc(texts))
    return path


def reference_trace(path: Path, who: str) -> Path:
    """The trace without the ``who`` victim: what a bad-time trace must analyse like."""
    path.write_text(_doc([json.dumps(e) for i, e in enumerate(EVENTS) if i != VICTIM[who]]))
    return path


_HEAD = b'{"traceEvents": [{"ph":"X","cat":"kernel","name":"k0","pid":0,"tid":7,"ts":1,"dur":2,"args":{"stream":7}},'
_TAIL = b'"}], "baseTimeNanoseconds": 0}'


def _victim_head(field: str) -> bytes:
    return b'{"ph":"X","cat":"kernel","pid":0,"tid":7,"ts":10,"dur":2,"args":{"stream":7},"' + field.encode() + b'":"'


def gzip_repeated(path: Path, head: bytes, block: bytes, count: int, tail: bytes) -> Path:
    """A gzip file (one member) of ``head + block * count + tail``, made without compressing
    ``count`` blocks: after a full flush the compressor starts afresh, so every block compresses
    to the same bytes, made once and repeated (2 GiB of one byte in ~2 MB, in well under a
    second)."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = c.compress(head) + c.flush(zlib.Z_FULL_FLUSH)
    one = c.compress(block) + c.flush(zlib.Z_FULL_FLUSH)
    last = c.compress(tail) + c.flush(zlib.Z_FINISH)
    crc = zlib.crc32(head)
    for _ in range(count):
        crc = zlib.crc32(block, crc)
    crc = zlib.crc32(tail, crc)
    size = (len(head) + len(block) * count + len(tail)) & 0xFFFFFFFF
    with open(path, "wb") as f:
        f.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" + first)
        for _ in range(count):
            f.write(one)
        f.write(last + crc.to_bytes(4, "little") + size.to_bytes(4, "little"))
    return path


def gzip_one_string(path: Path, n: int, *, field: str = "name", byte: bytes = b"a") -> Path:
    """A gzip file holding two kernels, the second with a ``field`` string of ``n`` bytes (a
    multiple of 1 MiB)."""
    assert n % (1 << 20) == 0
    return gzip_repeated(path, _HEAD + _victim_head(field), byte * (1 << 20), n >> 20, _TAIL)


def gzip_big_event(path: Path, mib: int) -> Path:
    """Two kernels, the second with an args array of ``mib`` MiB of zeros (no long string: only
    the per-event cap stops it)."""
    head = _HEAD + b'{"ph":"X","cat":"kernel","pid":0,"tid":7,"ts":10,"dur":2,"name":"k1","args":{"big":['
    return gzip_repeated(path, head, b"0," * (1 << 19), mib, b'0]}}], "baseTimeNanoseconds": 0}')


def long_string_json(path: Path, n: int, *, field: str = "name", byte: bytes = b"b") -> Path:
    """The same two kernels as plain JSON, the second with a ``field`` string of ``n`` bytes."""
    with open(path, "wb") as f:
        f.write(_HEAD + _victim_head(field))
        mib = byte * (1 << 20)
        for _ in range(n >> 20):
            f.write(mib)
        f.write(byte * (n & ((1 << 20) - 1)))
        f.write(_TAIL)
    return path


@dataclass
class Child:
    rc: int
    out: str
    err: str
    seconds: float
    peak_rss_mb: float

    @property
    def err_lines(self) -> list[str]:
        return [ln for ln in self.err.splitlines() if ln.strip()]


#: Runs ``ranksight`` as ``python -m ranksight`` would and, at exit, writes the process's own peak
#: RSS (``VmHWM`` of /proc/self/status, kB) to the file named by its first argument. ``ru_maxrss``
#: alone is not the child's own: Linux carries the high-water mark of the forked copy of the parent
#: across ``exec``, so late in a long test session every child "peaked" at the pytest process' size.
_LAUNCHER = """
import atexit, runpy, sys
out = sys.argv[1]
def _hwm():
    try:
        with open("/proc/self/status") as f:
            kb = next(ln.split()[1] for ln in f if ln.startswith("VmHWM:"))
        with open(out, "w") as f:
            f.write(kb)
    except (OSError, StopIteration):
        pass
atexit.register(_hwm)
sys.argv = ["ranksight", *sys.argv[2:]]
runpy.run_module("ranksight", run_name="__main__", alter_sys=True)
"""


def run_child(*args: str | os.PathLike[str], env: dict[str, str] | None = None, timeout: float = 120) -> Child:
    """``ranksight ARGS`` in a child process, with its own peak RSS: ``VmHWM`` written by the child at
    exit (see :data:`_LAUNCHER`); ``os.wait4``'s ``ru_maxrss`` when the child could not write it."""
    hwm = tempfile.NamedTemporaryFile(delete=False)
    hwm.close()
    cmd = [sys.executable, "-c", _LAUNCHER, hwm.name, *map(os.fspath, args)]
    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=fo, stderr=fe, env={**os.environ, **(env or {})})
        while True:
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid == p.pid:
                break
            if time.perf_counter() - t0 > timeout:
                p.kill()
                os.wait4(p.pid, 0)
                p.returncode = -9
                raise TimeoutError(f"{cmd} ran past {timeout} s")
            time.sleep(0.01)
        seconds = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
        fo.seek(0)
        fe.seek(0)
        out, err = fo.read().decode(), fe.read().decode()
    try:
        with open(hwm.name) as f:
            text = f.read().strip()
    finally:
        os.unlink(hwm.name)
    kib = int(text) if text.isdigit() else usage.ru_maxrss  # both KiB on Linux
    return Child(p.returncode, out, err, seconds, kib / 1024)
