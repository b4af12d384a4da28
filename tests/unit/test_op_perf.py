"""op-perf: the cost model's FLOPs and bytes against hand-computed values (GEMMs transposed, batched,
broadcast and biased; causal and non-causal attention with grouped-query heads; convolution with
stride, dilation and groups; elementwise, reductions, normalization, softmax, embedding, copy), an
op with no model, and the analysis on a hand-built trace with exact expected values."""

from __future__ import annotations

import json

import pytest

import ranksight
from ranksight.analyses import run_analysis
from ranksight.views.flops import causal_pairs, op_cost

BF16, F32, I64 = "c10::BFloat16", "float", "long int"


def cost(name: str, dims: list, types: list, conc: list | None = None) -> tuple:
    return op_cost(name, json.dumps(dims), json.dumps(types), None if conc is None else json.dumps(conc))


# --- GEMM -------------------------------------------------------------------------------------


def test_mm_and_its_transposed_operand() -> None:
    # A[64,128] @ B[128,32]: 2·M·K·N FLOPs; A, B read and C written once, 2 bytes each
    c = cost("aten::mm", [[64, 128], [128, 32]], [BF16, BF16])
    assert c == ("gemm", 2 * 64 * 128 * 32, (64 * 128 + 128 * 32 + 64 * 32) * 2, BF16, False, None)
    # a transposed operand is a stride change: the logical shapes and so the cost are the same
    assert cost("aten::mm", [[64, 128], [128, 32]], [BF16, BF16], ["", ""])[:3] == c[:3]


def test_addmm_bias_is_read_not_counted_as_flops() -> None:
    # bias fp32 [32]: read (128 B), no FLOP (PyTorch's flop counter convention)
    c = cost("aten::addmm", [[32], [64, 128], [128, 32], [], []], [F32, BF16, BF16, "Scalar", "Scalar"])
    assert c[:4] == ("gemm", 2 * 64 * 128 * 32, 32 * 4 + (64 * 128 + 128 * 32 + 64 * 32) * 2, BF16)


def test_batched_and_broadcast_matmul() -> None:
    c = cost("aten::bmm", [[4, 64, 128], [4, 128, 32]], [F32, F32])
    assert c[1:3] == (2 * 4 * 64 * 128 * 32, 4 * (64 * 128 + 128 * 32 + 64 * 32) * 4)
    c = cost("aten::baddbmm", [[4, 64, 32], [4, 64, 128], [4, 128, 32], [], []], [BF16, BF16, BF16, "Scalar", "Scalar"])
    assert c[1:3] == (2 * 4 * 64 * 128 * 32, (4 * 64 * 32 + 4 * 64 * 128 + 4 * 128 * 32 + 4 * 64 * 32) * 2)
    # matmul [2,1,64,128] x [3,128,32]: batch broadcast to [2,3]
    c = cost("aten::matmul", [[2, 1, 64, 128], [3, 128, 32]], [BF16, BF16])
    assert c[1:3] == (2 * 6 * 64 * 128 * 32, (2 * 64 * 128 + 3 * 128 * 32 + 6 * 64 * 32) * 2)


def test_linear_with_bias() -> None:
    c = cost("aten::linear", [[8, 16, 128], [32, 128], [32]], [BF16, BF16, BF16])
    assert c[1:3] == (2 * 128 * 128 * 32, (8 * 16 * 128 + 32 * 128 + 32 + 8 * 16 * 32) * 2)


def test_scaled_mm_output_dtype_from_its_argument() -> None:
    fp8 = "c10::Float8_e4m3fn"
    dims = [[64, 128], [128, 32], [], [], [], [], [], []]
    types = [fp8, fp8, F32, F32, "", "", "ScalarType", "Scalar"]
    c = cost("aten::_scaled_mm", dims, types, ["", "", "", "", "", "", "15", "False"])  # 15: bfloat16
    assert c[1:4] == (2 * 64 * 128 * 32, 64 * 128 + 128 * 32 + 4 + 4 + 64 * 32 * 2, fp8)
    none = cost("aten::_scaled_mm", dims, types, ["", "", "", "", "", "", "", ""])
    assert none[2] is None and none[5] == "the output dtype of _scaled_mm is not recorded"


# --- attention --------------------------------------------------------------------------------


@pytest.mark.parametrize(("sq", "sk"), [(1, 1), (4, 128), (128, 128), (128, 4), (7, 9), (9, 7)])
def test_causal_pairs_brute_force(sq: int, sk: int) -> None:
    for offset in (0, sk - sq):
        brute = sum(min(max(i + 1 + offset, 0), sk) for i in range(sq))
        assert causal_pairs(sq, sk, offset) == brute


def test_sdpa_grouped_query_causal_and_not() -> None:
    # Q [B=2, Hq=8, S=128, D=64]; K, V [2, Hkv=2, 128, 64] (grouped-query)
    q, kv = [2, 8, 128, 64], [2, 2, 128, 64]
    dims = [q, kv, kv, [], [], [], []]
    types = [BF16, BF16, BF16, "Scalar", "Scalar", "Scalar", "Scalar"]
    nbytes = (2 * 8 * 128 * 64 + 2 * 2 * 2 * 128 * 64 + 2 * 8 * 128 * 64) * 2
    full = cost("aten::_scaled_dot_product_flash_attention", dims, types, ["", "", "", "0.", "False", "False", ""])
    assert full == ("attention_fwd", 2 * 16 * 128 * 128 * (64 + 64), nbytes, BF16, False, None)
    causal = cost("aten::_scaled_dot_product_flash_attention", dims, types, ["", "", "", "0.", "True", "False", ""])
    assert causal[1] == 2 * 16 * (128 * 129 // 2) * 128
    # the flag not recorded: counted in full and flagged
    assert cost("aten::_scaled_dot_product_flash_attention", dims, types)[1:5] == (full[1], nbytes, BF16, True)


def test_flash_attn_bottom_right_causal_and_backward() -> None:
    # flash_attn layout [B, S, H, D]: Sq=4 decode rows over Sk=128 keys, bottom-right aligned
    q, kv = [1, 4, 8, 64], [1, 128, 8, 64]
    dims = [q, kv, kv, [], [], []]
    types = [BF16, BF16, BF16, "Scalar", "Scalar", "Scalar"]
    c = cost("flash_attn::_flash_attn_forward", dims, types, ["", "", "", "0.0", "0.125", "True"])
    assert c[1] == 2 * 8 * (125 + 126 + 127 + 128) * 128
    # backward: dO, Q, K, V, O read; dQ, dK, dV written; 2·pairs·(3D + 2Dv) per head
    bdims = [q, q, kv, kv, q, [1, 8, 4]] + [[]] * 6
    btypes = [BF16] * 5 + [F32] + ["Scalar"] * 6
    b = cost("flash_attn::_flash_attn_backward", bdims, btypes, [""] * 11 + ["False"])
    qkv = (4 * 8 * 64 + 2 * 128 * 8 * 64) * 2
    assert b[:3] == ("attention_bwd", 2 * 8 * 4 * 128 * (3 * 64 + 2 * 64), 2 * qkv + 2 * 4 * 8 * 64 * 2)


# --- convolution ------------------------------------------------------------------------------


def test_conv_stride_dilation_groups() -> None:
    # x [2, 16, 32, 32], w [32, 4, 3, 3] (groups 4), stride 2, padding 1, dilation 2 -> 15 x 15
    dims = [[2, 16, 32, 32], [32, 4, 3, 3], [], [], [], [], [], [], []]
    types = [BF16, BF16, "", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Scalar"]
    conc = ["", "", "", "[2, 2]", "[1, 1]", "[2, 2]", "False", "[0, 0]", "4"]
    c = cost("aten::convolution", dims, types, conc)
    out = 2 * 32 * 15 * 15
    assert c == (
        "conv_fwd",
        2 * 2 * (32 * 4 * 3 * 3) * 15 * 15,
        (2 * 16 * 32 * 32 + 32 * 4 * 9 + out) * 2,
        BF16,
        False,
        None,
    )


def test_conv_backward_output_mask() -> None:
    dims = [[2, 32, 15, 15], [2, 16, 32, 32], [32, 4, 3, 3], [], [], [], [], [], [], [], []]
    conc = ["", "", "", "[32]", "[2, 2]", "[1, 1]", "[2, 2]", "False", "[0, 0]", "4", "[True, True, False]"]
    types = [BF16, BF16, BF16] + [""] * 8
    c = cost("aten::convolution_backward", dims, types, conc)
    go, x, w = 2 * 32 * 225, 2 * 16 * 1024, 32 * 4 * 9
    assert c[:3] == ("conv_bwd", 2 * 2 * 2 * (32 * 4 * 9) * 225, (go + x + w + x + w) * 2)


# --- elementwise, reduction, normalization, softmax, embedding, copy ---------------------------


def test_elementwise() -> None:
    assert cost("aten::add", [[4, 8], [8], []], [BF16, BF16, "Scalar"]) == (
        "elementwise_binary", 32, (32 + 8 + 32) * 2, BF16, False, None
    )  # fmt: skip
    # a Scalar operand moves nothing
    assert cost("aten::mul", [[4, 8], []], [F32, "Scalar"])[1:3] == (32, 32 * 4 * 2)
    # comparisons write booleans; in-place ops write their first input
    assert cost("aten::eq", [[4, 8], [4, 8]], [F32, F32])[1:3] == (32, 32 * 4 * 2 + 32)
    assert cost("aten::add_", [[4, 8], [4, 8], []], [BF16, F32, "Scalar"])[1:3] == (32, 32 * 2 + 32 * 4 + 32 * 2)
    assert cost("aten::silu", [[4, 8]], [BF16])[:3] == ("elementwise_unary", 32, 32 * 2 * 2)
    assert cost("aten::addcmul_", [[8], [8], [8], []], [F32, F32, F32, "Scalar"])[1:3] == (16, 8 * 4 * 4)


def test_reductions() -> None:
    # mean over the last dim, keepdim: 4 outputs
    assert cost("aten::mean", [[4, 8], [], [], []], [F32, "ScalarList", "Scalar", ""], ["", "[-1]", "True", ""]) == (
        "reduction", 32, 32 * 4 + 4 * 4, F32, False, None
    )  # fmt: skip
    assert cost("aten::sum", [[4, 8]], [BF16], [""])[1:3] == (32, 64 + 2)
    # the dims not recorded: no bytes, the reason given
    r = cost("aten::sum", [[4, 8], [], []], [BF16, "ScalarList", "Scalar"])
    assert r[2] is None and r[5] == "the reduced dims are not recorded"


def test_normalization_softmax_embedding_copy() -> None:
    ln = cost("aten::native_layer_norm", [[4, 8], [], [8], [8], []], [BF16, "ScalarList", BF16, BF16, "Scalar"])
    assert ln == ("normalization", 8 * 32, (32 + 8 + 8 + 32) * 2, BF16, False, None)
    rms = cost("aten::_fused_rms_norm", [[4, 8], [], [8], []], [BF16, "ScalarList", BF16, "Scalar"])
    assert rms[1:3] == (4 * 32, (32 + 8 + 32) * 2)
    sm = cost("aten::_softmax", [[4, 8], [], []], [F32, "Scalar", "Scalar"], ["", "-1", "False"])
    assert sm[:3] == ("softmax", 5 * 32, 32 * 4 * 2)
    emb = cost("aten::embedding", [[100, 16], [4, 8], [], [], []], [BF16, I64, "Scalar", "Scalar", "Scalar"])
    assert emb[:3] == ("embedding", 0.0, 32 * 8 + 2 * 32 * 16 * 2)
    cp = cost("aten::copy_", [[4, 8], [4, 8], []], [BF16, F32, "Scalar"])
    assert cp[:4] == ("copy", 0.0, 32 * 2 + 32 * 4, F32)


def test_no_model_is_said_never_guessed() -> None:
    assert cost("myext::fancy_op", [[4, 8]], [BF16]) == (None, None, None, None, False, "no model")
    assert op_cost("aten::mm", None, None, None) == (
        "gemm", None, None, None, False, "no Input Dims (profile with record_shapes=True)"
    )  # fmt: skip
    bad = cost("aten::mm", [[64], [128, 32]], [BF16, BF16])
    assert bad[1] is None and bad[5] is not None


# --- the analysis on a hand-built trace --------------------------------------------------------

H100 = [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel"
EW = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)"  # noqa: E501


def _op(name: str, ts: int, dims: list | None = None, types: list | None = None, dur: int = 10) -> dict:
    args = {} if dims is None else {"Input Dims": dims, "Input type": types}
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": args}


def _launch(ts: int, corr: int, kernel: str, kts: int, kdur: int) -> list[dict]:
    return [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts, "dur": 2,
         "args": {"correlation": corr}},
        {"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": kts, "dur": kdur,
         "args": {"correlation": corr, "device": 0, "stream": 7}},
    ]  # fmt: skip


def _trace(make_trace):
    mm = ([[1024, 1024], [1024, 1024]], [BF16, BF16])
    ev = [
        _op("aten::mm", 10, *mm),
        *_launch(12, 1, GEMM, 100, 100),
        _op("aten::mm", 30, *mm),
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemsetAsync", "pid": 1, "tid": 1, "ts": 31, "dur": 1,
         "args": {"correlation": 6}},
        {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 0, "tid": 7, "ts": 290, "dur": 2,
         "args": {"correlation": 6, "device": 0, "stream": 7}},
        *_launch(32, 2, GEMM, 300, 100),
        _op("aten::add", 50, [[1024, 1024], [1024, 1024], []], [BF16, BF16, "Scalar"]),
        *_launch(52, 3, EW, 500, 10),
        _op("myext::fancy", 70),
        *_launch(72, 4, EW, 600, 5),
        *_launch(90, 5, EW, 700, 7),  # launched outside every op
        {"ph": "X", "cat": "kernel", "name": EW, "pid": 0, "tid": 7, "ts": 800, "dur": 3,
         "args": {"correlation": 99, "device": 0, "stream": 7}},  # its launch is not in the trace
    ]  # fmt: skip
    return ranksight.load(make_trace(ev, deviceProperties=H100), cache=False)


def test_op_perf_on_a_hand_built_trace(make_trace) -> None:
    res = run_analysis("op-perf", _trace(make_trace))
    ops = {r["name"]: r for r in res["ops"].to_dicts()}
    mm = ops["aten::mm"]
    gf, nb = 2 * 1024**3, 3 * 1024 * 1024 * 2
    # kernel time: the sum of the activities a call launched (a memset and a GEMM for the second call)
    assert (mm["count"], mm["kernel_us_sum"], mm["kernel_us_mean"], mm["kernels_per_call"]) == (2, 202.0, 101.0, 1.5)
    assert (
        mm["kernels"]
        == "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel | Memset (Device)"
    )
    assert (mm["gflop_per_call"], mm["bytes_per_call"], mm["flop_per_byte"]) == (gf / 1e9, nb, gf / nb)
    assert mm["achieved_tflop_per_s"] == pytest.approx(2 * gf / 202e-6 / 1e12)
    assert mm["achieved_tb_per_s"] == pytest.approx(2 * nb / 202e-6 / 1e12)
    assert (mm["precision"], mm["tensor_cores"], mm["peak_dtype"], mm["peak_tflop_per_s"]) == (
        "bf16",
        "yes",
        "bf16",
        989.4,
    )
    assert (mm["mem_bw_tb_per_s"], mm["bound"], mm["model"]) == (3.35, "compute", "yes")
    pct = 100 * (2 * gf / 202e-6 / 1e12) / 989.4
    assert mm["pct_of_roofline"] == pytest.approx(pct)
    assert mm["roofline_tflop_per_s"] == pytest.approx(989.4)
    assert mm["lost_us"] == pytest.approx(202 * (1 - pct / 100))
    add = ops["aten::add"]
    # elementwise: held to the FP32 (vector) peak; memory bound
    assert (add["category"], add["tensor_cores"], add["peak_dtype"], add["bound"]) == (
        "elementwise_binary", "no", "fp32", "memory"
    )  # fmt: skip
    assert add["pct_of_roofline"] == pytest.approx(100 * (3 * 1024 * 1024 * 2 / 10e-6 / 1e12) / 3.35)
    fancy = ops["myext::fancy"]
    assert (fancy["category"], fancy["model"], fancy["gflop_per_call"], fancy["kernel_us_sum"]) == (
        "elementwise", "no model", None, 5.0
    )  # fmt: skip
    (a,) = res["attribution"].to_dicts()
    assert (a["gpu_us"], a["attributed_us"], a["unattributed_us"], a["no_launch_us"], a["outside_ops_us"]) == (
        227.0, 217.0, 10.0, 3.0, 7.0
    )  # fmt: skip
    assert (a["modelled_us"], a["no_model_us"], a["gpu"]) == (212.0, 5.0, "H100 SXM")
    cats = {r["category"]: r for r in res["categories"].to_dicts()}
    assert cats["gemm"]["kernel_us"] == 202.0 and cats["gemm"]["share_pct"] == pytest.approx(202 / 217 * 100)
    assert cats["gemm"]["achieved_tflop_per_s"] == pytest.approx(2 * gf / 202e-6 / 1e12)
    assert res["gpus"]["mem_bw_tb_per_s"].to_list() == [3.35]


def test_unknown_gpu_leaves_the_roofline_empty(make_trace, tmp_path) -> None:
    ev = [_op("aten::mm", 10, [[64, 64], [64, 64]], [BF16, BF16]), *_launch(12, 1, GEMM, 100, 10)]
    run = ranksight.load(make_trace(ev, deviceProperties=[{"id": 0, "name": "ARTEMIS"}]), cache=False)
    res = run_analysis("op-perf", run)
    (r,) = res["ops"].to_dicts()
    assert r["gflop_per_call"] == 2 * 64**3 / 1e9 and r["pct_of_roofline"] is None and r["peak_tflop_per_s"] is None
    assert r["model"] == "no roofline: ARTEMIS: no peak in the table (views/peaks.py)"
    # a user table gives it one
    f = tmp_path / "artemis.csv"
    f.write_text("pattern,label,fp32,bf16,mem_bw_tbps\nARTEMIS,MTIA,10,100,1\n")
    (s,) = run_analysis("op-perf", run, gpu_spec=str(f))["ops"].to_dicts()
    assert (s["peak_tflop_per_s"], s["mem_bw_tb_per_s"], s["model"], s["gpu"]) == (100.0, 1.0, "yes", "MTIA")
