"""Writing TraceLens-compatible perf report sheets (``op-perf --tracelens-csv DIR``).

One CSV per sheet (``DIR/<sheet>.csv``; with several ranks ``DIR/rank<N>/<sheet>.csv``), written
as pandas' ``DataFrame.to_csv(index=False)`` writes TraceLens's: floats as Python's shortest
round-trip ``repr``, NaN and None empty, booleans ``True``/``False``. Every path is checked first
(never an input, never an existing file without ``force``) and the files of each folder are written
into a staging folder moved into place together (:func:`ranksight.io.output.staged_dir`).
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Mapping, Sequence

import polars as pl

from ranksight.io.output import OutputError, check_output, staged_dir

__all__ = ["sheet_csv", "write_tracelens_csv", "TABLE_PREFIX"]

#: Tables of an op-perf result that are TraceLens sheets: ``tracelens/<rank>/<sheet>``.
TABLE_PREFIX = "tracelens/"


def _cell(v: object) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, float):
        return "" if math.isnan(v) else repr(v)
    return str(v)


def sheet_csv(df: pl.DataFrame) -> str:
    """One sheet as pandas writes it (``to_csv(index=False)``)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(df.columns)
    for row in df.iter_rows():
        w.writerow([_cell(v) for v in row])
    return buf.getvalue()


def split_tables(
    tables: Mapping[str, pl.DataFrame],
) -> tuple[dict[str, pl.DataFrame], dict[int, dict[str, pl.DataFrame]]]:
    """An op-perf result's tables: (its own tables, {rank: {sheet: table}} of the TraceLens sheets)."""
    own: dict[str, pl.DataFrame] = {}
    sheets: dict[int, dict[str, pl.DataFrame]] = {}
    for name, df in tables.items():
        if name.startswith(TABLE_PREFIX):
            _, rank, sheet = name.split("/", 2)
            sheets.setdefault(int(rank), {})[sheet] = df
        else:
            own[name] = df
    return own, sheets


def write_tracelens_csv(
    sheets: Mapping[int, Mapping[str, pl.DataFrame]],
    out_dir: str,
    *,
    force: bool = False,
    inputs: Sequence[str] = (),
) -> list[str]:
    """Write the sheets of each rank (``{rank: {sheet: table}}``) into ``out_dir``; returns the paths."""
    if os.path.lexists(out_dir) and not os.path.isdir(out_dir):
        raise OutputError(f"cannot write into {out_dir}: it exists and is not a directory")
    one = len(sheets) == 1
    files: list[tuple[str, pl.DataFrame]] = []
    for rank in sorted(sheets):
        sub = "" if one else f"rank{rank}"
        for sheet, df in sheets[rank].items():
            files.append((os.path.join(sub, f"{sheet}.csv"), df))
    for rel, _ in files:
        check_output(os.path.join(out_dir, rel), inputs=inputs, force=force)
    written = []
    # one staging folder per destination folder: an existing rank<N>/ gets its files replaced one by
    # one (a folder cannot be renamed over a non-empty one)
    by_dir: dict[str, list[tuple[str, pl.DataFrame]]] = {}
    for rel, df in files:
        by_dir.setdefault(os.path.dirname(rel), []).append((os.path.basename(rel), df))
    for sub, items in by_dir.items():
        dest = os.path.join(out_dir, sub) if sub else out_dir
        with staged_dir(dest) as tmp:
            for name, df in items:
                with open(os.path.join(tmp, name), "w", encoding="utf-8", newline="") as f:
                    f.write(sheet_csv(df))
                written.append(os.path.join(dest, name))
    return written
