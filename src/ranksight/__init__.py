"""ranksight: where the time goes in multi-GPU PyTorch jobs.

>>> import ranksight
>>> run = ranksight.load("traces/")          # doctest: +SKIP
>>> run[0].events                            # doctest: +SKIP
"""

from ranksight._core import __version__ as _core_version
from ranksight.errors import (
    DuplicateRankError,
    InputTooLargeError,
    MissingDataError,
    RanksightError,
    RanksightWarning,
    TraceFormatError,
    TraceNotFoundError,
    UsageError,
)
from ranksight.model import Run, Trace, TraceMeta, load

__version__ = "0.1.0"

__all__ = [
    "load",
    "Run",
    "Trace",
    "TraceMeta",
    "RanksightError",
    "TraceFormatError",
    "TraceNotFoundError",
    "DuplicateRankError",
    "InputTooLargeError",
    "UsageError",
    "MissingDataError",
    "RanksightWarning",
    "__version__",
]
