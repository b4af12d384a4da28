"""Golden: the per-rank critical path equals HTA v0.6's on the four ``critical_path_*`` oracles.

``critical_path_breakdown.csv`` (HTA's ``get_critical_path_breakdown()``, sorted by
``event_idx, type, duration`` because HTA builds it from a set) and ``critical_path_summary.csv``
(``summary()``: % of the path's duration by ``bound_by``); the windows are the oracles' calls
(``manifest.json``). ``event_idx`` is HTA's index, the event's position in ``traceEvents``: the
trace row.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import polars as pl
import pytest

import ranksight as rs
from ranksight.analyses.critical_path import rank_breakdown
from ranksight.views.names import hta_short_name

ORACLES = Path(__file__).resolve().parents[3] / "shared" / "oracles" / "hta-0.6"
DATA = Path(__file__).resolve().parents[1] / "data" / "hta" / "critical_path"
CASES = {
    "alexnet": ("[param|pytorch.model.alex_net|0|0|0|measure|forward]", 1),
    "simple_add": ("[param|pytorch.model.alex_net|0|0|0|measure|forward]", 1),
    "cuda_event_sync": ("ProfilerStep", 0),
    "cuda_event_sync_multi_stream": ("", None),
}

pytestmark = pytest.mark.skipif(
    not ORACLES.is_dir(), reason=f"HTA oracles not found at {ORACLES} (../shared is absent): golden tests skipped"
)


def _ours(name: str) -> pl.DataFrame:
    ann, inst = CASES[name]
    trace = rs.load(DATA / name)[0]
    bd, _ = rank_breakdown(trace, annotation=ann, instance_id=inst, hta_compat=True)
    return bd


@pytest.mark.parametrize("name", sorted(CASES))
def test_call_matches_the_oracle_manifest(name: str) -> None:
    call = json.loads((ORACLES / f"critical_path_{name}" / "manifest.json").read_text())["analyses"]["critical_path"][
        "call"
    ]
    ann, inst = CASES[name]
    assert f"annotation={ann!r}" in call and f"instance_id={inst}" in call


@pytest.mark.parametrize("name", sorted(CASES))
def test_breakdown_equals_hta(name: str) -> None:
    bd = _ours(name)
    o = pd.read_csv(ORACLES / f"critical_path_{name}" / "critical_path_breakdown.csv")
    want = pl.from_pandas(
        o[["event_idx", "duration", "type", "s_name", "pid", "tid", "stream", "bound_by"]]
    ).with_columns(
        pl.col("event_idx").fill_nan(None).cast(pl.Int64),
        pl.col("duration").cast(pl.Int64),
        pl.col("s_name").cast(pl.String),
        pl.col("pid").fill_nan(None).cast(pl.Int64),
        pl.col("tid").fill_nan(None).cast(pl.Int64),
        pl.col("stream").fill_nan(None).cast(pl.Int64),
        pl.col("bound_by").fill_null(""),
    )
    got = bd.select(
        pl.col("event_row").alias("event_idx"),
        pl.col("weight_us").cast(pl.Int64).alias("duration"),
        "type",
        pl.col("name")
        .map_elements(lambda n: hta_short_name(n, is_memory=n.startswith(("Memcpy", "Memset"))), return_dtype=pl.String)
        .alias("s_name"),
        pl.when(pl.col("event_row").is_not_null()).then(pl.col("pid")).alias("pid"),
        pl.when(pl.col("event_row").is_not_null()).then(pl.col("tid")).alias("tid"),
        pl.when(pl.col("event_row").is_not_null()).then(pl.col("stream")).alias("stream"),
        "bound_by",
    )
    key = ["event_idx", "type", "duration"]
    assert got.height == want.height
    assert got.sort(key, nulls_last=True).equals(want.sort(key, nulls_last=True))


@pytest.mark.parametrize("name", sorted(CASES))
def test_summary_equals_hta(name: str) -> None:
    bd = _ours(name)
    got = (
        bd.group_by("bound_by")
        .agg(pl.col("weight_us").sum())
        .with_columns((100 * pl.col("weight_us") / pl.col("weight_us").sum()).alias("pct"))
    )
    o = pd.read_csv(ORACLES / f"critical_path_{name}" / "critical_path_summary.csv").fillna({"bound_by": ""})
    want = dict(zip(o["bound_by"], o["pct_of_critical_path"], strict=True))
    assert dict(zip(got["bound_by"].to_list(), got["pct"].to_list(), strict=True)) == pytest.approx(want, rel=1e-12)


# ---- the HTA facade: TraceAnalysis.critical_path_analysis ------------------------------------


def _facade(name: str, **kw: Any) -> Any:
    from ranksight.hta import TraceAnalysis

    ann, inst = CASES[name]
    analyzer = TraceAnalysis(trace_dir=str(DATA / name), **kw)
    rank = analyzer._session().ranks[0]
    res = analyzer.critical_path_analysis(rank=rank, annotation=ann, instance_id=inst)
    assert res is not None
    return res


@pytest.mark.parametrize("name", sorted(CASES))
def test_facade_equals_hta(name: str) -> None:
    cp, ok = _facade(name, hta_compat=True)
    assert ok
    got = cp.get_critical_path_breakdown()
    want = pd.read_csv(ORACLES / f"critical_path_{name}" / "critical_path_breakdown.csv")
    cols = ["event_idx", "duration", "type", "s_name", "pid", "tid", "stream", "index", "bound_by"]
    assert list(got.columns) == [*cols[:4], "cat", *cols[4:]]
    key = ["event_idx", "type", "duration"]
    g = got[cols].sort_values(key).reset_index(drop=True)
    w = want[cols].sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(
        g.fillna({"s_name": "", "bound_by": ""}).astype({"duration": float}),
        w.fillna({"s_name": "", "bound_by": ""}).astype({"duration": float}),
        check_dtype=False,
    )
    summary = cp.summary()
    o = pd.read_csv(ORACLES / f"critical_path_{name}" / "critical_path_summary.csv").fillna({"bound_by": ""})
    assert dict(summary) == pytest.approx(dict(zip(o["bound_by"], o["pct_of_critical_path"], strict=True)), rel=1e-12)


def test_facade_without_the_annotation_returns_none() -> None:
    from ranksight.errors import RanksightWarning
    from ranksight.hta import TraceAnalysis

    analyzer = TraceAnalysis(trace_dir=str(DATA / "simple_add"))
    rank = analyzer._session().ranks[0]
    with pytest.warns(RanksightWarning, match="could not find annotation"):
        assert analyzer.critical_path_analysis(rank, "no such annotation", 0) is None
    # the fixed model by default: a path, and ranksight's own table beside HTA's
    res = analyzer.critical_path_analysis(rank, "", None)
    assert res is not None
    cp, ok = res
    assert ok and cp.breakdown["weight_us"].sum() == pytest.approx(cp.get_critical_path_breakdown()["duration"].sum())
