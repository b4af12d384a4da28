"""One cell of a table as text, for the terminal and Markdown (CSV and JSON keep raw values)."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["MAX_TEXT", "format_value"]

#: Longer text is cut with an ellipsis in terminal and Markdown tables (CSV and JSON keep it whole).
MAX_TEXT = 80


def format_value(v: Any) -> str:
    """A cell as text. A value that could not be computed (None, NaN, ±inf) is empty, as
    ``--format json`` writes it null; the notes say why."""
    if v is None:
        return ""
    if isinstance(v, str):
        return v if len(v) <= MAX_TEXT else v[: MAX_TEXT - 1] + "…"
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return ""
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        if abs(v) >= 1 or v == 0:
            return f"{v:,.2f}"
        return f"{v:.3g}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return str(v)
