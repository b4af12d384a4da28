"""The name normaliser (ranksight.views.names): each rule on real names, exact outputs."""

from __future__ import annotations

import pytest

from ranksight.views.names import hta_short_name, normalize_kernel, normalize_op, strip_brackets

ELEMENTWISE = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, "
    "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3>)"
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("<built-in method view of Tensor object at 0x7f56b1975900>", "<built-in method view of Tensor object at 0x…>"),
        ("ProfilerStep#1009", "ProfilerStep#*"),
        ("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "enumerate(DataLoader)#__next__"),
        ("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", "enumerate(DataLoader)#__next__"),
        ("torch/nn/modules/module.py(1501): _call_impl", "torch/nn/modules/module.py(*): _call_impl"),
        ("triton_poi_fused_add_0", "triton_poi_fused_add_*"),
        ("hipLaunchKernel", "cudaLaunchKernel"),
        ("hipMemcpyAsync", "cudaMemcpyAsync"),
        ("hipblasLtMatmul", "hipblasLtMatmul"),  # lower-case after hip: a library name, kept
        ("aten::mm", "aten::mm"),
        # templates are kept in op names by default: CppNode<X> differ by X
        (
            "torch::autograd::CppNode<SplitLookupFunction_rowwise_adagrad_Op>",
            "torch::autograd::CppNode<SplitLookupFunction_rowwise_adagrad_Op>",
        ),
    ],
)
def test_normalize_op(raw, expected):
    assert normalize_op(raw) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (ELEMENTWISE, "at::native::vectorized_elementwise_kernel"),
        (ELEMENTWISE.replace("<4,", "<8,"), "at::native::vectorized_elementwise_kernel"),  # vector width differs: same kernel
        ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "ncclKernel_AllReduce_RING_LL_Sum_float"),
        ("Memcpy DtoD (Device -> Device)", "Memcpy DtoD (Device -> Device)"),  # '(' after a space: text
        ("Memset (Device)", "Memset (Device)"),
        ("void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, true, false>(float*, float const*, "
         "int)",
         "(anonymous namespace)::softmax_warp_forward"),
        ("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_align8>(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_align8::Params)",
         "cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_align8>"),
        ("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_12", "triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_*"),
        ("attn_fwd", "attn_fwd"),
    ],
)  # fmt: skip
def test_normalize_kernel(raw, expected):
    assert normalize_kernel(raw) == expected


def test_keep_templates_and_shapes_options():
    assert normalize_kernel(ELEMENTWISE, templates=False).startswith("at::native::vectorized_elementwise_kernel<4, ")
    sm90 = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_execute"
    assert normalize_kernel(sm90) == sm90
    assert (
        normalize_kernel(sm90, shapes=True)
        == "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize*_warpgroupsize*_execute"
    )
    assert normalize_kernel("Cijk_Alik_Bljk_MT32x64x128_MI16x16x1_SN", shapes=True) == "Cijk_Alik_Bljk_MT*_MI*_SN"
    assert normalize_op("aten::mm [[1, 512], [512, 512]]", shapes=True) == "aten::mm"
    assert normalize_op("torch::autograd::CppNode<X<Y> >", templates=True) == "torch::autograd::CppNode"


def test_strip_brackets_edge_cases():
    assert strip_brackets("a<b<c>>(d)") == "a"
    assert strip_brackets("operator-> (x)") == "operator-> (x)"
    assert strip_brackets("unbalanced<oops") == "unbalanced<oops"
    assert strip_brackets("<lambda>") == "<lambda>"  # nothing left: the name is kept


@pytest.mark.parametrize(
    ("raw", "is_memory", "expected"),
    [
        ("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", False, "enumerate#_MultiProcessingDataLoaderIter.__next__"),
        ("autograd::engine::evaluate_function: torch::autograd::CppNode<SplitLookupFunction_rowwise_adagrad_Op>", False, "torch::autograd::CppNode"),
        ("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", False, "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"),
        ("void (anonymous namespace)::softmax_warp_forward<float, 10>(float*, int)", False, "::softmax_warp_forward"),
        ("Memcpy DtoD (Device -> Device)", True, "Memcpy DtoD (Device -> Device)"),
        ("## forward ##", False, "## forward ##"),
    ],
)  # fmt: skip
def test_hta_short_name(raw, is_memory, expected):
    """HTA v0.6's short names, as measured in its outputs (oracle CSVs and s_name columns)."""
    assert hta_short_name(raw, is_memory=is_memory) == expected
