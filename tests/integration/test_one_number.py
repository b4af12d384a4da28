"""One definition, one number (issue 17 item 7): every place that shows a headline metric shows the
same value, on every corpus trace.

For each trace one :class:`~ranksight.analyses.Session` computes the summary (``build_summary``),
the report payload (``build_payload``), ``diagnose``'s findings and the analyses; every number that
is GPU busy, GPU idle, exposed communication, overlap efficiency or step time is then recorded under
its metric and window (``docs/metrics.md``: the GPU span, the step windows, or the TensorBoard
plugin's steps) with the rank (and step) it is about, and each recorded value must equal the one of
the analysis that implements the metric, within the rounding of the place that shows it (payload
tables: 4 decimals, finding evidence: 2, finding text: 1).

A second check guards the labels: a column named like a headline metric may appear only in the
tables listed in :data:`OWNERS` (a new table reusing ``busy_pct`` or ``overlap_efficiency`` for a
different number fails here, as the two ``overlap_efficiency`` of issue 17 did).

Inputs: every trace of tests/data, the multi-rank folders (DLRM example, 2-rank DDP, 4-rank gloo);
every trace of ../shared/traces that tests/data has no copy of, when ../shared is present (a test
says loudly when it is not).
"""

from __future__ import annotations

import math
import re
import warnings
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from tests.conftest import DATA, SHARED, shared_or_skip
from tests.unit.taxonomy_table import corpus_files

import ranksight
from ranksight.analyses import Missing, Session
from ranksight.errors import RanksightError
from ranksight.report.headline import build_summary
from ranksight.report.html import build_payload

EXAMPLE = Path(ranksight.__file__).parent / "data" / "examples" / "dlrm"
FOLDERS = [
    EXAMPLE,
    DATA / "hta" / "trace_filter",  # 2 ranks: exposed communication that is partly waiting for the other
    DATA / "generated" / "h100" / "ddp-gloo-2ranks",
    DATA / "generated" / "cpu-ddp-gloo-4ranks",
]

#: Tolerances of the places that round: analyses (float µs arithmetic), payload tables and charts
#: (4 decimals), finding evidence (2 decimals), finding text (1 decimal).
EXACT, PAYLOAD, EVIDENCE, TEXT = 1e-6, 0.5e-4 + 1e-9, 0.005 + 1e-9, 0.05 + 1e-9

#: Tables allowed to hold a column named like a headline metric (analysis, table); any other table
#: with such a column is a second number under the same label.
OWNERS: dict[str, set[tuple[str, str]]] = {
    "busy_pct": {("summary", "gpu")},  # GPU busy over the GPU span
    "busy_pct_of_steps": {("temporal", "over_steps")},
    "busy_us": {("summary", "gpu"), ("memcpy-bw", "summary"), ("memcpy-bw", "per_stream")},  # memcpy-bw: per kind
    "idle_pct": {("temporal", "temporal"), ("temporal", "per_step")},
    "idle_us": {
        ("temporal", "temporal"),  # GPU span
        ("temporal", "per_step"),  # each step window
        ("summary", "gpu"),  # = temporal's
        ("idle", "idle"),  # per stream (labelled stream idle in the report)
        ("idle", "per_step"),
        ("idle-causes", "by_rank"),  # per cause: sums to temporal's
        ("idle-causes", "by_step"),
        ("idle-causes", "call_sites"),
    },
    "overlap_efficiency": {("exposed-comm", "per_step"), ("exposed-comm", "per_rank")},
    "exposed_comm_us": {("overlap", "overlap")},
    "step_time_us": {("temporal", "per_step"), ("temporal", "over_steps")},
    "utilization_pct": {("gpu-metrics", "overall"), ("gpu-metrics", "per_step")},  # kernels only, plugin steps
}


def _inputs() -> list[Path]:
    local = [p for p in corpus_files(DATA) if "malicious" not in p.parts]
    have = {str(p.relative_to(DATA)) for p in local}
    shared = corpus_files(SHARED / "traces") if (SHARED / "traces").exists() else []
    extra = [p for p in shared if str(p.relative_to(SHARED / "traces")) not in have]
    return [*FOLDERS, *local, *extra]


def _id(p: Path) -> str:
    s = str(p)
    for root in (str(SHARED / "traces") + "/", str(DATA) + "/", str(EXAMPLE.parent) + "/"):
        s = s.replace(root, "")
    return s[-70:]


# ---- one session per trace ------------------------------------------------------------------


@dataclass
class Views:
    """Everything that shows a number, computed once on one session."""

    session: Session
    summary: Any
    payload: dict[str, Any]
    findings: list[Any]
    blocks: dict[str, dict[str, Any]] = field(default_factory=dict)

    def res(self, name: str, **opts: Any) -> Any:
        r = self.session.try_result(name, **opts)
        return None if isinstance(r, Missing) else r

    def table(self, block_id: str) -> pl.DataFrame | None:
        """A payload table block back as a frame (string columns decoded)."""
        b = self.blocks.get(block_id)
        if b is None or b.get("type") != "table":
            return None
        strings = self.payload["strings"]
        cols = {}
        for c, data in zip(b["columns"], b["data"], strict=True):
            cols[c["name"]] = [None if i is None else strings[i] for i in data] if c["kind"] == "str" else data
        return pl.DataFrame(cols, strict=False)

    def chart(self, block_id: str) -> dict[str, list[Any]] | None:
        """A bar chart block: ``{category: values}`` per series name, categories as strings."""
        b = self.blocks.get(block_id)
        if b is None or b.get("chart") != "bar":
            return None
        strings = self.payload["strings"]
        cats = [strings[i] for i in b["categories"]]
        return {strings[s["name"]]: dict(zip(cats, s["values"], strict=True)) for s in b["series"]}


@cache
def _views(path: str) -> Views | str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            run = ranksight.load(path)
        except RanksightError as err:
            return f"not loadable ({type(err).__name__}): covered by test_shared_corpus"
        sess = Session.of(run)
        summary = build_summary(sess, top=1, findings=1000)
        payload = build_payload(sess)
        from ranksight.analyses.diagnose import findings

        got = sess.try_memo(("report", "findings"), lambda: findings(sess), "diagnose")
    found = [] if isinstance(got, Missing) else got[0]
    v = Views(sess, summary, payload, found)
    for s in payload["sections"]:
        for b in s["blocks"]:
            v.blocks[b["id"]] = b
    return v


# ---- the book of observations ---------------------------------------------------------------


def _num(x: Any) -> float | None:
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else x


@dataclass
class Book:
    """``(metric, key) → [(value, tolerance, where)]``; the first entry is the implementation's."""

    seen: dict[tuple[str, tuple[Any, ...]], list[tuple[float | None, float, str]]] = field(
        default_factory=lambda: defaultdict(list)
    )

    def add(self, metric: str, key: tuple[Any, ...], value: Any, where: str, tol: float = EXACT) -> None:
        self.seen[(metric, tuple(int(k) if k is not None else None for k in key))].append((_num(value), tol, where))

    def rows(self, metric: str, df: pl.DataFrame | None, keys: list[str], col: str, where: str, **kw: Any) -> None:
        if df is None or col not in df.columns:
            return
        for row in df.select(*keys, col).iter_rows():
            self.add(metric, row[:-1], row[-1], where, **kw)

    def mismatches(self) -> list[str]:
        bad = []
        for (metric, key), vals in self.seen.items():
            v0, _, w0 = vals[0]
            for v, tol, w in vals[1:]:
                same = (v is None and v0 is None) or (
                    v is not None and v0 is not None and abs(v - v0) <= max(tol, EXACT * abs(v0))
                )
                if not same:
                    bad.append(f"{metric} {key}: {w0} = {v0} but {w} = {v}")
        return bad


def _payload_rows(book: Book, v: Views, metric: str, block: str, keys: list[str], col: str, scale: float = 1.0) -> None:
    t = v.table(block)
    if t is not None and col in t.columns and all(k in t.columns for k in keys):
        book.rows(metric, t.with_columns(pl.col(col) * scale), keys, col, f"report {block}.{col}", tol=PAYLOAD * scale)


def _chart(book: Book, v: Views, metric: str, block: str, series: str, scale: float) -> None:
    ch = v.chart(block)
    if ch is None or series not in ch:
        return
    for cat, val in ch[series].items():
        m = re.fullmatch(r"rank (\d+)", cat)
        if m:
            book.add(
                metric,
                (int(m[1]),),
                None if val is None else val * scale,
                f"report chart {block}/{series}",
                PAYLOAD * scale,
            )


def _book(v: Views) -> Book:
    book = Book()
    tem = v.res("temporal", per_step=True)
    if tem is None:
        return book
    t, ps, ov = tem["temporal"], tem["per_step"], tem["over_steps"]
    t = t.with_columns(
        (pl.col("kernel_time_us") - pl.col("idle_us")).alias("_busy"), (100 - pl.col("idle_pct")).alias("_bp")
    )
    per_rank = v.summary.tables["per_rank"]
    gpu = v.res("summary", top=10)["gpu"]  # the options build_summary asks for (SUMMARY_TOP)

    # -- GPU busy and idle over the GPU span: temporal is the implementation
    for metric, col, s_col, h_col, h_scale, blocks in [
        (
            "gpu_span_us",
            "kernel_time_us",
            "span_us",
            "gpu_span_ms",
            1e3,
            [("gpu-busy-table", "span_us"), ("temporal-table", "kernel_time_us")],
        ),
        ("gpu_busy_us@span", "_busy", "busy_us", None, 1, [("gpu-busy-table", "busy_us")]),
        (
            "gpu_idle_us@span",
            "idle_us",
            "idle_us",
            None,
            1,
            [("gpu-busy-table", "idle_us"), ("temporal-table", "idle_us")],
        ),
        ("gpu_busy_pct@span", "_bp", "busy_pct", "gpu_busy_pct", 1, [("gpu-busy-table", "busy_pct")]),
        ("gpu_idle_pct@span", "idle_pct", None, "idle_pct", 1, [("temporal-table", "idle_pct")]),
        (
            "compute_us@span",
            "compute_us",
            None,
            None,
            1,
            [("temporal-table", "compute_us"), ("overlap-table", "compute_us")],
        ),
        ("compute_pct@span", "compute_pct", None, "compute_pct", 1, []),
    ]:
        book.rows(metric, t, ["rank"], col, f"temporal.{col}", tol=1e-6 if col != "_bp" else 0.005 + 1e-9)
        if s_col:
            book.rows(metric, gpu.filter(pl.col("span_us").is_not_null()), ["rank"], s_col, f"summary.gpu.{s_col}")
        if h_col and h_col in per_rank.columns:
            book.rows(metric, per_rank.with_columns(pl.col(h_col) * h_scale), ["rank"], h_col, f"headline {h_col}")
        for block, c in blocks:
            _payload_rows(book, v, metric, block, ["rank"], c)
    _chart(book, v, "gpu_busy_us@span", "gpu-busy-chart", "busy", 1e3)
    _chart(book, v, "gpu_idle_us@span", "gpu-busy-chart", "idle", 1e3)
    ovl = v.res("overlap")
    if ovl is not None:
        book.rows("compute_us@span", ovl["overlap"], ["rank"], "compute_us", "overlap.compute_us")
    ic = v.res("idle-causes")
    if ic is not None and ic["by_rank"].height:
        sums = ic["by_rank"].group_by("rank").agg(pl.col("idle_us").sum())
        book.rows("gpu_idle_us@span", sums, ["rank"], "idle_us", "idle-causes by_rank summed", tol=1e-3)

    # -- the step windows: temporal per step is the implementation
    book.rows("step_us", ps, ["rank", "step"], "step_time_us", "temporal.per_step.step_time_us")
    book.rows("gpu_idle_us@step", ps, ["rank", "step"], "idle_us", "temporal.per_step.idle_us")
    book.rows("gpu_idle_pct@step", ps, ["rank", "step"], "idle_pct", "temporal.per_step.idle_pct")
    _payload_rows(book, v, "step_us", "temporal-steps", ["rank", "step"], "step_time_us")
    _payload_rows(book, v, "gpu_idle_us@step", "temporal-steps", ["rank", "step"], "idle_us")
    book.rows("gpu_busy_pct@steps", ov, ["rank"], "busy_pct_of_steps", "temporal.over_steps")
    book.rows("gpu_busy_us@steps", ov, ["rank"], "busy_us_in_steps", "temporal.over_steps")
    book.rows("step_windows_us", ov, ["rank"], "step_time_us", "temporal.over_steps")
    if ps.height:  # the summed per-step table agrees with its own sums
        agg = (
            ps.filter(pl.col("rank").is_in(ov["rank"].implode()))
            .group_by("rank")
            .agg(
                pl.col("step_time_us").sum().alias("win"),
                (pl.col("step_time_us") - pl.col("idle_us")).sum().alias("busy"),
                (pl.col("step_time_us").mean() / 1e3).alias("mean_ms"),
            )
        )
        book.rows("step_windows_us", agg, ["rank"], "win", "temporal.per_step summed")
        book.rows("gpu_busy_us@steps", agg, ["rank"], "busy", "temporal.per_step summed")
        book.rows("step_ms", agg, ["rank"], "mean_ms", "temporal.per_step mean")
    for metric, col in [("gpu_busy_pct@steps", "gpu_busy_pct_of_steps"), ("step_ms", "step_ms")]:
        if col in per_rank.columns:
            book.rows(
                metric, per_rank.filter(pl.col("rank").is_in(ov["rank"].implode())), ["rank"], col, f"headline {col}"
            )
    _payload_rows(book, v, "gpu_busy_pct@steps", "gpu-busy-steps-table", ["rank"], "busy_pct_of_steps")
    _payload_rows(book, v, "gpu_busy_us@steps", "gpu-busy-steps-table", ["rank"], "busy_us_in_steps")
    if ic is not None and ic["by_step"].height:
        sums = ic["by_step"].group_by("rank", "step").agg(pl.col("idle_us").sum())
        book.rows("gpu_idle_us@step", sums, ["rank", "step"], "idle_us", "idle-causes by_step summed", tol=1e-3)
    mfu = v.res("mfu")
    if mfu is not None and "step_us" in mfu["steps"].columns:
        book.rows("step_us", mfu["steps"], ["rank", "step"], "step_us", "mfu.steps.step_us", tol=1e-3)

    # -- exposed communication and overlap efficiency; overlap is the implementation over the GPU span
    if ovl is not None:
        o = ovl["overlap"]
        book.rows("exposed_comm_us@span", o, ["rank"], "exposed_comm_us", "overlap.exposed_comm_us")
        book.rows("comm_us@span", o, ["rank"], "comm_us", "overlap.comm_us")
        book.rows("overlap_pct@span", o, ["rank"], "comp_comm_overlap_pctg", "overlap.comp_comm_overlap_pctg")
        _payload_rows(book, v, "exposed_comm_us@span", "overlap-table", ["rank"], "exposed_comm_us")
        _payload_rows(book, v, "overlap_pct@span", "overlap-table", ["rank"], "comp_comm_overlap_pctg")
        _chart(book, v, "exposed_comm_us@span", "overlap-chart", "exposed", 1e3)
    ex = v.res("exposed-comm")
    kernel_ranks = list(gpu.filter(pl.col("kernels") > 0)["rank"].to_list())
    if ex is not None:
        exs = ex["per_step"]
        stepped = exs.filter(pl.col("step").is_not_null())
        book.rows("step_us", stepped, ["rank", "step"], "step_us", "exposed-comm.per_step.step_us")
        on_gpu = pl.col("rank").is_in(kernel_ranks)  # CPU-only ranks: compute is CPU ops (a note says so)
        book.rows("compute_us@step", ps.filter(on_gpu), ["rank", "step"], "compute_us", "temporal.per_step")
        book.rows("compute_us@step", stepped.filter(on_gpu), ["rank", "step"], "compute_us", "exposed-comm.per_step")
        _payload_rows(book, v, "step_us", "exposed-comm-per_step", ["rank", "step"], "step_us")
        pr = ex["per_rank"].with_columns((pl.col("exposed_share_of_step") * 100).alias("pct"))
        book.rows("overlap_efficiency@steps", pr, ["rank"], "overlap_efficiency", "exposed-comm.per_rank")
        book.rows("exposed_wait_us@steps", pr, ["rank"], "exposed_wait_us", "exposed-comm.per_rank")
        book.rows("exposed_comm_pct@steps", pr, ["rank"], "pct", "exposed-comm.per_rank exposed / step")
        for metric, col in [
            ("overlap_efficiency@steps", "overlap_efficiency"),
            ("exposed_comm_pct@steps", "exposed_comm_pct"),
        ]:
            if col in per_rank.columns:
                has = per_rank.filter(pl.col("rank").is_in(pr["rank"].implode()))
                book.rows(metric, has, ["rank"], col, f"headline {col}")
        _payload_rows(book, v, "overlap_efficiency@steps", "exposed-comm-per_rank", ["rank"], "overlap_efficiency")
        # without steps (one window over the whole trace) on a GPU rank whose collectives are all
        # kernels, the same definition over a window that holds the GPU span gives overlap's numbers
        if ovl is not None:
            whole = exs.filter(pl.col("step").is_null() & on_gpu)
            for r in whole["rank"].to_list():
                if _gpu_collectives_only(v, int(r)):
                    row = pr.filter(pl.col("rank") == r)  # the rank's one window: per_rank is that window
                    book.add("exposed_comm_us@span", (r,), row["exposed_us"][0], "exposed-comm without steps")
                    book.add("comm_us@span", (r,), row["comm_us"][0], "exposed-comm without steps")
                    eff = row["overlap_efficiency"][0]
                    book.add(
                        "overlap_pct@span",
                        (r,),
                        None if eff is None else 100 * eff,
                        "exposed-comm without steps",
                        0.005 + 1e-9,
                    )

    # -- the TensorBoard plugin's steps (a variant with its own label): overview and gpu-metrics agree
    ovw = v.res("overview")
    if ovw is not None and ovw["steps"].height:
        book.rows("plugin_step_us", ovw["steps"], ["rank", "step"], "total_us", "overview.steps.total_us")
        _payload_rows(book, v, "plugin_step_us", "step-overview-table", ["rank", "step"], "total_us")
        gm = v.res("gpu-metrics")
        if gm is not None:
            one_device = gm["overall"].group_by("rank").len().filter(pl.col("len") == 1)["rank"]
            book.rows(
                "plugin_step_us",
                gm["per_step"].filter(pl.col("rank").is_in(one_device.implode())),
                ["rank", "step"],
                "window_us",
                "gpu-metrics.per_step.window_us",
                tol=1e-3,
            )

    _findings(book, v)
    return book


def _gpu_collectives_only(v: Views, rank: int) -> bool:
    from ranksight.views.comm_extract import rank_collectives

    coll = rank_collectives(v.session.run[rank])
    return coll.height == 0 or bool((coll["source"] == "gpu").all())


def _findings(book: Book, v: Views) -> None:
    """The numbers in diagnose's findings: the evidence (of the worst rank, named first in the text)
    and the text of every rank (the others' in ``evidence["by_rank"]`` when findings were merged)."""
    for f in v.findings:
        ev = f.evidence
        texts = [f.summary, *ev.get("by_rank", {}).values()]
        first = re.match(r"rank (\d+):", f.summary)
        r = int(first[1]) if first else None
        where = f"finding {f.rule}"
        if f.rule == "low-gpu-utilization":
            book.add("gpu_busy_pct@steps", (r,), ev["busy_pct_of_steps"], f"{where} evidence", EVIDENCE)
            book.add("gpu_busy_us@steps", (r,), ev["busy_us_in_steps"], f"{where} evidence", EVIDENCE)
            book.add("step_windows_us", (r,), ev["window_us"], f"{where} evidence", EVIDENCE)
            for text in texts:
                m = re.match(r"rank (\d+): GPU busy ([\d.]+)% of the step windows", text)
                assert m, text
                book.add("gpu_busy_pct@steps", (int(m[1]),), float(m[2]), f"{where} text", TEXT)
        elif f.rule == "launch-bound":
            book.add("gpu_busy_pct@steps", (r,), ev["busy_pct_of_steps"], f"{where} evidence", EVIDENCE)
        elif f.rule == "exposed-communication":
            m = re.search(r"\(rank (\d+): [\d.]+ ms of ([\d.]+) ms exposed", f.summary)
            assert m, f.summary
            r = int(m[1])
            book.add("exposed_comm_us@span", (r,), ev["exposed_comm_us"], f"{where} evidence", EVIDENCE)
            book.add("exposed_comm_us@span", (r,), float(m[2]) * 1e3, f"{where} text", TEXT * 1e3)
            book.add("comm_us@span", (r,), ev["comm_us"], f"{where} evidence", EVIDENCE)
            for rank, share in ev["exposed_share_pct_by_rank"].items():  # (exposed − its wait) / GPU span
                exposed = book.seen.get(("exposed_comm_us@span", (int(rank),)), [(None,)])[0][0]
                wait = book.seen.get(("exposed_wait_us@steps", (int(rank),)), [(None,)])[0][0] or 0.0
                span = book.seen[("gpu_span_us", (int(rank),))][0][0]
                want = None if exposed is None or not span else 100 * max(exposed - wait, 0.0) / span
                book.add("own_exposed_pct@span", (int(rank),), want, "overlap, exposed-comm and temporal")
                book.add("own_exposed_pct@span", (int(rank),), share, f"{where} evidence", EVIDENCE)
            if book.seen.get(("exposed_wait_us@steps", (r,)), [(None,)])[0][0] is not None:  # several ranks
                book.add("exposed_wait_us@steps", (r,), ev["waiting_for_other_ranks_us"], f"{where} evidence", EVIDENCE)
            if _num(ev["overlap_pct"]) is not None:
                book.add("overlap_pct@span", (r,), ev["overlap_pct"], f"{where} evidence", EVIDENCE)
        elif f.rule == "idle-causes":
            for s, p in ev.get("idle_pct_by_step", {}).items():
                book.add("gpu_idle_pct@step", (r, int(s)), p, f"{where} evidence", EVIDENCE)
            for text in texts:  # a rank without steps: its idle over the GPU span, in words
                m = re.match(r"rank (\d+): .*\(([\d.]+) ms of ([\d.]+) ms; the trace has no steps\)", text)
                if m:
                    book.add("gpu_idle_us@span", (int(m[1]),), float(m[2]) * 1e3, f"{where} text", TEXT * 1e3)
                    book.add("gpu_span_us", (int(m[1]),), float(m[3]) * 1e3, f"{where} text", TEXT * 1e3)


def _same_findings_everywhere(v: Views) -> list[str]:
    """The summary's and the report's findings are diagnose's, word for word."""
    bad = []
    want = [(f.rule, f.summary) for f in v.findings]
    if "findings" in v.summary.tables:
        got = list(v.summary.tables["findings"].select("rule", "summary").iter_rows())
        if got != want:
            bad.append(f"summary findings {got} != diagnose {want}")
    items = v.blocks.get("findings-list", {}).get("items")
    if items is not None:
        strings = v.payload["strings"]
        got = [(i["rule"], strings[i["detail"]]) for i in items]
        if got != want:
            bad.append(f"report findings {got} != diagnose {want}")
    return bad


def _label_owners(v: Views) -> list[str]:
    """Columns named like a headline metric only in the tables of :data:`OWNERS`."""
    from ranksight.analyses import REGISTRY

    bad = []
    results = [(n, v.res(n)) for n in sorted(REGISTRY) if n not in ("diff", "nccl-log")]
    results.append(("temporal", v.res("temporal", per_step=True)))
    for name, res in results:
        if res is None:
            continue
        for tname, df in res.tables.items():
            for col in set(df.columns) & set(OWNERS):
                if (name, tname) not in OWNERS[col]:
                    bad.append(
                        f"`{name}` table {tname!r} has a column {col!r}: that label belongs to {sorted(OWNERS[col])}"
                    )
    return bad


# ---- the tests --------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [str(p) for p in _inputs()], ids=_id)
def test_every_place_shows_the_same_number(path: str) -> None:
    v = _views(path)
    if isinstance(v, str):
        pytest.skip(v)
    book = _book(v)
    bad = book.mismatches() + _same_findings_everywhere(v) + _label_owners(v)
    assert not bad, "\n".join(bad[:20])
    assert not v.session.failures, v.session.failures  # an analysis that fails shows no number at all


def test_the_example_shows_each_metric_in_several_places() -> None:
    """The check is not empty: on the DLRM example every metric is seen in two places or more, and
    the numbers of issue 17 are the ones now shown (rank 7: GPU busy 24.25 % of the GPU span, 21.26 %
    of the step windows; rank 0: overlap efficiency 0.045, one definition)."""
    v = _views(str(EXAMPLE))
    assert isinstance(v, Views)
    book = _book(v)
    metrics = {m for m, _ in book.seen}
    assert {
        "gpu_span_us",
        "gpu_busy_us@span",
        "gpu_idle_us@span",
        "gpu_busy_pct@span",
        "gpu_idle_pct@span",
        "gpu_busy_pct@steps",
        "step_us",
        "step_ms",
        "gpu_idle_us@step",
        "exposed_comm_us@span",
        "overlap_efficiency@steps",
        "exposed_comm_pct@steps",
        "plugin_step_us",
    } <= metrics
    for (m, key), vals in book.seen.items():
        if m in ("gpu_busy_pct@span", "gpu_busy_pct@steps", "step_us", "overlap_efficiency@steps"):
            assert len(vals) >= 2, (m, key, vals)
    assert book.seen[("gpu_busy_pct@span", (7,))][0][0] == 24.25
    assert book.seen[("gpu_busy_pct@steps", (7,))][0][0] == 21.26
    assert round(book.seen[("overlap_efficiency@steps", (0,))][0][0], 3) == 0.045
    (low,) = [f for f in v.findings if f.rule == "low-gpu-utilization"]
    assert low.summary.startswith("rank 7: GPU busy 21.3% of the step windows"), low.summary
    assert low.evidence["busy_pct_of_steps"] == 21.26
    assert not book.mismatches()


def test_shared_corpus_is_checked() -> None:
    """Says loudly when ../shared/traces is absent (its traces are then not walked)."""
    shared_or_skip("traces")
    assert any(str(SHARED) in p for p in (str(x) for x in _inputs()))
