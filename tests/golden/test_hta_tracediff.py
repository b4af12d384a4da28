"""Golden test: the HTA facade's TraceDiff against HTA v0.6 on hta/trace_diff control vs test.

Oracles: tests/golden/hta/tracediff/ (copies, see the README there); each file's exact HTA call
is in its manifest and is checked below against the call this test makes. The two traces are
read from ../shared (skipped loudly when absent). Everything must be equal: row order, columns,
counts and µs durations (both traces have whole-µs times, so exact ns / 1000 equals HTA's value),
change categories, and the ops_diff name lists in order.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pd = pytest.importorskip("pandas")

from tests.conftest import shared_or_skip  # noqa: E402

from ranksight.hta import DeviceType, LabeledTrace, TraceDiff  # noqa: E402

ORACLE = Path(__file__).resolve().parent / "hta" / "tracediff" / "tracediff_trace_diff_control_vs_test"
MANIFEST = json.loads((ORACLE / "manifest.json").read_text())

CALLS = {
    "compare_traces_cpu_demo": ("TraceDiff.compare_traces(control_t, test_t, 3, 1, 1010, 1010, DeviceType.CPU)",
                                lambda c, t: TraceDiff.compare_traces(c, t, 3, 1, 1010, 1010, DeviceType.CPU)),
    "compare_traces_gpu_demo": ("TraceDiff.compare_traces(control_t, test_t, None, 1, 1010, 1010, DeviceType.GPU)",
                                lambda c, t: TraceDiff.compare_traces(c, t, None, 1, 1010, 1010, DeviceType.GPU)),
    "compare_traces_default": ("TraceDiff.compare_traces(control_t, test_t)", lambda c, t: TraceDiff.compare_traces(c, t)),
    "compare_traces_cpu_short": ("TraceDiff.compare_traces(control_t, test_t, device_type=DeviceType.CPU, "
                                 "use_short_name=True)",
                                 lambda c, t: TraceDiff.compare_traces(c, t, device_type=DeviceType.CPU, use_short_name=True)),
    "ops_diff_cpu_demo": ("TraceDiff.ops_diff(control_t, test_t, 3, 1, 1010, 1010, DeviceType.CPU)",
                          lambda c, t: TraceDiff.ops_diff(c, t, 3, 1, 1010, 1010, DeviceType.CPU)),
    "ops_diff_gpu": ("TraceDiff.ops_diff(control_t, test_t, device_type=DeviceType.GPU)",
                     lambda c, t: TraceDiff.ops_diff(c, t, device_type=DeviceType.GPU)),
    "ops_diff_default": ("TraceDiff.ops_diff(control_t, test_t)", lambda c, t: TraceDiff.ops_diff(c, t)),
}  # fmt: skip


@pytest.fixture(scope="module")
def sides():
    root = shared_or_skip("traces/hta/trace_diff")
    return LabeledTrace(label="Control", trace_dir=root / "control"), LabeledTrace(
        label="Test", trace_dir=root / "test"
    )


def test_every_oracle_call_is_covered():
    assert set(MANIFEST["calls"]) == set(CALLS)
    for key, (call, _) in CALLS.items():
        assert MANIFEST["calls"][key]["call"] == call
        assert MANIFEST["calls"][key]["status"] == "ok"


@pytest.mark.shared
@pytest.mark.parametrize("key", [k for k in CALLS if k.startswith("compare_traces")])
def test_compare_traces(sides, key):
    got = CALLS[key][1](*sides)
    exp = pd.read_csv(ORACLE / f"{key}.csv", index_col=0, keep_default_na=False)
    assert len(got) == MANIFEST["calls"][key]["rows"]
    assert got.index.name == exp.index.name
    assert list(got.index) == list(exp.index)
    assert list(got.columns) == list(exp.columns)
    num = [c for c in exp.columns if c != "counts_change_categories"]
    assert (got[num].to_numpy() == exp[num].to_numpy()).all()
    assert list(got["counts_change_categories"]) == list(exp["counts_change_categories"])
    assert all(str(d) == "float64" for d in got[num].dtypes)  # names missing on one side make floats, as in HTA


@pytest.mark.shared
@pytest.mark.parametrize("key", [k for k in CALLS if k.startswith("ops_diff")])
def test_ops_diff(sides, key):
    got = CALLS[key][1](*sides)
    assert got == json.loads((ORACLE / f"{key}.json").read_text())
    assert {k: len(v) for k, v in got.items()} == MANIFEST["calls"][key]["result_sizes"]


@pytest.mark.shared
def test_sides_as_hta_reports_them(sides):
    c, t = sides
    assert c.ranks() == MANIFEST["control_ranks"] and t.ranks() == MANIFEST["test_ranks"]
    assert c.iterations() == MANIFEST["control_iterations"] and t.iterations() == MANIFEST["test_iterations"]
    with pytest.raises(ValueError, match=r"^Invalid argument rank=1\.$"):
        TraceDiff.compare_traces(c, t, 1, 1, 1010, 1010, DeviceType.GPU)  # the notebook's call: control has rank 3 only
