"""Frequent GPU kernel sequences under an operator (HTA's ``get_frequent_cuda_kernel_sequences``).

Definitions (one rank; µs):

- the CPU events of each thread form a call tree (:mod:`ranksight.views.hta_call_stack`, HTA's call
  stack: depth 0 at top level); a launch's GPU activities (kernels, memcpys, memsets) hang below it;
- candidates: CPU events whose name **contains** ``op`` (literal substring, as in HTA); roots: the
  candidates at the smallest depth among all candidates that have at least ``min_pattern_len`` GPU
  activities below them (HTA's rule: a shallower candidate with fewer kernels hides deeper ones);
- pattern of a root: its name followed by the names of every GPU activity below it, by GPU start
  (``|``-joined, as in HTA). Identical patterns are counted: exact-sequence grouping, one pattern
  per root;
- per pattern: ``count``, ``gpu_dur_us`` (sum over roots of their GPU activities' durations) and
  ``cpu_dur_us`` (sum of the roots' durations), sorted by count (descending) then pattern.

Works on ns traces (HTA crashes on the −1 µs durations its rounding creates there). The rows of the
top patterns (roots, their CPU descendants and GPU activities) are returned in ``occurrences`` so a
writer can mark them in a copy of the trace (``ranksight.io.rewrite``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, Option, register
from ranksight.analyses._session import Session
from ranksight.errors import UsageError
from ranksight.model.kinds import CPU_KINDS
from ranksight.views.hta_call_stack import ancestor_at_depth, nest
from ranksight.views.links import launch_children, names_matching

if TYPE_CHECKING:
    from ranksight.model.run import Run
    from ranksight.model.trace import Trace

__all__ = ["cpu_tree", "kernel_patterns", "sequences"]

_PATTERN_SCHEMA = {
    "rank": pl.Int32,
    "pattern": pl.String,
    "count": pl.Int64,
    "gpu_dur_us": pl.Float64,
    "cpu_dur_us": pl.Float64,
}
_OCC_SCHEMA = {"rank": pl.Int32, "pattern": pl.String, "count": pl.Int64, "row": pl.UInt32}


def cpu_tree(trace: Trace) -> pl.DataFrame:
    """Every timed CPU-thread event with ``parent_row`` and ``depth`` (HTA's call stack)."""
    cpu = (
        trace.scan()
        .filter(pl.col("kind").is_in([k for k in CPU_KINDS if k != "memory"]) & pl.col("dur_ns").is_not_null())
        .select("row", "pid", "tid", "ts_ns", "end_ns", "dur_ns", "name")
        .collect()
    )
    return cpu.join(nest(cpu), on="row")


def kernel_patterns(
    trace: Trace, op: str, *, min_pattern_len: int = 3, top_k: int = 5
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``(patterns, occurrences)`` of one rank (see the module docstring)."""
    if not op:
        raise UsageError("give an operator name (--op NAME), e.g. aten::linear")
    tree = cpu_tree(trace)
    empty = pl.DataFrame(schema=_PATTERN_SCHEMA), pl.DataFrame(schema=_OCC_SCHEMA)
    cand = tree.filter(names_matching(tree, lambda s: s.str.contains(op, literal=True))).with_columns(
        pl.col("name").cast(pl.String)
    )
    if cand.height == 0:
        return empty
    size = int(trace.scan().select(pl.col("row").max()).collect().item()) + 1
    depth_of = np.full(size, -1, np.int64)
    depth_of[tree["row"].to_numpy()] = tree["depth"].to_numpy()
    parent_of = np.full(size, -1, np.int64)
    parent_of[tree["row"].to_numpy()] = tree["parent_row"].fill_null(-1).to_numpy()
    d = int(cand["depth"].min())  # type: ignore[arg-type]
    ch = launch_children(trace)
    # the candidate-depth ancestor of each launch: which candidate (if any) it belongs to
    lr = ch["launch_row"].to_numpy().astype(np.int64)
    anc = ancestor_at_depth(lr, depth_of, parent_of, d) if lr.size else np.empty(0, np.int64)
    roots = cand.filter(pl.col("depth") == d).select("row", "name", "dur_ns")
    kids = ch.select(
        pl.Series("root", anc),
        pl.col("row").alias("gpu_row"),
        pl.col("name").cast(pl.String).alias("kernel"),
        "ts_ns",
        "dur_ns",
    ).filter(pl.col("root").is_in(roots["row"].cast(pl.Int64).implode()))
    per_root = (
        kids.sort(["root", "ts_ns", "gpu_row"])
        .group_by("root", maintain_order=True)
        .agg(pl.len().alias("n"), pl.col("kernel"), pl.col("dur_ns").sum().alias("gpu_ns"))
        .filter(pl.col("n") >= min_pattern_len)
        .join(
            roots.select(pl.col("row").cast(pl.Int64).alias("root"), "name", pl.col("dur_ns").alias("cpu_ns")),
            on="root",
        )
        .with_columns(pl.concat_list(pl.col("name"), pl.col("kernel")).list.join("|").alias("pattern"))
    )
    if per_root.height == 0:
        return empty
    patterns = (
        per_root.group_by("pattern")
        .agg(
            pl.len().cast(pl.Int64).alias("count"),
            (pl.col("gpu_ns").sum() / 1e3).alias("gpu_dur_us"),
            (pl.col("cpu_ns").sum() / 1e3).alias("cpu_dur_us"),
        )
        .sort(["count", "pattern"], descending=[True, False])
        .select(pl.lit(trace.rank, pl.Int32).alias("rank"), "pattern", "count", "gpu_dur_us", "cpu_dur_us")
    )
    top = patterns.head(top_k)
    top_roots = per_root.join(top.select("pattern", "count"), on="pattern").select("root", "pattern", "count")
    # every CPU descendant of a top root, plus the GPU activities below it
    trow = tree["row"].to_numpy().astype(np.int64)
    tanc = ancestor_at_depth(trow, depth_of, parent_of, d)
    cpu_occ = pl.DataFrame({"root": tanc, "row": trow}).join(top_roots, on="root")
    gpu_occ = kids.select("root", pl.col("gpu_row").cast(pl.Int64).alias("row")).join(top_roots, on="root")
    occ = (
        pl.concat([cpu_occ, gpu_occ])
        .select(pl.lit(trace.rank, pl.Int32).alias("rank"), "pattern", "count", pl.col("row").cast(pl.UInt32))
        .sort("row")
    )
    return patterns, occ


def sequences(
    run: Run,
    *,
    ranks: Sequence[int] | None = None,
    op: str = "",
    min_pattern_len: int = 3,
    top_k: int = 5,
) -> AnalysisResult:
    """Frequent kernel sequences under ``op`` on each selected rank (default: the first rank)."""
    sess = Session.of(run, ranks)
    rs = sess.ranks if ranks else sess.ranks[:1]
    per = sess.map(kernel_patterns, rs, op=op, min_pattern_len=min_pattern_len, top_k=top_k)
    pats, occs, notes = [], [], []
    for r in rs:
        p, o = per[r]
        if p.height == 0:
            notes.append(f"rank {r}: no {op!r} op with at least {min_pattern_len} GPU activities below it")
        pats.append(p)
        occs.append(o)
    return AnalysisResult({"patterns": pl.concat(pats), "occurrences": pl.concat(occs)}, notes)


register(
    AnalysisSpec(
        name="sequences",
        func=sequences,
        help="frequent GPU kernel sequences under an operator (--op NAME), with counts and GPU/CPU time",
        options=(
            Option("op", str, "", "operator name (substring, e.g. aten::linear)"),
            Option("min_pattern_len", int, 3, "fewest GPU activities under a root op"),
            Option("top_k", int, 5, "patterns whose rows are listed in 'occurrences'"),
        ),
    )
)
