"""Cells of a table as text for people (the terminal and Markdown); CSV and JSON keep raw values.

A column's unit comes from its name, as everywhere in ranksight (names carry units):

- ``_ns``, ``_us``, ``_ms`` anywhere in the name (``idle_us``, ``kernel_us_mean``,
  ``busy_us_per_replay``): a duration, shown as ``850 ns``, ``12.3 µs``, ``1.23 ms``, ``4.56 s``;
- ``bytes`` (``reserved_bytes``, ``bytes_per_call``): a size, ``512 B``, ``1.5 KiB``, ``4.5 GiB``
  (powers of 1024);
- ``_gbps``, ``_tb_per_s``: a bandwidth, ``71 MB/s``, ``24.1 GB/s`` (powers of 1000, as
  bandwidths are quoted);
- ``_tflop_per_s``: a FLOP rate, ``850 GFLOP/s``, ``5.61 TFLOP/s``;
- ``_mb``, ``_gb`` at the end (``json_mb``): a size already in MB / GB, ``1.76 MB``.

Three significant digits (trailing zeros dropped), the unit chosen so the number is at least 1.
Time points are not durations: a column whose unit follows ``ts``, ``start`` or ``end``
(``ts_ns``, ``gpu_start_ns``, ``first_start_us``) is shown as a plain number. Other numbers: an
integer column, or a float column whose every value is a whole number (call counts), as integers
with thousands separators; floats with two decimals (three significant digits below 1). A value
that could not be computed (None, NaN, ±inf) is an empty cell, as ``--format json`` writes it null.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import polars as pl

__all__ = ["MAX_TEXT", "format_value", "column_unit", "column_formatter", "format_columns", "human"]

#: Longer text is cut with an ellipsis in terminal and Markdown tables (CSV and JSON keep it whole).
MAX_TEXT = 80

_DURATION = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3}
_TIME_POINT = {"ts", "start", "end"}
_DURATION_UNITS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))
_SIZE_UNITS = ((1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"))
#: up to tera: a peak of 1,307 TFLOP/s reads as the tables of GPU peaks write it
_RATE_UNITS = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))


def column_unit(name: str) -> tuple[str, float] | None:
    """``(kind, scale)`` of a column from its name: kind ``duration`` (scale to seconds),
    ``size`` (bytes), ``bandwidth`` (bytes/s), ``flops`` (FLOP/s), ``mb`` / ``gb`` (as is); None
    for a plain number (time points included)."""
    tokens = name.lower().split("_")
    for i, tok in enumerate(tokens):
        if tok in _DURATION and i > 0:
            return None if tokens[i - 1] in _TIME_POINT else ("duration", _DURATION[tok])
        if tok == "bytes":
            return ("size", 1.0)
        if tok == "gbps":
            return ("bandwidth", 1e9)
        if tok in ("tb", "gb", "mb") and tokens[i + 1 : i + 3] == ["per", "s"]:
            return ("bandwidth", {"tb": 1e12, "gb": 1e9, "mb": 1e6}[tok])
        if tok in ("tflop", "gflop") and tokens[i + 1 : i + 3] == ["per", "s"]:
            return ("flops", 1e12 if tok == "tflop" else 1e9)
        if tok in ("mb", "gb") and i == len(tokens) - 1 and i > 0:
            return (tok, 1.0)
    return None


def _sig3(x: float) -> str:
    """Three significant digits for 1 <= x < 1000 (and below 1 for zero-unit cases), trailing
    zeros dropped: 1.23, 4.5, 12.3, 123."""
    a = abs(x)
    text = f"{x:.0f}" if a >= 99.95 else f"{x:.1f}" if a >= 9.995 else f"{x:.2f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def human(value: float, kind: str, scale: float = 1.0) -> str:
    """``value`` (in units of ``scale``) of a ``kind`` from :func:`column_unit` as text."""
    if value == 0:
        return "0"
    v = value * scale
    a = abs(v)
    if kind == "duration":
        if a >= 1000:
            return f"{v:,.0f} s"
        for size, unit in _DURATION_UNITS:
            if a >= size * 0.9995 or unit == "ns":
                return f"{_sig3(v / size)} {unit}"
    if kind == "size":
        if a < 1024:
            return f"{v:.0f} B" if float(v).is_integer() else f"{_sig3(v)} B"
        for size, unit in _SIZE_UNITS:
            if a >= size * 0.9995:
                return f"{_sig3(v / size)} {unit}"
    if kind in ("bandwidth", "flops"):
        base = "B/s" if kind == "bandwidth" else "FLOP/s"
        for size, prefix in _RATE_UNITS:
            if a >= size * 0.9995 or prefix == "":
                x = v / size
                return f"{x:,.0f} {prefix}{base}" if abs(x) >= 999.5 else f"{_sig3(x)} {prefix}{base}"
    if kind in ("mb", "gb"):
        return f"{_sig3(v)} {kind.upper()}"
    return f"{v:g}"


def format_value(v: Any) -> str:
    """A cell as text, without knowing its column. A value that could not be computed (None,
    NaN, ±inf) is empty, as ``--format json`` writes it null; the notes say why."""
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


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and (math.isnan(v) or math.isinf(v)))


def column_formatter(name: str, dtype: pl.DataType, values: Sequence[Any] = ()) -> Callable[[Any], str]:
    """How the cells of one column are shown (see the module's table): by the unit its name
    carries; a float column of whole numbers as integers."""
    if not dtype.is_numeric():
        return format_value
    unit = column_unit(name)
    if unit is not None:
        kind, scale = unit

        def fmt(v: Any) -> str:
            return "" if _missing(v) else human(float(v), kind, scale)

        return fmt
    if dtype.is_float():
        present = [v for v in values if not _missing(v)]
        if present and all(float(v).is_integer() and abs(v) < 2**53 for v in present):
            return lambda v: "" if _missing(v) else f"{int(v):,}"
    return format_value


def format_columns(df: pl.DataFrame) -> list[list[str]]:
    """Every row of ``df`` as text cells, each column with its :func:`column_formatter`."""
    fmts = [column_formatter(c, dt, df[c].to_list()) for c, dt in df.schema.items()]
    return [[f(v) for f, v in zip(fmts, row, strict=True)] for row in df.iter_rows()]
