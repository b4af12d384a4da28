"""Terminal and Markdown tables for people (issue 21, item 4): human durations and sizes decided by
the unit in the column name, integers as integers, numbers never wrapped (columns left out with a
note instead), raw numbers kept in CSV/JSON; progress on stderr only on a terminal."""

from __future__ import annotations

import io
import json
import time

import polars as pl
import pytest
from rich.console import Console

from ranksight.cli._common import Context, step
from ranksight.report.cells import column_formatter, column_unit, human
from ranksight.report.markdown import table_to_markdown
from ranksight.report.terminal import _rich_table, print_tables


@pytest.mark.parametrize(
    ("value", "kind", "scale", "text"),
    [
        (1230.0, "duration", 1e-6, "1.23 ms"),
        (622928.0, "duration", 1e-6, "623 ms"),
        (12.34, "duration", 1e-6, "12.3 µs"),
        (0.85, "duration", 1e-6, "850 ns"),
        (850.0, "duration", 1e-9, "850 ns"),
        (13.01, "duration", 1e-3, "13 ms"),
        (3367.0, "duration", 1e-3, "3.37 s"),
        (4_000_000.0, "duration", 1e-3, "4,000 s"),
        (-58076.0, "duration", 1e-6, "-58.1 ms"),
        (999.96, "duration", 1e-6, "1 ms"),
        (0.0, "duration", 1e-6, "0"),
        (512.0, "size", 1.0, "512 B"),
        (1536.0, "size", 1.0, "1.5 KiB"),
        (4.5 * 2**30, "size", 1.0, "4.5 GiB"),
        (127926272.0, "size", 1.0, "122 MiB"),
        (0.071, "bandwidth", 1e9, "71 MB/s"),
        (24.07, "bandwidth", 1e9, "24.1 GB/s"),
        (5.61, "flops", 1e12, "5.61 TFLOP/s"),
        (0.85, "flops", 1e12, "850 GFLOP/s"),
        (1307.0, "flops", 1e12, "1,307 TFLOP/s"),
        (1.76, "mb", 1.0, "1.76 MB"),
    ],
)
def test_human_units(value: float, kind: str, scale: float, text: str) -> None:
    assert human(value, kind, scale) == text


def test_unit_from_the_column_name() -> None:
    assert column_unit("idle_us") == ("duration", 1e-6)
    assert column_unit("kernel_us_mean") == ("duration", 1e-6)  # the unit need not be last
    assert column_unit("busy_us_per_replay") == ("duration", 1e-6)
    assert column_unit("span_ms") == ("duration", 1e-3)
    assert column_unit("dur_ns") == ("duration", 1e-9)
    assert column_unit("reserved_bytes") == ("size", 1.0)
    assert column_unit("bytes") == ("size", 1.0)
    assert column_unit("busbw_gbps") == ("bandwidth", 1e9)
    assert column_unit("mem_bw_tb_per_s") == ("bandwidth", 1e12)
    assert column_unit("achieved_tflop_per_s") == ("flops", 1e12)
    assert column_unit("json_mb") == ("mb", 1.0)
    # time points are not durations; names without a unit are plain numbers
    for name in ("ts_ns", "alloc_ts_ns", "gpu_start_ns", "first_start_us", "end_us", "gpu_end_ns"):
        assert column_unit(name) is None, name
    for name in ("idle_pct", "calls", "flop_per_byte", "us", "busy", "status", "mfu"):
        assert column_unit(name) is None, name


def test_whole_floats_are_integers_and_missing_is_empty() -> None:
    calls = column_formatter("calls", pl.Float64(), [38.0, 1200.0, None])
    assert [calls(v) for v in (38.0, 1200.0, None, float("nan"))] == ["38", "1,200", "", ""]
    ratio = column_formatter("ratio", pl.Float64(), [0.707, 2.0])
    assert [ratio(v) for v in (0.707, 2.0, 1234.5)] == ["0.707", "2.00", "1,234"]
    dur = column_formatter("idle_us", pl.Float64(), [])
    assert [dur(v) for v in (None, float("inf"), 1500.0)] == ["", "", "1.5 ms"]
    assert column_formatter("count", pl.Int64(), [3])(1234567) == "1,234,567"


def _df() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "rank": [0, 1],
            "name": ["ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", "aten::mm"],
            "calls": [38.0, 1200.0],
            "total_us": [1_150_400.0, 622_928.0],
            "reserved_bytes": [4 * 2**30 + 2**29, 1024],
            "busbw_gbps": [24.07, 0.071],
            "idle_pct": [49.34, 0.5],
            "ts_ns": [1_694_128_201_545_000_000, 1_694_128_201_546_000_000],
            "note": ["a note that is long enough to be cut when the terminal is narrow", ""],
        }
    )


def _render(df: pl.DataFrame, width: int) -> list[str]:
    buf = io.StringIO()
    Console(file=buf, width=width, soft_wrap=False, highlight=False).print(_rich_table("t", df, 50, width=width))
    return [line.rstrip() for line in buf.getvalue().splitlines()]


def test_wide_table_shows_everything_in_human_units() -> None:
    lines = _render(_df(), 250)
    assert all(len(line) <= 250 for line in lines)
    row0 = next(line for line in lines if line.startswith("│    0 │"))
    cells = [c.strip() for c in row0.strip("│").split("│")]
    assert cells[2:] == ["38", "1.15 s", "4.5 GiB", "24.1 GB/s", "49.34", "1,694,128,201,545,000,000", cells[-1]]
    assert cells[1] == "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"
    row1 = next(line for line in lines if line.startswith("│    1 │"))
    assert [c.strip() for c in row1.strip("│").split("│")][2:6] == ["1,200", "623 ms", "1 KiB", "71 MB/s"]


def test_numbers_never_wrap_at_80_columns() -> None:
    """At 80 columns, text is cut with "…" and the columns that still do not fit are left out
    with a caption naming them; every number shown is whole, on one line."""
    lines = _render(_df(), 80)
    assert all(len(line) <= 80 for line in lines), lines
    rows = [line for line in lines if line.startswith(("│ ", "┃ "))]
    assert len(rows) == 3  # header and two rows: no line wrapped
    body = [[c.strip() for c in r.strip("│").split("│")] for r in rows[1:]]
    assert [r[0] for r in body] == ["0", "1"]
    assert body[0][2:] == ["38", "1.15 s", "4.5 GiB", "24.1 GB/s", "49.34"][: len(body[0]) - 2]
    assert body[0][1].endswith("…")
    caption = " ".join(line for line in lines if not line.startswith(("│", "┏", "┃", "┡", "└", "t")))
    assert "not shown at 80 columns: " in caption
    shown = {c.strip() for c in rows[0].strip("┃").split("┃")}
    dropped = caption.split("not shown at 80 columns: ")[1].split(" (")[0].split(", ")
    assert set(dropped) | shown == set(_df().columns) and not set(dropped) & shown
    assert dropped[-1] == "note"


def test_markdown_uses_human_units_and_integers() -> None:
    md = table_to_markdown(_df().select("rank", "calls", "total_us", "reserved_bytes"))
    assert md.splitlines() == [
        "| rank | calls | total_us | reserved_bytes |",
        "| ---: | ---: | ---: | ---: |",
        "| 0 | 38 | 1.15 s | 4.5 GiB |",
        "| 1 | 1,200 | 623 ms | 1 KiB |",
    ]


def test_csv_and_json_keep_raw_numbers() -> None:
    df = _df().select("rank", "calls", "total_us", "reserved_bytes")
    buf = io.StringIO()
    print_tables({"t": df}, "csv", file=buf)
    assert buf.getvalue().splitlines()[1] == "0,38.0,1150400.0,4831838208"
    buf = io.StringIO()
    print_tables({"t": df}, "json", file=buf)
    assert json.loads(buf.getvalue())["tables"]["t"][0] == {
        "rank": 0,
        "calls": 38.0,
        "total_us": 1150400.0,
        "reserved_bytes": 4831838208,
    }


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_only_on_a_terminal_after_the_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    tty = _Tty()
    monkeypatch.setattr("sys.stderr", tty)
    with step(Context(), "writing the report r.html", after=0.05):
        time.sleep(0.6)
    assert "writing the report r.html" in tty.getvalue()
    fast = _Tty()
    monkeypatch.setattr("sys.stderr", fast)
    with step(Context(), "quick", after=0.5):
        pass
    assert fast.getvalue() == ""
    quiet = _Tty()
    monkeypatch.setattr("sys.stderr", quiet)
    with step(Context(quiet=True), "quiet", after=0.01):
        time.sleep(0.2)
    assert quiet.getvalue() == ""
    pipe = io.StringIO()
    monkeypatch.setattr("sys.stderr", pipe)
    with step(Context(), "piped", after=0.01):
        time.sleep(0.2)
    assert pipe.getvalue() == ""
