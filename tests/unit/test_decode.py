"""Decoder and trace model on small hand-built traces with exact expected columns."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest

import ranksight
from ranksight.errors import DuplicateRankError, TraceFormatError, TraceNotFoundError
from ranksight.io.kineto import decode

EVENTS = [
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 10, "tid": 11, "ts": 100.0, "dur": 50.0},
    {
        "ph": "X",
        "cat": "cpu_op",
        "name": "aten::mm",
        "pid": 10,
        "tid": 11,
        "ts": 101.5,
        "dur": 10.25,
        "args": {"External id": 7, "Input Dims": [[2, 3], [3, 4]], "Input type": ["float", "float"]},
    },
    {
        "ph": "X",
        "cat": "cuda_runtime",
        "name": "cudaLaunchKernel",
        "pid": 10,
        "tid": 11,
        "ts": 102.001,
        "dur": 3.0,
        "args": {"correlation": 55, "External id": 7, "cbid": 211},
    },
    {
        "ph": "X",
        "cat": "kernel",
        "name": "sgemm_kernel",
        "pid": 0,
        "tid": 7,
        "ts": 149.0,
        "dur": 20.0,
        "args": {
            "correlation": 55,
            "stream": 7,
            "device": 0,
            "grid": [4, 2, 1],
            "block": [128, 1, 1],
            "registers per thread": 64,
            "shared memory": 1024,
            "blocks per SM": 0.1,
            "warps per SM": 0.4,
            "est. achieved occupancy %": 12,
        },
    },
    {
        "ph": "X",
        "cat": "cuda_sync",
        "name": "Stream Sync",
        "pid": 0,
        "tid": 7,
        "ts": 160.0,
        "dur": 5.0,
        "args": {"correlation": 56, "stream": 7, "device": 0},
    },
    {
        "ph": "i",
        "cat": "cpu_instant_event",
        "name": "[memory]",
        "pid": 10,
        "tid": 11,
        "ts": 103.0,
        "s": "t",
        "args": {
            "Addr": 140000,
            "Bytes": 512,
            "Total Allocated": 2048,
            "Total Reserved": 4096,
            "Device Type": 1,
            "Device Id": 0,
        },
    },
    {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 55, "pid": 10, "tid": 11, "ts": 102.001},
    {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 55, "pid": 0, "tid": 7, "ts": 149.0, "bp": "e"},
    {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7 "}},
    {
        "ph": "X",
        "cat": "Trace",
        "name": "PyTorch Profiler (0)",
        "pid": "Spans",
        "tid": "PyTorch Profiler",
        "ts": 90,
        "dur": 200,
    },
]
TOP = {
    "schemaVersion": 1,
    "distributedInfo": {
        "backend": "nccl",
        "rank": 2,
        "world_size": 4,
        "pg_config": [
            {
                "pg_name": "0",
                "pg_desc": "default_pg",
                "backend_config": "cuda:nccl",
                "pg_size": 4,
                "ranks": [0, 1, 2, 3],
            }
        ],
    },
    "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "numSms": 132}],
    "customKey": {"a": [1, 2]},
    "baseTimeNanoseconds": 1_000_000_000,
}


def test_core_columns_exact(make_trace):
    p = make_trace(EVENTS, **TOP)
    d = decode(p)
    ev = d.events
    # flow events (ph s/t/f) are not event rows: they live in the flow table
    assert ev["row"].to_list() == [0, 1, 2, 3, 4, 5, 8, 9]
    assert d.stats["events"] == len(EVENTS)
    assert ev["ph"].cast(pl.String).to_list() == ["X", "X", "X", "X", "X", "i", "M", "X"]
    base = 1_000_000_000
    assert ev["ts_ns"].to_list() == [
        base + 100_000,
        base + 101_500,
        base + 102_001,
        base + 149_000,
        base + 160_000,
        base + 103_000,
        None,
        base + 90_000,
    ]
    assert ev["dur_ns"].to_list() == [50_000, 10_250, 3_000, 20_000, 5_000, None, None, 200_000]
    assert ev["correlation"].to_list() == [None, None, 55, 55, 56, None, None, None]
    assert ev["external_id"].to_list() == [None, 7, 7, None, None, None, None, None]
    assert ev["stream"].to_list() == [None, None, None, 7, 7, None, None, None]
    assert ev["pid"].to_list()[:7] == [10, 10, 10, 0, 0, 10, 0]
    # string pid/tid become synthetic negative ids, with their names kept
    spans_pid = ev["pid"][7]
    assert spans_pid < -(1 << 29) and d.id_names[spans_pid] == "Spans"
    fl = d.tables["flow"]
    assert fl.columns == ["row", "ph", "cat", "name", "pid", "tid", "ts_ns", "flow_id", "flow_bp"]
    assert fl.select(pl.all().cast(pl.String)).rows() == [
        ("6", "s", "ac2g", "ac2g", "10", "11", str(base + 102_001), "55", None),
        ("7", "f", "ac2g", "ac2g", "0", "7", str(base + 149_000), "55", "e"),
    ]
    assert d.meta["customKey"] == {"a": [1, 2]}
    assert d.meta["baseTimeNanoseconds"] == base


def test_side_tables(make_trace):
    d = decode(make_trace(EVENTS, **TOP))
    k = d.tables["kernel"]
    assert k["row"].to_list() == [3]
    r = k.row(0, named=True)
    assert (r["grid_x"], r["grid_y"], r["grid_z"], r["block_x"]) == (4, 2, 1, 128)
    assert (r["registers_per_thread"], r["shared_memory_bytes"], r["blocks_per_sm"], r["est_occupancy_pct"]) == (
        64,
        1024,
        0.1,
        12.0,
    )
    op = d.tables["op"]
    assert op["row"].to_list() == [1]
    assert op["input_dims"].cast(pl.String).to_list() == ["[[2,3],[3,4]]"]
    assert op["input_type"].cast(pl.String).to_list() == ['["float","float"]']
    mem = d.tables["memory"].row(0, named=True)
    assert mem == {
        "row": 5,
        "addr": 140000,
        "bytes": 512,
        "total_allocated": 2048,
        "total_reserved": 4096,
        "device_type": 1,
        "device_id": 0,
    }
    fl = d.tables["flow"]
    assert fl["row"].to_list() == [6, 7] and fl["flow_id"].to_list() == [55, 55]
    assert fl["flow_bp"].cast(pl.String).to_list() == [None, "e"]
    assert d.tables["meta"]["label"].cast(pl.String).to_list() == ["stream 7 "]


def test_derived_model(make_trace):
    run = ranksight.load(make_trace(EVENTS, **TOP))
    assert run.ranks == [2]
    t = run[2]
    ev = t.events
    assert ev["kind"].cast(pl.String).to_list() == [
        "user_annotation",
        "cpu_op",
        "cuda_runtime",
        "kernel",
        "sync",
        "memory",
        "metadata",
        "other",
    ]
    assert ev["kernel_class"].cast(pl.String).to_list()[3] == "COMPUTE"
    assert ev["kernel_class"][4] is None  # sync is not GPU work
    assert ev["launch_row"].to_list()[3] == 2
    assert ev["gpu_count"].to_list()[2] == 1
    # the kernel runs after the step's CPU end but belongs to the step that launched it
    assert ev["step"].to_list()[:4] == [3, 3, 3, 3]
    assert t.meta.world_size == 4 and t.meta.gpu_vendor == "NVIDIA" and t.meta.gpu_model == "NVIDIA H100 80GB HBM3"
    assert t.meta.process_groups[0].ranks == (0, 1, 2, 3)
    st = t.steps.row(0, named=True)
    assert (st["step"], st["start_ns"], st["gpu_end_ns"], st["kernel_count"]) == (3, 1_000_100_000, 1_000_169_000, 1)
    raw = t.raw_events([3])[0]
    assert raw["args"]["grid"] == [4, 2, 1] and raw["name"] == "sgemm_kernel"


def test_graph_launch_and_driver_apis(make_trace):
    ev = (
        [
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaGraphLaunch",
                "pid": 1,
                "tid": 1,
                "ts": 10,
                "dur": 5,
                "args": {"correlation": 9},
            },
            {
                "ph": "X",
                "cat": "cuda_driver",
                "name": "cuLaunchKernelEx",
                "pid": 1,
                "tid": 1,
                "ts": 20,
                "dur": 5,
                "args": {"correlation": 10},
            },
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "hipExtModuleLaunchKernel",
                "pid": 1,
                "tid": 1,
                "ts": 30,
                "dur": 5,
                "args": {"correlation": 11, "stream": "0x0"},
            },
        ]
        + [
            {
                "ph": "X",
                "cat": "kernel",
                "name": f"k{i}",
                "pid": 0,
                "tid": 7,
                "ts": 40 + i,
                "dur": 1,
                "args": {"correlation": 9, "stream": 7},
            }
            for i in range(3)
        ]
        + [
            {
                "ph": "X",
                "cat": "kernel",
                "name": "triton_poi",
                "pid": 0,
                "tid": 7,
                "ts": 50,
                "dur": 1,
                "args": {"correlation": 10, "stream": 7},
            },
            {
                "ph": "X",
                "cat": "kernel",
                "name": "Cijk_Ailk",
                "pid": 2,
                "tid": 0,
                "ts": 60,
                "dur": 1,
                "args": {"correlation": 11, "stream": 0},
            },
            {
                "ph": "X",
                "cat": "kernel",
                "name": "ncclDevKernel_Generic",
                "pid": 2,
                "tid": 0,
                "ts": 70,
                "dur": 1,
                "args": {"stream": 0},
            },
        ]
    )
    t = ranksight.load(make_trace(ev))[0]
    e = t.events
    assert e["gpu_count"].to_list()[:3] == [3, 1, 1]
    assert e["launch_row"].to_list()[3:9] == [0, 0, 0, 1, 2, None]
    assert e["stream"].to_list()[2] == 0  # "0x0" parsed
    assert e["kernel_class"].cast(pl.String).to_list()[3:] == ["COMPUTE"] * 5 + ["COMMUNICATION"]


def test_gzip_and_plain_equal(make_trace):
    a = decode(make_trace(EVENTS, **TOP)).events
    b = decode(make_trace(EVENTS, gz=True, **TOP)).events
    assert a.equals(b)


def test_bare_array_2021_format(tmp_path):
    p = tmp_path / "old.json"
    p.write_text(
        json.dumps(
            [
                {
                    "ph": "X",
                    "cat": "Kernel",
                    "name": "k",
                    "pid": 0,
                    "tid": "stream 7",
                    "ts": 5,
                    "dur": 2,
                    "args": {"correlation": 1, "external id": 3},
                },
                {
                    "ph": "X",
                    "cat": "Runtime",
                    "name": "cudaLaunchKernel",
                    "pid": 9,
                    "tid": 9,
                    "ts": 1,
                    "dur": 1,
                    "args": {"correlation": 1},
                },
            ]
        )
    )
    t = ranksight.load(p)[0]
    e = t.events
    assert e["tid"][0] == 7 and e["stream"][0] == 7 and e["external_id"][0] == 3
    assert e["kind"].cast(pl.String).to_list() == ["kernel", "cuda_runtime"]
    assert e["launch_row"][0] == 1


def test_truncated_salvage_and_strict(tmp_path):
    full = json.dumps(
        {"traceEvents": [{"ph": "X", "name": f"e{i}", "ts": i, "dur": 1, "pid": 1, "tid": 1} for i in range(10)]}
    )
    cut = full[: full.index('"e7"') + 3]
    p = tmp_path / "cut.json"
    p.write_text(cut)
    d = decode(p)
    assert d.events.height == 7  # e0..e6 are complete, e7 is cut
    assert d.warnings and "lost" in d.warnings[0] and "6000 ns" in d.warnings[0]
    with pytest.raises(TraceFormatError, match="truncated"):
        decode(p, strict=True)
    g = tmp_path / "cut.json.gz"
    g.write_bytes(gzip.compress(full.encode())[:-30])
    assert 0 < decode(g).events.height <= 10


def test_repaired_events(tmp_path):
    p = tmp_path / "bad.json"
    p.write_bytes(b'{"traceEvents": [{"ph": "i", "name": "a\x01b", "ts": 1, "dur": N/A, "pid": 1, "tid": 1}]}')
    d = decode(p)
    assert d.events["name"].cast(pl.String).to_list() == ["a\x01b"]
    assert d.events["dur_ns"].to_list() == [None]
    assert any("repaired" in w for w in d.warnings)


@pytest.mark.parametrize(
    "content,match",
    [
        (b"", "empty"),
        (b"hello", "not a JSON trace"),
        (b'{"a": 1}', "no 'traceEvents'"),
        (b'{"traceEvents": [{"ph": "X", "ts": 1', "truncated"),
        (b'{"traceEvents": [{"ph": "X", "ts": 1}, {"ph" "X"}]}', "invalid event"),
    ],
)
def test_bad_inputs_raise_format_error(tmp_path, content, match):
    p = tmp_path / "x.json"
    p.write_bytes(content)
    with pytest.raises(TraceFormatError, match=match) as ei:
        decode(p)
    assert str(p) in str(ei.value)


def test_invalid_event_reports_offset_and_index(tmp_path):
    p = tmp_path / "x.json"
    text = '{"traceEvents": [{"ph": "X", "ts": 1}, {"ph" "X"}]}'
    p.write_text(text)
    with pytest.raises(TraceFormatError) as ei:
        decode(p)
    assert ei.value.event_index == 1 and ei.value.offset == text.index('{"ph" "X"}')


def test_missing_path():
    with pytest.raises(TraceNotFoundError):
        ranksight.load("/nonexistent/trace.json")


def test_compact_traces_get_their_own_ranks(make_trace, tmp_path):
    ev = [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]
    make_trace(ev, name="a.json", compact=True, distributedInfo={"rank": 3})
    make_trace(ev, name="b.json", compact=True, distributedInfo={"rank": 5})
    assert b'"rank":3' in (tmp_path / "a.json").read_bytes()
    run = ranksight.load(tmp_path)
    assert run.ranks == [3, 5]


def test_duplicate_rank_names_both_files(make_trace, tmp_path):
    ev = [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]
    make_trace(ev, name="a.json", distributedInfo={"rank": 0})
    make_trace(ev, name="b.json", distributedInfo={"rank": 0})
    with pytest.raises(DuplicateRankError) as ei:
        ranksight.load(tmp_path)
    assert "a.json" in str(ei.value) and "b.json" in str(ei.value)


@pytest.mark.parametrize(
    "name,rank", [("rank-3.json", 3), ("x_rank_4.json", 4), ("rank5.trace.json", 5), ("worker6.pt.trace.json", 6)]
)
def test_rank_from_file_name(make_trace, name, rank):
    p = make_trace([{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}], name=name)
    assert ranksight.load(p).ranks == [rank]


def test_rank_by_order_warns(make_trace, tmp_path):
    ev = [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]
    make_trace(ev, name="a.json")
    make_trace(ev, name="b.json")
    with pytest.warns(ranksight.RanksightWarning, match="numbered in order"):
        assert ranksight.load(tmp_path).ranks == [0, 1]


def test_non_trace_json_in_folder_skipped(make_trace, tmp_path):
    make_trace([{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}], name="rank0.json")
    (tmp_path / "config.json").write_text('{"lr": 0.1}')
    with pytest.warns(ranksight.RanksightWarning, match="not a trace"):
        assert ranksight.load(tmp_path).ranks == [0]


def test_ns_exact_on_real_trace(data):
    """Acceptance: ts written as ...689.047 becomes ...689047 ns, and dur likewise."""
    p = data("hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz")
    t = ranksight.load(p)[0]
    ev = t.events
    row = ev.filter(pl.col("ts_ns") == 1712195495519689047)
    assert row.height == 1
    assert row["dur_ns"][0] == 63813
    assert row["name"].cast(pl.String)[0] == "autograd::engine::evaluate_function: DivBackward1"
    # a float64 round trip would lose these digits
    assert int(float("1712195495519689.047") * 1000) != 1712195495519689047


@pytest.mark.parametrize("name", ["plain.json", "gz.json.gz", "cut.json"])
def test_scan_spans_equals_the_decoders_spans(tmp_path, data, name):
    """The spans-only scan gives exactly the decoder's byte spans (plain, gzip, truncated)."""
    from ranksight.io.kineto import scan_spans

    src = data("hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz")
    text = gzip.decompress(Path(src).read_bytes())
    p = tmp_path / name
    if name.endswith(".gz"):
        p.write_bytes(gzip.compress(text))
    elif name.startswith("cut"):
        p.write_bytes(text[: len(text) * 2 // 3])
    else:
        p.write_bytes(text)
    d = decode(p)
    sp = scan_spans(p)
    assert sp.height == d.stats["events"] > d.events.height > 1000
    assert sp.equals(d.spans)


def test_big_traces_scan_their_spans_again(tmp_path, data, monkeypatch):
    """Over SPANS_RESIDENT_MAX events a trace keeps no spans in memory; raw events still read."""
    from ranksight.model import trace as trace_mod

    p = data("hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz")
    small = ranksight.load(p, cache=False)[0]
    monkeypatch.setattr(trace_mod, "SPANS_RESIDENT_MAX", 10)
    big = ranksight.load(p, cache=False)[0]
    assert isinstance(small._spans, pl.DataFrame) and callable(big._spans)
    rows = [0, 17, big.events.height - 1]
    assert big.raw_events(rows) == small.raw_events(rows)
    assert big.spans.equals(small.spans)


def test_launch_linked_through_ac2g_flows_without_correlation(make_trace):
    """Events without a correlation arg (some old and third-party traces) are linked by their ac2g
    flow pair, which lives in the flow table: the kernel finds its launch and the launch's step."""
    evs = [
        {"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#4", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 5},
        {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 9, "pid": 1, "tid": 1, "ts": 10},
        {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 9, "pid": 0, "tid": 7, "ts": 150, "bp": "e"},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 150, "dur": 20},
    ]
    t = ranksight.load(make_trace(evs))[0]
    ev = t.events
    assert ev["row"].to_list() == [0, 1, 4]
    k = ev.filter(pl.col("kind") == "kernel").row(0, named=True)
    assert (k["launch_row"], k["correlation"], k["step"]) == (1, 9, 4)
    assert ev.filter(pl.col("row") == 1)["gpu_count"].item() == 1
    assert t.table("flow")["row"].to_list() == [2, 3]
