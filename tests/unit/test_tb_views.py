"""overview, gpu-metrics, ops, kernel-config on hand-built traces.

The first half runs the TensorBoard plugin's own mini traces (``tb_plugin_mini.py``, BSD-3-Clause)
and asserts the plugin's expected values; the second half checks ranksight's deliberate
differences on traces built here, with answers worked out by hand in the comments.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from tb_plugin_mini import MINI

import ranksight
from ranksight.analyses.gpu_metrics import gpu_metrics
from ranksight.analyses.kernel_config import kernel_config, kernel_table
from ranksight.analyses.ops import op_table
from ranksight.analyses.overview import overview
from ranksight.errors import MissingDataError
from ranksight.views.tb_op_tree import build_op_tree

US = 1000  # ns per µs


@pytest.fixture
def mini(make_trace: Callable[..., Path]) -> Callable[[str], Any]:
    def load(name: str) -> Any:
        return ranksight.load([make_trace(MINI[name], schemaVersion=1)])

    return load


def steps_us(run: Any, **kw: Any) -> list[dict[str, Any]]:
    return overview(run, **kw)["steps"].to_dicts()


def ops_by_name(run: Any, **kw: Any) -> dict[str, dict[str, Any]]:
    t = op_table(run[run.ranks[0]], **kw)
    return {r["name"]: r for r in t.to_dicts()}


# ---- the plugin's mini traces -------------------------------------------------------------------


def test_all_categories(mini: Any) -> None:
    run = mini("all_categories")
    (s,) = steps_us(run)
    assert (s["kernel_us"], s["memcpy_us"], s["memset_us"], s["runtime_us"]) == (15, 10, 5, 30)
    assert (s["dataloader_us"], s["cpu_exec_us"], s["other_us"], s["communication_us"]) == (180, 35, 125, 0)
    ops = ops_by_name(run)
    assert set(ops) == {"aten::to", "aten::nll_loss_backward"}
    to, nll = ops["aten::to"], ops["aten::nll_loss_backward"]
    assert (to["calls"], to["host_total_us"], to["device_total_us"], to["host_self_us"], to["device_self_us"]) == (
        1,
        60,
        0,
        60,
        0,
    )
    assert (nll["host_total_us"], nll["device_total_us"], nll["host_self_us"], nll["device_self_us"]) == (
        70,
        30,
        70 - 20 - 10 - 5,
        30,
    )
    shape = op_table(run[0], group_by="shape")
    assert shape.filter(pl.col("name") == "aten::to")["input_dims"].item() == "[[2,8,5],[],[],[],[],[],[],[]]"
    (k,) = kernel_config(run, group_by="op")["kernels"].to_dicts()
    assert (k["op"], k["calls"], k["total_us"], k["min_us"], k["max_us"]) == ("aten::nll_loss_backward", 1, 15, 15, 15)


def test_external_id_decides_the_owner_of_boundary_runtimes(mini: Any) -> None:
    ops = ops_by_name(mini("external_id"))
    assert (ops["aten::mat_mul"]["device_total_us"], ops["aten::mat_mul"]["device_self_us"]) == (5 + 6 + 7 + 8, 6 + 8)
    assert (ops["aten::mm"]["device_total_us"], ops["aten::mm"]["device_self_us"]) == (5 + 7, 5 + 7)


@pytest.mark.parametrize("name", ["operator_relation", "operator_relation_1"])
def test_operator_relation_same_start_or_end(mini: Any, name: str) -> None:
    ops = ops_by_name(mini(name))
    assert ops["aten::mat_mul"]["host_self_us"] == 100 - 70
    assert ops["aten::mm"]["host_self_us"] == 70


def test_remove_dup_nodes(mini: Any) -> None:
    run = mini("remove_dup_nodes")
    ops = ops_by_name(run)
    assert list(ops) == ["aten::mm"] and ops["aten::mm"]["calls"] == 1
    assert ops["aten::mm"]["device_self_us"] == 8
    # the two inner aten::mm are absorbed; the outer keeps the innermost one's runtime (20 µs)
    assert ops["aten::mm"]["host_self_us"] == 100 - 20
    assert len(build_op_tree(run[0]).absorbed) == 2


def test_top_level_runtime(mini: Any) -> None:
    run = mini("top_level_runtime")
    ops = ops_by_name(run)
    assert (ops["aten::mm"]["device_total_us"], ops["aten::mm"]["device_self_us"]) == (0, 0)
    assert kernel_table(run[0], group_by="name")["calls"].to_list() == [1]


def test_runtime_called_by_profilerstep(mini: Any) -> None:
    run = mini("runtime_called_by_profilerstep")
    (s,) = steps_us(run)
    assert (s["kernel_us"], s["runtime_us"], s["cpu_exec_us"], s["other_us"]) == (8, 20, 0, 300 - 8 - 20)
    assert op_table(run[0]).height == 0  # a ProfilerStep is not an operator
    assert kernel_table(run[0], group_by="op")["op"].to_list() == ["ProfilerStep#1"]


def test_runtime_launch_multiple_kernels(mini: Any) -> None:
    run = mini("runtime_launch_multipe_kernels")
    assert ops_by_name(run)["Broadcast"]["device_total_us"] == 120318 + 132800
    assert kernel_table(run[0], group_by="name")["calls"].to_list() == [2]


def test_no_profilerstep(mini: Any) -> None:
    run = mini("no_profilerstep")
    (s,) = steps_us(run)
    assert s["step"] == 0
    assert (s["kernel_us"], s["memcpy_us"], s["memset_us"], s["runtime_us"]) == (100, 0, 0, 320 - 310)
    assert (s["dataloader_us"], s["cpu_exec_us"], s["other_us"]) == (0, 60 + (310 - 300), 300 - (100 + 60))
    assert s["total_us"] == (320 + 100) - 100
    nll = ops_by_name(run)["aten::nll_loss_backward"]
    assert (nll["host_total_us"], nll["device_total_us"], nll["host_self_us"], nll["device_self_us"]) == (
        70,
        100,
        70 - 20,
        100,
    )


def test_multiple_profilersteps_no_overlap(mini: Any) -> None:
    run = mini("multiple_profilersteps_no_overlap")
    s1, s2 = steps_us(run)
    assert (s1["kernel_us"], s1["memcpy_us"], s1["runtime_us"], s1["cpu_exec_us"], s1["other_us"]) == (
        0,
        40,
        5,
        60 - 5,
        200 - 60 - 20,
    )
    assert s1["total_us"] == 320 - 100
    assert (s2["kernel_us"], s2["memcpy_us"], s2["runtime_us"], s2["cpu_exec_us"], s2["other_us"]) == (
        200,
        0,
        5,
        50 - 5,
        360 - 350,
    )
    assert s2["total_us"] == 610 - 350
    avg = overview(run)["average"].filter(pl.col("category") == "Step")["time_us"].item()
    assert avg == ((320 - 100) + (610 - 350)) / 2
    ops = ops_by_name(run)
    assert (ops["aten::to"]["device_total_us"], ops["aten::to"]["host_self_us"]) == (40, 60 - 5)
    assert (ops["aten::mm"]["device_total_us"], ops["aten::mm"]["host_self_us"]) == (200, 50 - 5)
    (k,) = kernel_config(run, group_by="op")["kernels"].to_dicts()
    assert (k["name"], k["op"], k["calls"], k["total_us"]) == (
        "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>",
        "aten::mm",
        1,
        200,
    )


def test_self_time(mini: Any) -> None:
    ops = ops_by_name(mini("self_time"))
    mm, mat = ops["aten::mm"], ops["aten::mat_mul"]
    assert (mat["host_total_us"], mat["device_total_us"], mat["host_self_us"], mat["device_self_us"]) == (
        100,
        20 + 16,
        100 - 40 - 25,
        16,
    )
    assert (mm["host_total_us"], mm["device_total_us"], mm["host_self_us"], mm["device_self_us"]) == (40, 20, 30, 20)


def test_multiple_profilersteps_with_overlap(mini: Any) -> None:
    s1, s2 = steps_us(mini("multiple_profilersteps_with_overlap"))
    assert (s1["kernel_us"], s1["memcpy_us"], s1["runtime_us"]) == (0, 100, 5)
    assert (s1["cpu_exec_us"], s1["other_us"]) == ((200 + 60) - (150 + 90) - 5, 280 - (200 + 60))
    assert s1["total_us"] == (280 + 100) - (150 + 90)
    assert (s2["kernel_us"], s2["memcpy_us"], s2["runtime_us"]) == (200, 0, 5)
    assert (s2["cpu_exec_us"], s2["other_us"]) == ((280 + 100) - 360 + (410 - 405), 0)
    assert s2["total_us"] == 610 - (280 + 100)


def test_last_steps_no_kernel(mini: Any) -> None:
    (s,) = steps_us(mini("last_steps_no_kernel"))
    assert s["total_us"] == (150 + 180) - (90 + 20)


def test_pure_cpu(mini: Any) -> None:
    s1, s2 = steps_us(mini("pure_cpu"))
    assert (s1["kernel_us"], s1["runtime_us"], s1["cpu_exec_us"], s1["other_us"], s1["total_us"]) == (
        0,
        0,
        10,
        200 - 10,
        200,
    )
    assert (s2["cpu_exec_us"], s2["other_us"], s2["total_us"]) == (40, 100 - 40, 100)


def test_gpu_utilization(mini: Any) -> None:
    run = mini("gpu_utilization")
    (o,) = gpu_metrics(run)["overall"].to_dicts()
    assert o["device"] == 1
    assert o["utilization_pct"] == pytest.approx(100 * (40 + 20) / 120)
    sm = (
        0.5 * (135 - 130)
        + 1.0 * (140 - 135)
        + 0.6 * (145 - 140)
        + 0.9 * (150 - 145)
        + 0.3 * (170 - 150)
        + 1.0 * (220 - 200)
    )
    assert o["sm_efficiency_pct"] == pytest.approx(100 * sm / (220 - 100))
    assert o["occupancy_pct"] == pytest.approx((0.6 * 10 + 0.1 * 15 + 1.0 * 25 + 0.3 * 20) / (10 + 15 + 25 + 20))
    by_name = {r["name"]: r for r in kernel_table(run[0], group_by="name").to_dicts()}
    cunn = by_name["void cunn_ClassNLLCriterion_updateGradInput_kernel<float>"]
    assert cunn["mean_blocks_per_sm"] == pytest.approx((0.5 * 10 + 0.3 * 25 + 10.5 * 20) / (10 + 25 + 20))
    assert cunn["mean_est_occupancy_pct"] == pytest.approx((0.6 * 10 + 1.0 * 25 + 0.3 * 20) / (10 + 25 + 20))
    gemm = by_name["void gemmSN_TN_kernel_64addr"]  # the 0-duration call has no weight
    assert (gemm["mean_blocks_per_sm"], gemm["mean_est_occupancy_pct"]) == (pytest.approx(0.6), pytest.approx(0.1))
    by_op = {(r["name"], r["op"]): r for r in kernel_table(run[0], group_by="op").to_dicts()}
    assert by_op[("void gemmSN_TN_kernel_64addr", "aten::mat_mul")]["mean_blocks_per_sm"] == pytest.approx(0.6)
    c_mm = by_op[("void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", "aten::mm")]
    assert c_mm["mean_blocks_per_sm"] == pytest.approx((0.5 * 10 + 0.3 * 25) / (10 + 25))
    assert c_mm["mean_est_occupancy_pct"] == pytest.approx((0.6 * 10 + 1.0 * 25) / (10 + 25))
    c_mat = by_op[("void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", "aten::mat_mul")]
    assert (c_mat["mean_blocks_per_sm"], c_mat["mean_est_occupancy_pct"]) == (pytest.approx(10.5), pytest.approx(0.3))


def test_gpu_utilization_kernel_out_of_step(mini: Any) -> None:
    run = mini("gpu_utilization_kernel_out_of_step")
    (o,) = gpu_metrics(run)["overall"].to_dicts()
    assert o["utilization_pct"] == 0.0
    assert o["sm_efficiency_pct"] is None and o["occupancy_pct"] is None
    (k,) = kernel_table(run[0], group_by="name").to_dicts()
    assert k["mean_blocks_per_sm"] == pytest.approx((20 * 0.5 + 25 * 10.5) / (20 + 25))
    assert k["mean_est_occupancy_pct"] == pytest.approx((20 * 0.6 + 25 * 0.3) / (20 + 25))


@pytest.mark.parametrize("rules", ["plugin", "current"])
def test_tensor_core(mini: Any, rules: str) -> None:
    run = mini("tensor_core")
    ops = ops_by_name(run, tensor_core_rules=rules)
    assert (ops["aten::conv2d"]["tc_eligible"], ops["aten::conv2d"]["tc_self_pct"]) == (True, 0.0)
    assert ops["aten::conv2d"]["tc_total_pct"] == pytest.approx(100 * 15 / (15 + 10))
    assert (ops["op_no_tc"]["tc_eligible"], ops["op_no_tc"]["tc_total_pct"]) == (False, 0.0)
    assert (ops["aten::cudnn_convolution"]["tc_self_pct"], ops["aten::cudnn_convolution"]["tc_total_pct"]) == (
        100.0,
        100.0,
    )
    ks = {r["name"]: r for r in kernel_table(run[0], group_by="op", tensor_core_rules=rules).to_dicts()}
    assert (ks["kernel_no_tc"]["op"], ks["kernel_no_tc"]["tensor_cores"]) == ("op_no_tc", False)
    volta = ks["volta_fp16_s884cudnn_fp16_128x128_ldg8_splitK_relu_f2f_exp_small_nhwc_tn_v1"]
    assert (volta["op"], volta["tensor_cores"]) == ("aten::cudnn_convolution", True)
    (o,) = gpu_metrics(run, tensor_core_rules=rules)["overall"].to_dicts()
    assert o["tensor_core_pct"] == pytest.approx(100 * 15 / (15 + 10))


# ---- ranksight's own definitions, on traces built here ---------------------------------------------


def X(cat: str, name: str, ts: float, dur: float, tid: int = 1, pid: int = 1, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def K(name: str, ts: float, dur: float, corr: int, **args: Any) -> dict[str, Any]:
    return X("kernel", name, ts, dur, tid=7, pid=0, correlation=corr, device=0, stream=7, **args)


def RT(name: str, ts: float, dur: float, corr: int, ext: int, cat: str = "cuda_runtime") -> dict[str, Any]:
    return X(cat, name, ts, dur, correlation=corr, **{"External id": ext})


def OP(name: str, ts: float, dur: float, ext: int, cat: str = "cpu_op") -> dict[str, Any]:
    return X(cat, name, ts, dur, **{"External id": ext})


def modern_comm_trace() -> list[dict[str, Any]]:
    """One step [0, 100): aten::mm [10, 30) launches a GEMM [20, 40) through cudaLaunchKernel
    [12, 14); c10d::allreduce_ [40, 50) launches an NCCL kernel [45, 85) through cuLaunchKernelEx
    [42, 44) (a driver call the plugin ignores). The trace also carries the gpu_user_annotation copy
    of the step."""
    return [
        OP("ProfilerStep#3", 0, 100, 1, cat="user_annotation"),
        X("gpu_user_annotation", "ProfilerStep#3", 18, 70, tid=7, pid=0),
        OP("aten::mm", 10, 20, 2),
        RT("cudaLaunchKernel", 12, 2, 100, 2),
        K("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", 20, 20, 100),
        OP("c10d::allreduce_", 40, 10, 3),
        RT("cuLaunchKernelEx", 42, 2, 101, 3, cat="cuda_driver"),
        K("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 45, 40, 101),
    ]


def test_overview_recognises_modern_collectives_and_driver_launches(make_trace: Callable[..., Path]) -> None:
    run = ranksight.load([make_trace(modern_comm_trace())])
    (s,) = steps_us(run)
    # Kernel [20,40) = 20; Communication = NCCL kernel [45,85) ∪ host op [40,50) = [40,85) minus
    # nothing earlier = 45; Runtime [12,14) (the driver call lies inside the comm span) = 2;
    # CPU Exec: aten::mm [10,30) minus kernel and runtime = [10,12) ∪ [14,20) = 8; Other = 100 − 75
    assert (s["kernel_us"], s["communication_us"], s["runtime_us"], s["cpu_exec_us"]) == (20, 45, 2, 8)
    assert (s["other_us"], s["total_us"]) == (25, 100)
    assert s["step"] == 3  # one step: the gpu_user_annotation copy is not a second step


def test_overview_plugin_compat_misses_them(make_trace: Callable[..., Path]) -> None:
    run = ranksight.load([make_trace(modern_comm_trace())])
    (s,) = steps_us(run, plugin_compat=True)
    # ten names only: the NCCL kernel is a Kernel ([20,40) ∪ [45,85) = 60), c10d::allreduce_ is CPU
    # Exec, the driver call is nothing: Runtime [12,14) = 2; CPU Exec [10,12) ∪ [14,20) ∪ [40,45) = 13
    assert (s["kernel_us"], s["communication_us"], s["runtime_us"], s["cpu_exec_us"], s["other_us"]) == (
        60,
        0,
        2,
        13,
        25,
    )


def test_gpu_metrics_compute_utilization_excludes_collectives(make_trace: Callable[..., Path]) -> None:
    (o,) = gpu_metrics(ranksight.load([make_trace(modern_comm_trace())]))["overall"].to_dicts()
    assert o["utilization_pct"] == pytest.approx(60.0)  # [20,40) ∪ [45,85) over [0,100)
    assert o["compute_utilization_pct"] == pytest.approx(20.0)
    assert o["tensor_core_pct"] == pytest.approx(100 * 20 / 60)  # sm90 xmma GEMM; NCCL is not
    assert o["sm_efficiency_pct"] is None  # no kernel carries 'blocks per SM'


def test_sm_efficiency_caps_concurrent_kernels_at_one(make_trace: Callable[..., Path]) -> None:
    ev = [
        OP("ProfilerStep#1", 0, 10, 1),
        RT("cudaLaunchKernel", 1, 1, 1, 1),
        RT("cudaLaunchKernel", 2, 1, 2, 1),
        K("a", 0, 10, 1, **{"blocks per SM": 0.7, "est. achieved occupancy %": 40}),
        K("b", 5, 10, 2, **{"blocks per SM": 0.6, "est. achieved occupancy %": 10}),
    ]
    (o,) = gpu_metrics(ranksight.load([make_trace(ev)]))["overall"].to_dicts()
    # step [0,15) (extended to the last kernel end); 0.7 on [0,5), min(1.3,1) on [5,10), 0.6 on [10,15)
    assert o["window_us"] == 15
    assert o["sm_efficiency_pct"] == pytest.approx(100 * (0.7 * 5 + 1.0 * 5 + 0.6 * 5) / 15)
    assert o["occupancy_pct"] == pytest.approx((40 * 10 + 10 * 10) / 20)


def test_kernel_config_missing_args_stay_missing(make_trace: Callable[..., Path]) -> None:
    ev = [
        OP("aten::mm", 0, 10, 1),
        RT("cudaLaunchKernel", 1, 1, 1, 1),
        RT("cudaLaunchKernel", 2, 1, 2, 1),
        K(
            "gemm",
            10,
            30,
            1,
            grid=[4, 1, 1],
            block=[128, 1, 1],
            **{"blocks per SM": 2.0, "registers per thread": 32, "shared memory": 0},
        ),
        K("gemm", 50, 10, 2, grid=[4, 1, 1], block=[128, 1, 1], **{"registers per thread": 32, "shared memory": 0}),
    ]
    run = ranksight.load([make_trace(ev)])
    (k,) = kernel_config(run)["kernels"].to_dicts()
    assert (k["grid"], k["block"], k["registers_per_thread"], k["shared_memory_bytes"]) == (
        "[4, 1, 1]",
        "[128, 1, 1]",
        32,
        0,
    )
    assert (k["calls"], k["total_us"], k["mean_us"], k["min_us"], k["max_us"]) == (2, 40, 20, 10, 30)
    assert k["mean_blocks_per_sm"] == 2.0  # the plugin fills the missing arg with 0: (2·30 + 0·10)/40 = 1.5
    assert k["mean_est_occupancy_pct"] is None


def test_crossing_ranges_are_dropped_like_the_plugin(make_trace: Callable[..., Path]) -> None:
    # A [0,100) contains B [10,40); C [30,60) starts inside B and ends after it: dropped. D [70,80)
    # is a child of A. A's self = 100 − 30 − 10 = 60.
    ev = [OP("A", 0, 100, 1), OP("B", 10, 30, 2), OP("C", 30, 30, 3), OP("D", 70, 10, 4)]
    run = ranksight.load([make_trace(ev)])
    tree = build_op_tree(run[0])
    assert len(tree.dropped) == 1
    ops = ops_by_name(run)
    assert set(ops) == {"A", "B", "D"}
    assert ops["A"]["host_self_us"] == 60


def test_runtime_without_external_id_nests_by_time(make_trace: Callable[..., Path]) -> None:
    ev = [
        OP("aten::add", 0, 10, 1),
        X("cuda_runtime", "cudaLaunchKernel", 2, 1, correlation=5),
        K("add_kernel", 5, 4, 5),
    ]
    ops = ops_by_name(ranksight.load([make_trace(ev)]))
    assert (ops["aten::add"]["device_self_us"], ops["aten::add"]["host_self_us"]) == (4, 9)


def test_cpu_only_trace(make_trace: Callable[..., Path]) -> None:
    run = ranksight.load([make_trace([OP("ProfilerStep#1", 0, 50, 1), OP("aten::add", 10, 5, 2)])])
    (s,) = steps_us(run)
    assert (s["cpu_exec_us"], s["other_us"], s["total_us"]) == (5, 45, 50)
    with pytest.raises(MissingDataError, match="GPU kernel events"):
        gpu_metrics(run)
    with pytest.raises(MissingDataError, match="GPU kernel events"):
        kernel_config(run)
