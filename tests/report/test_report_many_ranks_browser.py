"""The report of more than 32 ranks in headless Chromium: the compressed payload inflates, the
rank × step heatmap draws on its canvas, the worst rank's detail shows first, and picking a rank
(typed, or clicked on the heatmap) shows that rank's numbers and rows. Skips loudly without
chromium or playwright, like ``test_report_browser.py``."""

from __future__ import annotations

import pytest
from tests.report.test_report_browser import Page, _check_common, browser, shots  # noqa: F401  (fixtures)

from ranksight.report.html import ranks as rkmod
from ranksight.report.html import render_html

SLOW = 13

#: the heatmap of 40 ranks × 3 steps: every cell's centre is painted (canvas units: 900 wide, rows of
#: 14 below a 10-unit margin, left margin 16 + 6.5 per character of the longest row label)
_CELLS = """(sel) => {
  const cv = document.querySelector(sel + " canvas"), g = cv.getContext("2d"), k = cv.width / 900;
  const left = 16 + 7 * 6.5, cw = (900 - left - 80) / 3;
  let n = 0;
  for (let i = 0; i < 40; i++) for (let j = 0; j < 3; j++) {
    const p = g.getImageData(Math.round((left + (j + 0.5) * cw) * k), Math.round((10 + i * 14 + 6) * k), 1, 1).data;
    if (p[3] === 255) n++;
  }
  return n;
}"""

_PAINTED = """(sel) => {
  const cv = document.querySelector(sel + " canvas");
  const d = cv.getContext("2d").getImageData(0, 0, cv.width, cv.height).data;
  let n = 0;
  for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
  return n;
}"""


@pytest.fixture(scope="module")
def many_page(browser, many_doc, tmp_path_factory):  # noqa: F811  (the imported fixture)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(rkmod, "PACK_MIN_BYTES", 0)  # the page holds the payload compressed
        html = render_html(many_doc)
    assert '"packed":"gzip-base64"' in html
    path = tmp_path_factory.mktemp("many-report") / "many.html"
    path.write_text(html, encoding="utf-8")
    pg = Page(browser, path)
    yield pg
    pg.close()


def test_many_ranks_report_draws(many_page, shots):  # noqa: F811
    pg = many_page
    _check_common(pg)
    page = pg.page
    assert page.evaluate("RS.renderMs") < 3000
    # the rank × step heatmap: one row per rank, painted on its canvas
    sel = "#chart-ranks-heat-temporal-step_time_us"
    assert int(page.get_attribute(sel, "data-rows")) == 40
    assert int(page.get_attribute(sel, "data-points")) == 40 * 3
    assert page.evaluate(_CELLS, sel) == 40 * 3
    # a bar per rank on a canvas, one headline at a time
    bars = "#chart-ranks-chart"
    assert int(page.get_attribute(bars, "data-points")) == 40 and page.evaluate(_PAINTED, bars) > 1000
    page.select_option(f"{bars} select", label="wait_caused_ms (ms)")
    assert int(page.get_attribute(bars, "data-drawn")) == 40
    # the worst rank's detail is shown first
    panel = page.locator(".rs-rank-panel")
    assert panel.get_attribute("data-rank") == str(SLOW)
    assert "one of the worst ranks" in panel.locator("h4").first.inner_text()
    page.locator("#sec-ranks").screenshot(path=str(shots / "many-ranks.png"))


def test_picking_a_rank_shows_its_detail(many_page):
    page = many_page.page
    panel = page.locator(".rs-rank-panel")
    page.fill("#rs-rank-input", "7")
    page.press("#rs-rank-input", "Enter")
    assert panel.get_attribute("data-rank") == "7"
    detail = next(b for s in many_page.doc["sections"] for b in s["blocks"] if b["id"] == "ranks-detail")
    assert panel.locator("#table-rank-headlines tbody tr").count() == len(detail["metrics"])
    # its rows in the per-rank tables: the temporal table has one row, of rank 7
    d = panel.locator('details[data-table="temporal-table"]')
    assert "1 row" in d.locator("summary").inner_text()
    d.locator("summary").click()
    assert d.locator("tbody tr").count() == 1
    assert d.locator("tbody tr td").first.inner_text() == "7"
    # a click on the heatmap's row of rank 20 picks rank 20
    sel = "#chart-ranks-heat-temporal-step_time_us canvas"
    page.locator(sel).scroll_into_view_if_needed()
    box = page.locator(sel).bounding_box()
    k = box["width"] / 900  # the canvas draws in 900 units
    cell, top, left = 14, 10, 16 + len("rank 39") * 6.5  # 40 rows of 14 units, labels of 7 characters
    page.mouse.click(box["x"] + (left + 40) * k, box["y"] + (top + 20 * cell + cell / 2) * k)
    assert panel.get_attribute("data-rank") == "20"
    # a rank not in the run says so
    page.fill("#rs-rank-input", "400")
    page.press("#rs-rank-input", "Enter")
    assert "no rank 400" in page.locator(".rs-rankpick .rs-count").inner_text()
