"""The notebook API (issue 21, item 6): ranksight.analyze / diagnose / report, results that show
themselves as HTML, .plot() with plotly (a clear error without it), and examples/quickstart.py
executed as a script."""

from __future__ import annotations

import html
import os
import runpy
import subprocess
import sys
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

import ranksight
from ranksight.analyses import AnalysisResult, Session, run_analysis
from ranksight.data import example_path
from ranksight.errors import MissingDataError, UsageError

ROOT = Path(__file__).resolve().parents[2]
DLRM = example_path("dlrm")


@pytest.fixture(scope="module")
def run() -> ranksight.Run:
    return ranksight.load(DLRM)


def test_import_ranksight_loads_no_analysis_and_no_reporter() -> None:
    """The API is lazy: `import ranksight` imports neither the analyses nor the reporters."""
    code = (
        "import sys, ranksight; "
        "print(sorted(m for m in sys.modules if m.startswith(('ranksight.analyses', 'ranksight.report')))); "
        "print(callable(ranksight.analyze), callable(ranksight.report), 'report' in dir(ranksight))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["[]", "True True True"]


def test_analyze_is_the_session_result(run: ranksight.Run) -> None:
    res = ranksight.analyze(run, "temporal", per_step=True, ranks=[0, 7])
    assert isinstance(res, AnalysisResult)
    assert res.main.equals(run_analysis("temporal", run, ranks=[0, 7], per_step=True).main)
    assert res.main["rank"].to_list() == [0, 7] and "per_step" in res.tables
    by_path = ranksight.analyze(str(DLRM), "temporal", ranks=[7])  # paths are loaded
    assert by_path.main.row(0, named=True)["idle_us"] == 8308.0
    with pytest.raises(MissingDataError, match=r"no \[memory\] events"):
        ranksight.analyze(run, "memory")
    with pytest.raises(UsageError, match="unknown analysis 'nope'"):
        ranksight.analyze(run, "nope")


def test_diagnose_gives_the_findings(run: ranksight.Run) -> None:
    res = ranksight.diagnose(run)
    f = res["findings"]
    assert f.columns[:3] == ["severity", "rule", "impact"] and f.height >= 3
    assert f["severity"][0] == "high"


def test_report_writes_the_file_and_reuses_the_session(run: ranksight.Run, tmp_path: Path) -> None:
    s = Session(run)
    ranksight.analyze(s, "temporal")
    out = ranksight.report(s, tmp_path / "r.html", title="mine")
    assert out == tmp_path / "r.html" and out.read_text()[:15] == "<!DOCTYPE html>"
    assert "<title>mine · ranksight</title>" in out.read_text()
    before = Counter(s.calls)
    assert before["temporal"] >= 1 and len(before) > 10
    ranksight.analyze(s, "temporal")  # the session's results are reused: nothing computed again
    assert ranksight.diagnose(s).main.height >= 3
    assert s.calls - before == Counter({"diagnose": 1})  # its rules read what the report computed
    with pytest.raises(ranksight.RanksightError, match="exists; use --force"):
        ranksight.report(s, out)
    assert ranksight.report(s, out, force=True) == out
    with pytest.raises(UsageError, match="refusing to overwrite an input"):
        ranksight.report(run, run[0].path, force=True)
    assert ranksight.report is sys.modules["ranksight.report"]  # still the package: ranksight.report.x works
    assert ranksight.report.write_html is not None


def test_repr_html_is_small_escaped_and_says_what_is_cut() -> None:
    df = pl.DataFrame(
        {"rank": list(range(25)), "name": ["void k<float>(T*)"] * 25, "idle_us": [1.5, float("nan")] + [2e6] * 23}
    )
    res = AnalysisResult({"kernels": df, "other": df.head(1)}, ["a note with <b>"])
    text = res._repr_html_()
    assert text.startswith('<div class="ranksight-result">') and text.endswith("</div>")
    assert "<p><b>kernels</b> <small>(25 rows × 3 columns)</small></p>" in text
    assert text.count("<tr>") == 1 + 20 + 1 + 1  # two headers, 20 + 1 rows
    assert "void k&lt;float&gt;(T*)" in text and "<float>" not in text
    assert '<td style="text-align:right">1.5</td><td' not in text  # cells in column order
    row0 = text.split("<tbody>")[1].split("</tr>")[0]
    assert row0 == (
        '<tr><td style="text-align:right">0</td><td style="text-align:left">void k&lt;float&gt;(T*)</td>'
        '<td style="text-align:right">1.5</td>'
    )
    row1 = text.split("<tbody>")[1].split("</tr>")[1]
    assert row1.endswith('<td style="text-align:right"></td>')  # NaN: empty
    assert "2,000,000" in text
    assert "5 more rows: <code>result[&#x27;kernels&#x27;]</code> is the whole DataFrame" in text
    assert "<li>note: a note with &lt;b&gt;</li>" in text
    assert html.unescape("&lt;") == "<"


def test_plot_with_plotly(run: ranksight.Run) -> None:
    pytest.importorskip("plotly")
    res = ranksight.analyze(run, "temporal")
    fig = res.plot()
    assert [b.name for b in fig.data] == ["kernel_time_us", "idle_us", "compute_us", "non_compute_us"]
    assert list(fig.data[0].x) == [str(r) for r in range(8)]
    assert list(fig.data[1].y) == res.main["idle_us"].to_list()
    assert fig.layout.title.text == "temporal"
    one = res.plot(y="idle_pct")
    assert [b.name for b in one.data] == ["idle_pct"]
    with pytest.raises(UsageError, match="no table 'nope'"):
        res.plot("nope")


def test_plot_without_plotly_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "plotly", None)
    monkeypatch.setitem(sys.modules, "plotly.graph_objects", None)
    res = AnalysisResult({"t": pl.DataFrame({"rank": [0], "idle_us": [1.0]})})
    with pytest.raises(UsageError, match=r"needs plotly, which is not installed: pip install plotly"):
        res.plot()


def test_quickstart_example_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """examples/quickstart.py, a jupytext percent script, runs top to bottom as a script."""
    path = ROOT / "examples" / "quickstart.py"
    text = path.read_text()
    assert text.count("# %%") >= 8 and "format_name: percent" in text
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        ns = runpy.run_path(str(path), run_name="__main__")
    finally:
        os.chdir(cwd)
    assert ns["temporal"].main.height == 8 and ns["out"].exists()
    assert ns["findings"].main.height >= 3
    out = capsys.readouterr().out
    assert "report: " in out and "open it in a browser" in out
