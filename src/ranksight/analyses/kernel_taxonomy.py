"""What each GPU kernel is: the kernel taxonomy of every rank, with its time.

Per rank, one row per distinct GPU activity (:mod:`ranksight.views.kernel_taxonomy`): class,
family, precision (and where it comes from), Tensor Core use, library and architecture, as the
kernel taxonomy (:mod:`ranksight.model.taxonomy`, ``docs/kernel-taxonomy.md``) decides them, with
``count``, ``sum_us`` and ``pct`` = share of the rank's summed GPU activity time (kernels, memcpys
and memsets; overlapping activities each count in full, so this is a share of summed time, not of
wall time).

Tables:

- ``families``: time per (class, family) over the selected ranks, with the share of summed GPU
  time;
- ``matrix_precision``: time of the matrix families (gemm, attention, convolution) per precision
  and Tensor Core answer, with the share of matrix time;
- ``kernels``: the ``top`` kernels per rank by time (all with ``top=0``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, Option, register
from ranksight.analyses._session import Session
from ranksight.analyses.run_context import seed_taxonomy
from ranksight.model.taxonomy import MATRIX_FAMILIES
from ranksight.views.kernel_taxonomy import kernel_taxonomy_table

if TYPE_CHECKING:
    from ranksight.model.run import Run

__all__ = ["kernel_taxonomy"]


def _share(col: str, over: str | list[str] | None = None) -> pl.Expr:
    total = pl.col(col).sum() if over is None else pl.col(col).sum().over(over)
    return pl.when(total > 0).then((100 * pl.col(col) / total).round(2)).otherwise(None)


def kernel_taxonomy(run: Run, *, ranks: Sequence[int] | None = None, top: int = 30) -> AnalysisResult:
    """The kernel taxonomy of the selected ranks (see the module doc)."""
    sess = Session.of(run, ranks)
    seed_taxonomy(sess)  # many small ranks: one pass over all of them
    per = [t for t in sess.map(kernel_taxonomy_table).values() if t.height]
    if not per:
        return AnalysisResult(
            {"families": pl.DataFrame(), "matrix_precision": pl.DataFrame(), "kernels": pl.DataFrame()},
            ["no GPU activity with a duration in these traces"],
        )
    k = pl.concat(per).with_columns((pl.col("dur_ns") / 1e3).alias("sum_us")).drop("dur_ns")
    fam = (
        k.group_by("kernel_class", "family")
        .agg(pl.col("sum_us").sum(), pl.col("count").sum(), pl.col("name").n_unique().alias("names"))
        .with_columns(_share("sum_us").alias("pct"))
        .sort(["sum_us", "family"], descending=[True, False])
    )
    mat = k.filter(pl.col("family").is_in(list(MATRIX_FAMILIES)))
    notes = []
    if mat.height:
        mp = (
            mat.group_by("precision", "tensor_cores")
            .agg(pl.col("sum_us").sum(), pl.col("name").n_unique().alias("names"))
            .with_columns(_share("sum_us").alias("pct_of_matrix"))
            .sort(["sum_us", "precision"], descending=[True, False])
        )
    else:
        mp = pl.DataFrame(schema={"precision": pl.String, "tensor_cores": pl.String, "sum_us": pl.Float64})
        notes.append("no matrix kernels (gemm, attention, convolution) in these traces")
    kern = k.with_columns(_share("sum_us", "rank").alias("pct")).sort(
        ["rank", "sum_us", "name"], descending=[False, True, False]
    )
    if top > 0:
        kern = kern.group_by("rank", maintain_order=True).head(top)
    kern = kern.select(
        "rank",
        "name",
        "kind",
        "kernel_class",
        "family",
        "precision",
        "precision_source",
        "tensor_cores",
        "library",
        "arch",
        "count",
        "sum_us",
        "pct",
    )
    unknown = k.filter((pl.col("kernel_class") == "COMPUTE") & (pl.col("family") == "other"))
    if unknown.height:
        share = float(unknown["sum_us"].sum()) / max(float(k["sum_us"].sum()), 1e-9)
        notes.append(
            f"{unknown['name'].n_unique()} kernel names ({100 * share:.1f}% of summed GPU time) have no compute family "
            "in their name: family 'other', precision and Tensor Core use 'unknown' unless the name says"
        )
    return AnalysisResult({"families": fam, "matrix_precision": mp, "kernels": kern}, notes)


register(
    AnalysisSpec(
        name="kernel-taxonomy",
        func=kernel_taxonomy,
        help="What each GPU kernel is: class, family, precision, Tensor Core use, library (the kernel taxonomy)",
        options=(Option("top", int, 30, "kernels shown per rank (0: all)"),),
    )
)
