"""The report of more than 32 ranks: distributions across ranks, the outlier rank named, rank ×
step heatmaps, every rank's data in the page, a bounded size, the compressed payload.

The run (``many_ranks.py``): 40 ranks, rank 13 slow by known amounts, so its wait caused is known
exactly and it is the one outlier of that headline.
"""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest
from tests.report.many_ranks import wait_caused_us
from tests.report.test_report_payload import _validator, string_refs_ok

from ranksight.report.html import ranks as rkmod
from ranksight.report.html import read_payload, render_html
from ranksight.report.html.payload import encode_table
from ranksight.report.html.sections import Ctx

N, SLOW = 40, 13


def _section(doc, slug):
    return next(s for s in doc["sections"] if s["slug"] == slug)


def _block(doc, block_id):
    return next(b for s in doc["sections"] for b in s["blocks"] if b["id"] == block_id)


def _rows(doc, b):
    """A table block's rows as dicts (string columns resolved)."""
    S = doc["strings"]
    names = [c["name"] for c in b["columns"]]
    kinds = [c["kind"] for c in b["columns"]]
    return [
        {n: (S[v] if k == "str" and v is not None else v) for n, k, v in zip(names, kinds, row)}
        for row in zip(*b["data"])
    ]


# ---- the statistics ------------------------------------------------------------------------------


def test_nearest_rank_percentiles_are_values_of_ranks():
    s = np.arange(1.0, 101.0)  # 1..100
    assert [rkmod.nearest_rank(s, p) for p in (50, 90, 99, 100)] == [50.0, 90.0, 99.0, 100.0]
    s = np.array([3.0, 7.0, 9.0])
    assert [rkmod.nearest_rank(s, p) for p in (0, 50, 90)] == [3.0, 7.0, 9.0]


def test_robust_z_and_outliers():
    v = np.array([10.0, 11.0, 9.0, 10.0, 12.0, 8.0, 10.0, 40.0])
    z = rkmod.robust_z(v)
    med, mad = 10.0, 1.0
    assert z[-1] == pytest.approx((40.0 - med) / (1.4826 * mad))
    sp = rkmod.spread(list(range(8)), v.tolist())
    assert sp is not None and [lab for lab, _ in sp.outliers] == [7]
    assert (sp.min, sp.min_label, sp.max, sp.max_label) == (8.0, 5, 40.0, 7)
    # more than half the ranks at the median (MAD = 0): the mean absolute deviation scales instead
    v = np.array([5.0] * 9 + [6.0])
    z = rkmod.robust_z(v)
    assert z[-1] == pytest.approx(1.0 / (1.2533 * 0.1)) and z[0] == 0.0
    assert not rkmod.robust_z(np.array([2.0, 2.0, 2.0])).any()
    # nulls and NaN are left out; nothing left: no spread
    assert rkmod.spread([0, 1], [None, float("nan")]) is None


def test_focus_ranks_worst_first():
    per_rank = pl.DataFrame(
        {
            "rank": list(range(10)),
            "step_ms": [10.0] * 8 + [30.0, 10.5],  # rank 8 much slower
            "gpu_busy_pct": [90.0] * 9 + [20.0],  # rank 9 much idler
            "kernels": [100] * 10,
        }
    )
    f = rkmod.focus_of(per_rank, range(10))
    assert f.worst[:2] == [9, 8] or f.worst[:2] == [8, 9]
    assert set(f.outliers) == {8, 9}
    assert f.ranks[: len(f.worst)] == f.worst and len(f.ranks) <= rkmod.MAX_FOCUS


def test_rank_ranges():
    assert rkmod.rank_ranges([5, 0, 1, 2, 9, 7, 8]) == "0–2,5,7–9"


def test_pack_round_trip():
    doc = {"a": [1, 2.5, None], "s": "</script>"}
    packed = rkmod.pack_json(json.dumps(doc))
    assert packed["packed"] == "gzip-base64" and rkmod.unpack_json(packed) == doc
    assert rkmod.unpack_json({"x": 1}) == {"x": 1}


def test_few_ranks_keep_one_bar_per_rank(demo_run):
    """Up to 32 ranks ``rank_bar`` is the bar chart of before, and tables are encoded at once."""
    ctx = Ctx(demo_run)
    assert not ctx.many
    got = ctx.rank_bar([0, 1], {"a": [1.0, 2.0]}, id="x", title="T", unit="ms")
    assert got == [Ctx(demo_run).bar(["rank 0", "rank 1"], {"a": [1.0, 2.0]}, id="x", title="T", unit="ms")]
    t = ctx.table(pl.DataFrame({"rank": [0, 1], "v": [1, 2]}), id="t", title="T")
    assert t["rows"] == 2 and not ctx.deferred


# ---- the report of 40 ranks ----------------------------------------------------------------------


def test_across_ranks_section_names_the_slow_rank(many_doc):
    doc = many_doc
    assert doc["ranks"] == list(range(N)) and not doc["failures"]
    sec = _section(doc, "ranks")
    assert sec["shown"] and sec["group"] == "Run"
    spread = {r["metric"]: r for r in _rows(doc, _block(doc, "ranks-spread"))}
    w = spread["wait_caused_ms"]
    assert w["max_rank"] == str(SLOW) and w["max"] == pytest.approx(wait_caused_us() / 1e3, abs=1e-4)
    assert w["outliers"] == 1 and w["outlier_ranks"].startswith(f"{SLOW} (z +")
    assert w["p50"] == 0.0 and w["ranks"] == N
    assert spread["times_last"]["max_rank"] == str(SLOW) and spread["times_last"]["max"] == 3
    detail = _block(doc, "ranks-detail")
    assert detail["type"] == "rankdetail" and detail["ranks"] == list(range(N))
    assert detail["worst"][0] == SLOW and SLOW in detail["outliers"] and SLOW in detail["focus"]
    names = [doc["strings"][m["name"]] for m in detail["metrics"]]
    wc = detail["metrics"][names.index("wait_caused_ms")]
    assert wc["values"][SLOW] == pytest.approx(wait_caused_us() / 1e3, abs=1e-4)
    assert wc["z"][SLOW] > rkmod.OUTLIER_Z and all(z == 0 for r, z in enumerate(wc["z"]) if r != SLOW)


def test_rank_by_step_heatmaps(many_doc):
    doc = many_doc
    hm = _block(doc, "ranks-heat-temporal-step_time_us")
    assert hm["chart"] == "heatmap" and hm["canvas"] and hm["row_ranks"] == list(range(N))
    assert [doc["strings"][c] for c in hm["cols"]] == ["step 1", "step 2", "step 3"]
    assert len(hm["values"]) == N and all(len(r) == 3 for r in hm["values"])
    # the collective-wait heatmap of the stragglers section: the slow rank waits least in every step
    w = _block(doc, "stragglers-heatmap")
    assert w["canvas"] and w["row_ranks"] == list(range(N))
    slow_row = w["values"][SLOW]
    assert all(slow_row[j] <= min(r[j] for r in w["values"]) for j in range(len(slow_row)))


def test_per_rank_charts_become_distributions(many_doc):
    doc = many_doc
    chart = _block(doc, "stragglers-chart")
    assert chart["chart"] == "rankbars" and chart["ranks"] == list(range(N))
    assert chart["series"][0]["values"][SLOW] == pytest.approx(wait_caused_us() / 1e3, abs=1e-4)
    rows = _rows(doc, _block(doc, "stragglers-chart-spread"))
    assert rows[0]["max_rank"] == str(SLOW) and rows[0]["outlier_ranks"].startswith(f"{SLOW} ")
    # no chart of the report has a bar or a series per rank
    for s in doc["sections"]:
        for b in s["blocks"]:
            if b["type"] == "chart" and b["chart"] == "bar":
                assert len(b["categories"]) <= 32 and len(b["series"]) <= 32, b["id"]


def test_every_rank_in_the_page_and_schema(many_doc, many_html):
    """Every per-rank table holds all 40 ranks (the budget is far away); the packed or plain page
    reads back to the same payload, which validates against the schema."""
    doc = many_doc
    tables = [
        b
        for s in doc["sections"]
        for b in s["blocks"]
        if b["type"] == "table" and any(c["name"] == "rank" and c["kind"] == "int" for c in b["columns"])
    ]
    assert len(tables) >= 20
    for b in tables:
        assert "rank_subset" not in b, b["id"]
    for bid in ("temporal-table", "ranks-headlines", "stragglers-ranks", "overview-files"):
        rows = _rows(doc, _block(doc, bid))
        assert sorted({r["rank"] for r in rows}) == list(range(N)), bid
    back = read_payload(many_html)
    assert back == json.loads(json.dumps(doc))
    _validator("report-schema.json").validate(back)
    string_refs_ok(back)


def test_tables_over_budget_keep_the_focus_ranks(many_session, monkeypatch):
    """With a budget too small for every rank's rows, tables keep the focus ranks' rows (the slow
    rank among them) and say so; the page is compressed and reads back."""
    from ranksight.report.html import build_payload

    monkeypatch.setattr(rkmod, "TABLE_BUDGET_BYTES", 2_000)
    monkeypatch.setattr(rkmod, "PACK_MIN_BYTES", 0)
    doc = build_payload(many_session)
    subset = [b for s in doc["sections"] for b in s["blocks"] if b["type"] == "table" and "rank_subset" in b]
    assert subset
    focus = _block(doc, "ranks-detail")["focus"]
    for b in subset:
        kept = b["rank_subset"]["ranks"]
        assert set(kept) <= set(focus) and b["rank_subset"]["of"] >= len(kept) and b["total_rows"] >= b["rows"]
        rank_col = [c["name"] for c in b["columns"]].index("rank")
        assert set(b["data"][rank_col]) <= set(focus) | {None}
    big = _block(doc, "collectives-collectives")  # 40 ranks × 3 collectives: over a 2 kB budget
    assert SLOW in big["rank_subset"]["ranks"]
    html = render_html(doc)
    assert '"packed":"gzip-base64"' in html
    back = read_payload(html)
    assert back["sections"] == json.loads(json.dumps(doc["sections"]))


def test_size_bounded_at_4096_ranks(many_session):
    """Per-rank tables of 4,096 ranks: every rank's rows embedded while the (estimated, compressed)
    budget lasts, the focus ranks' rows beyond, so the page stays bounded however many ranks."""
    ctx = Ctx(many_session)
    assert ctx.many
    focus = ctx.focus().ranks
    rng = np.random.default_rng(0)
    n_ranks, per_rank = 4096, 4
    blocks = []
    for t in range(8):
        rows = n_ranks * per_rank * (1 + t % 3)
        df = pl.DataFrame(
            {
                "rank": np.repeat(np.arange(n_ranks), rows // n_ranks),
                "name": [f"kernel_{i % 50}" for i in range(rows)],
                **{f"v{k}_us": rng.lognormal(3, 1, rows) for k in range(5)},
            }
        )
        blocks.append(ctx.table(df, id=f"t{t}", title=f"table {t}", sort=("v0_us", True)))
    assert all("data" not in b for b in blocks)  # deferred until the budget is shared out
    ctx.finish_tables()
    full = [b for b in blocks if "rank_subset" not in b]
    cut = [b for b in blocks if "rank_subset" in b]
    assert full and cut
    for b in full:
        assert len(set(b["data"][0])) == n_ranks
    for b in cut:
        assert set(b["data"][0]) == set(focus) and b["rank_subset"]["of"] == n_ranks
    packed = rkmod.compressed_size([[b["data"] for b in blocks], ctx.strings.strings])
    assert packed < 1.25 * rkmod.TABLE_BUDGET_BYTES, packed
    # the smallest tables per rank come first: a cut table is never smaller per rank than a full one
    assert max(b["rows"] for b in full) <= min(b["total_rows"] for b in cut)


def test_raw_size_bounded_when_rows_compress_well(many_session, monkeypatch):
    """Rows that compress to little (ranks that repeat each other) are held to a budget of JSON
    before compression too: that is what the browser parses when the page opens."""
    monkeypatch.setattr(rkmod, "TABLE_BUDGET_RAW_BYTES", 300_000)
    ctx = Ctx(many_session)
    n_ranks = 4096
    df = pl.DataFrame({"rank": np.repeat(np.arange(n_ranks), 4), "kernel": ["gemm", "relu", "copy", "nccl"] * n_ranks})
    same = df.with_columns(pl.lit(1234.5678).alias("sum_us"), pl.lit(77).alias("calls"))
    blocks = [ctx.table(same.head(n_ranks), id="small", title="small"), ctx.table(same, id="big", title="big")]
    ctx.finish_tables()
    assert "rank_subset" not in blocks[0] and len(set(blocks[0]["data"][0])) == n_ranks // 4
    assert blocks[1]["rank_subset"]["of"] == n_ranks and set(blocks[1]["data"][0]) == set(ctx.focus().ranks)
    full_raw = rkmod.json_sizes(encode_table(same, ctx.strings, id="x", title="")["data"])
    assert full_raw[0] < rkmod.TABLE_BUDGET_BYTES and full_raw[1] > 300_000  # cut for its raw size only


def test_no_section_of_few_ranks_is_listed_for_many(demo_doc):
    """The "Across ranks" section is left out (not listed as not shown) for 8 ranks."""
    assert all(s["slug"] != "ranks" for s in demo_doc["sections"])


def test_all_to_all_heatmap_merges_rank_ranges():
    """Beyond 128 ranks the source × destination heatmap sums bytes over equal ranges of ranks."""
    from ranksight.report.html.sections_dist import MAX_PAIR_AXIS, _pair_matrix

    n = 300
    tot = pl.DataFrame({"src": list(range(n)), "dst": [(r + 1) % n for r in range(n)], "bytes": [2**20] * n})
    rows, cols, values = _pair_matrix(tot, list(range(n)))
    per = -(-n // MAX_PAIR_AXIS)
    assert len(rows) == len(cols) == len(values) == -(-n // per) and rows[0] == "ranks 0–2" and cols[-1] == "297–299"
    assert sum(v for row in values for v in row if v is not None) == pytest.approx(n)
    assert values[0][0] == pytest.approx(per - 1) and values[0][1] == pytest.approx(1)  # 0→1, 1→2 inside; 2→3 out
    assert values[-1][0] == pytest.approx(1)  # 299 → 0
    few = _pair_matrix(tot.head(3).with_columns(pl.col("dst").clip(0, 2)), [0, 1, 2])
    assert few[0] == ["rank 0", "rank 1", "rank 2"] and few[2][0] == [None, 1.0, None]


def test_long_rank_lists_in_reasons_become_ranges():
    from ranksight.report.html.build import _short_rank_lists

    text = f"`launches`: rank(s) {list(range(4096))} have no launch; sizes [1, 2]"
    assert _short_rank_lists(text) == "`launches`: rank(s) [0–4095] have no launch; sizes [1, 2]"
    assert _short_rank_lists(str(list(range(32)))) == str(list(range(32)))  # 32 or fewer: as they are


# ---- operator-level detail for the focus ranks ---------------------------------------------------


def _detail_ctx(many_session, monkeypatch, detail_ranks=None):
    """A context over a fresh session (no result computed yet) whose run counts as more than
    DETAIL_RANKS_MAX ranks, with the `ops` section built."""
    from ranksight.analyses import Session
    from ranksight.report.html.build import _run_section, load_sections

    monkeypatch.setattr(rkmod, "DETAIL_RANKS_MAX", 8)
    ctx = Ctx(Session(many_session.run), detail_ranks=detail_ranks)
    sec = next(s for s in load_sections() if s.slug == "ops")
    out = _run_section(sec, ctx)
    ctx.finish_tables()
    return ctx, out


def _ops_keys(ctx):
    return [k[1] for k in ctx.session._store.results if k[0] == "ops"]


def test_operator_detail_runs_on_the_focus_ranks_beyond_the_limit(many_session, monkeypatch):
    ctx, out = _detail_ctx(many_session, monkeypatch)
    focus = sorted(ctx.focus().ranks)
    assert SLOW in focus and len(focus) < N
    assert ctx.detail_subset() == focus
    assert _ops_keys(ctx) == [tuple(focus)]  # `ops` never ran on the 40 ranks
    assert out["shown"]
    (table,) = [b for b in out["blocks"] if b["type"] == "table"]
    assert table["rank_subset"] == {"ranks": focus, "of": N, "reason": "detail"}
    rank_col = [c["name"] for c in table["columns"]].index("rank")
    assert set(table["data"][rank_col]) == set(focus)
    notes = [ctx.strings.strings[n] for n in out["notes"]]  # interned
    assert any(n.startswith(f"operator-level detail for {len(focus)} of {N} ranks") for n in notes)
    # what is not operator-level detail still covers every rank
    assert ctx.detail_subset() is not None and ctx.result("temporal")["temporal"]["rank"].n_unique() == N


def test_detail_ranks_asked_for_are_added_and_all_means_every_rank(many_session, monkeypatch):
    ctx, _ = _detail_ctx(many_session, monkeypatch, detail_ranks=[0, 39])
    assert ctx.detail_subset() == sorted(set(ctx.focus().ranks) | {0, 39})
    ctx, out = _detail_ctx(many_session, monkeypatch, detail_ranks="all")
    assert ctx.detail_subset() is None and _ops_keys(ctx) == [None]
    (table,) = [b for b in out["blocks"] if b["type"] == "table"]
    assert "rank_subset" not in table  # 40 ranks' rows fit the budget
    assert not any(ctx.strings.strings[n].startswith("operator-level detail") for n in out["notes"])


def test_detail_ranks_must_be_ranks_of_the_run(many_session):
    from ranksight.errors import UsageError
    from ranksight.report.html import build_payload

    with pytest.raises(UsageError, match=r"detail ranks \[40, 99\] are not ranks of this run"):
        build_payload(many_session, detail_ranks=[3, 40, 99])
    with pytest.raises(UsageError, match="'all' or a list of ranks"):
        build_payload(many_session, detail_ranks="some")


def test_detail_ranks_option_parses_ranks_and_ranges():
    import argparse

    from ranksight.cli.report import _detail_ranks

    assert _detail_ranks("all") == "all"
    assert _detail_ranks("5, 17,40-43,5") == [5, 17, 40, 41, 42, 43]
    with pytest.raises(argparse.ArgumentTypeError):
        _detail_ranks("5,x")


def test_critical_path_own_paths_for_the_focus_ranks_job_path_for_every_rank(many_session, monkeypatch):
    """critical-path's per-rank paths (HTA's model) are operator-level detail; its job-wide path
    joins every rank, and its tables are not marked."""
    from ranksight.analyses import Session
    from ranksight.report.html.build import _run_section, _sections_to_run

    monkeypatch.setattr(rkmod, "DETAIL_RANKS_MAX", 8)
    ctx = Ctx(Session(many_session.run))
    focus = sorted(ctx.focus().ranks)
    sec = next(s for s in _sections_to_run() if s.slug == "more-critical-path")
    out = _run_section(sec, ctx)
    ctx.finish_tables()
    assert out["shown"], out["reason"]
    res = ctx.session.result("critical-path", path_ranks=focus)
    assert sorted(res["summary"]["rank"].unique().to_list()) == focus
    assert sorted(res["job_by_rank"]["rank"].unique().to_list()) == sorted(
        many_session.result("critical-path")["job_by_rank"]["rank"].unique().to_list()
    )
    blocks = {b["title"]: b for b in out["blocks"]}
    for t in ("summary", "by_type", "by_operator", "breakdown"):
        b = blocks[t]
        assert b["rank_subset"]["reason"] == "detail" and b["rank_subset"]["ranks"] == focus, t
        assert set(b["data"][[c["name"] for c in b["columns"]].index("rank")]) == set(focus), t
    # the section asked for the focus ranks' own paths only
    asked = [dict(k[2]) for k in ctx.session._store.results if k[0] == "critical-path"]
    assert asked[0] == {"path_ranks": tuple(focus)}
    for t in ("job_by_rank", "job_segments"):
        assert "rank_subset" not in blocks[t], t
    # the per-rank paths computed equal those of the run over every rank, rank by rank
    full = many_session.result("critical-path")["summary"].filter(pl.col("rank").is_in(focus))
    assert res["summary"].sort("rank", "bound_by").equals(full.sort("rank", "bound_by"))
