"""Cell-by-cell comparison of the HTA facade (``hta_compat=True``) with every HTA v0.6 oracle table.

For each oracle folder in ``../shared/oracles/hta-0.6`` whose trace is available, each CSV that
the facade's ``TraceAnalysis`` can reproduce is recomputed with the call the folder's manifest
names, aligned with the oracle (rows by the table's natural key, or by position for tables HTA
returns in a fixed order; tables cut at 2,000 rows are compared on their saved prefix) and
compared cell by cell:

- integers and strings: equal;
- percentages and ratios (HTA rounds them to 1 or 2 d.p.): within 1e-4;
- other floats (means, standard deviations, bandwidths): within 1e-9 relative (1e-6 absolute);
- NaN equals NaN.

A cell of an oracle row with no partner on our side counts as differing. ``cells(folder)``
returns one :class:`FileCount` per compared file; ``python -m tests.golden.hta_cells`` prints the
share per file and every differing cell. Used by ``tests/golden/test_hta_cells.py``.
"""

from __future__ import annotations

import functools
import json
import math
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from tests.conftest import DATA, SHARED

from ranksight.hta import TraceAnalysis

ORACLES = SHARED / "oracles" / "hta-0.6"
EXAMPLE = Path(__file__).resolve().parents[2] / "src" / "ranksight" / "data" / "examples" / "dlrm"

#: oracle folder → trace path (tests/data first, ../shared/traces otherwise); folders whose
#: input is not in ../shared (oracles.md §5, second table) are not listed
TRACES: dict[str, Path] = {
    "amd_trace": DATA / "hta/amd_trace",
    "cpu_ddp_gloo_4ranks": SHARED / "traces/generated/cpu-ddp-gloo-4ranks",
    "cpu_only": DATA / "hta/cpu_only",
    "critical_path_alexnet": DATA / "hta/critical_path/alexnet",
    "critical_path_cuda_event_sync": DATA / "hta/critical_path/cuda_event_sync",
    "critical_path_cuda_event_sync_multi_stream": DATA / "hta/critical_path/cuda_event_sync_multi_stream",
    "critical_path_simple_add": DATA / "hta/critical_path/simple_add",
    "cupti_profiler": DATA / "hta/cupti_profiler",
    "df_index_resolver": SHARED / "traces/hta/df_index_resolver",
    "distributed_info_unavailable": DATA / "hta/distributed_info_unavailable",
    "dlrm_8ranks": EXAMPLE,
    "execution_trace_kineto": DATA / "hta/execution_trace/benchmark_simple_add_trace.json.gz",
    "history_with_gpu_user_annotation": DATA / "hta/with_gpu_user_annotation",
    "mtia_inference_trace": SHARED / "traces/hta/mtia_inference_trace",
    "nccl_parser_config": DATA / "hta/nccl_parser_config",
    "negative_queue_length_values_check": SHARED / "traces/hta/negative_queue_length_values_check",
    "ns_resolution_trace": DATA / "hta/ns_resolution_trace",
    "rank_non_gpu": DATA / "hta/rank_non_gpu",
    "timeline_analysis_sampled_rank0": DATA / "hta/trace_filter/sampled_rank-0.json.gz",
    "trace_diff_control": SHARED / "traces/hta/trace_diff/control",
    "trace_diff_test": SHARED / "traces/hta/trace_diff/test",
    "trace_filter_sampled_ranks01": DATA / "hta/trace_filter",
    "triton_example": DATA / "hta/triton_example",
}


@dataclass
class FileCount:
    folder: str
    file: str
    cells: int
    equal: int
    #: (row key, column, HTA's value, ours)
    diffs: list[tuple[str, str, object, object]] = field(default_factory=list)


@functools.cache
def analyzer(folder: str) -> TraceAnalysis:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return TraceAnalysis(trace_dir=str(TRACES[folder]), hta_compat=True)


def manifest(folder: str) -> dict:
    return json.loads((ORACLES / folder / "manifest.json").read_text())


def _ranks_of(call: str) -> list[int] | None:
    """The ``ranks=[...]`` list of a manifest call, or None."""
    i = call.find("ranks=[")
    if i < 0:
        return None
    j = call.index("]", i)
    body = call[i + 7 : j].strip()
    return [int(x) for x in body.split(",")] if body else []


def _per_rank(d: dict[int, pd.DataFrame], index_name: str | None = None) -> pd.DataFrame:
    frames = []
    for r, df in d.items():
        df = df.reset_index() if index_name else df
        frames.append(df.assign(rank=r) if "rank" not in df.columns else df)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _ours(folder: str, file: str, call: str) -> pd.DataFrame | None:
    a = analyzer(folder)
    ranks = _ranks_of(call)
    name = file.removesuffix(".csv")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if name == "profiler_steps":
            return pd.DataFrame({"profiler_steps": a.get_profiler_steps()})
        if name == "temporal_breakdown":
            return a.get_temporal_breakdown(visualize=False)
        if name in ("idle_time_breakdown", "idle_interval_stats"):
            idle, stats = a.get_idle_time_breakdown(ranks=ranks, visualize=False, show_idle_interval_stats=True)
            return idle if name == "idle_time_breakdown" else stats.reset_index()
        if name.startswith("gpu_kernel_breakdown"):
            kw = {"duration_ratio": 1.0, "num_kernels": 100000} if "_all_" in file else {}
            kt, k = a.get_gpu_kernel_breakdown(visualize=False, **kw)
            return kt if name.endswith("kernel_type") else k
        if name == "comm_comp_overlap":
            return a.get_comm_comp_overlap(visualize=False)
        if name == "cuda_kernel_launch_stats":
            return _per_rank(a.get_cuda_kernel_launch_stats(ranks=ranks, visualize=False))
        if name == "queue_length_summary":
            return a.get_queue_length_summary(ranks=ranks)
        if name == "queue_length_time_series":
            return _per_rank(a.get_queue_length_time_series(ranks=ranks), index_name="index")
        if name == "memory_bw_summary":
            return a.get_memory_bw_summary(ranks=ranks)
        if name == "memory_bw_time_series":
            return _per_rank(a.get_memory_bw_time_series(ranks=ranks))
        if name == "time_spent_blocked_on_full_queue":
            return a.get_time_spent_blocked_on_full_queue(a.get_queue_length_time_series(ranks=ranks))
        if name == "potential_stragglers":
            return pd.DataFrame({"potential_stragglers": a.get_potential_stragglers()})
        if name.endswith("user_annotation_breakdown"):
            return a.get_gpu_user_annotation_breakdown(use_gpu_annotation=name.startswith("gpu"), visualize=False)
        if name == "aten_op_kernels_and_delay":
            return _per_rank(a.get_aten_op_kernels_and_delay(ranks=ranks))
    return None


#: natural row keys (None: compare rows in HTA's order)
KEYS: dict[str, list[str] | None] = {
    "temporal_breakdown": ["rank"],
    "comm_comp_overlap": ["rank"],
    "idle_time_breakdown": ["rank", "stream", "idle_category"],
    "idle_interval_stats": ["rank", "stream", "idle_category"],
    "gpu_kernel_breakdown_kernel_type": ["kernel_type"],
    "gpu_kernel_breakdown_all_kernel_type": ["kernel_type"],
    "gpu_kernel_breakdown_kernels": ["rank", "kernel_type", "name"],
    "gpu_kernel_breakdown_all_kernels": ["rank", "kernel_type", "name"],
    "cpu_user_annotation_breakdown": ["rank", "name"],
    "gpu_user_annotation_breakdown": ["rank", "name"],
    "aten_op_kernels_and_delay": ["rank", "aten_op_name", "kernel_sequence"],
    "potential_stragglers": ["potential_stragglers"],
    "profiler_steps": None,
    "cuda_kernel_launch_stats": None,
    "queue_length_time_series": None,
    "memory_bw_time_series": None,
    "time_spent_blocked_on_full_queue": None,
}
#: files with three header rows (describe() over a (rank, key) index)
SUMMARIES = {"queue_length_summary", "memory_bw_summary"}


def _is_ratio(col: str) -> bool:
    return any(s in col for s in ("pctg", "ratio", "percentage"))


def _equal(col: str, o: object, g: object) -> bool:
    if isinstance(o, str) or isinstance(g, str):
        return str(o) == str(g)
    try:
        fo, fg = float(o), float(g)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return o == g
    if math.isnan(fo) or math.isnan(fg):
        return math.isnan(fo) and math.isnan(fg)
    if _is_ratio(col):
        return abs(fo - fg) <= 1e-4
    return math.isclose(fo, fg, rel_tol=1e-9, abs_tol=1e-6)


def _read_oracle(path: Path) -> pd.DataFrame | None:
    name = path.stem
    if path.stat().st_size == 0:
        return None
    try:
        if name in SUMMARIES:
            df = pd.read_csv(path, header=[0, 1], index_col=[0, 1])
            df.columns = [c for _, c in df.columns]
            return df.reset_index()
        if name in ("idle_interval_stats", "queue_length_time_series"):
            return pd.read_csv(path)
        return pd.read_csv(path, index_col=0)
    except pd.errors.EmptyDataError:
        return None


def _shape_ours(name: str, ours: pd.DataFrame | None) -> pd.DataFrame | None:
    if ours is None:
        return None
    if name in SUMMARIES:
        ours = ours.copy()
        ours.columns = [c[1] if isinstance(c, tuple) else c for c in ours.columns]
        return ours.reset_index()
    return ours.reset_index(drop=True)


#: Tables whose rows at equal timestamps HTA orders with numpy's unstable quicksort argsort (its
#: queue length and memory bandwidth series, and their ``describe()``); the facade calls the same
#: function (``analyses/queue.py``, ``analyses/memcpy_bw.py`` with ``hta_order``). Which of two
#: equal timestamps comes first depends on the CPU: numpy sends an int64 argsort to
#: x86-simd-sort's AVX-512 kernel where the CPU has AVX-512 (the oracles were recorded on such a
#: machine, and match cell for cell there) and to its own introsort elsewhere, so HTA itself gives
#: other running values at tied points on a CPU without it.
TIE_ORDERED = {
    "queue_length_time_series": (["rank", "stream"], "queue_length"),
    "memory_bw_time_series": (["rank", "name"], "memory_bw_gbps"),
}
TIE_ORDERED_SUMMARIES = {
    "queue_length_summary": "queue_length_time_series",
    "memory_bw_summary": "memory_bw_time_series",
}


def argsort_as_oracles() -> bool:
    """Whether numpy's quicksort argsort on this CPU is the one the oracles were recorded with
    (x86-simd-sort's AVX-512 kernel): then every cell is compared as it is."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__
    except ImportError:  # numpy < 2
        from numpy.core._multiarray_umath import __cpu_features__  # type: ignore[no-redef]
    return bool(__cpu_features__.get("AVX512_SKX"))


def tie_order_diffs(
    oracle: pd.DataFrame, ours: pd.DataFrame, keys: list[str], value: str, *, truncated: bool
) -> tuple[int, list[tuple[str, str, object, object]]]:
    """A series (``keys``, ``ts``, a running ``value``) against the oracle's where tied points may
    come in another order: the same points (every column but the running value, each tie group as
    a set) and the same running value after each tie group (the state once every tied point is
    counted, whatever their order). ``truncated``: the oracle is a saved prefix, compared on the
    tie groups it holds whole. Returns the cells compared and the differing ones."""
    oracle = oracle.reset_index(drop=True)
    ours = ours.reset_index(drop=True)
    cols = [c for c in oracle.columns if c != value]
    by = [*keys, "ts"]
    if (not truncated and len(ours) != len(oracle)) or any(c not in ours.columns for c in [*cols, value]):
        return 1, [("(table)", "rows", len(oracle), len(ours))]
    if truncated:
        ours = ours.head(len(oracle))
        last = tuple(_canon(oracle[by]).iloc[-1])
        oracle = oracle[[tuple(r) != last for r in _canon(oracle[by]).itertuples(index=False)]]
        ours = ours[[tuple(r) != last for r in _canon(ours[by]).itertuples(index=False)]]
        if len(ours) != len(oracle):
            return 1, [("(table)", "rows of the saved prefix", len(oracle), len(ours))]
    o_pts = _canon(oracle[cols]).sort_values(cols).reset_index(drop=True)
    g_pts = _canon(ours[cols]).sort_values(cols).reset_index(drop=True)
    same = (o_pts.values == g_pts.values).all(axis=1)
    diffs = [
        (f"point {i}", "point", tuple(o_pts.iloc[i]), tuple(g_pts.iloc[i])) for i in range(len(same)) if not same[i]
    ]
    o_end = oracle.assign(**_canon(oracle[by])).groupby(by, sort=True)[value].last()
    g_end = ours.assign(**_canon(ours[by])).groupby(by, sort=True)[value].last()
    for k, ov in o_end.items():
        gv = g_end.get(k)
        if gv is None or not _equal(value, ov, gv):
            diffs.append((str(k), f"{value} after the tie group", ov, gv))
    return len(oracle) + len(o_end), diffs


def _compare_tie_order(folder: str, file: str, name: str, oracle: pd.DataFrame, ours: pd.DataFrame) -> FileCount:
    """A series of :data:`TIE_ORDERED` compared up to the order of tied points (:func:`tie_order_diffs`)."""
    keys, value = TIE_ORDERED[name]
    cells, diffs = tie_order_diffs(oracle, ours, keys, value, truncated=manifest_file(folder, file)["truncated"])
    return FileCount(folder, file, cells, cells - len(diffs), diffs)


def _compare_tie_summary(folder: str, file: str, name: str, oracle: pd.DataFrame, ours: pd.DataFrame) -> FileCount:
    """A summary of a :data:`TIE_ORDERED` series on a CPU that orders ties otherwise: the same
    (rank, key) rows as the oracle, and each cell equal to ``describe()`` of the facade's own series
    (checked above against the oracle's series up to the order of ties)."""
    series = TIE_ORDERED_SUMMARIES[name]
    keys, value = TIE_ORDERED[series]
    s = _ours(folder, f"{series}.csv", manifest_call(folder, file))
    assert s is not None
    if value == "memory_bw_gbps":
        s = s[s[value] > 0]
    want = s.groupby(keys)[value].describe().reset_index()
    diffs: list[tuple[str, str, object, object]] = []
    okeys = set(oracle[keys].astype(str).agg("|".join, axis=1))
    gkeys = ours[keys].astype(str).agg("|".join, axis=1)
    if okeys != set(gkeys):
        diffs.append(("(table)", "rows", sorted(okeys), sorted(gkeys)))
    w = want.set_index(want[keys].astype(str).agg("|".join, axis=1))
    cells = 0
    for i, k in enumerate(gkeys):
        for c in [c for c in oracle.columns if c not in keys]:
            cells += 1
            if k not in w.index or not _equal(c, w.at[k, c], ours.iloc[i][c]):
                diffs.append((k, c, w.at[k, c] if k in w.index else None, ours.iloc[i][c]))
    return FileCount(folder, file, cells, cells - len(diffs), diffs)


def _canon(df: pd.DataFrame) -> pd.DataFrame:
    """Every column as text, numbers written one way (the oracle's ``56351.0`` is our ``56351``)."""
    out = {}
    for c in df.columns:
        num = pd.to_numeric(df[c], errors="coerce")
        out[c] = num.astype(float).map(repr) if num.notna().all() else df[c].astype(str)
    return pd.DataFrame(out, index=df.index)


def manifest_file(folder: str, file: str) -> dict:
    m = manifest(folder)["analyses"]
    return next(f for v in m.values() for f in v.get("files", []) if f["file"] == file)


def manifest_call(folder: str, file: str) -> str:
    m = manifest(folder)["analyses"]
    entry = next((v for v in m.values() if any(f["file"] == file for f in v.get("files", []))), None)
    assert entry is not None, (folder, file)
    return str(entry["call"])


def compare(folder: str, file: str) -> FileCount:
    """One oracle file against the facade's output (see the module docstring)."""
    name = file.removesuffix(".csv")
    m = manifest(folder)["analyses"]
    entry = next((v for v in m.values() if any(f["file"] == file for f in v.get("files", []))), None)
    assert entry is not None, (folder, file)
    info = next(f for f in entry["files"] if f["file"] == file)
    oracle = _read_oracle(ORACLES / folder / file)
    ours = _shape_ours(name, _ours(folder, file, entry["call"]))
    if oracle is None or len(oracle) == 0:
        # an empty oracle: one "cell" saying the table is empty
        empty = ours is None or len(ours) == 0
        return FileCount(folder, file, 1, int(empty), [] if empty else [("(table)", "rows", 0, len(ours))])
    cols = list(oracle.columns)
    total = oracle.shape[0] * len(cols)
    if ours is None:
        return FileCount(folder, file, total, 0, [("(table)", "rows", len(oracle), None)])
    if not argsort_as_oracles():
        if name in TIE_ORDERED:
            return _compare_tie_order(folder, file, name, oracle, ours)
        if name in TIE_ORDERED_SUMMARIES:
            return _compare_tie_summary(folder, file, name, oracle, ours)
    keys = KEYS.get(name, [c for c in cols if c in ("rank", "stream", "name")] if name in SUMMARIES else None)
    diffs: list[tuple[str, str, object, object]] = []
    if keys is None:
        # positional: HTA's order; a cut table is compared on its saved prefix
        if not info["truncated"] and len(ours) != len(oracle):
            diffs.append(("(table)", "rows", len(oracle), len(ours)))
        g = ours.head(len(oracle)).reset_index(drop=True)
        o = oracle.reset_index(drop=True)
        pairs = [(i, i if i < len(g) else None) for i in range(len(o))]
    else:
        o = oracle.reset_index(drop=True)
        g = ours.reset_index(drop=True)
        okey = o[keys].astype(str).agg("|".join, axis=1)
        gkey = (
            g[keys].astype(str).agg("|".join, axis=1) if all(k in g.columns for k in keys) else pd.Series([], dtype=str)
        )
        gpos = {k: i for i, k in enumerate(gkey)}
        pairs = [(i, gpos.get(k)) for i, k in enumerate(okey)]
        extra = set(gkey) - set(okey)
        if extra:
            diffs.append(("(table)", "extra rows", len(o), f"+{len(extra)}: {sorted(extra)[:3]}"))
    equal = 0
    for i, j in pairs:
        rowkey = f"row {i}" if keys is None else "|".join(str(o.at[i, k]) for k in keys)
        for c in cols:
            ov = o.at[i, c]
            if j is None or c not in g.columns:
                diffs.append((rowkey, c, ov, None))
                continue
            gv = g.at[j, c]
            if _equal(c, ov, gv):
                equal += 1
            else:
                diffs.append((rowkey, c, ov, gv))
    return FileCount(folder, file, total, equal, diffs)


SUPPORTED = set(KEYS) | SUMMARIES


def oracle_files(folder: str) -> list[str]:
    return sorted(p.name for p in (ORACLES / folder).glob("*.csv") if p.stem in SUPPORTED)


def cells(folder: str) -> list[FileCount]:
    return [compare(folder, f) for f in oracle_files(folder)]


def main(argv: list[str]) -> int:
    folders = argv or [f for f in TRACES if TRACES[f].exists()]
    tot = eq = 0
    for folder in folders:
        for fc in cells(folder):
            tot += fc.cells
            eq += fc.equal
            share = 100.0 * fc.equal / fc.cells
            print(f"{folder:45s} {fc.file:42s} {fc.equal:6d}/{fc.cells:6d} {share:6.2f}%")
            for d in fc.diffs[:8]:
                print("      ", d)
            if len(fc.diffs) > 8:
                print(f"       … {len(fc.diffs) - 8} more")
    print(f"TOTAL {eq}/{tot} = {100.0 * eq / max(tot, 1):.2f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
