"""The report's payload: string table, columnar tables, escaping, chart helpers, schema."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ranksight
from ranksight.report.html import build_payload, read_payload, render_html
from ranksight.report.html.build import GENERIC_EXCLUDED, covered_analyses, load_sections
from ranksight.report.html.payload import StringTable, encode_table, script_json
from ranksight.report.html.render import csp_for, script_text
from ranksight.report.html.sections import Ctx, Skip, downsample, histogram

ROOT = Path(__file__).resolve().parents[2]
EVIL = "</script><script>alert(1)</script><b>x</b> & \"q\" 'q' \u2028"


def _validator(name: str):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "docs" / name).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def string_refs_ok(doc: dict) -> None:
    """Every string index in the payload points into the string table."""
    n = len(doc["strings"])

    def ok(i):
        assert i is None or (isinstance(i, int) and 0 <= i < n), i

    ok(doc["title"])
    for i in doc["inputs"]:
        ok(i)
    for s in doc["sections"]:
        for i in s["notes"]:
            ok(i)
        for b in s["blocks"]:
            if b["type"] == "table":
                for c, col in zip(b["columns"], b["data"]):
                    assert len(col) == b["rows"]
                    if c["kind"] == "str":
                        for i in col:
                            ok(i)
            elif b["type"] == "chart":
                for k in ("categories", "rows", "cols"):
                    for i in b.get(k, []):
                        ok(i)
                for ser in b.get("series", []):
                    ok(ser["name"])
            elif b["type"] == "kv":
                for it in b["items"]:
                    ok(it.get("text"))
            elif b["type"] == "text":
                ok(b["text"])
            elif b["type"] == "findings":
                for f in b["items"]:
                    ok(f["title"])
                    ok(f.get("detail"))


def test_string_table_interns_once():
    st = StringTable()
    assert [st("a"), st("b"), st("a"), st(None), st(3)] == [0, 1, 0, None, 2]
    assert st.strings == ["a", "b", "3"]


def test_encode_table_columnar_exact():
    st = StringTable()
    df = pl.DataFrame({"name": ["k1", "k2", "k1"], "n": [1, 2, None], "t": [1.23456789, float("nan"), 2.0]})
    b = encode_table(df, st, id="t", title="T", sort=("t", True), units={"t": "µs"})
    assert b["columns"] == [
        {"name": "name", "kind": "str"},
        {"name": "n", "kind": "int"},
        {"name": "t", "kind": "float", "unit": "µs"},
    ]
    assert b["data"] == [[0, 1, 0], [1, 2, None], [1.23456789, None, 2.0]]  # full precision
    assert b["rows"] == 3 and b["sort"] == {"column": "t", "descending": True}
    assert st.strings == ["k1", "k2"]


def test_script_json_cannot_close_the_script():
    text = script_json({"s": [EVIL, "<!--", "a&b"]})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"s": [EVIL, "<!--", "a&b"]}


def test_csp_pins_the_script_and_blocks_network():
    js = script_text()
    csp = csp_for(js)
    assert (
        "default-src 'none'" in csp
        and "connect-src 'none'" in csp
        and "'unsafe-inline'" not in csp.split("script-src")[1].split(";")[0]
    )
    assert "</script" not in js.lower()


def test_downsample_keeps_extremes():
    x = np.arange(10_000, dtype=float)
    y = np.sin(x / 100.0)
    y[1234] = 50.0
    y[8765] = -50.0
    xs, ys = downsample(x, y, 200)
    assert len(xs) <= 200 and np.all(np.diff(xs) > 0)
    assert 50.0 in ys and -50.0 in ys
    same = downsample(x[:10], y[:10], 200)
    assert len(same[0]) == 10


def test_histogram_shared_edges_and_log():
    edges, counts, log = histogram({"a": np.array([1.0, 10.0, 100.0, 1000.0]), "b": np.array([5.0])}, 3, True)
    assert log and np.allclose(edges, [1, 10, 100, 1000])
    assert counts["a"].tolist() == [1, 1, 2] and counts["b"].tolist() == [1, 0, 0]
    edges, counts, log = histogram({"a": np.array([0.0, 1.0, 2.0])}, 2, True)
    assert not log and edges.tolist() == [0.0, 1.0, 2.0] and counts["a"].tolist() == [1, 2]
    with pytest.raises(Skip):
        histogram({"a": np.array([])}, 4, True)


def test_ctx_skips_unknown_analysis(demo_run):
    ctx = Ctx(demo_run)
    with pytest.raises(Skip, match="not available"):
        ctx.result("no-such-analysis")


def test_sections_declared_once_with_known_groups():
    secs = load_sections()
    slugs = [s.slug for s in secs]
    assert len(slugs) == len(set(slugs))
    assert all(re.fullmatch(r"[a-z0-9][a-z0-9-]*", s) for s in slugs)
    assert {"overview", "gpu-busy", "top-kernels"} <= set(slugs)


def test_every_registered_analysis_appears(demo_doc):
    """Each registered analysis has a declared section or a generic one (diff needs two runs)."""
    from ranksight.analyses import names

    doc = demo_doc
    needs = {n for s in doc["sections"] for n in s["needs"]}
    assert set(names()) - GENERIC_EXCLUDED <= needs
    assert covered_analyses() <= {n for s in load_sections() for n in s.needs}


def test_golden_example_payload_validates(demo_html):
    """Golden: the JSON embedded in the example's report validates against docs/report-schema.json."""
    doc = read_payload(demo_html)
    _validator("report-schema.json").validate(doc)
    string_refs_ok(doc)
    assert doc["schema"] == "ranksight-report" and doc["version"] == 1
    assert doc["ranks"] == list(range(8))
    shown = {s["slug"] for s in doc["sections"] if s["shown"]}
    assert {"overview", "gpu-busy", "top-kernels"} <= shown
    assert not doc["failures"], doc["failures"]
    for s in doc["sections"]:
        assert s["shown"] or s["reason"], s["slug"]


def test_example_report_under_5mb(demo_html):
    assert len(demo_html.encode()) < 5 * 1024 * 1024


def test_html_is_self_contained(demo_html):
    # no external resource of any kind: no src/href to another origin, no imports, no fetch
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", demo_html)
    assert "@import" not in demo_html and "fetch(" not in demo_html and "XMLHttpRequest" not in demo_html
    assert demo_html.count("<script") == 2


def test_malicious_names_are_escaped(data):
    run = ranksight.load(data("malicious"))
    doc = build_payload(run, title=EVIL)
    html = render_html(doc)
    # the only <script> tags are the report's own two, and the names survive intact in the payload
    assert html.lower().count("<script") == 2 and html.lower().count("</script") == 2
    assert "<b>x</b>" not in html and "<img" not in html and "<svg onload" not in html
    back = read_payload(html)
    assert back == json.loads(json.dumps(doc))
    assert EVIL in back["strings"]
    assert "</script><script>window.__pwned=1</script>" in back["strings"]
    # the title in <title> and <h1> is HTML-escaped by the template
    assert "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in html
    _validator("report-schema.json").validate(back)
    string_refs_ok(back)


def test_cpu_only_trace_says_why(data):
    run = ranksight.load(data("generated/cpu-ddp-gloo-4ranks"))
    doc = build_payload(run)
    by = {s["slug"]: s for s in doc["sections"]}
    assert by["overview"]["shown"]
    assert not by["gpu-busy"]["shown"] and "GPU" in by["gpu-busy"]["reason"]
    _validator("report-schema.json").validate(doc)


def test_long_tables_are_capped(demo_run):
    ctx = Ctx(demo_run)
    df = pl.DataFrame({"x": list(range(10)), "name": [f"n{i}" for i in range(10)]})
    b = ctx.table(df, id="t", title="T", max_rows=3, sort=("x", True))
    assert b["rows"] == 3 and b["total_rows"] == 10 and b["data"][0] == [9, 8, 7]
    assert "total_rows" not in ctx.table(df, id="u", title="U")


def test_wide_heatmaps_are_bucketed(demo_run, monkeypatch):
    import ranksight.report.html.sections as secs

    monkeypatch.setattr(secs, "MAX_HEATMAP_COLS", 2)
    ctx = Ctx(demo_run)
    b = ctx.heatmap(["r0", "r1"], ["s1", "s2", "s3", "s4"], [[1, 3, 5, None], [0, 0, 2, 4]], id="h", title="H")
    assert [ctx.strings.strings[i] for i in b["cols"]] == ["s1–s2", "s3–s4"]
    assert b["values"] == [[2.0, 5.0], [0.0, 3.0]]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from("<>/&'\"\u2028\u2029!-scriptSCRIPT \\"), max_size=40), max_size=5))
def test_script_json_round_trips_and_never_closes_a_tag(names):
    text = script_json({"strings": names})
    assert "</" not in text and "<!--" not in text and "<" not in text
    assert json.loads(text) == {"strings": names}


def test_summary_headlines_match_their_analyses(demo_run, demo_session):
    from ranksight.analyses import run_analysis
    from ranksight.report.headline import build_summary

    doc = build_summary(demo_session, top=2)
    pr = doc.tables["per_rank"]
    assert pr["rank"].to_list() == list(range(8))
    busy = run_analysis("summary", demo_run)["gpu"]
    assert pr["gpu_busy_pct"].to_list() == busy["busy_pct"].to_list()
    assert pr["kernels"].to_list() == busy["kernels"].to_list()
    assert pr["idle_pct"].to_list() == run_analysis("temporal", demo_run)["temporal"].sort("rank")["idle_pct"].to_list()
    assert doc.tables["top_kernels"].group_by("rank").len()["len"].max() == 2
    # memory has no data in the example: its headline is left out, with the reason
    assert "peak_mem_gib" not in pr.columns and any(n.startswith("`memory`: no [memory] events") for n in doc.notes), (
        doc.notes
    )
    assert set(doc.columns) == set(pr.columns)
    only = build_summary(demo_session, ranks=[3])
    assert only.tables["per_rank"]["rank"].to_list() == [3] and set(only.tables["top_kernels"]["rank"].to_list()) == {3}


def test_all_to_all_pair_heatmap_exact(demo_run):
    """The rank-pair heatmap sums bytes over instances, in MiB, null where nothing was sent."""
    from ranksight.analyses import AnalysisResult
    from ranksight.report.html.sections_dist import all_to_all

    ctx = Ctx(demo_run)
    per_rank = pl.DataFrame(
        {"instance": [0, 0], "rank": [0, 1], "send_bytes": [3 * 2**20, 2**20], "recv_bytes": [2**20, 3 * 2**20]}
    )
    pairs = pl.DataFrame({"instance": [0, 1, 0], "src": [0, 0, 1], "dst": [1, 1, 0], "bytes": [2**20, 2**20, 2**19]})
    ctx.session.seed("all-to-all", AnalysisResult({"per_rank": per_rank, "imbalance": pl.DataFrame(), "pairs": pairs}))
    blocks = all_to_all(ctx)
    heat = blocks[0]
    assert heat["chart"] == "heatmap" and heat["values"] == [[None, 2.0], [0.5, None]]
    bar = blocks[1]
    assert [s["values"] for s in bar["series"]] == [[3.0, 1.0], [1.0, 3.0]]
    assert [b["id"] for b in blocks[2:]] == ["all-to-all-per_rank", "all-to-all-pairs"]


def test_wide_helper_exact():
    from ranksight.report.html.sections import wide

    df = pl.DataFrame({"rank": [1, 0, 0, 1, 0], "cat": ["a", "a", "b", "b", "a"], "v": [1.0, 2.0, 10.0, 4.0, 3.0]})
    cats, bars = wide(df, "rank", "cat", "v", scale=0.5)
    assert cats == [0, 1] and bars == {"b": [5.0, 2.0], "a": [2.5, 0.5]}
    cats, bars = wide(df, "rank", "cat", "v", order=["a", "b", "c"])
    assert list(bars) == ["a", "b"]


def test_section_needs_name_registered_analyses():
    """A typo in a section's ``needs`` would hide the section for ever: every name must exist."""
    from ranksight.analyses import names

    unknown = {(s.slug, n) for s in load_sections() for n in s.needs if n not in names()}
    assert unknown == set()
