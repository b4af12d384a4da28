"""The HTA facade's TraceDiff: HTA's behaviour on small inputs, and where ranksight differs on
purpose (each difference is an entry under "TraceDiff" in docs/hta-differences.md)."""

from __future__ import annotations

import pytest

pd = pytest.importorskip("pandas")

from ranksight.hta import DeviceType, LabeledTrace, TraceDiff  # noqa: E402

EV = [
    {"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#7", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 20},
    {
        "ph": "X",
        "cat": "cuda_runtime",
        "name": "cudaLaunchKernel",
        "pid": 1,
        "tid": 1,
        "ts": 12,
        "dur": 3,
        "args": {"correlation": 5},
    },
    {
        "ph": "X",
        "cat": "kernel",
        "name": "void gemm<float>(float*)",
        "pid": 0,
        "tid": 7,
        "ts": 40,
        "dur": 30,
        "args": {"correlation": 5, "stream": 7},
    },
    {
        "ph": "X",
        "cat": "gpu_memcpy",
        "name": "Memcpy DtoD (Device -> Device)",
        "pid": 0,
        "tid": 7,
        "ts": 80,
        "dur": 2,
        "args": {"correlation": 6, "stream": 7},
    },
    {
        "ph": "X",
        "cat": "cuda_runtime",
        "name": "cudaMemcpyAsync",
        "pid": 1,
        "tid": 1,
        "ts": 50,
        "dur": 4,
        "args": {"correlation": 6},
    },
    {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": 1, "tid": 1, "ts": 0, "dur": 200},
]


def _pair(make_trace, test_events=None):
    c = LabeledTrace(label="Control", trace_dir=make_trace(EV))
    t = LabeledTrace(label="Test", trace_dir=make_trace(test_events or EV + [
        {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 1, "ts": 60, "dur": 5}]))  # fmt: skip
    return c, t


def test_columns_rows_and_categories(make_trace):
    c, t = _pair(make_trace)
    df = TraceDiff.compare_traces(c, t)
    assert list(df.columns) == ["Control_counts", "Control_total_duration", "Test_counts", "Test_total_duration",
                                "diff_counts", "diff_duration", "counts_change_categories"]  # fmt: skip
    # control names sorted, then the test-only name; the "Trace" category is not an op
    assert list(df.index) == ["Memcpy DtoD (Device -> Device)", "ProfilerStep#7", "aten::mm", "cudaLaunchKernel",
                              "cudaMemcpyAsync", "void gemm<float>(float*)", "aten::relu"]  # fmt: skip
    assert df.loc["aten::relu"].tolist() == [0.0, 0.0, 1.0, 5.0, 1.0, 5.0, "+"]
    assert df.loc["aten::mm"].tolist() == [1.0, 20.0, 1.0, 20.0, 0.0, 0.0, "="]
    assert TraceDiff.ops_diff(c, t)["added"] == ["aten::relu"]
    gpu = TraceDiff.compare_traces(c, t, device_type=DeviceType.GPU)
    assert list(gpu.index) == ["Memcpy DtoD (Device -> Device)", "void gemm<float>(float*)"]
    assert gpu["Control_counts"].dtype.kind == "i"  # no name missing on a side: integers, as in HTA
    short = TraceDiff.compare_traces(c, t, device_type=DeviceType.GPU, use_short_name=True)
    assert list(short.index) == ["Memcpy DtoD (Device -> Device)", "gemm"] and short.index.name == "short_name"


def test_summary_and_extract(make_trace):
    c, _ = _pair(make_trace)
    ops = c.extract_ops(device_type=DeviceType.CPU)
    assert sorted(ops["name"]) == ["ProfilerStep#7", "aten::mm", "cudaLaunchKernel", "cudaMemcpyAsync"]
    assert set(ops["iteration"]) == {7} and set(ops["stream"]) == {-1}
    s = c.get_ops_summary(c.extract_ops())
    assert list(s.columns) == ["cat", "name", "short_name", "counts", "total_duration", "cat_id", "name_id"]
    assert s.set_index("name").loc["void gemm<float>(float*)", "short_name"] == "gemm"


def test_invalid_rank_and_iteration(make_trace):
    c, t = _pair(make_trace)
    with pytest.raises(ValueError, match=r"^Invalid argument rank=3\.$"):
        TraceDiff.compare_traces(c, t, control_rank=3)
    assert TraceDiff.compare_traces(c, t, control_iteration=99, test_iteration=99).empty


def test_same_labels_get_a_test_suffix(make_trace):
    c = LabeledTrace(label="run", trace_dir=make_trace(EV))
    df = TraceDiff.compare_traces(c, c)
    assert list(df.columns[:4]) == [
        "run_counts",
        "run_total_duration",
        "run_control_test_counts",
        "run_control_test_total_duration",
    ]


# ---- deliberate differences (docs/hta-differences.md, TraceDiff) -----------------------------


def test_missing_labels_are_deterministic(make_trace):
    """HTA draws a random t0..t10 (two traces can collide); ranksight numbers them in order."""
    a = LabeledTrace(trace_dir=make_trace(EV))
    b = LabeledTrace(trace_dir=make_trace(EV))
    n = int(a.label[1:])
    assert a.label == f"t{n}" and b.label == f"t{n + 1}"


def test_amd_kernels_are_gpu_events(data):
    """HTA coerces ROCm's stream "0x0" to −1 and lists AMD kernels as CPU ops; ranksight keeps
    them on the GPU side (category-based)."""
    c = LabeledTrace(label="amd", trace_dir=data("hta/amd_trace"))
    gpu = TraceDiff.compare_traces(c, c, device_type=DeviceType.GPU)
    cpu = TraceDiff.compare_traces(c, c, device_type=DeviceType.CPU)
    assert any(n.startswith("Cijk_") for n in gpu.index) and not any(n.startswith("Cijk_") for n in cpu.index)
    assert gpu.shape[0] == 13


def test_ns_durations_exact_unless_hta_compat(data):
    """On a trace with ns timestamps HTA rounds each start up and end down to whole µs (in float64
    µs, which at epoch scale also moves ends by up to 0.25 µs); the facade keeps exact durations
    (ns / 1000) and rounds only with hta_compat=True."""
    path = data("hta/ns_resolution_trace")
    exact = LabeledTrace(label="exact", trace_dir=path)
    compat = LabeledTrace(label="hta", trace_dir=path, hta_compat=True)
    df = TraceDiff.compare_traces(exact, compat, device_type=DeviceType.GPU)
    row = df.loc["Memcpy DtoD (Device -> Device)"]
    assert (row["exact_counts"], row["exact_total_duration"], row["hta_total_duration"]) == (320, 756.573, 507.0)
    assert (df["hta_total_duration"] % 1 == 0).all() and (df["exact_total_duration"] % 1 != 0).sum() > 50


def test_visualize_writes_figures(make_trace, tmp_path):
    pytest.importorskip("plotly")
    c, t = _pair(make_trace)
    df = TraceDiff.compare_traces(c, t)
    counts, durations = tmp_path / "counts.html", tmp_path / "durations.html"
    assert TraceDiff.visualize_counts_diff(df, show_image=False, export_image_path=str(counts)) is None
    assert TraceDiff.visualize_duration_diff(df, show_image=False, export_image_path=str(durations)) is None
    assert "aten::relu" in counts.read_text() and "aten::relu" in durations.read_text()
    none = tmp_path / "none.html"
    TraceDiff.visualize_counts_diff(TraceDiff.compare_traces(c, c), show_image=False, export_image_path=str(none))
    assert not none.exists()  # nothing changed: no figure
