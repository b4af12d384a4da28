"""Output faults (issue 24, family 4): every fault of an output path (read-only, permission, full
disk, an existing file, a path that is a directory or not one) is a ``RanksightError``: exit 2 and
one line naming the path and the cause in words; a multi-file output is all or nothing.

A full disk and a read-only folder are simulated by making the writing call raise what the kernel
raises (``OSError(ENOSPC)``, ``OSError(EROFS)``, ``PermissionError``) or what polars raises around
it (``ComputeError: … No space left on device (os error 28)``): the tests run as root, for whom
``chmod`` does not make a folder read-only, and cannot mount a small file system.
"""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path

import polars as pl
import pytest
from _fault_helpers import assert_clear_error, case, check_table, cli, events, leftovers, write_trace

from ranksight.io import output as output_mod
from ranksight.report.html import render as render_mod

FAMILY = "outputs"
ENOSPC_TEXT = "parquet: File out of specification: underlying IO error: No space left on device (os error 28)"


@pytest.fixture
def traces(tmp_path: Path) -> Path:
    d = tmp_path / "in"
    d.mkdir()
    for r in (0, 1):
        write_trace(d / f"rank{r}.json", events(6, 2))
    return d


def _fail_after(n: int, exc: BaseException):  # noqa: ANN202
    """A write that succeeds ``n`` times (writing the real file), then raises ``exc``."""
    real = pl.DataFrame.write_parquet
    calls = {"n": 0}

    def write(self, file, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        calls["n"] += 1
        if calls["n"] > n:
            raise exc
        return real(self, file, *a, **k)

    return write


def _names(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir()) if d.exists() else []


# ---- export --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "exc",
    [pl.exceptions.ComputeError(ENOSPC_TEXT), OSError(errno.ENOSPC, "No space left on device")],
    ids=["polars-ComputeError", "OSError"],
)
@case(
    FAMILY,
    "`export --tables` onto a full disk: the 5th Parquet file fails (polars `ComputeError` 'os error 28', or "
    "`OSError(ENOSPC)`)",
    "clear error",
    "exit 2, 'cannot write into OUT: no space left on the device'; OUT not created and no temporary folder left; "
    "the re-run (disk freed) writes every file with no '--force'",
)
def test_export_tables_full_disk_leaves_nothing(tmp_path, traces, monkeypatch, exc):
    out = tmp_path / "out"
    monkeypatch.setattr(pl.DataFrame, "write_parquet", _fail_after(4, exc))
    r = cli("export", traces, "--to", out, "--tables", "--no-cache")
    assert_clear_error(r, f"cannot write into {out}: no space left on the device")
    assert not out.exists() and leftovers(tmp_path) == []
    monkeypatch.undo()
    r = cli("export", traces, "--to", out, "--tables", "--no-cache")
    assert r.rc == 0, r.err
    assert len(_names(out)) == 2 * 9 and leftovers(out) == []


@case(
    FAMILY,
    "`export --tables` into an existing folder holding a file of the user's, full disk half-way",
    "clear error",
    "exit 2; the folder holds exactly what it held before (the user's file, untouched), no temporary folder",
)
def test_export_into_existing_folder_full_disk(tmp_path, traces, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    monkeypatch.setattr(pl.DataFrame, "write_parquet", _fail_after(7, pl.exceptions.ComputeError(ENOSPC_TEXT)))
    assert_clear_error(cli("export", traces, "--to", out, "--tables", "--no-cache"), "no space left on the device")
    assert _names(out) == ["mine.txt"] and (out / "mine.txt").read_text() == "keep"


@case(
    FAMILY,
    "`export --to FILE` where FILE is an existing regular file",
    "clear error",
    "exit 2, 'cannot write into FILE: it exists and is not a directory'; the file untouched",
)
def test_export_to_an_existing_file(tmp_path, traces):
    f = tmp_path / "out.parquet"
    f.write_bytes(b"precious")
    assert_clear_error(cli("export", traces, "--to", f, "--no-cache"), f"cannot write into {f}", "not a directory")
    assert f.read_bytes() == b"precious"


@case(
    FAMILY,
    "`export` where an output file already exists (no `--force`)",
    "clear error",
    "exit 2, 'PATH exists; use --force to overwrite'; nothing written",
)
def test_export_existing_output_without_force(tmp_path, traces):
    out = tmp_path / "out"
    out.mkdir()
    (out / "rank1.events.parquet").write_bytes(b"precious")
    assert_clear_error(cli("export", traces, "--to", out, "--no-cache"), "rank1.events.parquet exists; use --force")
    assert _names(out) == ["rank1.events.parquet"]


@case(
    FAMILY,
    "`export` where an output path is a directory",
    "clear error",
    "exit 2, 'PATH is a directory'",
)
def test_export_output_path_is_a_directory(tmp_path, traces):
    out = tmp_path / "out"
    (out / "rank0.events.parquet").mkdir(parents=True)
    assert_clear_error(cli("export", traces, "--to", out, "--no-cache"), "rank0.events.parquet is a directory")


@pytest.mark.parametrize(
    ("exc", "cause"),
    [
        (PermissionError(errno.EACCES, "Permission denied"), "permission denied"),
        (OSError(errno.EROFS, "Read-only file system"), "the file system is read-only"),
    ],
    ids=["EACCES", "EROFS"],
)
@case(
    FAMILY,
    "`export --to` a read-only folder (the temporary folder cannot be created: `EACCES` or `EROFS`)",
    "clear error",
    "exit 2, 'cannot write into OUT: permission denied' / 'the file system is read-only'",
)
def test_export_read_only_folder(tmp_path, traces, monkeypatch, exc, cause):
    def mkdtemp(*_a, **_k):  # noqa: ANN002, ANN003, ANN202
        raise exc

    monkeypatch.setattr(output_mod.tempfile, "mkdtemp", mkdtemp)
    out = tmp_path / "out"
    assert_clear_error(cli("export", traces, "--to", out, "--no-cache"), f"cannot write into {out}: {cause}")
    assert not out.exists()


# ---- report --------------------------------------------------------------------------------------


class _FullFile:
    """A text file whose writes fail as on a full disk."""

    def __init__(self, path: str, *_a: object, **_k: object) -> None:
        self.path = path

    def __enter__(self) -> _FullFile:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def write(self, _text: str) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")


@case(
    FAMILY,
    "`report -o FILE` on a full disk (the HTML write fails with `ENOSPC`)",
    "clear error",
    "exit 2, 'cannot write FILE: no space left on the device'; neither FILE nor a temporary file left",
)
def test_report_full_disk(tmp_path, traces, monkeypatch):
    out = tmp_path / "r.html"
    monkeypatch.setattr(render_mod, "open", _FullFile, raising=False)
    assert_clear_error(cli("report", traces, "-o", out, "--no-cache"), f"cannot write {out}: no space left")
    assert _names(tmp_path) == ["in"]


@case(
    FAMILY,
    "`report -o DIR/FILE` where DIR is read-only (checked before loading the traces)",
    "clear error",
    "exit 2, 'cannot write FILE: permission denied in DIR'",
)
def test_report_read_only_folder(tmp_path, traces, monkeypatch):
    ro = tmp_path / "ro"
    ro.mkdir()
    real = os.access
    monkeypatch.setattr(output_mod.os, "access", lambda p, m: False if os.fspath(p) == str(ro) else real(p, m))
    out = ro / "r.html"
    assert_clear_error(cli("report", traces, "-o", out, "--no-cache"), f"cannot write {out}: permission denied")
    assert _names(ro) == []


@case(
    FAMILY,
    "`report -o FILE` where the rename into place fails (`EROFS`: remounted read-only meanwhile)",
    "clear error",
    "exit 2, 'the file system is read-only'; no temporary file left",
)
def test_report_rename_fails(tmp_path, traces, monkeypatch):
    def replace(*_a, **_k):  # noqa: ANN002, ANN003, ANN202
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(output_mod.os, "replace", replace)
    out = tmp_path / "r.html"
    assert_clear_error(cli("report", traces, "-o", out, "--no-cache"), "the file system is read-only")
    assert _names(tmp_path) == ["in"]


@pytest.mark.parametrize("what", ["existing file", "directory", "missing folder", "parent is a file"])
@case(
    FAMILY,
    "`report -o PATH` where PATH exists, is a directory, lies in a missing folder, or under a regular file",
    "clear error",
    "exit 2: 'exists; use --force to overwrite' / 'is a directory' / 'folder … does not exist' / 'is not a "
    "directory'; nothing written",
)
def test_report_bad_output_paths(tmp_path, traces, what):
    if what == "existing file":
        out = tmp_path / "r.html"
        out.write_text("mine")
        frag = "exists; use --force to overwrite"
    elif what == "directory":
        out = tmp_path / "r.html"
        out.mkdir()
        frag = "is a directory"
    elif what == "missing folder":
        out = tmp_path / "nope" / "r.html"
        frag = "does not exist"
    else:
        (tmp_path / "file").write_text("x")
        out = tmp_path / "file" / "r.html"
        frag = "is not a directory"
    assert_clear_error(cli("report", traces, "-o", out, "--no-cache"), frag)
    if what == "existing file":
        assert out.read_text() == "mine"


# ---- counters ------------------------------------------------------------------------------------


@case(
    FAMILY,
    "`counters -o OUT` on a full disk while the second rank's trace copy is written",
    "clear error",
    "exit 2, 'no space left on the device'; OUT not created, nothing left; the re-run works",
)
def test_counters_full_disk(tmp_path, traces, monkeypatch):
    from ranksight.io import rewrite as rewrite_mod

    real = rewrite_mod._atomic_write
    calls = {"n": 0}

    def write(dst, chunks):  # noqa: ANN001, ANN202
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(dst, chunks)

    monkeypatch.setattr(rewrite_mod, "_atomic_write", write)
    out = tmp_path / "out"
    assert_clear_error(cli("counters", traces, "-o", out, "--no-cache"), f"cannot write into {out}: no space left")
    assert not out.exists() and leftovers(tmp_path) == []
    monkeypatch.undo()
    r = cli("counters", traces, "-o", out, "--no-cache")
    assert r.rc == 0 and _names(out) == ["rank0_with_counters.json.gz", "rank1_with_counters.json.gz"], r.err


@case(
    FAMILY,
    "`counters -o OUT` where OUT is a regular file",
    "clear error",
    "exit 2, 'it exists and is not a directory'",
)
def test_counters_out_is_a_file(tmp_path, traces):
    f = tmp_path / "out"
    f.write_text("x")
    assert_clear_error(cli("counters", traces, "-o", f, "--no-cache"), "exists and is not a directory")


def test_docs_table():
    check_table(sys.modules[__name__], FAMILY)
