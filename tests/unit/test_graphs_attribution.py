"""Graph attribution on hand-built replay + capture pairs with a known mapping: every replayed kernel gets the
capture-side operator, module, shapes and call stack; a kernel missing from one side; two graphs on two
streams; one graph replayed many times; CUDA captures without kernel names; capture sources found beside the
trace (TraceLens's layout) or given; ``ops`` and ``op-kernels`` on the replay."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from tests.unit.test_graphs import Tr, capture, graph_replay

import ranksight
from ranksight.analyses import Session
from ranksight.errors import UsageError
from ranksight.views.graph_attribution import capture_sources, graph_attribution, operator_trace

LAYER = [
    ("aten::mm", "gemm_a", [[8, 16], [16, 32]]),
    ("aten::add", "add_b", [[8, 32], [8, 32]]),
    ("aten::relu", "relu_c", None),
]


def _replay(tmp: Path, n: int = 3, kernels: list[str] | None = None, name: str = "replay.json") -> Path:
    tr = Tr()
    tr.launch("aten::argmax", "argmax_k", 0, 5)
    names = kernels or ["gemm_a", "add_b", "relu_c"]
    for i in range(n):
        t = 100 + 100 * i
        graph_replay(tr, t, [(k, t + 10 + 15 * j, 10) for j, k in enumerate(names)])
    return tr.write(tmp / name)


def _capture(tmp: Path, launches: list = LAYER, name: str = "cap.json", api: str = "hip") -> Path:  # type: ignore[type-arg]
    tr = Tr()
    tr.module("Layer_0", 2.5, 5 * len(launches), 1)  # inside the capture window [2, 3 + 5 n]
    capture(tr, 1, launches, api=api)
    return tr.write(tmp / name)


def _load(p: Path):  # noqa: ANN202
    run = ranksight.load(str(p), cache=False)
    return run, run[run.ranks[0]]


def test_exact_match_gives_op_module_shapes(tmp_path: Path) -> None:
    _, t = _load(_replay(tmp_path))
    a = graph_attribution(t, str(_capture(tmp_path)))
    k = a.kernels
    assert k.height == 9
    assert k["match"].unique().to_list() == ["exact"]
    assert k["confidence"].unique().to_list() == [1.0]
    first = k.filter(pl.col("replay") == 0).sort("pos")
    assert first["op"].to_list() == ["aten::mm", "aten::add", "aten::relu"]
    assert first["input_dims"].to_list() == ["[[8,16],[16,32]]", "[[8,32],[8,32]]", None]
    assert first["module"].to_list() == ["Layer_0"] * 3
    assert first["call_stack"].to_list() == ["nn.Module: Layer_0"] * 3
    assert first["capture_api"].to_list() == ["hipLaunchKernel"] * 3
    assert a.matched_ns == a.replayed_ns == 9 * 10_000
    assert a.unmatched.height == 0


def test_kernel_missing_from_capture_and_extra_capture_launch(tmp_path: Path) -> None:
    _, t = _load(_replay(tmp_path, n=2, kernels=["gemm_a", "add_b", "extra_k", "relu_c"]))
    cap = _capture(tmp_path, [*LAYER[:2], ("aten::zero_", "cap_only", None), LAYER[2]])
    a = graph_attribution(t, str(cap))
    first = a.kernels.filter(pl.col("replay") == 0).sort("pos")
    assert first["name"].to_list() == ["gemm_a", "add_b", "extra_k", "relu_c"]
    assert first["op"].to_list() == ["aten::mm", "aten::add", None, "aten::relu"]
    assert first["match"].to_list() == ["aligned", "aligned", "taxonomy", "aligned"]
    assert first["confidence"].to_list() == [0.75, 0.75, None, 0.75]  # 3 paired of max(4, 4)
    um = a.unmatched.sort("what")
    assert um.select("what", "pos", "name", "why").rows() == [
        ("capture launch", 2, "cap_only", "recorded in the capture, not replayed"),
        ("replay kernel", 2, "extra_k", "not in the matched capture graph"),
    ]
    assert a.matched_ns == 2 * 3 * 10_000


def test_two_graphs_on_two_streams(tmp_path: Path) -> None:
    tr = Tr()
    for i in range(2):
        t = 100 + 100 * i
        graph_replay(tr, t, [("gemm_a", t + 10, 10), ("add_b", t + 25, 10)], stream=7)
        graph_replay(tr, t + 5, [("x_k", t + 12, 5), ("y_k", t + 20, 5)], stream=9)
    _, rt = _load(tr.write(tmp_path / "replay.json"))
    ct = Tr()
    end = capture(ct, 0, [("aten::mm", "gemm_a", None), ("aten::add", "add_b", None)])
    capture(ct, end + 5, [("aten::sin", "x_k", None), ("aten::cos", "y_k", None)])
    a = graph_attribution(rt, str(ct.write(tmp_path / "cap.json")))
    assert a.assignments.sort("graph", "replay").select("graph", "cgraph", "method").rows() == [
        (0, 0, "exact"),
        (0, 0, "exact"),
        (1, 1, "exact"),
        (1, 1, "exact"),
    ]
    ops = dict(a.kernels.filter(pl.col("replay") == 1).select("name", "op").iter_rows())
    assert ops == {"gemm_a": "aten::mm", "add_b": "aten::add", "x_k": "aten::sin", "y_k": "aten::cos"}


def test_one_graph_on_two_streams_by_name(tmp_path: Path) -> None:
    """Kernels of one graph on two streams: GPU order differs from the capture's CPU order."""
    tr = Tr()
    c = tr.rt("hipGraphLaunch", 100, 4)
    tr.k("b_side", 105, 3, c, stream=9)  # starts first on the GPU, captured second
    tr.k("a_main", 106, 10, c, stream=7)
    tr.k("c_main", 120, 10, c, stream=7)
    _, rt = _load(tr.write(tmp_path / "replay.json"))
    ct = Tr()
    capture(ct, 0, [("aten::mm", "a_main", None), ("aten::sin", "b_side", None), ("aten::add", "c_main", None)])
    a = graph_attribution(rt, str(ct.write(tmp_path / "cap.json")))
    got = dict(a.kernels.select("name", "op").iter_rows())
    assert got == {"a_main": "aten::mm", "b_side": "aten::sin", "c_main": "aten::add"}
    assert a.kernels["confidence"].to_list() == [1.0, 1.0, 1.0]
    assert a.kernels["match"].unique().to_list() == ["aligned"]  # paired by name, not in one order


def test_one_graph_replayed_many_times(tmp_path: Path) -> None:
    run, t = _load(_replay(tmp_path, n=40))
    cap = str(_capture(tmp_path))
    a = graph_attribution(t, cap)
    assert a.assignments.height == 40 and a.assignments["cgraph"].unique().to_list() == [0]
    ops = Session.of(run).result("ops", capture=cap)["ops"]
    row = {r["name"]: r for r in ops.iter_rows(named=True)}
    assert row["aten::mm"]["calls"] == 40
    assert row["aten::mm"]["device_self_us"] == pytest.approx(400)
    assert row["aten::mm"]["host_self_us"] == 0 and row["aten::mm"]["host_total_us"] == 0
    assert row["aten::argmax"]["device_self_us"] == pytest.approx(5)  # the eager op as before
    assert row["aten::argmax"]["host_total_us"] == pytest.approx(8)
    # the capture-side shapes come along (the op side table of the copies)
    shapes = Session.of(run).result("ops", capture=cap, group_by="shape")["ops"]
    mm = shapes.filter(pl.col("name") == "aten::mm")
    assert mm.select("input_dims", "calls").rows() == [("[[8,16],[16,32]]", 40)]
    # and the nn.Module frames: the capture's Layer_0 holds the replayed kernels
    from ranksight.analyses.modules import module_table

    mods = module_table(operator_trace(run[0], cap))
    assert mods is not None
    layer = mods.filter(pl.col("path") == "Layer_0").row(0, named=True)
    assert layer["calls"] == 40 and layer["device_total_us"] == pytest.approx(40 * 30)


def test_tied_capture_graphs_used_in_turn(tmp_path: Path) -> None:
    """Two identical captured layers (different modules): replays take them in turn."""
    _, t = _load(_replay(tmp_path, n=4))
    ct = Tr()
    ct.module("Layer_0", 0, 30, 1)
    end = capture(ct, 1, LAYER)
    ct.module("Layer_1", end + 1, 30, 2)
    capture(ct, end + 2, LAYER)
    a = graph_attribution(t, str(ct.write(tmp_path / "cap.json")))
    asg = a.assignments.sort("replay")
    assert asg["cgraph"].to_list() == [0, 1, 0, 1]
    assert asg["candidates"].to_list() == [2, 2, 2, 2]
    mods = a.kernels.filter(pl.col("pos") == 0).sort("replay")["module"].to_list()
    assert mods == ["Layer_0", "Layer_1", "Layer_0", "Layer_1"]


def test_cuda_capture_without_names_matches_by_position(tmp_path: Path) -> None:
    tr = Tr()
    for i in range(2):
        t = 100 + 100 * i
        graph_replay(tr, t, [("gemm_a", t + 10, 10), ("add_b", t + 25, 10)], api="cudaGraphLaunch")
    _, rt = _load(tr.write(tmp_path / "replay.json"))
    cap = _capture(tmp_path, [("aten::mm", None, None), ("aten::add", None, None)], api="cuda")
    a = graph_attribution(rt, str(cap))
    assert a.kernels["match"].unique().to_list() == ["position"]
    assert a.kernels["confidence"].unique().to_list() == [0.5]
    assert a.kernels.filter(pl.col("replay") == 0)["op"].to_list() == ["aten::mm", "aten::add"]
    # a capture with another number of launches does not match without names
    cap3 = _capture(tmp_path, [("aten::mm", None, None)] * 3, api="cuda", name="cap3.json")
    b = graph_attribution(rt, str(cap3))
    assert b.kernels["capture_row"].null_count() == b.kernels.height
    assert b.unmatched.filter(pl.col("what") == "graph")["why"].to_list() == ["no capture graph shares its kernels"]


def test_no_capture_names_node_or_taxonomy(tmp_path: Path) -> None:
    tr = Tr()
    c = tr.rt("cudaGraphLaunch", 10, 2)
    tr.k("nvjet_sm90_tst_128x128_64x6_2x1_v_bz_NNT", 20, 5, c)
    tr.k("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>()", 30, 5, c)
    tr.events[-1]["args"].update({"graph id": 3, "graph node id": 17})
    _, t = _load(tr.write(tmp_path / "t.json"))
    k = graph_attribution(t).kernels.sort("pos")
    assert k["match"].to_list() == ["taxonomy", "graph node"]
    assert k["attributed_as"].to_list() == ["gemm (cuBLAS)", "graph 3 node 17"]
    assert k["confidence"].to_list() == [None, None]


def test_tracelens_layout_found_beside_the_trace(tmp_path: Path) -> None:
    rp = _replay(tmp_path)
    d = tmp_path / "capture_traces"
    d.mkdir()
    _capture(d, name="graph_capture_rank_0.json")
    (d / "execution_details.json").write_text(
        json.dumps(
            [
                {"file": "graph_capture_rank_0.json", "batch_size": 32, "mode": "FULL"},
                {"file": "absent.json", "batch_size": 64, "mode": "FULL"},
            ]
        )
    )
    _, t = _load(rp)
    src = capture_sources(t)
    assert [(Path(s.path).name, s.batch_size, s.mode, s.problem) for s in src] == [
        ("graph_capture_rank_0.json", 32, "FULL", None),
        ("absent.json", 64, "FULL", "listed in execution_details.json, file absent"),
    ]
    assert src[0].how == "capture_traces/execution_details.json"
    assert graph_attribution(t).matched_ns == 9 * 10_000
    assert capture_sources(t, "none") == []
    assert [Path(s.path).name for s in capture_sources(t, str(tmp_path))][0] == "graph_capture_rank_0.json"
    with pytest.raises(UsageError, match="no such file or folder"):
        capture_sources(t, str(tmp_path / "nope"))


def test_capture_of_another_rank_is_not_used(tmp_path: Path) -> None:
    _, t = _load(_replay(tmp_path))
    src = capture_sources(t, str(_capture(tmp_path, name="capture_rank_3.json")))
    assert src[0].problem == "names rank 3, not rank 0"
    assert graph_attribution(t, src[0].path).matched_ns == 0


def test_capture_and_replay_in_one_trace(tmp_path: Path) -> None:
    tr = Tr()
    end = capture(tr, 0, LAYER)
    for i in range(2):
        t = end + 100 + 100 * i
        graph_replay(tr, t, [(k, t + 10 + 15 * j, 10) for j, k in enumerate(["gemm_a", "add_b", "relu_c"])])
    _, t = _load(tr.write(tmp_path / "both.json"))
    a = graph_attribution(t)
    assert [s.how for s in a.sources] == ["this trace"]
    assert a.kernels["op"].to_list() == ["aten::mm", "aten::add", "aten::relu"] * 2


def test_operator_trace_moves_launches_and_keeps_the_rest(tmp_path: Path) -> None:
    _, t = _load(_replay(tmp_path, n=2))
    ot = operator_trace(t, str(_capture(tmp_path)))
    ev = ot.events
    assert ev.height > t.events.height
    gl = ev.filter(pl.col("name").cast(pl.String) == "hipGraphLaunch")
    assert gl["gpu_count"].to_list() == [0, 0]  # every activity moved to its captured launch's copy
    k = ev.filter(pl.col("kind") == "kernel").sort("ts_ns")
    launches = ev.filter(pl.col("row").is_in(k["launch_row"].implode()))
    assert set(launches["name"].cast(pl.String).to_list()) == {"hipLaunchKernel"}
    # each copy inside its graph launch call, after it starts
    for lrow, (ts, end) in zip(gl["row"].to_list(), gl.select("ts_ns", "end_ns").rows(), strict=True):
        mine = k.filter(pl.col("launch_row").is_in(ev.filter(pl.col("row") > t.events["row"].max())["row"].implode()))
        assert mine.height == 6 and lrow is not None
        assert ts < end
    copies = ev.filter(pl.col("row") > t.events["row"].max())
    assert copies.filter(pl.col("kind") == "cpu_op").height == 6
    # the timing of everything else is the replay's own
    assert operator_trace(t, "none") is t


def test_op_kernels_on_replay(tmp_path: Path) -> None:
    run, _ = _load(_replay(tmp_path, n=3))
    res = Session.of(run).result("op-kernels", capture=str(_capture(tmp_path)))["op_kernels"]
    rows = {r["aten_op_name"]: r for r in res.iter_rows(named=True)}
    assert rows["aten::mm"]["kernel_sequence"] == "gemm_a" and rows["aten::mm"]["occurrence_count"] == 3
    assert rows["aten::mm"]["avg_aten_op_launch_delay"] is None  # replayed: no launch delays
    assert rows["aten::argmax"]["avg_aten_op_launch_delay"] == pytest.approx(2.0)
    hta = Session.of(run).result("op-kernels", capture=str(_capture(tmp_path)), hta_apis=True)["op_kernels"]
    assert "aten::mm" not in hta["aten_op_name"].to_list()  # HTA has no graph attribution


def test_graphs_analysis_with_capture(tmp_path: Path) -> None:
    run, _ = _load(_replay(tmp_path, n=3))
    res = Session.of(run).result("graphs", capture=str(_capture(tmp_path)))
    g = res["graphs"].row(0, named=True)
    assert g["attributed_pct"] == 100 and g["match"] == "exact" and g["capture"] == "cap.json:0"
    c = res["captures"].row(0, named=True)
    assert (c["source"], c["how"], c["launches"], c["named"], c["replays"], c["graph"]) == (
        "cap.json",
        "--capture",
        3,
        3,
        3,
        0,
    )
    assert res["kernels"]["op"].to_list() == ["aten::mm", "aten::add", "aten::relu"]
    assert any("100.00 % of the replayed GPU time" in n for n in res.notes)


def test_capture_source_chosen_by_batch_size(tmp_path: Path) -> None:
    """Two capture files with the same kernels (TraceLens layout, batch 8 and 32): a replay inside a step of 20
    requests gets the batch-32 capture, one inside a step of 4 the batch-8 capture (the smallest size that
    holds the step); without a step annotation the first source, with a note."""
    tr = Tr()
    for i, bs in enumerate((20, 4)):
        t = 100 + 200 * i
        tr.ann(f"step[DECODE bs={bs}]", t, 100)
        graph_replay(tr, t + 5, [("gemm_a", t + 20, 10), ("add_b", t + 35, 10), ("relu_c", t + 50, 10)])
    rp = tr.write(tmp_path / "replay.json")
    d = tmp_path / "capture_traces"
    d.mkdir()
    for bs, op in ((8, "aten::mm"), (32, "aten::matmul")):  # the op names tell the sources apart
        _capture(d, [(op, "gemm_a", None), *LAYER[1:]], name=f"bs_{bs}.json")
    (d / "execution_details.json").write_text(
        json.dumps([{"file": f"bs_{b}.json", "batch_size": b, "mode": "FULL"} for b in (8, 32)])
    )
    _, t = _load(rp)
    a = graph_attribution(t)
    first = a.kernels.filter(pl.col("pos") == 0).sort("replay")
    assert first["op"].to_list() == ["aten::matmul", "aten::mm"]
    assert a.notes == []
    # no step annotations: the first source, said in a note
    tr2 = Tr()
    graph_replay(tr2, 100, [("gemm_a", 120, 10), ("add_b", 135, 10), ("relu_c", 150, 10)])
    _, t2 = _load(tr2.write(tmp_path / "bare.json"))
    b = graph_attribution(t2, str(d))
    assert b.kernels["op"][0] == "aten::mm"
    assert "no listed batch size decides (step size not annotated)" in b.notes[0]
