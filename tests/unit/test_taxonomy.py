"""The kernel taxonomy (ranksight.model.taxonomy): one family at a time, with real kernel names.

Names come from corpus traces (marked with the trace) or from the libraries' sources and
documentation (marked "docs"); each with its expected class, family, precision, Tensor Core use and
library. Then the properties: communication is never decided by a word inside template arguments,
and the rules file is well-formed and documented.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ranksight.model.kinds import kernel_class_of_name
from ranksight.model.taxonomy import (
    FAMILIES,
    PRECISIONS,
    base_name,
    classify,
    kernel_taxonomy,
    normalise,
    rules,
    rules_fingerprint,
    without_params,
)

# (name, class, family, precision, tensor_cores, library)
CASES = [
    # ---- NVIDIA GEMMs ----------------------------------------------------------------------------
    (  # CUTLASS 3 FP8 grouped GEMM (MoE experts), Hopper GMMA (docs: CUTLASS grouped GEMM example)
        "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cutlass::gemm::GroupProblemShape<"
        "cute::tuple<int, int, int> >, cutlass::gemm::collective::CollectiveMma<cutlass::gemm::"
        "MainloopSm90TmaGmmaWarpSpecializedCooperative<4, cutlass::gemm::KernelPtrArrayTmaWarpSpecialized"
        "CooperativeFP8FastAccum>, cute::tuple<cute::C<128>, cute::C<128>, cute::C<128> >, cutlass::float_e4m3_t, "
        "cutlass::float_e4m3_t> > >(cutlass::gemm::kernel::GemmUniversal<>::Params)",
        "COMPUTE",
        "gemm",
        "fp8",
        "yes",
        "CUTLASS",
    ),
    (  # cuBLASLt FP8 on Hopper (docs: cuBLAS 12 kernel names)
        "sm90_xmma_gemm_e4m3bf16_e4m3f32_f32_tn_n_tilesize128x128x128_warpgroupsize1x1x1_execute_segment_k_off_"
        "kernel__5x_cublas",
        "COMPUTE",
        "gemm",
        "fp8",
        "yes",
        "cuBLAS",
    ),
    (  # tracelens/h100 BERT
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__"
        "5x_cublas",
        "COMPUTE",
        "gemm",
        "bf16",
        "yes",
        "cuBLAS",
    ),
    (  # HTA trace_diff (A100): TF32 Tensor Core GEMM (s1688 = fp32 I/O on the m16n8k8 TF32 MMA)
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x64_32x6_nt_align1>(cutlass_80_tensorop_s1688gemm_"
        "128x64_32x6_nt_align1::Params)",
        "COMPUTE",
        "gemm",
        "tf32",
        "yes",
        "CUTLASS",
    ),
    ("volta_h884gemm_64x64_ldg8_nn", "COMPUTE", "gemm", "fp16", "yes", "cuBLAS"),  # docs: PyProf hmma list
    ("volta_sgemm_64x64_nt", "COMPUTE", "gemm", "fp32", "no", "cuBLAS"),  # hta/df_index_resolver (V100)
    (  # tests/data/generated/h100/train-eager: cuBLAS 12 nvjet (precision not in the name)
        "nvjet_sm90_tst_128x128_64x6_2x1_v_bz_NNT",
        "COMPUTE",
        "gemm",
        "unknown",
        "yes",
        "cuBLAS",
    ),
    (  # tracelens/b200: TensorRT-LLM FP4 x FP8 cubin GEMM
        "bmm_MxE4m3_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3_et128x16_m128x16x32_cga1x1x1_16dp256b_rM_TN_transOut_"
        "schedP2x1x2x3_biasM_bN_tma_tmaOpt_clmp_swiGlu_dynBatch_sm100f",
        "COMPUTE",
        "gemm",
        "fp4",
        "yes",
        "TensorRT-LLM",
    ),
    ("void deep_gemm::fp8_gemm_kernel<128, 128>(float*, int)", "COMPUTE", "gemm", "fp8", "yes", "DeepGEMM"),  # docs
    ("triton_tem_fused_addmm_relu_0", "COMPUTE", "gemm", "unknown", "yes", "Triton"),  # docs: Inductor template
    # ---- AMD GEMMs -------------------------------------------------------------------------------
    (  # tracelens/mi300: hipBLASLt with an MFMA shape
        "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT128x256x32_MI16x16x1_SN_LDSB1_AFC1_AFEM1_AFEM1_ASEM1_CLR1",
        "COMPUTE",
        "gemm",
        "bf16",
        "yes",
        "hipBLASLt/Tensile",
    ),
    (  # docs: hipBLASLt FP8 (F8 = e4m3fnuz, B8 = e5m2fnuz)
        "Cijk_Alik_Bljk_F8B8BS_BH_Bias_SAV_UserArgs_MT256x256x128_MI16x16x1_SN_LDSB1",
        "COMPUTE",
        "gemm",
        "fp8",
        "yes",
        "hipBLASLt/Tensile",
    ),
    (  # tracelens/mi300 ResNet: Composable Kernel XDL convolution (mangled)
        "_ZN2ck16tensor_operation6device12_GLOBAL__N_139kernel_grouped_conv_fwd_xdl_cshuffle_v3INS_28GridwiseGemm_xdl_"
        "cshuffle_v3INS_13tensor_layout4gemm8RowMajorENS6_11ColumnMajorES7_ttfttNS0_12element_wise11PassThroughE",
        "COMPUTE",
        "convolution",
        "unknown",
        "yes",
        "Composable Kernel",
    ),
    (  # tracelens/mi300 ResNet: MIOpen implicit GEMM on XDLOPS
        "igemm_fwd_gtcx3_nhwc_bf16_bx0_ex1_bt128x128x32_wt32x32x8_ws1x1_wr2x2_ta1x8x2x1_1x4x1x64_tb1x8x2x1_1x4x1x64",
        "COMPUTE",
        "convolution",
        "bf16",
        "yes",
        "MIOpen",
    ),
    # ---- attention -------------------------------------------------------------------------------
    (  # FlashAttention-3 backward: "Collective" is CUTLASS's mainloop, not communication (issue 17 item 7)
        "void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnBwdSm90<flash::CollectiveMainloopBwd"
        "Sm90<2, cute::tuple<cute::C<64>, cute::C<128>, cute::C<128> >, 128, cutlass::bfloat16_t, float, "
        "cutlass::arch::Sm90, true, false>, flash::CollectiveEpilogueBwd<cute::tuple<cute::C<64> >, cutlass::"
        "bfloat16_t, cutlass::arch::Sm90, 256, true>, flash::FlashAttnBwdSm90<> > > >(flash::FlashAttnBwdSm90<>::Params)",
        "COMPUTE",
        "attention",
        "bf16",
        "yes",
        "FlashAttention",
    ),
    (  # FlashAttention-2 (docs)
        "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::half_t, "
        "Flash_kernel_traits<128, 128, 64, 4, cutlass::half_t> >, false, false>(flash::Flash_fwd_params)",
        "COMPUTE",
        "attention",
        "fp16",
        "yes",
        "FlashAttention",
    ),
    (  # tracelens/b200: TRT-LLM FMHA with FP8 Q/K/V
        "fmhaSm100aKernel_QkvE4m3OBfloat16H64PagedKvCausalP16VarSeqQ128Kv128PersistentContext",
        "COMPUTE",
        "attention",
        "fp8",
        "yes",
        "TensorRT-LLM",
    ),
    ("aiter::fmha_fwd_hd128_bf16_rtz", "COMPUTE", "attention", "bf16", "yes", "AITER"),  # tracelens inference (MI300)
    # ---- other compute ---------------------------------------------------------------------------
    (  # tracelens/h100 timesformer: unfused softmax
        "void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::BFloat16, float, c10::BFloat16, "
        "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(c10::BFloat16*, c10::BFloat16 const*, int)",
        "COMPUTE",
        "softmax",
        "bf16",
        "no",
        "aten",
    ),
    (  # hta/trace_diff: the reduction's template argument names NormTwoOps; the kernel is a reduction
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::NormTwoOps<float, float, "
        "float>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::NormTwoOps<float, float, float>, "
        "unsigned int, float, 4>)",
        "COMPUTE",
        "reduction",
        "fp32",
        "no",
        "aten",
    ),
    (  # tracelens inference: AITER fused add + RMSNorm + quant (mangled)
        "_ZN5aiter24add_rmsnorm_quant_kernelIDF16bDF16bLi64ELi8ELb0ELb0ELb1ELi1EEEvPT0_PT_PfS4_S4_S4_diiiiiiib",
        "COMPUTE",
        "normalization",
        "bf16",
        "no",
        "AITER",
    ),
    (  # hta/trace_filter: FBGEMM's "fbgemm" contains "gemm": not a GEMM
        "void bounds_check_indices_kernel<long, false>(at::GenericPackedTensorAccessor<long, 1ul, "
        "at::RestrictPtrTraits, int>, fbgemm_gpu::FixedDivisor)",
        "COMPUTE",
        "other",
        "unknown",
        "unknown",
        "unknown",
    ),
    (  # FBGEMM's namespace in the kernel's own name: "fbgemm" is not "gemm"
        "void fbgemm_gpu::jagged_dense_elementwise_add_kernel<float>(float*, int)",
        "COMPUTE",
        "elementwise",
        "fp32",
        "no",
        "FBGEMM",
    ),
    ("triton_poi_fused_add_cos_sin_0", "COMPUTE", "elementwise", "unknown", "no", "Triton"),  # tracelens compile
    (  # tracelens/xdit_flux: a pointwise kernel whose fused-op list names an attention op
        "triton_poi_fused__to_copy_add_cat_fmha_v3_fwd_mul_neg_stack_unbind_unsqueeze_view_13",
        "COMPUTE",
        "elementwise",
        "unknown",
        "no",
        "Triton",
    ),
    (  # tracelens/b200: vLLM's KV-cache write has "flash" in its name and FP8 cache data: a copy, not attention
        "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, unsigned char, (vllm::Fp8KVCacheDataType)1>("
        "__nv_bfloat16 const*, __nv_bfloat16 const*, unsigned char*)",
        "COMPUTE",
        "elementwise",
        "fp8",
        "no",
        "vLLM",
    ),
    ("kernel_0", "COMPUTE", "other", "unknown", "unknown", "unknown"),  # no evidence: unknown, not a guess
    ("event_wait", "OTHER", "sync", "unknown", "no", "unknown"),  # hta/mtia_inference_trace
    # ---- communication ---------------------------------------------------------------------------
    (  # hta/negative_queue_length_values_check
        "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
        "COMMUNICATION",
        "p2p",
        "unknown",
        "no",
        "NCCL/RCCL",
    ),
    (
        "ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)",
        "COMMUNICATION",
        "collective",
        "unknown",
        "no",
        "NCCL/RCCL",
    ),
    (  # DeepEP (docs: csrc/kernels/intranode.cu, internode_ll.cu)
        "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*, long*, float*, int*, int*, "
        "int4 const*, float const*, long const*, float const*, bool const*, int const*, int, int)",
        "COMMUNICATION",
        "all_to_all",
        "unknown",
        "no",
        "DeepEP",
    ),
    (
        "void deep_ep::internode_ll::combine<false, 7168>(void*, void*, int*)",
        "COMMUNICATION",
        "all_to_all",
        "unknown",
        "no",
        "DeepEP",
    ),
    (
        "void deep_ep::intranode::notify_dispatch<8>(int const*, int*, int)",
        "COMMUNICATION",
        "all_to_all",
        "unknown",
        "no",
        "DeepEP",
    ),
    (
        "void uccl::intranode::notify_dispatch<8>(int const*, int*, int)",
        "COMMUNICATION",
        "all_to_all",
        "unknown",
        "no",
        "unknown",
    ),
    (  # DeepEP's layout kernel computes, it does not communicate
        "void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*, int*, int*, int*, bool*, int)",
        "COMPUTE",
        "other",
        "unknown",
        "unknown",
        "DeepEP",
    ),
    (  # MoRI-EP (AMD)
        "void mori::moe::EpDispatchIntraNodeKernel<__hip_bfloat16>(mori::moe::EpDispatchCombineArgs<__hip_bfloat16>)",
        "COMMUNICATION",
        "all_to_all",
        "bf16",
        "no",
        "unknown",
    ),
    ("nvshmemi_proxy_quiet_entrypoint", "COMMUNICATION", "p2p", "unknown", "no", "NVSHMEM"),  # docs: NVSHMEM
    (  # vLLM custom all-reduce (docs: csrc/custom_all_reduce.cuh)
        "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals, "
        "vllm::Signal*, __nv_bfloat16*, int, int)",
        "COMMUNICATION",
        "collective",
        "bf16",
        "no",
        "vLLM",
    ),
    (  # TensorRT-LLM Lamport all-reduce fusion (docs)
        "void tensorrt_llm::kernels::ar_fusion::allreduce_fusion_kernel_oneshot_lamport<__nv_bfloat16, 8, true>("
        "tensorrt_llm::kernels::ar_fusion::AllReduceFusionParams<__nv_bfloat16>)",
        "COMMUNICATION",
        "collective",
        "bf16",
        "no",
        "TensorRT-LLM",
    ),
    (  # tracelens/b200: PyTorch symmetric memory
        "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*, unsigned long, "
        "unsigned int**, unsigned long, unsigned long)",
        "COMMUNICATION",
        "collective",
        "bf16",
        "no",
        "unknown",
    ),
    # ---- memory ----------------------------------------------------------------------------------
    ("__amd_rocclr_copyBuffer", "MEMORY", "copy", "unknown", "no", "unknown"),  # ROCclr blit kernel
]


@pytest.mark.parametrize(("name", "cls", "family", "precision", "tc", "library"), CASES)
def test_family_precision_tensor_cores_library(
    name: str, cls: str, family: str, precision: str, tc: str, library: str
) -> None:
    got = classify(name)
    assert (got.kernel_class, got.family, got.precision, got.tensor_cores, got.library) == (
        cls,
        family,
        precision,
        tc,
        library,
    )
    assert kernel_class_of_name("kernel", name) == cls  # the class the events get


def test_memcpy_and_memset_activities() -> None:
    assert classify("Memcpy HtoD (Pageable -> Device)", "memcpy").family == "copy"
    assert classify("Memset (Device)", "memset").kernel_class == "MEMORY"
    assert kernel_class_of_name("cuda_runtime", "cudaLaunchKernel") is None


def test_arch_from_the_name() -> None:
    assert classify("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64").arch == "sm90"
    assert classify("Cijk_Alik_Bljk_BBS_BH_MT128x256x32_MI16x16x1_SN_GLS0_ISA942_IU1").arch == "gfx942"
    assert classify("ampere_sgemm_128x64_nn").arch == "sm80"
    assert classify("kernel_0").arch == "unknown"


def test_name_helpers() -> None:
    assert normalise("ncclDevKernel_AllReduce") == "nccl_dev_kernel_all_reduce"
    assert normalise("c10::BFloat16") == "c10::b_float16"
    assert base_name("void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, float>(float*, int)") == (
        "at::native::::cunn_SoftMaxForward"
    )
    assert base_name("_ZN5aiter24add_rmsnorm_quant_kernelIDF16bEEvPT0_") == "aiter::add_rmsnorm_quant_kernel"
    assert without_params("f<int>(fbgemm_gpu::FixedDivisor)") == "f<int>"


COMPUTE_NAMES = [c[0] for c in CASES if c[1] == "COMPUTE"]
COMM_WORDS = [
    "CollectiveMainloop",
    "AllReduceHelper",
    "all_to_all",
    "nccl::Device",
    "dispatch_combine",
    "deep_ep::intranode::dispatch",
    "BlockAllReduce",
    "cross_device_reduce_1stage",
]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(COMPUTE_NAMES), st.lists(st.sampled_from(COMM_WORDS), min_size=1, max_size=3))
def test_no_compute_kernel_becomes_communication_from_a_template_argument(name: str, words: list[str]) -> None:
    """A communication word inside the template arguments or the parameter list never makes a compute
    kernel communication (only the kernel's own name, or its launch's collective args, can)."""
    inner = ", ".join(words)
    as_template = f"void my_ns::compute_kernel<{inner}>(int)"
    as_param = f"{name.split('(')[0]}({inner}*, int)" if "(" in name else f"{name}({inner}*)"
    assert classify(as_template).kernel_class != "COMMUNICATION"
    assert classify(as_param).kernel_class == classify(name).kernel_class


@pytest.mark.parametrize(
    "word", ["collective", "dispatch", "combine", "reduce", "gather", "scatter", "send", "recv", "notify", "barrier"]
)
def test_a_generic_word_alone_is_not_communication(word: str) -> None:
    """Words a compute kernel can carry in its own name decide nothing without a library or a
    documented name around them."""
    for name in (f"void my_lib::{word}_kernel<int>(int)", f"{word}_tokens", f"void {word.title()}Mainloop<float>()"):
        assert classify(name).kernel_class != "COMMUNICATION", name


def test_rules_file_is_well_formed_and_documented() -> None:
    rs = rules()
    assert len(rs) > 40
    doc = (Path(__file__).resolve().parents[2] / "docs" / "kernel-taxonomy.md").read_text()
    for r in rs:
        if r.field == "family" or r.field == "comm" or r.field == "memory":
            assert r.value in FAMILIES, r
        if r.field == "precision":
            assert r.value in PRECISIONS, r
        assert r.source and r.example, r
        assert f"`{r.value}`" in doc, f"value {r.value} of a {r.field} rule is not documented"
    assert len(rules_fingerprint()) == 16


def test_every_comm_rule_example_is_communication() -> None:
    """The examples of the data file are decided by their own rule's field."""
    for r in rules():
        if "..." in r.example:
            continue
        got = classify(r.example)
        if r.field == "comm":
            assert got.kernel_class == "COMMUNICATION" and got.family == r.value, (r.value, r.example, got)
        elif r.field == "family":
            assert got.family == r.value, (r.value, r.example, got)


def test_vectorised_table() -> None:
    names = pl.Series(["volta_sgemm_64x64_nt", None, "volta_sgemm_64x64_nt", "ncclDevKernel_Generic(x)"])
    t = kernel_taxonomy(names)
    assert t.height == 2
    assert dict(zip(t["name"], t["kernel_class"], strict=True)) == {
        "volta_sgemm_64x64_nt": "COMPUTE",
        "ncclDevKernel_Generic(x)": "COMMUNICATION",
    }


def test_hostile_name_is_bounded() -> None:
    name = "void " + "a<" * 5000 + "x" + ">" * 5000 + "(" * 3000
    assert classify(name).kernel_class == "COMPUTE"
