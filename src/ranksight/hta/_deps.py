"""The HTA facade's optional dependencies, checked in one place."""

from __future__ import annotations

import importlib.util
from typing import Any

from ranksight.errors import UsageError

__all__ = ["pandas"]


def pandas() -> Any:
    """The ``pandas`` module, once pyarrow is known to be there too (polars converts its tables to
    pandas through Arrow). Without either: a :class:`~ranksight.errors.UsageError` naming the
    extra that brings them, instead of an ``ImportError`` from inside polars."""
    missing = [m for m in ("pandas", "pyarrow") if importlib.util.find_spec(m) is None]
    if missing:
        raise UsageError(
            f"the HTA facade returns pandas DataFrames (converted through Arrow) and {' and '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not installed: pip install 'ranksight[hta]'"
        )
    import pandas as pd

    return pd
