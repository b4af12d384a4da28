"""ranksight: where the time goes in multi-GPU PyTorch jobs.

>>> import ranksight
>>> run = ranksight.load("traces/")          # doctest: +SKIP
>>> run[0].events                            # doctest: +SKIP
"""

import os as _os

#: ``RANKSIGHT_LOW_MEMORY=1``: trade some speed for a lower peak (docs/scale.md). polars allocates
#: through its own jemalloc, which keeps freed pages for 0.5–1 s, so the transient columns of one step
#: stay resident while the next allocates (1 GB trace: 0.71 GB resident after loading instead of
#: 0.98 GB, load ~15 % slower). Takes effect only if polars is imported after ranksight; a
#: ``_RJEM_MALLOC_CONF`` the user set wins.
LOW_MEMORY = _os.environ.get("RANKSIGHT_LOW_MEMORY", "").lower() in ("1", "true", "yes", "on")
if LOW_MEMORY:
    _os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:0,muzzy_decay_ms:0")

from ranksight._core import __version__ as _core_version  # noqa: F401 (loads the Rust core: a missing build fails here)
from ranksight.errors import (
    DuplicateRankError,
    InputTooLargeError,
    MissingDataError,
    RanksightError,
    RanksightWarning,
    TraceChangedError,
    TraceFormatError,
    TraceNotFoundError,
    UsageError,
)
from ranksight.model import Run, Trace, TraceMeta, load

__version__ = "0.1.0"

if LOW_MEMORY:
    from ranksight._core import set_mmap_threshold as _set_mmap_threshold

    _set_mmap_threshold(128 << 10)

__all__ = [
    "load",
    "Run",
    "Trace",
    "TraceMeta",
    "RanksightError",
    "TraceFormatError",
    "TraceNotFoundError",
    "TraceChangedError",
    "DuplicateRankError",
    "InputTooLargeError",
    "UsageError",
    "MissingDataError",
    "RanksightWarning",
    "__version__",
]
