"""One error hierarchy, rooted at :class:`RanksightError`, and one warning class.

Every error that comes from an input names the file and, where it can, the rank and the byte
offset or event index. The CLI prints ``str(error)`` on one line and exits with ``exit_code``.
"""

from __future__ import annotations

import warnings
from pathlib import Path

__all__ = [
    "RanksightError",
    "TraceFormatError",
    "TraceNotFoundError",
    "TraceChangedError",
    "DuplicateRankError",
    "MixedRunsError",
    "InputTooLargeError",
    "UsageError",
    "MissingDataError",
    "RanksightWarning",
    "warn",
]

EXIT_OK = 0
EXIT_FAILED_GATE = 1
EXIT_BAD_INPUT = 2
#: A bug (an unexpected exception, or a panic in the Rust core): the CLI says so in one line.
EXIT_INTERNAL = 3


class RanksightError(Exception):
    """Root of every error ranksight raises on purpose."""

    exit_code = EXIT_BAD_INPUT

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        rank: int | None = None,
        offset: int | None = None,
        event_index: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.path = str(path) if path is not None else None
        self.rank = rank
        self.offset = offset
        self.event_index = event_index

    def __str__(self) -> str:
        where = []
        if self.path:
            where.append(self.path)
        if self.rank is not None:
            where.append(f"rank {self.rank}")
        if self.offset is not None:
            where.append(f"byte {self.offset}")
        if self.event_index is not None:
            where.append(f"event {self.event_index}")
        prefix = ": ".join([", ".join(where)]) + ": " if where else ""
        return f"{prefix}{self.message}"


class TraceFormatError(RanksightError, ValueError):
    """The file is not a readable Kineto trace (bad JSON, truncated, wrong structure, ...)."""


class TraceNotFoundError(RanksightError, FileNotFoundError):
    """A path given by the user does not exist or holds no trace."""


class TraceChangedError(RanksightError):
    """A trace file changed on disk after it was loaded: its events can no longer be read back."""


class DuplicateRankError(RanksightError, ValueError):
    """Two files claim the same rank."""


class MixedRunsError(RanksightError, ValueError):
    """The files do not belong to one run (ranks disagree on the world size, a rank is out of range)."""


class InputTooLargeError(RanksightError, ValueError):
    """The decompressed input exceeds the configured size cap."""


class UsageError(RanksightError, ValueError):
    """The arguments of a call or command do not make sense together."""


class MissingDataError(RanksightError, ValueError):
    """The trace lacks what an analysis needs (no GPU events, a single rank, ...)."""


class RanksightWarning(UserWarning):
    """A non-fatal oddity in the input (truncated trace, rank guessed from the file order, ...)."""


def warn(message: str, *, stacklevel: int = 2) -> None:
    """Issue a :class:`RanksightWarning`."""
    warnings.warn(message, RanksightWarning, stacklevel=stacklevel + 1)
