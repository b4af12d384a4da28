"""The report's payload keeps numbers at full precision: the browser formats them for display only
(tests/report/test_report_overflow_browser.py checks what the page shows)."""

from __future__ import annotations

import polars as pl

from ranksight.report.html.payload import StringTable, encode_table, series


def test_tables_and_series_keep_full_precision():
    df = pl.DataFrame({"p_value": [0.000817, 6.01e-05, 1.23456789e-9, float("nan")], "n": [1, 2, 3, 4]})
    blk = encode_table(df, StringTable(), id="p", title="p-values")
    assert blk["data"][0] == [0.000817, 6.01e-05, 1.23456789e-9, None]
    assert series([0.000817, 6.01e-05, 12345.678901234, float("inf")]) == [0.000817, 6.01e-05, 12345.678901234, None]
