"""The report in a real browser: headless Chromium (Debian's ``chromium``) driven by Playwright.

Opens the report of the built-in example and of two other real traces (plus the malicious-names
trace): no console errors, every section drawn, a table sorts, a chart has its data points, names
show as text and run no script, and the page makes no network request. Screenshots go to a temp
folder (printed); with ``RANKSIGHT_SAVE_SCREENSHOT=1`` the demo's also goes to docs/img/report.png.
Skips loudly when chromium or playwright is missing (``.ci/run`` installs both).
"""

from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path

import pytest

import ranksight
from ranksight.report.html import read_payload, write_report

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("RANKSIGHT_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


def _skip(msg: str) -> None:
    msg = f"SKIPPED LOUDLY: {msg}"
    warnings.warn(msg)
    pytest.skip(msg)


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM:
        _skip("chromium is not installed (apt-get install chromium); browser tests of the report did not run")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _skip("playwright is not installed (pip install playwright); browser tests of the report did not run")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    d = tmp_path_factory.mktemp("report-screenshots")
    print(f"\nreport screenshots: {d}")
    return d


@pytest.fixture(scope="module")
def reports(tmp_path_factory, demo_html):
    d = tmp_path_factory.mktemp("reports")
    data = ROOT / "tests" / "data"
    inputs = {
        "trace_filter": data / "hta" / "trace_filter",
        "bert": data / "tracelens" / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz",
        "malicious": data / "malicious",
    }
    out = {"demo": d / "demo.html"}
    out["demo"].write_text(demo_html, encoding="utf-8")
    for name, src in inputs.items():
        path = d / f"{name}.html"
        title = "</script><script>window.__pwned=9</script><b>t</b>" if name == "malicious" else None
        write_report(ranksight.load(src), path, title=title)
        out[name] = path
    return out


class Page:
    """A loaded report with what the browser saw."""

    def __init__(self, browser, path: Path) -> None:
        self.console: list[str] = []
        self.requests: list[str] = []
        self.blocked: list[str] = []
        self.url = path.resolve().as_uri()
        self.page = browser.new_page(viewport={"width": 1280, "height": 900})
        self.page.on(
            "console", lambda m: self.console.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None
        )
        self.page.on("pageerror", lambda e: self.console.append(f"pageerror: {e}"))
        self.page.on("request", lambda r: self.requests.append(r.url))

        def route(r):  # anything but the report file itself is blocked and recorded
            if r.request.url == self.url:
                r.continue_()
            else:
                self.blocked.append(r.request.url)
                r.abort()

        self.page.route("**/*", route)
        self.page.goto(self.url)
        self.page.wait_for_selector("body[data-ready='1']", timeout=15_000)
        self.doc = read_payload(path.read_text(encoding="utf-8"))

    def close(self) -> None:
        self.page.close()


_DOM_STATE = """() => {
  const out = {sections: {}, skipped: {}, tables: {}};
  document.querySelectorAll("section[data-slug]").forEach(s => {
    out.sections[s.dataset.slug] = s.querySelectorAll(".rs-block").length;
  });
  document.querySelectorAll("#not-shown li[data-skipped]").forEach(li => {
    out.skipped[li.dataset.skipped] = li.innerText.trim();
  });
  document.querySelectorAll(".rs-table-block").forEach(t => {
    out.tables[t.id.slice(6)] = t.querySelectorAll("tbody tr").length;
  });
  return out;
}"""


def _check_common(pg: Page) -> None:
    """No console error, no request but the file, every section drawn or listed with its reason,
    every table showing its first page."""
    assert pg.console == [], pg.console
    assert pg.requests == [pg.url], pg.requests
    assert pg.blocked == []
    dom = pg.page.evaluate(_DOM_STATE)
    for s in pg.doc["sections"]:
        if s["shown"]:
            assert dom["sections"].get(s["slug"]) == len(s["blocks"]), s["slug"]
        else:
            assert dom["skipped"].get(s["slug"]), s["slug"]
    for b in (b for s in pg.doc["sections"] if s["shown"] for b in s["blocks"] if b["type"] == "table"):
        assert dom["tables"][b["id"]] == min(b["rows"], b["page_size"]), b["id"]


def _render_times(pg: Page) -> tuple[float, float]:
    """Our own render timer and the browser's load event end, in ms."""
    render_ms = pg.page.evaluate("RS.renderMs")
    load_ms = pg.page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd")
    return float(render_ms), float(load_ms)


def test_demo_report(browser, reports, shots):
    pg = Page(browser, reports["demo"])
    try:
        _check_common(pg)
        shown = {s["slug"] for s in pg.doc["sections"] if s["shown"]}
        assert {"overview", "gpu-busy", "top-kernels"} <= shown
        # renders fast: our own timer and the browser's load event; the faster of two loads, so a
        # busy machine (the suite runs on two workers) does not fail a page that is not slow
        render_ms, load_ms = _render_times(pg)
        if render_ms >= 2000 or load_ms >= 2000:
            pg.page.reload()
            pg.page.wait_for_selector("body[data-ready='1']", timeout=15_000)
            again = _render_times(pg)
            render_ms, load_ms = min(render_ms, again[0]), min(load_ms, again[1])
        assert render_ms < 2000, render_ms
        assert 0 < load_ms < 2000, load_ms
        # a chart has its data points: one bar per (rank, series) in the GPU busy chart
        fig = pg.page.locator("#chart-gpu-busy-chart")
        block = next(b for s in pg.doc["sections"] for b in s["blocks"] if b["id"] == "gpu-busy-chart")
        expected = sum(v is not None for ser in block["series"] for v in ser["values"])
        assert expected == 16
        assert int(fig.get_attribute("data-points")) == expected
        assert fig.locator("rect.pt").count() == expected
        # hover shows the value as a tooltip
        fig.locator("rect.pt").first.hover()
        tip = pg.page.locator(".rs-tip")
        assert tip.is_visible() and "rank 0" in tip.inner_text()
        # a table sorts: click count (numeric → descending first), then again (ascending)
        t = pg.page.locator("#table-top-kernels-table")
        col = [
            c["name"]
            for c in next(b for s in pg.doc["sections"] for b in s["blocks"] if b["id"] == "top-kernels-table")[
                "columns"
            ]
        ].index("count")
        t.locator("thead tr").first.locator("th").nth(col).click()
        vals = [int(x.replace(",", "")) for x in t.locator(f"tbody tr td:nth-child({col + 1})").all_inner_texts()]
        assert vals == sorted(vals, reverse=True) and len(vals) == 25
        t.locator("thead tr").first.locator("th").nth(col).click()
        vals = [int(x.replace(",", "")) for x in t.locator(f"tbody tr td:nth-child({col + 1})").all_inner_texts()]
        assert vals == sorted(vals)
        # search and filter
        t.locator("input[type=search]").fill("sgemm")
        names = t.locator("tbody tr td:nth-child(2)").all_inner_texts()
        assert names and all("sgemm" in n for n in names)
        t.locator("input[type=search]").fill("")
        t.locator("tr.rs-filters input").nth(col).fill(">10")
        counts = [int(x.replace(",", "")) for x in t.locator(f"tbody tr td:nth-child({col + 1})").all_inner_texts()]
        assert counts and all(c > 10 for c in counts)
        # paging
        t.locator("tr.rs-filters input").nth(col).fill("")
        t.locator("button.rs-next").click()
        assert "rows 26–" in t.locator(".rs-count").inner_text()
        # a legend entry hides its series
        fig.locator(".rs-legend .rs-key").first.click()
        assert fig.locator("rect.pt").count() == 8
        fig.locator(".rs-legend .rs-key").first.click()
        # line charts zoom: drag over the left half, fewer points drawn; double-click resets
        q = pg.page.locator("#chart-queue-chart")
        if q.count():
            full = int(q.get_attribute("data-points"))
            q.scroll_into_view_if_needed()
            box = q.locator("svg rect[fill=transparent]").bounding_box()
            pg.page.mouse.move(box["x"] + 2, box["y"] + box["height"] / 2)
            pg.page.mouse.down()
            pg.page.mouse.move(box["x"] + box["width"] * 0.3, box["y"] + box["height"] / 2, steps=5)
            pg.page.mouse.up()
            zoomed = int(q.get_attribute("data-points"))
            assert 0 < zoomed < full
            q.locator("svg rect[fill=transparent]").dblclick()
            assert int(q.get_attribute("data-points")) == full
        pg.page.screenshot(path=str(shots / "demo.png"), full_page=True)
        if os.environ.get("RANKSIGHT_SAVE_SCREENSHOT") == "1":
            pg.page.evaluate("window.scrollTo(0, 0)")
            pg.page.set_viewport_size({"width": 1280, "height": 1000})
            pg.page.screenshot(path=str(ROOT / "docs" / "img" / "report.png"))
    finally:
        pg.close()


@pytest.mark.parametrize("name", ["trace_filter", "bert"])
def test_other_real_traces(browser, reports, shots, name):
    pg = Page(browser, reports[name])
    try:
        _check_common(pg)
        assert "overview" in {s["slug"] for s in pg.doc["sections"] if s["shown"]}
        figs = pg.page.locator("figure.rs-chart")
        for i in range(figs.count()):
            assert int(figs.nth(i).get_attribute("data-points") or 0) >= 0
        pg.page.screenshot(path=str(shots / f"{name}.png"), full_page=True)
    finally:
        pg.close()


def test_malicious_names_render_as_text(browser, reports, shots):
    pg = Page(browser, reports["malicious"])
    try:
        _check_common(pg)
        page = pg.page
        assert page.evaluate("typeof window.__pwned") == "undefined"
        assert page.locator("script").count() == 2
        assert page.locator("main img, main b, main i, main style, main svg[onload]").count() == 0
        text = page.locator("main").inner_text()
        for name in (
            "</script><script>window.__pwned=1</script>",
            '<img src=x onerror="window.__pwned=2">',
            "<svg onload=window.__pwned=4>",
            "{{ 7*7 }} ${alert(3)}",
        ):
            assert name in text, name
        # the title too
        assert "</script><script>window.__pwned=9</script><b>t</b>" in page.locator("header h1").inner_text()
        assert "</script><script>window.__pwned=9</script>" in page.title()
        page.screenshot(path=str(shots / "malicious.png"), full_page=True)
    finally:
        pg.close()
