"""The Tensor Core rule table on real kernel names taken from the traces in tests/data (and B200
from ../shared), with the share of kernel time each rule set finds."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

import ranksight
from ranksight.model.tensor_cores import (
    KERNEL_RULES,
    tc_eligible_op,
    tensor_core_mask,
    tensor_core_rule,
    uses_tensor_cores,
)

H100 = "tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz"
MI300 = "tracelens/mi300/gaunernst_bert-small-uncased__1016001.json.gz"
TRITON = "tracelens/torch_compile_triton/trace.json.gz"
A100 = "hta/nccl_parser_config/nccl_data.json.gz"
V100 = "kineto/2021-07-08_c6e5fe20/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"

# (trace in tests/data, a substring that picks exactly one kernel name there, uses Tensor Cores,
# deciding rule): the test judges the full name read from the trace
REAL = [
    (H100, "sm90_xmma_gemm_bf16bf16", True, "pyprof-2019"),
    (H100, "cutlass_80_wmma_tensorop_bf16_s161616gemm", True, "cutlass-tensorop"),
    (H100, "cutlass_80_tensorop_bf16_s16816gemm_relu", True, "pyprof-2019"),
    (H100, "pytorch_flash::flash_fwd_kernel", True, "attention"),
    (H100, "CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>", False, None),
    (MI300, "MT16x16x128_MI16x16x1_SN_LDSB0", True, "amd-tensile-mfma"),  # hipBLASLt MFMA GEMM
    (MI300, "attn_fwd", True, "attention"),  # Triton FlashAttention on ROCm
    (TRITON, "triton_poi_fused__unsafe_view_mul_silu_2", False, "not:triton-pointwise"),
    (TRITON, "triton_red_fused_add_mean_mul_pow_rsqrt_0", False, "not:triton-pointwise"),
    (A100, "cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4", True, "pyprof-2019"),
    (
        A100,
        "sm80_xmma_wgrad_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x16_stage4",
        True,
        "xmma",
    ),
    (A100, "cudnn_infer_ampere_scudnn_128x64_relu_xregs_large_nn_v1", False, "not:scudnn"),
    (A100, "ncclKernel_AllReduce_RING_LL_Sum_float", False, None),
    (V100, "volta_sgemm_64x64_nt", False, "not:sgemm"),
    (V100, "implicit_convolve_sgemm<float, float, 1024", False, "not:sgemm"),
    (V100, "volta_scudnn_128x64_relu_interior_nn_v1", False, "not:scudnn"),
    (V100, "dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>", False, "not:conv-gemv-helpers"),
]

# the same from ../shared (H100 Qwen, MI300 ResNet, B200 eager)
SHARED = [
    ("tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz", "cutlass_80_simt_sgemm", False, "not:cutlass-simt"),
    (
        "tracelens/mi300/resnet_act_checkpoint.json.gz",
        "SubTensorOpWithCastTensor1d",
        False,
        None,
    ),  # MIOpen element-wise
    ("tracelens/mi300/resnet_act_checkpoint.json.gz", "kernel_grouped_conv_fwd_xdl_cshuffle_v3", True, "amd-ck-mfma"),
    ("tracelens/b200/eager_trace.json.gz", "bmm_MxE4m3_MxE2m1MxE4m3_Fp32", True, "trtllm-gemm"),
    ("tracelens/b200/eager_trace.json.gz", "nvjet_tst_64x64_64x16_2x1_2cta_v_bz_bias_TNT", True, "nvjet"),
    ("tracelens/b200/eager_trace.json.gz", "fmhaSm100aKernel_QkvE4m3OBfloat16H64PagedKvCausal", True, "attention"),
    ("tracelens/b200/eager_trace.json.gz", "multimem_all_reduce_kernel", False, None),
]

_NAMES: dict[Path, list[str]] = {}


def _one_name(path: Path, sub: str) -> str:
    if path not in _NAMES:
        _NAMES[path] = sorted(set(ranksight.load([path])[0].kind("kernel")["name"].cast(pl.String).to_list()))
    hits = [n for n in _NAMES[path] if sub in n]
    assert len(hits) >= 1, f"{sub!r} not in {path}"
    return hits[0]


@pytest.mark.parametrize(("rel", "sub", "expected", "rule"), REAL)
def test_real_kernel_names(data: Callable[[str], Path], rel: str, sub: str, expected: bool, rule: str | None) -> None:
    name = _one_name(data(rel), sub)
    assert uses_tensor_cores(name) is expected
    assert tensor_core_rule(name) == rule


@pytest.mark.shared
@pytest.mark.parametrize(("rel", "sub", "expected", "rule"), SHARED)
def test_real_kernel_names_shared(shared_traces: Path, rel: str, sub: str, expected: bool, rule: str | None) -> None:
    name = _one_name(shared_traces / rel, sub)
    assert uses_tensor_cores(name) is expected
    assert tensor_core_rule(name) == rule


def test_plugin_test_kernel() -> None:
    # the name of the plugin's test_tensor_core (Volta FP16 cuDNN)
    assert (
        tensor_core_rule("volta_fp16_s884cudnn_fp16_128x128_ldg8_splitK_relu_f2f_exp_small_nhwc_tn_v1") == "pyprof-2019"
    )


def test_plugin_ruleset_is_the_2019_substring_list() -> None:
    assert uses_tensor_cores("volta_h884gemm_64x64_ldg8_nn", "plugin")
    assert not uses_tensor_cores("nvjet_tst_64x64_64x16_2x1_2cta_v_bz_bias_TNT", "plugin")
    assert not uses_tensor_cores("attn_fwd", "plugin")
    with pytest.raises(ValueError, match="rule set"):
        uses_tensor_cores("x", "2019")


def test_every_rule_documents_an_example_it_decides() -> None:
    names = {r.name for r in KERNEL_RULES}
    assert len(names) == len(KERNEL_RULES)
    for r in KERNEL_RULES:
        if "..." in r.example:
            continue
        got = tensor_core_rule(r.example)
        assert got == (r.name if r.uses_tc else f"not:{r.name}"), (r.name, got)
    doc = (Path(__file__).resolve().parents[2] / "docs" / "tensor-cores.md").read_text()
    for r in KERNEL_RULES:
        assert f"`{r.name}`" in doc, f"rule {r.name} is not documented in docs/tensor-cores.md"


def test_eligible_ops() -> None:
    assert tc_eligible_op("aten::addmm", "plugin") and tc_eligible_op("aten::addmm")
    assert not tc_eligible_op("AddmmBackward0", "plugin") and tc_eligible_op("AddmmBackward0")
    assert tc_eligible_op("aten::_scaled_dot_product_flash_attention") and not tc_eligible_op("aten::add")


def _tc_share(path: Path, ruleset: str) -> float:
    t = ranksight.load([path])[0]
    k = t.kind("kernel")
    tc = tensor_core_mask(k["name"], ruleset)
    return round(100 * k.filter(tc)["dur_ns"].sum() / k["dur_ns"].sum(), 1)


@pytest.mark.parametrize(
    ("rel", "plugin_pct", "current_pct"),
    [
        ("tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz", 32.2, 76.5),
        ("tracelens/mi300/gaunernst_bert-small-uncased__1016001.json.gz", 0.0, 74.1),
        (
            "kineto/2021-07-08_c6e5fe20/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz",
            0.0,
            0.0,
        ),
    ],
)
def test_share_of_kernel_time(data: Callable[[str], Path], rel: str, plugin_pct: float, current_pct: float) -> None:
    assert _tc_share(data(rel), "plugin") == plugin_pct
    assert _tc_share(data(rel), "current") == current_pct


@pytest.mark.shared
def test_share_of_kernel_time_b200(shared_traces: Path) -> None:
    p = shared_traces / "tracelens/b200/eager_trace.json.gz"
    assert _tc_share(p, "plugin") == 0.0  # tb-plugin-definitions.md §14 row 5
    assert _tc_share(p, "current") == 59.7
