"""Writing outputs safely, in one place: never over an input, never over an existing file without
``force``, never a half-written file, and every failure a one-line :class:`OutputError`.

Every writer of ranksight (the HTML report, ``export``'s Parquet files, rewritten traces with
counter tracks or kernel patterns) goes through :func:`check_output` and :func:`atomic_path`; a
command that writes several files writes them into :func:`staged_dir`, a temporary folder beside
the target, and moves them into place only when all of them are complete: a failure (a full disk
half-way) leaves nothing behind, and running the command again works.

A fault of the file system (read-only folder, permission, full disk, quota, a path that is a
folder or not a folder, an existing file) is an :class:`OutputError` (exit code 2) that says which
path and what is wrong in words, never a raw ``OSError`` or a Parquet library error.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator

from ranksight.errors import RanksightError, UsageError

__all__ = ["OutputError", "check_output", "atomic_path", "staged_dir", "output_error"]


class OutputError(RanksightError):
    """An output cannot be written: the path and the cause in words (exit code 2)."""


_CAUSES = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EISDIR: "it is a directory",
    errno.ENOTDIR: "a part of the path is not a directory",
    errno.EEXIST: "it exists",
    errno.ENOENT: "the folder does not exist",
    errno.ENAMETOOLONG: "the name is too long",
    errno.EFBIG: "the file is too large for the file system",
    errno.EIO: "input/output error (a failing disk or a network file system)",
    errno.EXDEV: "the temporary and final paths are on different file systems",
}

_OS_ERROR = re.compile(r"os error (\d+)")


def _errno_of(err: BaseException) -> int | None:
    """The errno of an ``OSError``, or the one a Parquet/Arrow error quotes (``os error 28``)."""
    no = getattr(err, "errno", None)
    if isinstance(no, int):
        return no
    m = _OS_ERROR.search(str(err))
    if m:
        return int(m.group(1))
    if "No space left on device" in str(err):
        return errno.ENOSPC
    return None


def _is_io_error(err: BaseException) -> bool:
    """Whether ``err`` is a file-system fault (an ``OSError``, or a polars/Arrow error that wraps
    one) rather than a bug."""
    if isinstance(err, RanksightError):
        return False
    return isinstance(err, OSError) or _errno_of(err) is not None


def output_error(path: str, err: BaseException, *, what: str = "cannot write") -> OutputError:
    """``err`` (an ``OSError`` or a library error wrapping one) as an :class:`OutputError` that
    names ``path`` and the cause in words."""
    no = _errno_of(err)
    cause = _CAUSES.get(no) if no is not None else None
    if cause is None:
        text = getattr(err, "strerror", None) or str(err) or type(err).__name__
        cause = text.split("\n")[0]
    return OutputError(f"{what} {path}: {cause}")


def check_output(
    path: str, *, inputs: Iterable[str] = (), force: bool = False, folder_must_exist: bool = False
) -> None:
    """Refuse to write ``path`` when it is a folder, one of ``inputs``, exists (without ``force``),
    or (with ``folder_must_exist``) lies in a folder that does not exist or cannot be written."""
    if os.path.isdir(path):
        raise OutputError(f"{path} is a directory; give a file name")
    real = os.path.realpath(path)
    if real in {os.path.realpath(p) for p in inputs}:
        raise UsageError(f"refusing to overwrite an input: {path}")
    if os.path.lexists(path) and not force:
        raise OutputError(f"{path} exists; use --force to overwrite")
    d = os.path.dirname(os.path.abspath(path))
    if folder_must_exist:
        if os.path.exists(d) and not os.path.isdir(d):
            raise OutputError(f"cannot write {path}: {d} is not a directory")
        if not os.path.isdir(d):
            raise OutputError(f"cannot write {path}: folder {d} does not exist")
    if os.path.isdir(d) and not os.access(d, os.W_OK | os.X_OK):
        raise OutputError(f"cannot write {path}: permission denied in {d}")


@contextlib.contextmanager
def atomic_path(path: str, *, suffix: str = ".tmp", mode: int | None = None) -> Iterator[str]:
    """A temporary path in ``path``'s folder to write to; renamed to ``path`` when the block ends
    without an error (with permissions ``mode`` when given), removed otherwise. A file-system
    fault, in the block or at the rename, is raised as an :class:`OutputError`."""
    d = os.path.dirname(os.path.abspath(path)) or "."
    try:
        fd, tmp = tempfile.mkstemp(prefix=".ranksight-", suffix=suffix, dir=d)
    except OSError as err:
        raise output_error(path, err) from None
    os.close(fd)
    try:
        yield tmp
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException as err:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(err, Exception) and _is_io_error(err):
            raise output_error(path, err) from None
        raise


def _nearest_existing(path: str) -> str:
    d = os.path.abspath(path)
    while not os.path.exists(d):
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    return d


@contextlib.contextmanager
def staged_dir(out_dir: str) -> Iterator[str]:
    """A temporary folder to write several files into (``.ranksight-*.partial``, inside ``out_dir``
    when it exists, else beside it). When the block ends without an error the files are moved into
    ``out_dir`` (the temporary folder is renamed to it when ``out_dir`` does not exist yet; each
    file is renamed into it otherwise: the same file system, so no copy and no room needed); on an
    error the temporary folder and everything in it is removed, so
    a failure leaves nothing. File-system faults are raised as :class:`OutputError`."""
    target = os.path.abspath(out_dir)
    if os.path.lexists(target) and not os.path.isdir(target):
        raise OutputError(f"cannot write into {out_dir}: it exists and is not a directory")
    # inside the target when it exists (the same file system even when it is a mount point), else
    # in its nearest existing ancestor
    base = target if os.path.isdir(target) else _nearest_existing(target)
    if not os.path.isdir(base):
        raise OutputError(f"cannot write into {out_dir}: {base} is not a directory")
    try:
        tmp = tempfile.mkdtemp(prefix=".ranksight-", suffix=".partial", dir=base)
    except OSError as err:
        raise output_error(out_dir, err, what="cannot write into") from None
    try:
        yield tmp
        if not os.path.isdir(target):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.rename(tmp, target)
            return
        for name in sorted(os.listdir(tmp)):
            os.replace(os.path.join(tmp, name), os.path.join(target, name))
        os.rmdir(tmp)
    except BaseException as err:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(err, Exception) and _is_io_error(err):
            raise output_error(out_dir, err, what="cannot write into") from None
        raise
