"""The Rust core's errors: each decoder error kind is its own exception class, mapped to the right
:class:`RanksightError` subclass; a panic becomes one clear internal error (CLI exit 3, one line);
the type stub lists exactly what the extension exports."""

from __future__ import annotations

import ast
import gzip
import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from ranksight import _core
from ranksight.cli import main
from ranksight.errors import (
    EXIT_INTERNAL,
    InputTooLargeError,
    RanksightError,
    TraceChangedError,
    TraceFormatError,
    TraceNotFoundError,
    UsageError,
)
from ranksight.io import kineto
from ranksight.io.kineto import decode, extract_events, read_header

#: The error each decoder error kind must become (the oracle for kineto.ERRORS).
EXPECTED = {
    "io": TraceNotFoundError,
    "changed": TraceChangedError,
    "request": UsageError,
    "empty": TraceFormatError,
    "too_large": InputTooLargeError,
    "gzip": TraceFormatError,
    "format": TraceFormatError,
    "truncated": TraceFormatError,
}

EVENTS = [
    {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1},
    {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 3, "dur": 1},
]


# --- the kinds and their mapping -----------------------------------------------------------


def test_every_kind_is_a_distinct_class_with_a_stable_name():
    kinds = _core.error_kinds()
    assert [k for k, _ in kinds] == list(EXPECTED)
    classes = [cls for _, cls in kinds]
    assert len(set(classes)) == len(classes)
    for kind, cls in kinds:
        assert issubclass(cls, _core.DecodeError) and cls is not _core.DecodeError
        assert cls.kind == kind
        assert cls.__module__ == "ranksight._core" and getattr(_core, cls.__name__) is cls
        # errors cross process boundaries (process pool, Dask): they pickle
        err = cls(kind, "message", 3, None)
        assert type(pickle.loads(pickle.dumps(err))) is cls


@pytest.mark.parametrize("kind", list(EXPECTED))
def test_each_kind_maps_to_its_ranksight_error(kind):
    cls = dict(_core.error_kinds())[kind]
    assert kineto.ERRORS[cls] is EXPECTED[kind]
    with pytest.raises(RanksightError) as info:
        kineto._raise("t.json", cls(kind, "what went wrong", 12, 3))
    assert type(info.value) is EXPECTED[kind]
    assert info.value.path == "t.json"
    assert info.value.exit_code == 2


# --- each kind from a real input -------------------------------------------------------------


def test_unreadable_paths_are_not_found(tmp_path):
    with pytest.raises(TraceNotFoundError, match="is a directory"):
        decode(tmp_path)
    with pytest.raises(TraceNotFoundError, match="cannot open"):
        read_header(tmp_path / "missing.json")


def test_empty_too_large_and_format_errors(tmp_path, make_trace):
    empty = tmp_path / "empty.json"
    empty.write_bytes(b"")
    with pytest.raises(TraceFormatError, match="the file is empty"):
        decode(empty)
    big = make_trace(EVENTS)
    with pytest.raises(InputTooLargeError, match="exceeds the cap of 10 bytes; raise it with --max-size"):
        decode(big, max_bytes=10)
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [{"ph": "X"}, {"ph": "X",,}]}')
    with pytest.raises(TraceFormatError, match="invalid event") as info:
        decode(bad)
    assert info.value.event_index == 1 and info.value.offset == 30


def test_truncated_and_corrupt_gzip_are_format_errors(tmp_path):
    cut = tmp_path / "cut.json"
    cut.write_text('{"traceEvents": [{"ph": "X", "name": "a"}, {"ph": "X"')
    with pytest.raises(TraceFormatError, match="truncated JSON"):
        decode(cut, strict=True)
    data = bytearray(gzip.compress(json.dumps({"traceEvents": EVENTS}).encode()))
    data[-8] ^= 0xFF  # the CRC
    corrupt = tmp_path / "corrupt.json.gz"
    corrupt.write_bytes(bytes(data))
    with pytest.raises(TraceFormatError, match="corrupt gzip data") as info:
        decode(corrupt)
    assert info.value.offset is not None


def test_a_file_changed_since_loading_is_not_reported_as_missing(make_trace):
    path = make_trace(EVENTS)
    d = decode(path)
    offsets, lengths = d.spans["offset"].to_list(), d.spans["length"].to_list()
    assert [e["name"] for e in extract_events(str(path), offsets, lengths)] == ["a", "b"]
    # overlapping spans: a wrong request, not a missing file
    with pytest.raises(UsageError, match="overlapping event spans"):
        extract_events(str(path), [offsets[0], offsets[0] + 1], [lengths[0], 1])
    path.write_bytes(path.read_bytes()[: offsets[1] + 2])
    with pytest.raises(TraceChangedError, match="changed since it was loaded") as info:
        extract_events(str(path), offsets, lengths)
    assert not isinstance(info.value, TraceNotFoundError)
    assert info.value.offset == offsets[1]
    path.unlink()
    with pytest.raises(TraceNotFoundError):
        extract_events(str(path), offsets, lengths)


# --- panics ----------------------------------------------------------------------------------


def test_a_panic_is_an_internal_error_not_a_base_exception():
    with pytest.raises(_core.InternalError, match=r"the Rust core panicked: boom at src/lib\.rs:\d+"):
        _core._panic_for_tests("boom")
    assert issubclass(_core.InternalError, Exception)
    assert not issubclass(_core.InternalError, RanksightError)


def _panicking_decoder(guarded: bool):
    def decode_file(*args, **kwargs):
        _core._panic_for_tests("index out of bounds", guarded=guarded)

    return decode_file


@pytest.mark.parametrize("guarded", [True, False], ids=["guarded", "pyo3-PanicException"])
def test_cli_reports_a_panic_in_one_line_with_exit_3(make_trace, monkeypatch, capfd, guarded):
    path = make_trace(EVENTS)
    monkeypatch.setattr(_core, "decode_file", _panicking_decoder(guarded))
    rc = main(["info", "--no-cache", str(path)])
    out, err = capfd.readouterr()
    assert rc == EXIT_INTERNAL == 3
    lines = err.strip().splitlines()
    # fd 2 is captured: Rust's own panic report is not printed either
    assert len(lines) == 1, err
    assert lines[0].startswith("ranksight: internal error: ")
    assert "the Rust core panicked" in lines[0] and "index out of bounds" in lines[0]
    assert lines[0].endswith("(run with -v for details)")
    # -v: the traceback too
    rc = main(["-v", "info", "--no-cache", str(path)])
    _, err = capfd.readouterr()
    assert rc == 3 and "Traceback" in err and len(err.strip().splitlines()) > 1


def test_a_panic_in_a_subprocess_prints_one_line(make_trace, tmp_path):
    """The real command line, with the panic hook installed at import: one line on stderr."""
    path = make_trace(EVENTS)
    code = (
        "import sys; from ranksight import _core; from ranksight.cli import main\n"
        "def boom(*a, **k): _core._panic_for_tests('boom')\n"
        "_core.decode_file = boom\n"
        f"sys.exit(main(['info', '--no-cache', {str(path)!r}]))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 3, r.stderr
    assert r.stderr.count("\n") == 1 and "the Rust core panicked: boom" in r.stderr, r.stderr


# --- the type stub -----------------------------------------------------------------------------


def _public(names):
    return {
        n
        for n in names
        if not n.startswith("_") or n in ("__version__", "_panic_for_tests", "__arrow_c_array__", "__len__")
    }


def test_the_stub_lists_what_the_extension_exports():
    stub = ast.parse(Path(_core.__file__).with_name("_core.pyi").read_text())
    in_stub: dict[str, ast.AST] = {}
    for node in stub.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            in_stub[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            in_stub[node.target.id] = node
    assert _public(in_stub) == _public(dir(_core))
    for name in ("Decoded", "ArrowTable"):
        node = in_stub[name]
        assert isinstance(node, ast.ClassDef)
        methods = {f.name for f in node.body if isinstance(f, ast.FunctionDef)}
        assert _public(methods) == _public(dir(getattr(_core, name))) - _public(dir(object)), name
