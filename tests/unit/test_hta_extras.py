"""The HTA facade without plotly (issue 21, item 2): ``visualize=True`` says that no figure is
drawn and how to get one (``pip install 'ranksight[hta]'``), and still returns the table."""

from __future__ import annotations

import sys
import warnings

import pandas as pd
import pytest

from ranksight.errors import RanksightWarning
from ranksight.hta import LabeledTrace, TraceAnalysis, TraceDiff

MESSAGE = (
    "plotly is not installed, so visualize=True draws no figure (the table is returned): pip install 'ranksight[hta]'"
)


@pytest.fixture
def no_plotly(monkeypatch):
    for name in [m for m in sys.modules if m == "plotly" or m.startswith("plotly.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "plotly", None)  # `import plotly` raises ImportError


def said(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, RanksightWarning)]


def test_breakdown_and_launch_methods_say_so(no_plotly, data):
    a = TraceAnalysis(trace_dir=str(data("hta/trace_filter")))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        df = a.get_temporal_breakdown(visualize=True)
        stats = a.get_cuda_kernel_launch_stats(ranks=[0], visualize=True)
    assert isinstance(df, pd.DataFrame) and len(df) == 2
    assert isinstance(stats[0], pd.DataFrame) and len(stats[0]) > 0
    assert said(caught) == [MESSAGE, MESSAGE]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        a.get_temporal_breakdown(visualize=False)
    assert said(caught) == []


def test_trace_diff_visualize_says_so(no_plotly):
    df = pd.DataFrame({"name": ["a"], "counts_control": [1], "counts_test": [2], "diff_counts": [1]})
    with pytest.warns(RanksightWarning) as caught:
        TraceDiff.visualize_counts_diff(df)
    assert [str(w.message) for w in caught] == [
        "plotly is not installed, so visualize_*_diff draws no figure (the table is returned): "
        "pip install 'ranksight[hta]'"
    ]


@pytest.mark.parametrize("missing", [("pyarrow",), ("pandas",), ("pandas", "pyarrow")])
def test_facade_without_pandas_or_pyarrow_says_which_extra(missing, monkeypatch):
    """Without pandas or pyarrow (polars converts to pandas through Arrow), the facade's
    constructors raise one UsageError naming what is missing and the extra, before loading
    anything, not an ImportError from inside polars at the first call."""
    import importlib.util

    from ranksight.errors import UsageError

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in missing else real(name, *a))
    for make in (lambda: TraceAnalysis(trace_dir="/nonexistent"), lambda: LabeledTrace(trace_dir="/x")):
        with pytest.raises(UsageError) as err:
            make()
        msg = str(err.value)
        assert " and ".join(missing) in msg and "pip install 'ranksight[hta]'" in msg, msg
