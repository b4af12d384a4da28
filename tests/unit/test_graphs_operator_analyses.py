"""``modules``, ``mfu``, ``op-perf`` and ``diff`` on a hand-built CUDA/HIP graph replay with its capture
(``--capture``): the replayed kernels count for the capture-side operators and modules, exactly as the eager
run of the same work would count them; without the capture they have no operator. Notes state the share of
the replayed GPU time attributed, its match kinds and confidence. Also the report's ``--capture`` (a
session default every operator analysis reads)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from tests.unit.test_graphs import Tr, capture, graph_replay

import ranksight
from ranksight.analyses import Session
from ranksight.analyses.diff import diff
from ranksight.errors import MissingDataError

#: (op, kernel, Input Dims, Input type) of the captured layer
LAYER = [
    ("aten::mm", "gemm_a", [[8, 16], [16, 32]], ["float", "float"]),
    ("aten::add", "add_b", [[8, 32], [8, 32]], ["float", "float"]),
    ("aten::relu", "relu_c", [[8, 32]], ["float"]),
]
MM_FLOPS = 2 * 8 * 16 * 32  # one aten::mm


def _typed(tr: Tr) -> None:
    """Give the layer's ops their ``Input type`` (the builder records dims only)."""
    types = {op: t for op, _, _, t in LAYER}
    for e in tr.events:
        if e.get("cat") == "cpu_op" and e["name"] in types:
            e["args"]["Input type"] = types[e["name"]]


def _replay(tmp: Path, n: int = 3) -> Path:
    """An eager argmax (5 µs kernel), then ``n`` replays of the layer's graph (three 10 µs kernels each) inside
    the replay's own module frame ``Model_0`` [95, 405] µs."""
    tr = Tr()
    tr.launch("aten::argmax", "argmax_k", 0, 5)
    tr.module("Model_0", 95, 310, 5)
    for i in range(n):
        t = 100 + 100 * i
        graph_replay(tr, t, [(k, t + 10 + 15 * j, 10) for j, (_, k, _, _) in enumerate(LAYER)])
    return tr.write(tmp / "replay.json")


def _capture(tmp: Path, *, modules: bool = True) -> str:
    """The layer captured inside module frame ``Layer_0`` (which lies inside the capture window)."""
    tr = Tr()
    if modules:
        tr.module("Layer_0", 2.5, 15, 1)
    capture(tr, 1, [(op, k, dims) for op, k, dims, _ in LAYER])
    _typed(tr)
    return str(tr.write(tmp / ("cap.json" if modules else "cap_nomod.json")))


def _eager(tmp: Path, n: int = 3) -> Path:
    """The same work run eagerly: argmax, then ``n`` times the layer's ops, each launching its kernel."""
    tr = Tr()
    tr.launch("aten::argmax", "argmax_k", 0, 5)
    for i in range(n):
        t = 100 + 100 * i
        for j, (op, k, dims, _) in enumerate(LAYER):
            tr.launch(op, k, t + 10 * j, 10, gpu_at=t + 10 + 15 * j)
            tr.events[-3]["args"]["Input Dims"] = dims  # the op of this launch
    _typed(tr)
    return tr.write(tmp / "eager.json")


def _run(p: Path):  # noqa: ANN202
    return ranksight.load(str(p), cache=False)


REPLAY_NOTE = (
    "rank 0: 90.0 µs of GPU time replayed from CUDA/HIP graphs (100.00 % of 90.0 µs) counted for the capture-side "
    "operators that launched it (exact 100.00 %; lowest confidence 1.00; graphs: docs/graphs.md)"
)
NONE_NOTE = "rank 0: 90.0 µs of GPU time replayed from CUDA/HIP graphs (100.00 %) has no operator"


def test_modules_on_replay(tmp_path: Path) -> None:
    run, cap = _run(_replay(tmp_path)), _capture(tmp_path)
    res = Session.of(run).result("modules", capture=cap)
    rows = {r["path"]: r for r in res["modules"].iter_rows(named=True)}
    assert list(rows) == ["Model_0", "Model_0/Layer_0"]
    layer, model = rows["Model_0/Layer_0"], rows["Model_0"]
    # the capture's frame holds the replayed kernels, one call per replay, with no host time
    assert (layer["calls"], layer["device_self_us"], layer["device_total_us"], layer["ops"]) == (3, 90.0, 90.0, 9)
    assert (layer["host_total_us"], layer["host_self_us"]) == (0.0, 0.0)
    # the replay's own frame keeps its host time (not reduced by the copied child) and holds them in total
    assert (model["host_total_us"], model["host_self_us"]) == (310.0, 310.0)
    assert (model["device_self_us"], model["device_total_us"]) == (0.0, 90.0)
    assert any(n.startswith(REPLAY_NOTE) and "module frames hold them" in n for n in res.notes)
    # without the capture the replay's frame holds them itself, and the note says they have no operator
    none = Session.of(run).result("modules", capture="none")
    assert none["modules"].select("path", "device_self_us", "host_self_us").rows() == [("Model_0", 90.0, 310.0)]
    assert any(n.startswith(NONE_NOTE) for n in none.notes)


def test_modules_capture_without_module_frames(tmp_path: Path) -> None:
    run = _run(_replay(tmp_path))
    res = Session.of(run).result("modules", capture=_capture(tmp_path, modules=False))
    assert res["modules"].select("path", "device_self_us").rows() == [("Model_0", 90.0)]
    assert any("the capture trace records no nn.Module frame around its captured launches" in n for n in res.notes)


def test_modules_missing_everywhere(tmp_path: Path) -> None:
    tr = Tr()
    graph_replay(tr, 100, [(k, 110 + 15 * j, 10) for j, (_, k, _, _) in enumerate(LAYER)])
    run = _run(tr.write(tmp_path / "bare.json"))
    with pytest.raises(MissingDataError, match="nor in their graph capture traces"):
        Session.of(run).result("modules", capture=_capture(tmp_path, modules=False))


def test_mfu_on_replay(tmp_path: Path) -> None:
    run, cap = _run(_replay(tmp_path)), _capture(tmp_path)
    res = Session.of(run).result("mfu", capture=cap, peak_tflops=1.0)
    st = res["steps"].row(0, named=True)
    # one step (no ProfilerSteps) from the first GPU start (10 µs) to the last end (350 µs)
    assert st["step_us"] == pytest.approx(340.0)
    assert st["model_gflop"] == pytest.approx(3 * MM_FLOPS / 1e9)
    assert st["mfu"] == pytest.approx(3 * MM_FLOPS / 340e-6 / 1e12)
    ops = res["ops"].row(0, named=True)
    assert (ops["name"], ops["dtype"], ops["calls"], ops["device_us"]) == ("aten::mm", "fp32", 3, 30.0)
    assert any(n.startswith(REPLAY_NOTE) for n in res.notes)
    # the MI300X fp32 peak from the table
    table = Session.of(run).result("mfu", capture=cap)["steps"].row(0, named=True)
    assert table["mfu"] == pytest.approx(3 * MM_FLOPS / 340e-6 / 163.4e12)
    # the same as the eager run of the same work
    eager = Session.of(_run(_eager(tmp_path))).result("mfu", peak_tflops=1.0)["steps"].row(0, named=True)
    assert eager["model_gflop"] == pytest.approx(st["model_gflop"])
    # without the capture no op has shapes: unknown, not 0
    none = Session.of(run).result("mfu", capture="none", peak_tflops=1.0)
    assert none["steps"].row(0, named=True)["mfu"] is None
    assert any(n.startswith(NONE_NOTE) for n in none.notes)


def test_op_perf_on_replay(tmp_path: Path) -> None:
    run, cap = _run(_replay(tmp_path)), _capture(tmp_path)
    res = Session.of(run).result("op-perf", capture=cap)
    got = {r["name"]: (r["count"], r["kernel_us_sum"]) for r in res["ops"].iter_rows(named=True)}
    assert got == {"aten::mm": (3, 30.0), "aten::add": (3, 30.0), "aten::relu": (3, 30.0), "aten::argmax": (1, 5.0)}
    mm = res["ops"].filter(pl.col("name") == "aten::mm").row(0, named=True)
    assert mm["gflop_per_call"] == pytest.approx(MM_FLOPS / 1e9)
    assert mm["input_dims"] == "[[8,16],[16,32]]"
    a = res["attribution"].row(0, named=True)
    assert (a["gpu_us"], a["attributed_us"], a["unattributed_us"]) == (95.0, 95.0, 0.0)
    assert any(n.startswith(REPLAY_NOTE) for n in res.notes)
    # the eager run of the same work gives the same groups
    eager = Session.of(_run(_eager(tmp_path))).result("op-perf")["ops"]
    assert {r["name"]: (r["count"], r["kernel_us_sum"]) for r in eager.iter_rows(named=True)} == got
    # without the capture: the replayed 90 µs launched outside every op
    none = Session.of(run).result("op-perf", capture="none")
    a = none["attribution"].row(0, named=True)
    assert (a["attributed_us"], a["outside_ops_us"]) == (5.0, 90.0)
    assert none["ops"]["name"].to_list() == ["aten::argmax"]
    assert any(n.startswith(NONE_NOTE) for n in none.notes)


def test_diff_eager_against_replay(tmp_path: Path) -> None:
    base, test, cap = _run(_eager(tmp_path)), _run(_replay(tmp_path)), _capture(tmp_path)
    res = diff(base, test, captures=(None, cap))
    op = {r["op"]: r for r in res["op_perf"].iter_rows(named=True)}
    assert set(op) == {"aten::mm", "aten::add", "aten::relu", "aten::argmax"}
    for name in ("aten::mm", "aten::add", "aten::relu"):  # matched operator by operator, nothing changed
        r = op[name]
        assert (r["only"], r["base_calls"], r["test_calls"], r["delta_us"]) == (None, 3, 3, 0.0)
    k = {r["kernel"]: r for r in res["kernels"].iter_rows(named=True)}
    assert {n: (r["op"], r["match"]) for n, r in k.items()} == {
        "gemm_a": ("aten::mm", "name"),
        "add_b": ("aten::add", "name"),
        "relu_c": ("aten::relu", "name"),
        "argmax_k": ("aten::argmax", "name"),
    }
    assert any(n.startswith("test: " + REPLAY_NOTE) for n in res.notes)
    assert not any(n.startswith("test: MFU: not known") for n in res.notes)  # shapes from the capture
    # without the capture the replayed operators exist on the base side only
    none = diff(base, test, captures=(None, "none"))
    only = {r["op"]: r["only"] for r in none["op_perf"].iter_rows(named=True)}
    assert only == {"aten::mm": "base", "aten::add": "base", "aten::relu": "base", "aten::argmax": None}
    assert {r["kernel"]: r["match"] for r in none["kernels"].iter_rows(named=True)}["gemm_a"] == "name, other op"
    assert any(n.startswith("test: " + NONE_NOTE) for n in none.notes)


def test_session_default_capture_reaches_every_operator_analysis(tmp_path: Path) -> None:
    """``ranksight report --capture``: a session default given to every analysis that declares the option."""
    run, cap = _run(_replay(tmp_path)), _capture(tmp_path)
    sess = Session.of(run)
    sess.set_default("capture", cap)
    assert sess.default("capture") == cap
    ops = {r["name"] for r in sess.result("ops")["ops"].iter_rows(named=True)}
    assert "aten::mm" in ops
    assert sess.result("op-perf") is sess.result("op-perf", capture=cap)  # one result, one key
    assert sess.result("modules")["modules"]["path"].to_list() == ["Model_0", "Model_0/Layer_0"]
    assert sess.with_ranks([0]).result("mfu", peak_tflops=1.0)["steps"]["mfu"][0] is not None  # shared store
    sess.result("temporal")  # an analysis without the option is not given it
    # an explicit option wins over the default
    assert "aten::mm" not in set(sess.result("ops", capture="none")["ops"]["name"].to_list())
