"""FLOP formulas against hand-computed values for known shapes (2 FLOPs per multiply-add)."""

from __future__ import annotations

import json

import pytest

from ranksight.views.flops import op_flops
from ranksight.views.peaks import dtype_of, lookup, peak_for


def f(name, dims, types=None, concrete=None):
    types = types or ["float"] * len(dims)
    return op_flops(name, json.dumps(dims), json.dumps(types), json.dumps(concrete) if concrete is not None else None)


@pytest.mark.parametrize(
    ("name", "dims", "expected"),
    [
        ("aten::mm", [[64, 128], [128, 32]], 2 * 64 * 128 * 32),  # 524,288
        ("aten::mm", [[1024, 1024], [1024, 96]], 201_326_592),  # trap 21's key_averages() value
        ("aten::addmm", [[32], [64, 128], [128, 32], [], []], 2 * 64 * 128 * 32),
        ("aten::bmm", [[8, 16, 64], [8, 64, 32]], 2 * 8 * 16 * 64 * 32),
        ("aten::baddbmm", [[8, 16, 32], [8, 16, 64], [8, 64, 32], [], []], 2 * 8 * 16 * 64 * 32),
        ("aten::matmul", [[4, 3, 16, 64], [4, 3, 64, 8]], 2 * 12 * 16 * 64 * 8),
        ("aten::matmul", [[2, 1, 16, 64], [5, 64, 8]], 2 * 10 * 16 * 64 * 8),  # broadcast batch 2x5
        ("aten::matmul", [[64], [64, 8]], 2 * 64 * 8),  # 1-D left operand
        ("aten::linear", [[16, 559, 1024], [1024, 1024], [1024]], 2 * 16 * 559 * 1024 * 1024),
        ("aten::mv", [[100, 50], [50]], 2 * 100 * 50),
        ("aten::_grouped_mm", [[96, 64], [4, 64, 32]], 2 * 96 * 64 * 32),
    ],
)
def test_matmul_class(name, dims, expected):
    flops, _, est = f(name, dims)
    assert flops == expected and not est


def test_conv2d_with_stride_and_padding():
    # ResNet stem: 32x3x224x224, 64x3x7x7, stride 2, pad 3 -> 112x112 output
    flops, _, est = f(
        "aten::conv2d",
        [[32, 3, 224, 224], [64, 3, 7, 7], [], [], [], [], []],
        concrete=["", "", "", "[2, 2]", "[3, 3]", "[1, 1]", "1"],
    )
    assert flops == 2 * 32 * (64 * 3 * 7 * 7) * 112 * 112 and not est
    # the same through aten::convolution and miopen/cudnn argument orders
    conv = f(
        "aten::convolution",
        [[32, 3, 224, 224], [64, 3, 7, 7], [], [], [], [], [], [], []],
        concrete=["", "", "", "[2, 2]", "[3, 3]", "[1, 1]", "False", "[0, 0]", "1"],
    )
    cudnn = f(
        "aten::cudnn_convolution",
        [[32, 3, 224, 224], [64, 3, 7, 7]] + [[]] * 7,
        concrete=["", "", "[3, 3]", "[2, 2]", "[1, 1]", "1", "False", "False", "True"],
    )
    miopen = f(
        "aten::miopen_convolution",
        [[32, 3, 224, 224], [64, 3, 7, 7]] + [[]] * 7,
        concrete=["", "", "", "[3, 3]", "[2, 2]", "[1, 1]", "1", "False", "False"],
    )
    assert conv[0] == cudnn[0] == miopen[0] == flops


def test_conv_grouped_and_estimated():
    # depthwise 3x3: weight [C, 1, 3, 3], groups C, stride 1 pad 1 -> same size
    flops, _, _ = f(
        "aten::conv2d",
        [[2, 8, 10, 10], [8, 1, 3, 3], [], [], [], [], []],
        concrete=["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "8"],
    )
    assert flops == 2 * 2 * (8 * 1 * 9) * 100
    # no concrete inputs (2021 traces): stride 1, same padding, flagged
    flops, _, est = f("aten::conv2d", [[2, 8, 10, 10], [4, 8, 3, 3], [], [], [], [], []])
    assert flops == 2 * 2 * (4 * 8 * 9) * 100 and est


def test_conv_backward_uses_output_mask():
    dims = [[10, 512, 7, 7], [10, 512, 7, 7], [512, 512, 3, 3], [], [], [], [], [], [], [], []]
    fwd = 2 * 10 * (512 * 512 * 9) * 49
    both = f(
        "aten::convolution_backward",
        dims,
        concrete=["", "", "", "[0]", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1", "[True, True, False]"],
    )
    weight_only = f(
        "aten::convolution_backward",
        dims,
        concrete=["", "", "", "[0]", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1", "[False, True, False]"],
    )
    assert both[0] == 2 * fwd and weight_only[0] == fwd


def test_attention_forward_and_backward():
    b, h, s, d = 16, 16, 559, 64
    fwd = 2 * b * h * s * s * (d + d)
    assert f("aten::scaled_dot_product_attention", [[b, h, s, d]] * 3 + [[]] * 5)[0] == fwd
    # flash kernels take [B, S, H, D]
    assert f("aten::_flash_attention_forward", [[b, s, h, d]] * 3 + [[]] * 10)[0] == fwd
    bwd = f("aten::_scaled_dot_product_flash_attention_backward", [[b, h, s, d]] * 4 + [[]] * 8)[0]
    assert bwd == 2.5 * fwd  # 5 matmuls vs 2
    # grouped-query attention: FLOPs follow the query heads
    assert (
        f("aten::scaled_dot_product_attention", [[1, 8, 128, 64], [1, 2, 256, 64], [1, 2, 256, 64]])[0]
        == 2 * 8 * 128 * 256 * 128
    )


def test_not_countable():
    assert f("aten::add", [[4], [4]])[0] is None
    assert op_flops("aten::mm", None, None, None)[0] is None
    assert f("aten::mm", [[4]])[0] is None  # malformed dims do not raise


def test_dtype_and_input_index():
    _, itype, _ = f(
        "aten::addmm",
        [[32], [64, 128], [128, 32], [], []],
        types=["float", "c10::BFloat16", "c10::BFloat16", "Scalar", "Scalar"],
    )
    assert dtype_of(itype) == "bf16"
    assert dtype_of("c10::Float8_e4m3fn") == "fp8" and dtype_of("float") == "fp32" and dtype_of("Scalar") is None


@pytest.mark.parametrize(
    ("props", "label", "bf16"),
    [
        ({"name": "NVIDIA H100 80GB HBM3"}, "H100 SXM", 989.4),
        ({"name": "NVIDIA H100 PCIe"}, "H100 PCIe", 756),
        ({"name": "NVIDIA H200"}, "H200", 989.4),
        ({"name": "NVIDIA B200"}, "B200", 2250),
        ({"name": "NVIDIA A100-SXM4-80GB"}, "A100", 312),
        ({"name": "NVIDIA A100-PG509-200"}, "A100", 312),
        ({"name": "NVIDIA L40S"}, "L40S", 362.05),
        ({"name": "NVIDIA GeForce RTX 4090"}, "GeForce RTX 4090", 165.2),
        ({"name": "AMD Instinct MI300X VF"}, "MI300X", 1307.4),
        ({"name": "AMD Instinct MI325X"}, "MI325X", 1307.4),
        ({"name": "AMD Instinct MI355X"}, "MI355X", 2516.6),
        ({"name": "", "computeMajor": 9, "computeMinor": 4, "numSms": 304}, "MI300X", 1307.4),  # vLLM traces
        ({"name": "AMD Radeon Graphics", "computeMajor": 9, "computeMinor": 0, "numSms": 104}, "MI250 (one GCD)", 181),
    ],
)
def test_peak_lookup(props, label, bf16):
    p = lookup(props)
    assert p is not None and p.label == label and p.tflops["bf16"] == bf16


def test_peak_fallbacks():
    v100 = lookup({"name": "Tesla V100-DGXS-32GB"})
    assert v100 is not None and v100.label == "V100 SXM2"
    assert peak_for(v100, "bf16") == (15.7, "fp32")  # no bf16 unit: FP32 peak, said so
    assert lookup({"name": "ARTEMIS"}) is None and lookup(None) is None
    gp100 = lookup({"name": "NVIDIA Quadro GP100", "computeMajor": 6, "computeMinor": 0, "numSms": 56})
    assert gp100 is not None and peak_for(gp100, "bf16") == (10.3, "fp32")  # Pascal: no bf16 unit
