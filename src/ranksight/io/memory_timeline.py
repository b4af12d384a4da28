"""Reader for PyTorch's memory-timeline export (``prof.export_memory_timeline(path)`` with a
``.raw.gz`` / ``.json.gz`` / ``.json`` name writing the raw events).

The raw file is a JSON list of ``[t_ns, action, numbytes, category]`` records
(``torch/profiler/_memory_profiler.py: export_memory_timeline_raw``):

- ``t_ns``: event time in ns on the profiler's clock; ``-1`` for tensors that existed before
  profiling (``PREEXISTING``);
- ``action``: 1 ``PREEXISTING``, 2 ``CREATE``, 3 ``INCREMENT_VERSION``, 4 ``DESTROY``
  (a version bump is written as two records at the same time: ``−bytes`` in the old category,
  ``+bytes`` in the new one);
- ``numbytes``: signed bytes (negative for ``DESTROY`` and the first half of a version bump);
- ``category``: index into :data:`CATEGORIES` (0 Parameter, 1 Optimizer state, 2 Input,
  3 Temporary, 4 Activation, 5 Gradient, 6 Autograd, 7 Unknown).

Categories come from PyTorch's memory profiler and can be wrong with distributed jobs and
torch.compile (facebookresearch/HolisticTraceAnalysis#222).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import polars as pl

from ranksight.errors import TraceFormatError, TraceNotFoundError

__all__ = ["CATEGORIES", "ACTIONS", "read_memory_timeline", "by_category"]

#: Category names by index, as PyTorch's ``_CATEGORY_TO_INDEX`` orders them.
CATEGORIES = ("Parameter", "Optimizer state", "Input", "Temporary", "Activation", "Gradient", "Autograd", "Unknown")
#: Action names by value (``torch.profiler._memory_profiler.Action``).
ACTIONS = {1: "PREEXISTING", 2: "CREATE", 3: "INCREMENT_VERSION", 4: "DESTROY"}


def read_memory_timeline(path: str | Path) -> pl.DataFrame:
    """The raw records: ``t_ns`` (null for pre-existing), ``action`` (name), ``bytes``
    (signed), ``category`` (name), in file order."""
    p = Path(path)
    if not p.exists():
        raise TraceNotFoundError("no such file", path=str(p))
    raw = p.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    try:
        recs = json.loads(raw)
    except ValueError as err:
        raise TraceFormatError(f"not a memory-timeline export: {err}", path=str(p)) from None
    if not isinstance(recs, list) or (recs and not (isinstance(recs[0], list) and len(recs[0]) == 4)):
        raise TraceFormatError(
            "not a memory-timeline raw export (expected a list of [t, action, bytes, category])", path=str(p)
        )
    arr = np.asarray(recs, dtype=np.int64).reshape(-1, 4)
    t = pl.Series("t_ns", arr[:, 0])
    cat = arr[:, 3]
    if cat.size and (cat.min() < 0 or cat.max() >= len(CATEGORIES)):
        raise TraceFormatError(f"unknown memory category index {int(cat.max())}", path=str(p))
    return pl.DataFrame(
        {
            "t_ns": pl.select(pl.when(t < 0).then(None).otherwise(t)).to_series(),
            "action": pl.Series(arr[:, 1]).replace_strict(ACTIONS, default="UNKNOWN", return_dtype=pl.String),
            "bytes": arr[:, 2],
            "category": pl.Series(cat).replace_strict(dict(enumerate(CATEGORIES)), return_dtype=pl.String),
        }
    )


def by_category(raw: pl.DataFrame) -> pl.DataFrame:
    """Cumulative bytes per category after each distinct time, in file order.

    Same series as PyTorch's ``_coalesce_timeline`` and HTA's ``MemoryAnalysis``: one row per run
    of records with the same time; pre-existing records (``t_ns`` null) form the first row, at
    the first real time. Columns: ``t_ns`` and one column per :data:`CATEGORIES` name.
    """
    if raw.height == 0:
        return pl.DataFrame(schema={"t_ns": pl.Int64, **{c: pl.Int64 for c in CATEGORIES}})
    t = raw["t_ns"].fill_null(-1).to_numpy()
    idx = raw["category"].replace_strict({c: i for i, c in enumerate(CATEGORIES)}, return_dtype=pl.Int64).to_numpy()
    onehot = np.zeros((raw.height, len(CATEGORIES)), dtype=np.int64)
    onehot[np.arange(raw.height), idx] = raw["bytes"].to_numpy()
    cum = np.cumsum(onehot, axis=0)
    last = np.nonzero(np.r_[t[1:] != t[:-1], True])[0]
    times = t[last]
    real = times[times >= 0]
    t_min = int(real.min()) if real.size else -1
    times = np.where(times < 0, t_min, times)
    return pl.DataFrame({"t_ns": times, **{c: cum[last, i] for i, c in enumerate(CATEGORIES)}})
