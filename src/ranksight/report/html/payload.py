"""The report's data payload: one JSON document, columnar tables, a string table for names.

Everything a trace contributes (kernel, op, annotation, file names) goes through
:class:`StringTable` and is rendered by the browser with ``textContent`` only; the JSON itself is
embedded with :func:`script_json`, which escapes ``<``, ``>``, ``&`` and the JS line separators, so
no name can close the ``<script>`` element or open a tag. The layout is described in
``docs/report-schema.json`` (``SCHEMA_VERSION``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import polars as pl

__all__ = [
    "SCHEMA_NAME",
    "SCHEMA_VERSION",
    "StringTable",
    "encode_table",
    "script_json",
    "clean",
    "series",
]

SCHEMA_NAME = "ranksight-report"
SCHEMA_VERSION = 1

_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_TRANS = str.maketrans(_ESCAPES)


class StringTable:
    """Interns strings: each distinct string is stored once; payload fields hold its index."""

    def __init__(self) -> None:
        self._index: dict[str, int] = {}
        self.strings: list[str] = []

    def __call__(self, s: object) -> int | None:
        """Index of ``s`` (``None`` stays ``None``)."""
        if s is None:
            return None
        t = str(s)
        i = self._index.get(t)
        if i is None:
            i = len(self.strings)
            self._index[t] = i
            self.strings.append(t)
        return i

    def many(self, values: Iterable[object]) -> list[int | None]:
        return [self(v) for v in values]


def clean(v: Any) -> Any:
    """JSON-safe scalar: NaN/inf → None, numpy scalars → Python."""
    if isinstance(v, float):
        return None if math.isnan(v) or math.isinf(v) else v
    if hasattr(v, "item") and not isinstance(v, (list, dict, str)):
        return clean(v.item())
    return v


def _col_kind(dt: pl.DataType) -> str:
    if dt == pl.Boolean:
        return "bool"
    if dt.is_integer():
        return "int"
    if dt.is_float() or dt.is_decimal():
        return "float"
    return "str"


def _finite(values: list[Any]) -> list[Any]:
    return [None if v is None or (isinstance(v, float) and not math.isfinite(v)) else v for v in values]


def encode_table(
    df: pl.DataFrame,
    strings: StringTable,
    *,
    id: str,
    title: str,
    sort: tuple[str, bool] | None = None,
    page_size: int = 25,
    units: Mapping[str, str] | None = None,
    help: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A table block: columns described once, values column by column.

    String-like columns (strings, categoricals, lists, structs) hold indices into the string table;
    floats keep their full precision (NaN and infinities become null): the browser formats them
    for display only (a p-value of 0.000817 shows as 0.000817, never as a rounded 0.0008).
    """
    cols = []
    data = []
    for name, dt in df.schema.items():
        kind = _col_kind(dt)
        s = df[name]
        if kind == "str":
            if isinstance(dt, (pl.List, pl.Struct, pl.Array, pl.Object)):
                vals = [None if v is None else json.dumps(v, default=str) for v in s.to_list()]
            else:
                vals = s.cast(pl.String).to_list()
            col = strings.many(vals)
        elif kind == "float":
            col = _finite(s.to_list())
        else:
            col = s.to_list()
        c: dict[str, Any] = {"name": name, "kind": kind}
        if units and name in units:
            c["unit"] = units[name]
        if help and name in help:
            c["help"] = help[name]
        cols.append(c)
        data.append(col)
    out: dict[str, Any] = {
        "type": "table",
        "id": id,
        "title": title,
        "columns": cols,
        "data": data,
        "rows": df.height,
        "page_size": page_size,
    }
    if sort is not None:
        out["sort"] = {"column": sort[0], "descending": bool(sort[1])}
    return out


def script_json(doc: Any) -> str:
    """JSON text safe to place inside ``<script type="application/json">``."""
    text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_default)
    return text.translate(_TRANS)


def _default(o: Any) -> Any:
    if hasattr(o, "item"):
        return clean(o.item())
    if isinstance(o, (set, tuple)):
        return list(o)
    return str(o)


def series(values: Sequence[Any]) -> list[Any]:
    """Numbers for a chart at full precision (formatted only at display), NaN/inf as null."""
    return [clean(v) for v in values]
