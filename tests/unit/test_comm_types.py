"""Collective names, element sizes and nccl-tests' bus-bandwidth factors."""

from __future__ import annotations

import pytest

from ranksight.views.comm_types import (
    busbw_factor,
    canonical_type,
    dtype_bytes,
    kernel_name_details,
    numel_args,
    parse_int_list,
    ring_coefficients,
    size_bucket,
)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("nccl:all_to_all", "all_to_all"),
        ("nccl:_all_gather_base", "all_gather"),
        ("c10d::_allgather_base_", "all_gather"),
        ("c10d::_reduce_scatter_base_", "reduce_scatter"),
        ("c10d::allreduce_", "all_reduce"),
        ("c10d::alltoall_base_", "all_to_all"),
        ("c10d::broadcast_", "broadcast"),
        ("c10d::recv_", "recv"),
        ("nccl:send 0->1", "send"),
        ("gloo:all_reduce", "all_reduce"),
        ("allreduce", "all_reduce"),
        ("_allgather_base", "all_gather"),
        ("reduce_scatter_tensor_coalesced", "reduce_scatter"),
        ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", "all_reduce"),
        ("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL", "reduce_scatter"),
        ("ncclKernel_Broadcast_RING_LL_Sum_int8_t", "broadcast"),
        ("ncclKernel_Reduce_RING_LL_Sum_float", "reduce"),
        ("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", "send_recv"),
        ("ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)", "unknown"),  # RCCL: every kernel
        ("multimem_all_reduce_kernel", "all_reduce"),
        ("void (anonymous namespace)::multimem_all_reduce_kernel<__nv_bfloat16, 8>(...)", "all_reduce"),  # B200 trace
        ("void vllm::cross_device_reduce_1stage<float, 8>(...)", "all_reduce"),
        ("c10d::barrier", "barrier"),
        ("", "unknown"),
        (None, "unknown"),
    ],
)
def test_canonical_type(name: str | None, expected: str) -> None:
    assert canonical_type(name) == expected


@pytest.mark.parametrize(
    ("dtype", "size"),
    [
        ("Float", 4),
        ("float", 4),
        ("c10::BFloat16", 2),
        ("BFloat16", 2),
        ("c10::Half", 2),
        ("long int", 8),
        ("Long", 8),
        ("int", 4),
        ("unsigned char", 1),
        ("signed char", 1),
        ("Double", 8),
        ("bool", 1),
        ("c10::Float8_e4m3fn", 1),
        ("Byte", 1),
        ("mystery", None),
        (None, None),
    ],
)
def test_dtype_bytes(dtype: str | None, size: int | None) -> None:
    assert dtype_bytes(dtype) == size


def test_numel_args_shapes_and_tensor_lists() -> None:
    assert numel_args("[[6144],[6144],[],[],[],[]]") == (6144, 6144)
    assert numel_args("[[[282762]],[],[],[],[],[]]") == (282762, None)  # TensorList
    assert numel_args("[[1073741824],[16777216],[]]") == (1073741824, 16777216)
    assert numel_args("[[2, 3, 4]]") == (24, None)
    assert numel_args("[[],[],[]]") == (None, None)
    assert numel_args(None) == (None, None)
    assert numel_args("not json") == (None, None)


def test_kernel_name_details() -> None:
    assert kernel_name_details("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)") == (
        "RING",
        "LL",
        "float",
    )
    assert kernel_name_details("ncclDevKernel_AllGather_RING_LL128") == ("RING", "LL128", None)
    assert kernel_name_details("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t") == ("RING", "SIMPLE", "int8_t")
    assert kernel_name_details("ncclDevKernel_Generic") == (None, None, None)


# nccl-tests doc/PERFORMANCE.md: busBw = algBw × factor. The published factors are
# AllReduce 2(n-1)/n, ReduceScatter (n-1)/n, AllGather (n-1)/n, Broadcast 1, Reduce 1,
# AlltoAll (n-1)/n, SendRecv 1 (hypothesis: a ring, each rank sends and receives S·factor).
NCCL_TESTS = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "all_to_all": lambda n: (n - 1) / n,
    "send": lambda n: 1.0,
    "recv": lambda n: 1.0,
    "send_recv": lambda n: 1.0,
}


@pytest.mark.parametrize("coll", sorted(NCCL_TESTS))
@pytest.mark.parametrize("n", [2, 4, 8, 16, 128])
def test_busbw_factor_matches_nccl_tests(coll: str, n: int) -> None:
    assert busbw_factor(coll, n) == pytest.approx(NCCL_TESTS[coll](n))


def test_busbw_factor_worked_values() -> None:
    # 8 GPUs: all-reduce 1.75, all-gather / reduce-scatter / all-to-all 0.875
    assert busbw_factor("all_reduce", 8) == 1.75
    assert busbw_factor("all_gather", 8) == 0.875
    assert busbw_factor("reduce_scatter", 8) == 0.875
    assert busbw_factor("all_to_all", 8) == 0.875
    assert busbw_factor("broadcast", 8) == 1.0
    assert busbw_factor("barrier", 8) is None
    assert busbw_factor("all_reduce", None) is None


def test_ring_coefficients() -> None:
    assert ring_coefficients("all_reduce", 4) == (6.0, 1.5)
    assert ring_coefficients("all_gather", 4) == (3.0, 0.75)
    assert ring_coefficients("broadcast", 4) == (3.0, 1.0)
    assert ring_coefficients("send", 2) == (1.0, 1.0)
    assert ring_coefficients("barrier", 4) is None


def test_size_bucket_and_int_lists() -> None:
    assert size_bucket(100) == "<4KiB"
    assert size_bucket(4096) == "4KiB-64KiB"
    assert size_bucket(1 << 20) == "1MiB-16MiB"
    assert size_bucket(1 << 30) == ">=256MiB"
    assert size_bucket(None) == "unknown"
    assert parse_int_list("[0, 1]") == (0, 1)
    assert parse_int_list("[]") is None
    assert parse_int_list("junk") is None


def test_vectorised_bandwidth_agrees_with_busbw_factor() -> None:
    import polars as pl

    from ranksight.views.comm_match import _bandwidth

    types = sorted(NCCL_TESTS) + ["barrier", "unknown"]
    rows = [(t, n, b) for t in types for n in (1, 2, 8, None) for b in (100, 5000, 1 << 20, 1 << 30, None)]
    df = pl.DataFrame(
        rows, schema={"coll_type": pl.String, "group_size": pl.Int64, "bytes": pl.Int64}, orient="row"
    ).with_columns(pl.lit(1000, dtype=pl.Int64).alias("transfer_ns"))
    out = _bandwidth(df)
    for t, n, b, f, bucket in out.select("coll_type", "group_size", "bytes", "busbw_factor", "size_bucket").iter_rows():
        assert f == (pytest.approx(busbw_factor(t, n)) if busbw_factor(t, n) is not None else None)
        assert bucket == size_bucket(b)
