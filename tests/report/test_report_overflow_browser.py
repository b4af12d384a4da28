"""Every chart of every corpus report stays inside its plot area, in headless Chromium.

On the report of each corpus trace (each folder of tests/data that holds traces, loaded as
``ranksight report DIR`` loads it; in the ``heavy`` pass also every trace file and folder of
../shared/traces, skipped loudly when absent), the DOM is checked:

- no mark (a bar, point, line or histogram bin: ``.pt``, ``path.series``, a roofline ceiling) lies
  outside its chart's plot area (the SVG's ``data-plot``: the axes contain the data);
- every legend entry is visible, drawn on top (the element at its centre is the entry) and overlaps
  neither another entry nor a mark;
- every chart (SVG or canvas) has an accessible name, every ``th`` a ``scope``, every table a
  non-empty ``caption``.

Reuses the browser and page of ``test_report_browser.py``; skips loudly without chromium or
playwright like it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.conftest import DATA, SHARED
from tests.report.test_report_browser import Page, _check_common, _skip, browser  # noqa: F401  (fixture)

import ranksight
from ranksight.report.html import write_report

#: Suffixes of the files a corpus folder holds traces in.
TRACE_SUFFIXES = (".json", ".json.gz", ".sqlite")
#: Files of the shared corpus that are not profiler traces (tests/integration/test_shared_corpus.py).
NOT_TRACES = {"hta/execution_trace/benchmark_simple_add_et.json.gz"}


def _trace_files(root: Path) -> list[Path]:
    return sorted(
        p
        for p in root.rglob("*")
        if p.is_file() and p.name.endswith(TRACE_SUFFIXES) and "oracles" not in p.relative_to(root).parts
    )


def _folders(root: Path) -> list[Path]:
    """Every folder that directly holds a trace file."""
    return sorted({p.parent for p in _trace_files(root)})


def _units(root: Path) -> list[Path]:
    """Every trace file (bar the few that are not traces) and every folder of several of them."""
    files = [p for p in _trace_files(root) if str(p.relative_to(root)) not in NOT_TRACES]
    multi = [d for d in _folders(root) if sum(p.parent == d for p in files) > 1]
    return sorted(files + multi)


#: The checks, in the page; returns a list of problems (empty: all good).
CHECK = r"""() => {
  const out = [];
  const tol = 0.6;  // SVG units: path coordinates are written with one decimal
  const name = el => {
    const lab = (el.getAttribute("aria-label") || "").trim();
    if (lab) return lab;
    const by = el.getAttribute("aria-labelledby");
    if (by) return by.split(/\s+/).map(i => (document.getElementById(i) || {}).textContent || "").join(" ").trim();
    const t = el.tagName.toLowerCase() === "svg" ? el.querySelector(":scope > title") : null;
    return t ? t.textContent.trim() : "";
  };
  const where = el => {
    const f = el.closest("figure, .rs-timeline, .rs-table-block, section");
    return (f && (f.id || (f.dataset && f.dataset.slug))) || "?";
  };
  const overlap = (a, b) => a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1;
  document.querySelectorAll("main svg, main canvas").forEach(el => {
    if (!name(el)) out.push("no accessible name: " + el.tagName + " in " + where(el));
    if (el.tagName.toLowerCase() === "svg" && el.getAttribute("role") !== "img") out.push("svg without role=img in " + where(el));
  });
  document.querySelectorAll("figure.rs-chart").forEach(fig => {
    if (!fig.querySelector("svg, canvas")) out.push("chart without svg or canvas: " + fig.id);
    const svg = fig.querySelector("svg");
    if (!svg) return;
    if (!svg.dataset.plot) { out.push("svg chart without data-plot: " + fig.id); return; }
    const [x0, y0, x1, y1] = svg.dataset.plot.split(",").map(Number);
    let bad = 0, first = "";
    svg.querySelectorAll(".pt, path.series, .rs-roof line").forEach(m => {
      let bx0, by0, bx1, by1;
      if (m.tagName === "circle") {  // a point: its centre is the datum
        bx0 = bx1 = +m.getAttribute("cx"); by0 = by1 = +m.getAttribute("cy");
      } else {
        const b = m.getBBox();
        bx0 = b.x; by0 = b.y; bx1 = b.x + b.width; by1 = b.y + b.height;
      }
      if (bx0 < x0 - tol || by0 < y0 - tol || bx1 > x1 + tol || by1 > y1 + tol) {
        bad++;
        if (!first) first = m.tagName + " [" + [bx0, by0, bx1, by1].map(v => v.toFixed(1)) + "] data-v=" + m.getAttribute("data-v");
      }
    });
    if (bad) out.push(fig.id + ": " + bad + " marks outside the plot area [" + [x0, y0, x1, y1] + "], e.g. " + first);
  });
  const marks = Array.from(document.querySelectorAll("main .pt, main path.series")).map(m => [m.closest("figure"), m.getBoundingClientRect()]);
  document.querySelectorAll(".rs-legend").forEach(lg => {
    const fig = lg.closest("figure, .rs-timeline");
    const keys = Array.from(lg.querySelectorAll(".rs-key"));
    lg.scrollIntoView({ block: "center" });
    const rects = keys.map(k => k.getBoundingClientRect());
    keys.forEach((k, i) => {
      const r = rects[i], cs = getComputedStyle(k);
      const label = where(lg) + " legend '" + k.textContent + "'";
      if (r.width < 1 || r.height < 1 || cs.visibility !== "visible" || cs.display === "none") { out.push(label + " is hidden"); return; }
      for (let j = 0; j < i; j++) if (overlap(r, rects[j])) out.push(label + " overlaps '" + keys[j].textContent + "'");
      const r2 = k.getBoundingClientRect();
      const at = document.elementFromPoint(r2.left + r2.width / 2, r2.top + r2.height / 2);
      if (!at || !(at === k || k.contains(at))) out.push(label + " is covered by " + (at ? at.tagName + "." + at.getAttribute("class") : "nothing"));
      marks.forEach(([f, mr]) => { if (f === fig && mr.width > 0 && overlap(r, mr)) out.push(label + " overlaps a mark"); });
    });
  });
  document.querySelectorAll("th").forEach(th => {
    if (!["col", "row", "colgroup", "rowgroup"].includes(th.getAttribute("scope"))) out.push("th without scope: '" + th.textContent + "' in " + where(th));
  });
  document.querySelectorAll("table").forEach(t => {
    const c = t.querySelector(":scope > caption");
    if (!c || !c.textContent.trim()) out.push("table without caption in " + where(t));
  });
  return out;
}"""


def check_report(browser, path: Path) -> None:  # noqa: F811
    """Open a written report and fail with what the checks found (the first 30 problems)."""
    pg = Page(browser, path)
    try:
        _check_common(pg)
        problems = pg.page.evaluate(CHECK)
    finally:
        pg.close()
    assert not problems, f"{path.name}: {len(problems)} problems:\n" + "\n".join(problems[:30])


def _report_of(src: Path, out: Path) -> Path:
    path = out / (str(src).strip("/").replace("/", "__") + ".html")
    write_report(ranksight.load(src), path)
    return path


DATA_UNITS = _folders(DATA)


@pytest.mark.parametrize("src", DATA_UNITS, ids=[str(p.relative_to(DATA)) for p in DATA_UNITS])
def test_no_mark_outside_its_plot_in_test_data_reports(browser, src, tmp_path):  # noqa: F811
    check_report(browser, _report_of(src, tmp_path))


def test_demo_and_many_rank_reports_hold_their_marks(browser, demo_html, many_html, tmp_path):  # noqa: F811
    for name, html in (("demo", demo_html), ("many", many_html)):
        path = tmp_path / f"{name}.html"
        path.write_text(html, encoding="utf-8")
        check_report(browser, path)


SHARED_TRACES = SHARED / "traces"
SHARED_UNITS = _units(SHARED_TRACES) if SHARED_TRACES.exists() else []


@pytest.mark.heavy
@pytest.mark.shared
@pytest.mark.parametrize(
    "src", SHARED_UNITS or [None], ids=[str(p.relative_to(SHARED_TRACES)) for p in SHARED_UNITS] or ["absent"]
)
def test_no_mark_outside_its_plot_in_shared_corpus_reports(browser, src, tmp_path):  # noqa: F811
    if src is None:
        _skip(f"{SHARED_TRACES} is absent; the shared-corpus overflow sweep did not run")
    check_report(browser, _report_of(src, tmp_path))


@pytest.fixture(scope="module")
def demo_page(browser, demo_html, tmp_path_factory):  # noqa: F811
    path = tmp_path_factory.mktemp("overflow-demo") / "demo.html"
    path.write_text(demo_html, encoding="utf-8")
    pg = Page(browser, path)
    yield pg
    pg.close()


#: Draws a chart block into a fresh host with the page's own chart code; returns what it drew.
DRAW = """([block, strings]) => {
  const host = document.createElement("div");
  document.querySelector("main").appendChild(host);
  const fig = RS.chart(host, block, strings);
  const svg = fig.querySelector("svg");
  const ticks = Array.from(svg.querySelectorAll(".rs-axis text")).map(t => t.textContent);
  const texts = Array.from(svg.querySelectorAll("text")).map(t => [t.childNodes[0] ? t.childNodes[0].nodeValue : "",
    t.querySelector("title") ? t.querySelector("title").textContent : null]);
  const out = {plot: svg.dataset.plot, ticks, texts, label: svg.getAttribute("aria-label"),
    title: svg.querySelector(":scope > title").textContent, desc: svg.querySelector(":scope > desc").textContent,
    legend: Array.from(fig.querySelectorAll(".rs-key")).map(k => [k.textContent, k.getAttribute("title")])};
  host.remove();
  return out;
}"""


def test_a_stacked_bar_axis_rounds_up_past_the_tallest_bar(demo_page):
    """18.8 ms of stacked bars: the axis ends at the next round tick (20), not the last below (15)."""
    long = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>(int, " + "x" * 80 + ")"
    block = {
        "type": "chart",
        "chart": "bar",
        "id": "t-bar",
        "title": "stacked",
        "categories": [0, 1],
        "series": [{"name": 2, "values": [10.0, 4.0]}, {"name": 3, "values": [8.8, 1.0]}],
        "stacked": True,
        "horizontal": False,
        "unit": "ms",
        "x_label": "",
        "y_label": "ms",
    }
    got = demo_page.page.evaluate(DRAW, [block, ["rank 0", long, "compute", "communication"]])
    assert got["ticks"] == ["0", "5", "10", "15", "20"]
    assert got["label"] == got["title"] == "stacked"
    assert "stacked bar chart of 2 categories" in got["desc"] and "compute, communication" in got["desc"]
    # a long category name is cut on the axis; its <title> holds the whole name
    cut = [t for t in got["texts"] if t[1] is not None]
    assert cut == [[long[:17] + "…", long]]
    page = demo_page.page
    assert page.evaluate("RS.ticks(0, 18.8, 5)") == [0, 5, 10, 15, 20]
    assert page.evaluate("RS.ticks(-3.2, 7, 5)") == [-4, -2, 0, 2, 4, 6, 8]
    assert page.evaluate("RS.ticks(0, 20, 5)") == [0, 5, 10, 15, 20]  # a maximum on a tick adds none


def test_p_values_show_at_full_precision(demo_page):
    """A table of p-values: the payload keeps them and the page shows 0.000817 and 6.01e-05 (as
    0.0000601), never 0.000800 or 0.000100."""
    page = demo_page.page
    shown = page.evaluate(
        """() => {
      const host = document.createElement("div");
      document.querySelector("main").appendChild(host);
      RS.table(host, {id: "t-p", title: "p-values", columns: [{name: "p_value", kind: "float"}],
        data: [[0.000817, 6.01e-05, 0.0123456]], rows: 3, page_size: 25}, []);
      const out = Array.from(host.querySelectorAll("tbody td")).map(td => td.textContent);
      out.push(host.querySelector("caption").textContent, host.querySelector("th").getAttribute("scope"));
      host.remove();
      return out;
    }"""
    )
    assert shown == ["0.000817", "0.0000601", "0.0123", "p-values", "col"]


def test_dark_mode_follows_the_system_and_the_switch(demo_page):
    page = demo_page.page
    bg = "() => getComputedStyle(document.body).backgroundColor"
    try:
        page.emulate_media(color_scheme="dark")
        assert page.evaluate(bg) == "rgb(20, 24, 30)"
        page.click("#rs-theme")  # the switch picks light over the system's dark
        assert page.evaluate(bg) == "rgb(255, 255, 255)"
        assert page.get_attribute("html", "data-theme") == "light"
        page.click("#rs-theme")
        assert page.evaluate(bg) == "rgb(20, 24, 30)"
        page.evaluate("document.documentElement.removeAttribute('data-theme')")
        page.emulate_media(color_scheme="light")
        assert page.evaluate(bg) == "rgb(255, 255, 255)"
        page.click("#rs-theme")
        assert page.evaluate(bg) == "rgb(20, 24, 30)"
    finally:
        page.evaluate("document.documentElement.removeAttribute('data-theme')")
        page.emulate_media(color_scheme="light")
