"""Tensor Core (NVIDIA) / Matrix Core (AMD) use, from kernel names: ONE table of rules.

A kernel *uses Tensor Cores* when its name matches a positive rule of :data:`KERNEL_RULES` and no
negative rule. Negative rules are checked first: they catch GEMM/convolution kernels that run on
the ordinary FP32 pipes (CUTLASS ``simt``, cuBLAS ``ffma`` xmma kernels, ``sgemm``/``scudnn``
kernels, attention helper kernels that do no matrix product). The rules and the evidence for each
are documented in ``docs/tensor-cores.md``; each rule names its source and an example kernel.

Two rule sets exist:

- ``"current"`` (default): every rule of :data:`KERNEL_RULES` (the plugin's 2019 list is part of
  it, as the ``pyprof-2019`` rules, so old traces are judged as before);
- ``"plugin"``: only the TensorBoard plugin's substring allow-list (from NVIDIA PyProf, 2019), for
  exact compatibility with the plugin's numbers.

Operators *eligible* for Tensor Cores are :data:`TC_ELIGIBLE_OPS_PLUGIN` (the plugin's list, from
autocast's FP16 list of 2021) plus :data:`TC_ELIGIBLE_OPS_CURRENT` (today's names).

Names only: a kernel whose name does not say what it does (a Triton kernel called ``kernel_0``, an
FP32 GEMM that a template names like its TF32 sibling) cannot be judged, and the dtype of the
launching op is not looked at.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import polars as pl

__all__ = [
    "Rule",
    "KERNEL_RULES",
    "PLUGIN_SUBSTRINGS",
    "TC_ELIGIBLE_OPS_PLUGIN",
    "TC_ELIGIBLE_OPS_CURRENT",
    "RULESETS",
    "uses_tensor_cores",
    "tensor_core_rule",
    "tensor_core_mask",
    "tc_eligible_op",
    "tc_eligible_mask",
]

RULESETS = ("current", "plugin")


@dataclass(frozen=True)
class Rule:
    """One row of the table: a regular expression (searched, case-insensitive), whether a match
    means Tensor Cores (``True``) or not (``False``), where the rule comes from and an example."""

    name: str
    pattern: str
    uses_tc: bool
    source: str
    example: str


#: The plugin's allow-list (torch_tb_profiler/profiler/tensor_core.py, from NVIDIA PyProf tc.py,
#: 2019): a kernel uses Tensor Cores when its name *contains* any of these (case-sensitive).
PLUGIN_SUBSTRINGS = (
    "h884",
    "s884",
    "h1688",
    "s1688",
    "hmma",
    "i8816",
    "16816",
    "dgrad_1x1_stride_2x2",
    "first_layer_wgrad_kernel",
    "conv1x1",
    "conv2d_c1_k1",
    "direct_group",
    "xmma_implicit_gemm",
    "xmma_sparse_conv",
    "xmma_warp_specialized_implicit_gemm",
    "xmma_gemm",
    "xmma_sparse_gemm",
    "c1688",
)

#: The table. Negative rules (``uses_tc=False``) are checked before positive ones.
KERNEL_RULES: tuple[Rule, ...] = (
    # ---- negatives: matrix kernels on the FP32/FP64 pipes, and helpers that do no MMA ----------
    Rule(
        "cutlass-simt",
        r"simt",
        False,
        "CUTLASS SIMT GEMMs (FFMA, no MMA)",
        "cutlass_80_simt_sgemm_128x32_8x5_nn_align1",
    ),
    Rule(
        "cublas-ffma",
        r"ffma",
        False,
        "cuBLAS xmma kernels built on FFMA",
        "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4",
    ),
    Rule(
        "sgemm",
        r"(?<![0-9])[scz]gemm",
        False,
        "cuBLAS/CUTLASS single-precision and complex GEMMs (volta_sgemm, ampere_sgemm)",
        "volta_sgemm_128x64_nn",
    ),
    Rule(
        "scudnn",
        r"scudnn|implicit_convolve_sgemm|winograd_nonfused",
        False,
        "cuDNN single-precision convolution kernels",
        "volta_scudnn_128x64_relu_interior_nn_v1",
    ),
    Rule(
        "attention-helpers",
        r"flash_bwd_dot_do_o|flash_bwd_convert|flash_bwd_clear|splitkv_combine|"
        r"fmha_cutlass[fb]_f32",
        False,
        "FlashAttention pre/post-processing kernels; mem-efficient attention in FP32 (SIMT)",
        "void flash::flash_fwd_splitkv_combine_kernel<...>",
    ),
    Rule(
        "conv-gemv-helpers",
        r"cask_cudnn\w*::compute\w*Offsets|cudnn::(?:cnn|detail)::(?:wgrad_alg|dgrad|im2col|reduce_wgrad)|generateWinogradTiles|^(?:void )?"
        r"(?:wgrad_alg\d_engine|dgrad_engine|dgrad2d_alg)|gemvx?::|gemv2[NT]_kernel|gemvNSP|splitKreduce",
        False,
        "cuDNN offset/im2col helpers and FP32 SIMT engines (wgrad_alg0, dgrad_engine); cuBLAS GEMV and split-K reduce",
        "void cudnn::cnn::wgrad_alg0_engine<float, 128, 5, 5, 3, 3, 3, false, 512>(...)",
    ),
    Rule(
        "triton-pointwise",
        r"^triton_(poi|red|per)_",
        False,
        "Inductor pointwise / reduction / persistent-reduction kernels (no tl.dot)",
        "triton_poi_fused_add_bitwise_and_bitwise_not_bitwise_or_ge_lt_mul_sub_0",
    ),
    # ---- NVIDIA: instruction and library names -------------------------------------------------
    Rule(
        "pyprof-2019",
        "|".join(re.escape(s) for s in PLUGIN_SUBSTRINGS),
        True,
        "TensorBoard plugin / NVIDIA PyProf list (Volta-Ampere cuBLAS and cuDNN HMMA kernels)",
        "volta_h884gemm_64x64_ldg8_nn",
    ),
    Rule(
        "mma-shape",
        r"(?<![0-9])(?:[hsicb]884|[hsic]1688|[hsic]1684|16816|16832|8816)(?:gemm|cudnn|conv|_)",
        True,
        "cuBLAS/cuDNN names that carry the HMMA/IMMA instruction shape",
        "ampere_i16832gemm_int8_... (INT8/FP8 m16n8k32 shape)",
    ),
    Rule(
        "xmma",
        r"xmma",
        True,
        "NVIDIA xmma (cuBLAS/cuBLASLt/cuDNN, sm80-sm100; FFMA variants excluded above)",
        "sm80_xmma_wgrad_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x16_stage4_warpsize2x2x1_g1_tensor16x8x8_execute_kernel_cudnn_train",
    ),
    Rule(
        "gmma-wgmma",
        r"w?gmma|tcgen05|utc[hiqf]?mma",
        True,
        "Hopper warpgroup MMA (GMMA/wgmma), Blackwell tcgen05/UMMA (CUTLASS 3, cuDNN, FA3)",
        "cutlass::gemm::kernel::GemmUniversal<...MainloopSm90TmaGmmaWarpSpecialized...>",
    ),
    Rule(
        "cutlass-tensorop",
        r"cutlass\w*tensorop|tensorop_\w*(?:gemm|fprop|dgrad|wgrad|conv)|mmatensorop|wmma",
        True,
        "CUTLASS 2/3 TensorOp and WMMA kernels (cutlass_80_tensorop_*, cutlass3x_sm90_tensorop_*)",
        "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8::Params)",
    ),
    Rule(
        "nvjet",
        r"nvjet",
        True,
        "cuBLAS 12.x GEMM kernels on Hopper/Blackwell",
        "nvjet_tst_64x64_64x16_2x1_2cta_v_bz_bias_TNT",
    ),
    Rule(
        "trtllm-gemm",
        r"(?:^|[^a-z])(?:bmm|gemm|gemmkernel)_\w*sm1[0-2][0-9][af]?\b",
        True,
        "TensorRT-LLM / FlashInfer cubin GEMMs for sm100+ (FP8/FP4 MX block-scaled)",
        "bmm_MxE4m3_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3_et128x16_m128x16x32_cga1x1x1_16dp256b_rM_TN_transOut_schedP2x1x2x3_biasM_bN_tma_tmaOpt_clmp_swiGlu_dynBatch_sm100f",
    ),
    Rule(
        "gemm-libs",
        r"deep_gemm|marlin|machete|cutlass3x|sm(?:80|89|90|100|120)_\w*gemm",
        True,
        "DeepGEMM, Marlin/Machete mixed-precision GEMMs, CUTLASS 3 generated GEMMs",
        "void deep_gemm::fp8_gemm_kernel<...>",
    ),
    Rule(
        "attention",
        r"flash_fwd|flash_bwd|flash::|flashattn|flash_attn|pytorch_flash|fmha|"
        r"(?:^|_)attn_(?:fwd|bwd)|_attention_(?:fwd|bwd)|flex_attention|prefill\w*kernel",
        True,
        "FlashAttention 1-3, PyTorch flash, xFormers/TRT-LLM FMHA, Triton/AITER attention kernels",
        "void pytorch_flash::flash_fwd_kernel<...>",
    ),
    Rule(
        "cudnn-fused",
        r"cudnn_generated\w*(?:sdpa|conv|gemm|matmul)|sdpa_\w*(?:fprop|bprop)",
        True,
        "cuDNN runtime-fusion engines and SDPA kernels",
        "cudnn_generated_fort_native_sdpa_sm90_knob_7_64x128x64_4x1x1_kernel0_0 (...)",
    ),
    # ---- Triton: only where the name says there is a dot product -------------------------------
    Rule(
        "triton-template",
        r"^triton_tem_|^triton_\w*(?:_mm|_bmm|_addmm|matmul|_gemm)|matmul_kernel|fused_moe_kernel|_grouped_mm",
        True,
        "Inductor template kernels (mm/bmm/addmm/conv/flex-attention) and Triton matmul / MoE kernels",
        "triton_tem_fused_addmm_relu_0",
    ),
    # ---- AMD: Tensile/hipBLASLt with MFMA, Composable Kernel XDL, MFMA names -------------------
    Rule(
        "amd-tensile-mfma",
        r"^Cijk_\w*_MI\d+x\d+x\d+",
        True,
        "Tensile/hipBLASLt kernels with an MFMA instruction shape (MI16x16x1 ...)",
        "Cijk_Alik_Bljk_B_BS_BH_Bias_HA_S_SAV_UserArgs_MT256x128x64_MI16x16x1_SN_LDSB1_...",
    ),
    Rule(
        "miopen-xdlops",
        r"^igemm_(?:fwd|bwd|wrw)_gtcx",
        True,
        "MIOpen implicit-GEMM assembly kernels built on XDLOPS/MFMA (gtcx, gtcx2 gfx90a, gtcx3 gfx942)",
        "igemm_fwd_gtcx3_nhwc_bf16_bx0_ex1_bt128x128x32_wt32x32x8_ws1x1_wr2x2_...",
    ),
    Rule(
        "amd-ck-mfma",
        r"_xdl|xdl_|xdlops|mfma",
        True,
        "Composable Kernel XDL (MFMA) GEMMs/convolutions, explicit MFMA names",
        "ck::kernel_gemm_xdl_cshuffle_v3<...>",
    ),
)

_NEG = re.compile("|".join(f"(?:{r.pattern})" for r in KERNEL_RULES if not r.uses_tc), re.IGNORECASE)
_POS = [(r, re.compile(r.pattern, re.IGNORECASE)) for r in KERNEL_RULES if r.uses_tc]
# pyprof-2019 substrings are case-sensitive in the plugin; keep that inside the table too
_POS = [(r, re.compile(r.pattern) if r.name == "pyprof-2019" else c) for r, c in _POS]
_NEG_RULES = [(r, re.compile(r.pattern, re.IGNORECASE)) for r in KERNEL_RULES if not r.uses_tc]


def _check(ruleset: str) -> None:
    if ruleset not in RULESETS:
        raise ValueError(f"unknown tensor-core rule set {ruleset!r}; choose from {RULESETS}")


def tensor_core_rule(name: str, ruleset: str = "current") -> str | None:
    """The name of the rule that decides ``name``: a positive rule, ``"not:<negative rule>"`` or
    None when nothing matches (no Tensor Cores)."""
    _check(ruleset)
    if ruleset == "plugin":
        return "pyprof-2019" if any(s in name for s in PLUGIN_SUBSTRINGS) else None
    for r, c in _NEG_RULES:
        if c.search(name):
            return f"not:{r.name}"
    for r, c in _POS:
        if c.search(name):
            return r.name
    return None


def uses_tensor_cores(name: str, ruleset: str = "current") -> bool:
    """Whether a kernel of this name runs on Tensor Cores / Matrix Cores (see the module doc)."""
    rule = tensor_core_rule(name, ruleset)
    return rule is not None and not rule.startswith("not:")


def tensor_core_mask(names: pl.Series, ruleset: str = "current") -> pl.Series:
    """Whether each kernel name runs on Tensor Cores by this table alone, each distinct name judged
    once. The analyses use :func:`ranksight.model.taxonomy.tensor_core_mask` (the taxonomy's answer)."""
    _check(ruleset)
    s = names.cast(pl.String)
    uniq = s.unique().drop_nulls()
    verdict = dict(zip(uniq.to_list(), (uses_tensor_cores(n, ruleset) for n in uniq.to_list()), strict=True))
    return s.replace_strict(verdict, default=False, return_dtype=pl.Boolean).alias("tensor_cores")


#: Operators the plugin treats as Tensor-Core eligible (exact names; autocast FP16 list of 2021).
TC_ELIGIBLE_OPS_PLUGIN = frozenset(
    {
        "aten::_convolution",
        "aten::conv1d",
        "aten::conv2d",
        "aten::conv3d",
        "aten::conv_tbc",
        "aten::conv_transpose1d",
        "aten::conv_transpose2d",
        "aten::conv_transpose3d",
        "aten::convolution",
        "aten::cudnn_convolution",
        "aten::cudnn_convolution_transpose",
        "aten::prelu",
        "aten::addmm",
        "aten::addmv",
        "aten::addr",
        "aten::matmul",
        "aten::mm",
        "aten::mv",
        "aten::linear",
        "aten::addbmm",
        "aten::baddbmm",
        "aten::bmm",
        "aten::chain_matmul",
        "aten::linalg_multi_dot",
        "aten::_thnn_fused_lstm_cell",
        "aten::_thnn_fused_gru_cell",
        "aten::lstm_cell",
        "aten::gru_cell",
        "aten::rnn_tanh_cell",
        "aten::rnn_relu_cell",
        "CudnnConvolutionBackward",
        "BmmBackward0",
        "aten::cudnn_convolution_transpose_backward",
        "CudnnConvolutionTransposeBackward",
        "MmBackward",
        "aten::cudnn_convolution_backward_weight",
        "aten::addmm_",
        "AddmvBackward",
        "MvBackward",
        "aten::cudnn_convolution_transpose_backward_weight",
        "aten::cudnn_convolution_transpose_backward_input",
        "AddmmBackward",
        "aten::cudnn_convolution_backward_input",
        "AddbmmBackward",
        "aten::cudnn_convolution_backward",
    }
)

#: Today's names of the same operators (PyTorch 2.x backward nodes, SDPA / flash / scaled-mm ops).
TC_ELIGIBLE_OPS_CURRENT = frozenset(
    {
        "MmBackward0",
        "AddmmBackward0",
        "BmmBackward0",
        "BaddbmmBackward0",
        "AddbmmBackward0",
        "MvBackward0",
        "AddmvBackward0",
        "ConvolutionBackward0",
        "CudnnConvolutionBackward0",
        "LinearBackward0",
        "aten::convolution_backward",
        "aten::cudnn_convolution_backward",
        "aten::_scaled_mm",
        "aten::_scaled_grouped_mm",
        "aten::_grouped_mm",
        "aten::_int_mm",
        "aten::scaled_dot_product_attention",
        "aten::_scaled_dot_product_flash_attention",
        "aten::_scaled_dot_product_efficient_attention",
        "aten::_scaled_dot_product_cudnn_attention",
        "aten::_flash_attention_forward",
        "aten::_flash_attention_backward",
        "aten::_efficient_attention_forward",
        "aten::_efficient_attention_backward",
        "aten::_scaled_dot_product_flash_attention_backward",
        "aten::_scaled_dot_product_efficient_attention_backward",
        "aten::_scaled_dot_product_cudnn_attention_backward",
        "ScaledDotProductFlashAttentionBackward0",
        "ScaledDotProductEfficientAttentionBackward0",
        "ScaledDotProductCudnnAttentionBackward0",
        "aten::_addmm_activation",
        "aten::einsum",
        "aten::tensordot",
    }
)


def tc_eligible_op(name: str, ruleset: str = "current") -> bool:
    """Whether an operator of this name is Tensor-Core eligible by name."""
    _check(ruleset)
    if name in TC_ELIGIBLE_OPS_PLUGIN:
        return True
    return ruleset == "current" and name in TC_ELIGIBLE_OPS_CURRENT


def tc_eligible_mask(names: pl.Series, ruleset: str = "current") -> pl.Series:
    """Vectorised :func:`tc_eligible_op`."""
    _check(ruleset)
    ok: Iterable[str] = TC_ELIGIBLE_OPS_PLUGIN | (TC_ELIGIBLE_OPS_CURRENT if ruleset == "current" else frozenset())
    if names.dtype != pl.Categorical:
        names = names.cast(pl.String)
    return names.is_in(list(ok)).fill_null(False).alias("tc_eligible")
