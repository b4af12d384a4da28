"""Helpers for the robustness tests: run the CLI in-process, build small bad inputs."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ranksight.cli import main

#: A small valid trace: one step, a launch and its kernel, a memcpy, an annotation.
EVENTS: list[dict[str, Any]] = [
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 10, "tid": 11, "ts": 100.0, "dur": 50.0},
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
        "name": "cudaMemcpyAsync",
        "pid": 10,
        "tid": 11,
        "ts": 120.0,
        "dur": 2.0,
        "args": {"correlation": 56},
    },
    {
        "ph": "X",
        "cat": "gpu_memcpy",
        "name": "Memcpy DtoH",
        "pid": 0,
        "tid": 7,
        "ts": 131.0,
        "dur": 4.0,
        "args": {"correlation": 56, "stream": 7, "device": 0},
    },
]


def doc(events: list[dict[str, Any]] | None = None, **top: Any) -> str:
    """Kineto-style JSON text (compact) with ``top`` keys before ``traceEvents``."""
    return json.dumps({**top, "traceEvents": EVENTS if events is None else events}, separators=(",", ":"))


def write(path: Path, content: str | bytes, *, gz: bool = False) -> Path:
    data = content.encode() if isinstance(content, str) else content
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


@dataclass
class Result:
    rc: int
    out: str
    err: str

    @property
    def err_lines(self) -> list[str]:
        return [ln for ln in self.err.splitlines() if ln.strip()]

    @property
    def errors(self) -> list[str]:
        return [ln for ln in self.err_lines if ln.startswith("ranksight: error:")]

    @property
    def warnings(self) -> list[str]:
        return [ln for ln in self.err_lines if ln.startswith("ranksight: warning:")]


def cli(*args: str | os.PathLike[str]) -> Result:
    """Run ``ranksight ARGS`` in this process (much faster than a subprocess) and capture it."""
    out, err = io.StringIO(), io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        warnings.simplefilter("always")
        try:
            rc = main([os.fspath(a) for a in args])
        except SystemExit as e:  # argparse usage errors
            rc = int(e.code or 0)
    return Result(rc, out.getvalue(), err.getvalue())


def assert_one_error(r: Result, path: str | os.PathLike[str], *fragments: str) -> str:
    """Exit code 2, exactly one error line that names ``path`` and contains ``fragments``, no
    traceback, nothing on stdout."""
    assert r.rc == 2, (r.rc, r.err)
    assert "Traceback" not in r.err
    assert len(r.errors) == 1, r.err
    line = r.errors[0]
    assert os.fspath(path) in line, line
    for f in fragments:
        assert f in line, (f, line)
    assert r.out == "", r.out
    return line
