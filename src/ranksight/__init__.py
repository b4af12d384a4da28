"""ranksight: where the time goes in multi-GPU PyTorch jobs.

>>> import ranksight
>>> run = ranksight.load("traces/")          # doctest: +SKIP
>>> run[0].events                            # doctest: +SKIP
"""

import os as _os

# polars allocates through its own jemalloc, which by default keeps freed pages for 10 s: the
# transient columns of one derivation then stay resident while the next one allocates, and a
# 1 GB trace held 1.35 GB after loading instead of 0.96 GB. Return them at once (load ~5 % slower).
# Takes effect only when polars is imported after ranksight; a value the user set wins.
_os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:0,muzzy_decay_ms:0")

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
