"""``analyze graphs`` on hand-built traces: replays, kernels per replay, GPU time, gaps inside and between
replays, launch cost against the eager launches it replaces, captures recognised as capture.

Also the trace builder (:class:`Tr`) the graph attribution tests share."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import write_trace

import ranksight
from ranksight.analyses import Session
from ranksight.analyses.graphs import eager_launch_cost

MI300 = {"deviceProperties": [{"id": 0, "name": "AMD Instinct MI300X", "computeMajor": 9, "computeMinor": 4}]}


class Tr:
    """A small Kineto trace in µs: CPU ops, runtime calls (optionally naming their kernel, as ROCm does),
    GPU activities linked by correlation."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.corr = 1000
        self.ext = 0

    def op(self, name: str, ts: float, dur: float, *, dims: list[Any] | None = None, tid: int = 1) -> int:
        self.ext += 1
        args: dict[str, Any] = {"External id": self.ext}
        if dims is not None:
            args["Input Dims"] = dims
        self.events.append(
            {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}
        )
        return self.ext

    def ann(self, name: str, ts: float, dur: float, *, tid: int = 1) -> None:
        self.events.append(
            {"ph": "X", "cat": "user_annotation", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur}
        )

    def module(self, name: str, ts: float, dur: float, mid: int, *, tid: int = 1) -> None:
        self.events.append(
            {
                "ph": "X",
                "cat": "python_function",
                "name": f"nn.Module: {name}",
                "pid": 1,
                "tid": tid,
                "ts": ts,
                "dur": dur,
                "args": {"Python module id": mid, "Python id": mid + 100},
            }
        )

    def rt(
        self, name: str, ts: float, dur: float, *, ext: int | None = None, kernel: str | None = None, tid: int = 1
    ) -> int:
        self.corr += 1
        args: dict[str, Any] = {"correlation": self.corr}
        if ext is not None:
            args["External id"] = ext
        if kernel is not None:
            args["kernel"] = kernel
        self.events.append(
            {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}
        )
        return self.corr

    def k(self, name: str, ts: float, dur: float, corr: int, *, stream: int = 7, cat: str = "kernel") -> None:
        self.events.append(
            {
                "ph": "X",
                "cat": cat,
                "name": name,
                "pid": 0,
                "tid": stream,
                "ts": ts,
                "dur": dur,
                "args": {"device": 0, "stream": stream, "correlation": corr},
            }
        )

    def launch(
        self, op: str, kernel: str, ts: float, kdur: float, *, api: str = "hipLaunchKernel", gpu_at: float | None = None
    ) -> None:
        """An eager op [ts, ts+8] whose launch call [ts+2, ts+4] runs ``kernel`` (at ``gpu_at``, default ts+10)."""
        e = self.op(op, ts, 8)
        c = self.rt(api, ts + 2, 2, ext=e)
        self.k(kernel, gpu_at if gpu_at is not None else ts + 10, kdur, c)

    def write(self, path: Path) -> Path:
        return write_trace(path, self.events, **MI300)


def graph_replay(
    tr: Tr,
    ts: float,
    kernels: list[tuple[str, float, float]],
    *,
    stream: int = 7,
    dur: float = 4,
    api: str = "hipGraphLaunch",
) -> int:
    """A graph launch call at ``ts`` running ``kernels`` (name, GPU start, duration) on ``stream``."""
    c = tr.rt(api, ts, dur)
    for name, at, d in kernels:
        tr.k(name, at, d, c, stream=stream, cat="kernel" if not name.startswith("Memcpy") else "gpu_memcpy")
    return c


def capture(
    tr: Tr, ts: float, launches: list[tuple[str, str | None, list[Any] | None]], *, api: str = "hip", tid: int = 1
) -> float:
    """A capture window from ``ts``: for each (op, kernel name or None, input dims) an op of 4 µs holding a
    launch call that names its kernel (ROCm) or not (None: CUDA); returns the window's end."""
    tr.rt(f"{api}StreamBeginCapture", ts, 1, tid=tid)
    t = ts + 2
    for op, kernel, dims in launches:
        e = tr.op(op, t, 4, dims=dims, tid=tid)
        launch_api = f"{api}LaunchKernel" if api == "hip" else "cudaLaunchKernel"
        tr.rt(launch_api, t + 1, 1, ext=e, kernel=kernel, tid=tid)
        t += 5
    tr.rt(f"{api}StreamEndCapture", t, 1, tid=tid)
    return t + 1


# ---- the graphs table ----------------------------------------------------------------------------


def _replay_trace() -> Tr:
    tr = Tr()
    tr.launch("aten::argmax", "argmax_k", 0, 5)  # eager launch call: 2 µs
    for i in range(3):
        graph_replay(
            tr,
            100 + 100 * i,
            [("gemm_a", 110 + 100 * i, 20), ("add_b", 135 + 100 * i, 5), ("norm_c", 145 + 100 * i, 10)],
        )
    # an eager kernel between replays 0 and 1: [170, 180]; its launch call lasts 4 µs
    e = tr.op("aten::add", 158, 8)
    c = tr.rt("hipLaunchKernel", 160, 4, ext=e)
    tr.k("add_eager", 170, 10, c)
    return tr


def test_graphs_table_exact(tmp_path: Path) -> None:
    run = ranksight.load(str(_replay_trace().write(tmp_path / "replay.json")), cache=False)
    res = Session.of(run).result("graphs", capture="none")
    g = res["graphs"].row(0, named=True)
    assert res["graphs"].height == 1
    assert (g["graph"], g["api"], g["streams"], g["replays"]) == (0, "hipGraphLaunch", "7", 3)
    assert (g["activities_per_replay"], g["kernels_per_replay"]) == (3, 3)
    assert g["gpu_us"] == pytest.approx(3 * 35)
    assert g["busy_us_per_replay"] == pytest.approx(35)
    assert g["gap_inside_us_per_replay"] == pytest.approx(10)  # 130→135 and 140→145
    # replay ends 155, 255; next starts 210, 310: gaps 55, 55; GPU idle 45 (eager kernel 170-180), 55
    assert g["gap_between_us"] == pytest.approx(55)
    assert g["idle_between_us"] == pytest.approx(50)
    assert g["cpu_launch_us"] == pytest.approx(4)
    assert g["eager_launch_us"] == pytest.approx(3)  # median of the eager launch calls 2 and 4 µs
    assert g["replaced_launch_us"] == pytest.approx(9)
    assert g["saved_us_per_replay"] == pytest.approx(5)
    assert g["launch_cost_from"] == "median of 2 eager launch calls in this trace"
    assert g["attributed_pct"] == 0 and g["match"] == "none"
    k = res["kernels"]
    assert k["name"].to_list() == ["gemm_a", "add_b", "norm_c"]
    assert k["match"].to_list() == ["taxonomy"] * 3
    assert k["replays"].to_list() == [3, 3, 3]
    assert k["gpu_us"].to_list() == pytest.approx([60, 15, 30])
    assert any("no capture trace" in n for n in res.notes)


def test_two_graphs_two_streams(tmp_path: Path) -> None:
    tr = Tr()
    for i in range(2):
        graph_replay(tr, 10 + 100 * i, [("a1", 20 + 100 * i, 5), ("a2", 30 + 100 * i, 5)], stream=7)
        graph_replay(tr, 15 + 100 * i, [("b1", 22 + 100 * i, 3)], stream=9)
    run = ranksight.load(str(tr.write(tmp_path / "t.json")), cache=False)
    res = Session.of(run).result("graphs", capture="none")
    g = res["graphs"].sort("graph")
    assert g["streams"].to_list() == ["7", "9"]
    assert g["replays"].to_list() == [2, 2]
    assert g["activities_per_replay"].to_list() == [2, 1]
    assert g["gpu_us"].to_list() == pytest.approx([20, 6])
    # no eager launch and no capture: the launch cost cannot be measured
    assert g["eager_launch_us"].to_list() == [None, None]
    assert g["launch_cost_from"][0] == "no eager launch call in this trace or its capture: not measurable"


def test_graph_id_decides_the_graph(tmp_path: Path) -> None:
    tr = Tr()
    c1 = tr.rt("cudaGraphLaunch", 10, 2)
    c2 = tr.rt("cudaGraphLaunch", 50, 2)
    for c, at in ((c1, 20), (c2, 60)):
        tr.k("k1", at, 5, c)
    tr.events[-1]["args"]["graph id"] = 8
    tr.events[-2]["args"]["graph id"] = 7
    run = ranksight.load(str(tr.write(tmp_path / "t.json")), cache=False)
    g = Session.of(run).result("graphs", capture="none")["graphs"].sort("graph")
    assert g["graph_id"].to_list() == [7, 8]  # same kernels, two graphs by id
    assert g["replays"].to_list() == [1, 1]


def test_capture_trace_recognised_as_capture(tmp_path: Path) -> None:
    tr = Tr()
    end = capture(tr, 0, [("aten::mm", "gemm_a", [[4, 4]]), ("aten::add", "add_b", None)])
    tr.launch("aten::fill_", "fill_k", end + 10, 3)  # ran: not captured
    run = ranksight.load(str(tr.write(tmp_path / "cap.json")), cache=False)
    res = Session.of(run).result("graphs")
    c = res["captures"].row(0, named=True)
    assert (c["source"], c["capture"], c["launches"], c["named"]) == ("this trace", 0, 2, 2)
    assert res["graphs"].height == 0
    (note,) = [n for n in res.notes if "graph capture" in n]
    assert "2 launches were recorded into graphs, not executed" in note
    assert "profile the replay and pass this trace with --capture" in note


def test_eager_cost_falls_back_to_capture_time_calls(tmp_path: Path) -> None:
    tr = Tr()
    graph_replay(tr, 10, [("gemm_a", 20, 5)])
    run = ranksight.load(str(tr.write(tmp_path / "t.json")), cache=False)
    import polars as pl

    us, how = eager_launch_cost(run[0], pl.DataFrame({"dur_ns": [1000, 3000, 2000]}))
    assert us == pytest.approx(2.0)
    assert how.startswith("median of 3 launch calls recorded while capturing")


def test_cli_graphs_json(tmp_path: Path, cli) -> None:  # noqa: ANN001
    p = _replay_trace().write(tmp_path / "replay.json")
    r = cli("analyze", "graphs", str(p), "--format", "json", "--capture", "none")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["tables"]["graphs"][0]["replays"] == 3
