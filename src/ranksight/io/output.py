"""Writing outputs safely, in one place: never over an input, never over an existing file without
``force``, and never a half-written file (a temporary file in the same folder, then a rename).

Every writer of ranksight (the HTML report, ``export``'s Parquet files, rewritten traces with
counter tracks or kernel patterns) goes through :func:`check_output` and :func:`atomic_path`.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable, Iterator

from ranksight.errors import UsageError

__all__ = ["check_output", "atomic_path"]


def check_output(
    path: str, *, inputs: Iterable[str] = (), force: bool = False, folder_must_exist: bool = False
) -> None:
    """Refuse to write ``path`` when it is a folder, one of ``inputs``, exists (without ``force``),
    or (with ``folder_must_exist``) lies in a folder that does not exist."""
    if os.path.isdir(path):
        raise UsageError(f"{path} is a directory; give a file name with -o")
    real = os.path.realpath(path)
    if real in {os.path.realpath(p) for p in inputs}:
        raise UsageError(f"refusing to overwrite an input: {path}")
    if os.path.exists(path) and not force:
        raise UsageError(f"{path} exists; use --force to overwrite")
    if folder_must_exist:
        d = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(d):
            raise UsageError(f"folder {d} does not exist")


@contextlib.contextmanager
def atomic_path(path: str, *, suffix: str = ".tmp", mode: int | None = None) -> Iterator[str]:
    """A temporary path in ``path``'s folder to write to; renamed to ``path`` when the block ends
    without an error (with permissions ``mode`` when given), removed otherwise."""
    d = os.path.dirname(os.path.abspath(path)) or "."
    fd, tmp = tempfile.mkstemp(prefix=".ranksight-", suffix=suffix, dir=d)
    os.close(fd)
    try:
        yield tmp
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
