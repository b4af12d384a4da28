"""Golden tests: the HTA facade's ``get_gpu_kernels_with_user_annotations`` and ``t`` (HTA's
``Trace``) against HTA v0.6.

Oracles (tests/golden/hta/<folder>/):
- ``gpu_kernels_with_user_annotations.csv``: copies of ../shared/oracles/hta-0.6 (HTA v0.6.0;
  ``analyzer.get_gpu_kernels_with_user_annotations(rank=0, expand_names=True,
  shorten_names=True)``; cut at 2,000 rows there; ``kernels_manifest.json`` is the relevant part
  of the oracle's manifest: the call and the full row count);
- ``trace_frame.csv`` and ``trace_manifest.json``: made here with HTA v0.6 from PyPI
  (``traceinsight`` 0.6.1) by the calls the manifest names (``analyzer.t.get_trace(rank)``, its
  first 2,000 rows with ``name``/``cat`` decoded through HTA's symbol table; ``min_ts``,
  ``get_iterations``, ``get_trace_duration``, ``get_device_type``, the row count).

With ``hta_compat=True`` every compared cell equals HTA's. HTA's symbol ids (``name``, ``cat``,
``user_annotation`` as integers) are compared through their decoded strings (``s_name``, ``s_cat``,
``s_user_annotation``): the ids number symbols in the order a process pool delivers them
(docs/hta.md). In ranksight's default mode the rows, indexes, links and names are the same; the
times are exact ns where HTA rounds ns traces to µs, and where that rounding turned a kernel into a
zero-length one HTA finds no annotation for it.
"""

from __future__ import annotations

import functools
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

pd = pytest.importorskip("pandas")

from tests.conftest import DATA  # noqa: E402

from ranksight.hta import TraceAnalysis  # noqa: E402

GOLDEN = Path(__file__).resolve().parent / "hta"

TRACES = {
    "amd_trace": "hta/amd_trace",
    "history_with_gpu_user_annotation": "hta/with_gpu_user_annotation",
    "nccl_parser_config": "hta/nccl_parser_config",
    "ns_resolution_trace": "hta/ns_resolution_trace",
    "trace_filter_sampled_ranks01": "hta/trace_filter",
}
#: traces with fractional-µs timestamps (HTA rounds them to µs)
NS_TRACES = {"amd_trace", "nccl_parser_config", "ns_resolution_trace"}

KERNEL_FOLDERS = [f for f in TRACES if (GOLDEN / f / "gpu_kernels_with_user_annotations.csv").exists()]
FRAME_FOLDERS = [f for f in TRACES if (GOLDEN / f / "trace_frame.csv").exists()]

#: columns compared by value (numbers: NaN equals NaN; strings exactly)
KERNEL_COLUMNS = (
    "index",
    "pid",
    "tid",
    "ts",
    "dur",
    "end",
    "stream",
    "correlation",
    "external_id",
    "index_correlation",
    "iteration",
    "s_name",
    "s_cat",
    "s_user_annotation",
)
FRAME_COLUMNS = (
    "index",
    "pid",
    "tid",
    "ts",
    "dur",
    "stream",
    "correlation",
    "external_id",
    "index_correlation",
    "iteration",
)
STRINGS = {"s_name", "s_cat", "s_user_annotation"}


@functools.lru_cache(maxsize=10)
def analyzer(folder: str, compat: bool) -> TraceAnalysis:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return TraceAnalysis(trace_dir=str(DATA / TRACES[folder]), hta_compat=compat)


def read(folder: str, name: str) -> pd.DataFrame:
    # "" is HTA's decoded name of "no annotation" (and an integer column written as "" is NaN)
    return pd.read_csv(GOLDEN / folder / name, index_col=0, keep_default_na=False, na_values=[])


def unequal(mine: pd.Series, want: pd.Series, column: str) -> np.ndarray:
    """Row mask where the cells differ."""
    if column in STRINGS:
        return mine.fillna("").astype(str).to_numpy() != want.astype(str).to_numpy()
    a = pd.to_numeric(mine, errors="coerce").to_numpy(float)
    b = pd.to_numeric(want.replace("", np.nan), errors="coerce").to_numpy(float)
    return ~((a == b) | (np.isnan(a) & np.isnan(b)))


@pytest.mark.parametrize("folder", KERNEL_FOLDERS)
def test_kernels_with_user_annotations_hta_compat(folder: str) -> None:
    want = read(folder, "gpu_kernels_with_user_annotations.csv")
    m = json.loads((GOLDEN / folder / "kernels_manifest.json").read_text())
    got = analyzer(folder, True).get_gpu_kernels_with_user_annotations(rank=0)
    assert got is not None
    assert m["saved_rows"] == len(want) and len(got) == m["rows"]  # every row, also past the 2,000 kept
    head = got.head(len(want)).reset_index(drop=True)
    bad = {c: int(unequal(head[c], want[c], c).sum()) for c in KERNEL_COLUMNS}
    assert {c: n for c, n in bad.items() if n} == {}
    assert (want["s_user_annotation"] != "").any(), "the oracle attributes kernels: the comparison is not vacuous"


@pytest.mark.parametrize("folder", KERNEL_FOLDERS)
def test_kernels_with_user_annotations_default(folder: str) -> None:
    """ranksight's mode: the same rows, links and names; exact times. A kernel whose annotation
    differs is one that HTA's µs rounding made zero-length (it then overlaps nothing)."""
    want = read(folder, "gpu_kernels_with_user_annotations.csv")
    got = analyzer(folder, False).get_gpu_kernels_with_user_annotations(rank=0)
    assert got is not None
    head = got.head(len(want)).reset_index(drop=True)
    same = ["index", "pid", "tid", "stream", "correlation", "external_id", "index_correlation", "s_name", "s_cat"]
    if folder != "amd_trace":  # HTA leaves AMD's stream-0 kernels without a step (docs/hta.md)
        same.append("iteration")
    bad = {c: int(unequal(head[c], want[c], c).sum()) for c in same}
    assert {c: n for c, n in bad.items() if n} == {}
    moved = unequal(head["s_user_annotation"], want["s_user_annotation"], "s_user_annotation")
    if folder not in NS_TRACES:
        assert not moved.any()
        assert not unequal(head["ts"], want["ts"], "ts").any()
    assert (pd.to_numeric(want.loc[moved, "dur"]) <= 0).all() and (head.loc[moved, "dur"] > 0).all()
    assert (head.loc[moved, "s_user_annotation"] != "").all()


@pytest.mark.parametrize("folder", FRAME_FOLDERS)
def test_t_matches_hta_trace(folder: str) -> None:
    """``TraceAnalysis.t`` with ``hta_compat``: HTA's ``Trace`` frame (by index) and its numbers."""
    m = json.loads((GOLDEN / folder / "trace_manifest.json").read_text())
    t = analyzer(folder, True).t
    r = m["ranks"][0]
    df = t.get_trace(r)
    got = {
        "ranks": t.get_ranks(),
        "min_ts": t.min_ts,
        "rows": len(df),
        "iterations": t.get_iterations(r),
        "duration": t.get_trace_duration(r),
        "device_type": t.get_device_type(),
    }
    assert got == {k: m[k] for k in got}
    want = read(folder, "trace_frame.csv")
    mine = df.set_index("index", drop=False).reindex(want["index"]).reset_index(drop=True)
    bad = {c: int(unequal(mine[c], want[c], c).sum()) for c in FRAME_COLUMNS}
    bad["s_name"] = int(unequal(mine["name"], want["s_name"], "s_name").sum())
    bad["s_cat"] = int(unequal(mine["cat"], want["s_cat"], "s_cat").sum())
    assert {c: n for c, n in bad.items() if n} == {}


def test_t_is_the_run_the_analyses_read() -> None:
    """One definition: ``t``'s frame holds the rows of the kernels table, with the same values;
    a launch and its kernel point at each other; unknown ranks raise."""
    from ranksight.errors import UsageError

    a = analyzer("ns_resolution_trace", False)
    frame = a.t.get_trace(0).set_index("index")
    k = a.get_gpu_kernels_with_user_annotations(rank=0).set_index("index")
    cols = ["ts", "dur", "stream", "correlation", "index_correlation", "iteration"]
    assert frame.loc[k.index, cols].equals(k[cols])
    launches = k["index_correlation"][k["index_correlation"] > 0]
    assert len(launches) > 4000
    assert (frame.loc[launches.to_numpy(), "index_correlation"].to_numpy() == launches.index.to_numpy()).all()
    hta = json.loads((GOLDEN / "ns_resolution_trace" / "trace_manifest.json").read_text())["iterations"]
    assert a.t.get_iterations() == a.get_profiler_steps() == hta
    raw = a.t.get_raw_trace_for_one_rank(0)
    assert len(raw["traceEvents"]) > len(frame)  # every event, unfiltered
    with pytest.raises(UsageError):
        a.t.get_trace(5)
    with pytest.raises(UsageError):
        a.get_gpu_kernels_with_user_annotations(rank=5)


def test_no_gpu_annotations_is_none() -> None:
    a = analyzer("trace_filter_sampled_ranks01", False)
    with pytest.warns(Warning, match="does not contain any GPU user annotations"):
        assert a.get_gpu_kernels_with_user_annotations(rank=1) is None


def test_expand_and_shorten_names() -> None:
    a = analyzer("history_with_gpu_user_annotation", False)
    full = a.get_gpu_kernels_with_user_annotations(0, expand_names=True, shorten_names=False)
    short = a.get_gpu_kernels_with_user_annotations(0)
    bare = a.get_gpu_kernels_with_user_annotations(0, expand_names=False)
    assert (full["s_name"] == full["name"]).all()
    assert (short["s_name"].str.len() < short["name"].str.len()).any()
    assert "s_name" not in bare.columns and list(bare["user_annotation"]) == list(short["user_annotation"])


# ---- overlay_critical_path_analysis -------------------------------------------------------------

#: HTA's critical-path cases (annotation, instance) as in tests/golden/test_hta_critical_path.py
OVERLAY_CASES = {
    "alexnet": ("[param|pytorch.model.alex_net|0|0|0|measure|forward]", 1),
    "simple_add": ("[param|pytorch.model.alex_net|0|0|0|measure|forward]", 1),
    "cuda_event_sync": ("ProfilerStep", 0),
    "cuda_event_sync_multi_stream": ("", None),
}


def _overlaid(path: str) -> list[dict]:
    import gzip

    with gzip.open(path, "rt") as f:
        return json.load(f)["traceEvents"]


@pytest.mark.parametrize("name", list(OVERLAY_CASES))
@pytest.mark.parametrize("only", [True, False])
def test_overlay_critical_path_equals_hta(name: str, only: bool, tmp_path: Path) -> None:
    """The overlaid trace HTA v0.6 writes (``overlay_manifest.json``, made with traceinsight
    0.6.1): the same file name, events, critical events (by position), flow arrows and their edge
    types; the input is not touched."""
    from collections import Counter

    m = json.loads((GOLDEN / f"critical_path_{name}" / "overlay_manifest.json").read_text())
    ann, inst = OVERLAY_CASES[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = TraceAnalysis(trace_dir=str(DATA / "hta/critical_path" / name), hta_compat=True)
    rank = a.t.get_ranks()[0]
    before = Path(a.t.trace_files[rank]).read_bytes()
    res = a.critical_path_analysis(rank=rank, annotation=ann, instance_id=inst)
    assert res is not None and res[1]
    out = a.overlay_critical_path_analysis(rank, res[0], str(tmp_path / "out"), only_show_critical_events=only)
    ev = _overlaid(out)
    crit = [i for i, e in enumerate(ev) if e.get("args", {}).get("critical") == 1 and e.get("cat") != "critical_path"]
    flows = [e for e in ev if e.get("cat") == "critical_path"]
    got = {
        "file": Path(out).name,
        "events": len(ev),
        "critical": len(crit),
        "flow_pairs": len(flows) // 2,
        "flow_types": dict(Counter(e["args"]["type"] for e in flows if e["ph"] == "s")),
        "x_events": sum(1 for e in ev if e.get("ph") == "X"),
    }
    assert got == m[f"only_show_critical_events={only}"]
    if not only:
        assert crit == m["critical_rows"]
    starts = {e["id"]: e for e in flows if e["ph"] == "s"}
    assert all(e["ph"] == "f" and e["bp"] == "e" and e["ts"] >= starts[e["id"]]["ts"] for e in flows if e["ph"] != "s")
    assert Path(a.t.trace_files[rank]).read_bytes() == before


# ---- the whole API --------------------------------------------------------------------------

#: Where a default differs from HTA's, and why (docs/hta.md)
DEFAULT_DEPARTURES = {
    # HTA's default folder is /tmp/trace; the facade asks for trace_dir or trace_files
    ("__init__", "trace_dir"),
    # HTA's default is its own function over its DataFrame and symbol table; None is HTA's method
    ("get_potential_stragglers", "straggler_identification_impl"),
}


def test_every_hta_method_with_its_parameters() -> None:
    """Every public method of HTA v0.6's TraceAnalysis exists in the facade with HTA's parameter
    names in HTA's order and HTA's defaults (``trace_analysis_api.json``, read from HTA by
    ``inspect.signature``); the facade may add keyword-only parameters (``hta_compat``)."""
    import inspect

    api = json.loads((GOLDEN / "trace_analysis_api.json").read_text())
    missing = [m for m in api["methods"] if not hasattr(TraceAnalysis, m)]
    assert missing == []
    for name in api["attributes"]:
        assert isinstance(inspect.getattr_static(TraceAnalysis, name), property), name
    for m, params in api["methods"].items():
        sig = inspect.signature(getattr(TraceAnalysis, m))
        mine = [p for p in sig.parameters.values() if p.name != "self" and p.kind != p.KEYWORD_ONLY]
        assert [p.name for p in mine] == [n for n, _ in params], m
        for p, (n, default) in zip(mine, params, strict=True):
            if (m, n) in DEFAULT_DEPARTURES:
                continue
            got = None if p.default is inspect.Parameter.empty else repr(p.default)
            assert got == default, (m, n, got, default)
