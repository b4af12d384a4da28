"""Operators of two runs side by side: op-perf's groups matched by (operator, tensor shapes, dtypes).

Input: the ``ops`` tables of ``op-perf`` of each side (any ranks). Definitions (``docs/diff.md``):

- **key**: the operator name with the vendor library's prefix made neutral (``aten::cudnn_*`` and
  ``aten::miopen_*`` → ``aten::dnn_*``: the same op on CUDA and ROCm), the shapes of its tensor
  inputs and their dtypes (scalar arguments, whose positions differ between those ops, left out).
  So an H100 trace and an MI300X trace of the same model match operator by operator;
- per side and key (summed over the side's ranks and the groups with that key): ``calls``,
  ``kernel_us`` per rank (the side's total ÷ its number of ranks), ``us_per_call``,
  ``tflop_per_s`` (FLOPs ÷ kernel time of the groups with a model), ``pct_of_roofline``
  (time-weighted: 100 × (1 − time lost ÷ modelled time)), the original names and the GPU;
- ``ratio`` = test ``us_per_call`` ÷ base ``us_per_call`` (> 1: slower per call on the test side);
  ``delta_us`` = test ``kernel_us`` − base ``kernel_us``; ``only`` names the side of an operator the
  other side does not have;
- **categories**: per op-perf category, both sides' ``kernel_us``, ``delta_us`` and its share of the
  total delta (the categories that explain most of the difference come first).
"""

from __future__ import annotations

import json
import re

import polars as pl

__all__ = ["op_key", "op_perf_diff"]

_DNN = re.compile(r"^aten::(cudnn|miopen)_")


def op_key(name: str, input_dims: str | None, input_type: str | None) -> tuple[str, str, str]:
    """(neutral name, tensor shapes, tensor dtypes) of an op group (module doc)."""
    try:
        dims = json.loads(input_dims) if input_dims else []
        types = json.loads(input_type) if input_type else []
    except ValueError:
        dims, types = [], []
    pairs = [
        (d, types[i] if i < len(types) else None)
        for i, d in enumerate(dims if isinstance(dims, list) else [])
        if isinstance(d, list) and d and all(isinstance(x, int) for x in d)
    ]
    return (
        _DNN.sub("aten::dnn_", name),
        json.dumps([p[0] for p in pairs], separators=(",", ":")),
        json.dumps([p[1] for p in pairs], separators=(",", ":")),
    )


def _side(ops: pl.DataFrame) -> pl.DataFrame:
    keys = ops.select("name", "input_dims", "input_type").unique()
    k = [op_key(*r) for r in keys.iter_rows()]
    keys = keys.with_columns(
        pl.Series("key_name", [x[0] for x in k], dtype=pl.String),
        pl.Series("shapes", [x[1] for x in k], dtype=pl.String),
        pl.Series("dtypes", [x[2] for x in k], dtype=pl.String),
    )
    o = ops.join(keys, on=["name", "input_dims", "input_type"], how="left", nulls_equal=True)
    ranks = max(o["rank"].n_unique(), 1)
    ok = pl.col("model") == "yes"
    return o.group_by("key_name", "shapes", "dtypes").agg(
        pl.col("category").drop_nulls().sort().first(),
        pl.col("name").unique().sort().str.join(", ").alias("names"),
        pl.col("count").sum().alias("calls"),
        (pl.col("kernel_us_sum").sum() / ranks).alias("kernel_us"),
        (pl.col("kernel_us_sum").sum() / pl.col("count").sum()).alias("us_per_call"),
        pl.when(pl.col("kernel_us_sum").filter(ok).sum() > 0)
        .then(
            (pl.col("gflop_per_call") * pl.col("count")).filter(ok).sum()
            / pl.col("kernel_us_sum").filter(ok).sum()
            * 1e3
        )
        .alias("tflop_per_s"),
        pl.when(pl.col("kernel_us_sum").filter(ok).sum() > 0)
        .then((1 - pl.col("lost_us").filter(ok).sum() / pl.col("kernel_us_sum").filter(ok).sum()) * 100)
        .alias("pct_of_roofline"),
        pl.col("gpu").drop_nulls().sort().first(),
    )


def op_perf_diff(
    base: pl.DataFrame, test: pl.DataFrame, labels: tuple[str, str] = ("base", "test")
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(operators, categories) of two op-perf ``ops`` tables (module doc); columns prefixed
    ``base_`` / ``test_`` (the sides' roles; ``labels`` name them in ``only``)."""
    b, t = _side(base), _side(test)
    on = ["key_name", "shapes", "dtypes"]
    vals = ["names", "calls", "kernel_us", "us_per_call", "tflop_per_s", "pct_of_roofline", "gpu"]
    j = b.rename({c: f"base_{c}" for c in [*vals, "category"]}).join(
        t.rename({c: f"test_{c}" for c in [*vals, "category"]}), on=on, how="full", coalesce=True
    )
    j = j.with_columns(
        pl.coalesce("base_category", "test_category").alias("category"),
        pl.when(pl.col("test_calls").is_null())
        .then(pl.lit(labels[0]))
        .when(pl.col("base_calls").is_null())
        .then(pl.lit(labels[1]))
        .alias("only"),
        (pl.col("test_us_per_call") / pl.col("base_us_per_call")).alias("ratio"),
        (pl.col("test_kernel_us").fill_null(0) - pl.col("base_kernel_us").fill_null(0)).alias("delta_us"),
    )
    # a total order: equal deltas are common (one op, several shapes), and the row order is output
    ops = j.sort(
        pl.col("delta_us").abs(),
        "key_name",
        "shapes",
        "dtypes",
        descending=[True, False, False, False],
        nulls_last=True,
    ).select(
        pl.col("key_name").alias("op"),
        "category",
        "shapes",
        "dtypes",
        "base_calls",
        "test_calls",
        "base_us_per_call",
        "test_us_per_call",
        "ratio",
        "base_kernel_us",
        "test_kernel_us",
        "delta_us",
        "base_tflop_per_s",
        "test_tflop_per_s",
        "base_pct_of_roofline",
        "test_pct_of_roofline",
        "only",
        "base_names",
        "test_names",
        "base_gpu",
        "test_gpu",
    )
    total = float(ops["delta_us"].sum())
    cats = (
        ops.group_by("category")
        .agg(
            pl.col("base_kernel_us").sum(),
            pl.col("test_kernel_us").sum(),
            pl.col("delta_us").sum(),
            pl.len().alias("ops"),
            pl.col("only").is_not_null().sum().alias("one_side_only"),
        )
        .with_columns(
            (pl.col("delta_us") / total * 100 if total else pl.lit(None, dtype=pl.Float64)).alias("share_of_delta_pct")
        )
        .sort(pl.col("delta_us").abs(), "category", descending=[True, False])
        .select(
            "category",
            "ops",
            "one_side_only",
            "base_kernel_us",
            "test_kernel_us",
            "delta_us",
            "share_of_delta_pct",
        )
    )
    return ops, cats
