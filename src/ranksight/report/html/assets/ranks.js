/* ranksight report, many ranks: canvas charts that scale to thousands of ranks (a strip of bars
 * per rank, rank × step heatmaps), the rank picker and the detail of the picked rank. Labels are
 * set with textContent; nothing from the payload is parsed as HTML. */
(function () {
  "use strict";
  var RS = (window.RS = window.RS || {});
  var h = RS.h;
  var MAX_ROWS_PX = 600;

  function ticks(lo, hi, n) {
    if (!(hi > lo)) hi = lo + 1;
    var step = Math.pow(10, Math.floor(Math.log10((hi - lo) / n)));
    var err = (hi - lo) / n / step;
    if (err >= 7.5) step *= 10; else if (err >= 3.5) step *= 5; else if (err >= 1.5) step *= 2;
    var out = [];
    var t = Math.floor(lo / step) * step;
    for (; t < hi + step; t += step) { out.push(+t.toPrecision(12)); if (t >= hi - step * 1e-9) break; }
    return out;  // from at or below lo to at or above hi: every bar fits
  }
  function short(v) {
    var a = Math.abs(v);
    if (a >= 1e9) return +(v / 1e9).toPrecision(3) + "G";
    if (a >= 1e6) return +(v / 1e6).toPrecision(3) + "M";
    if (a >= 1e4) return +(v / 1e3).toPrecision(3) + "k";
    if (a === 0) return "0";
    if (a < 0.01) return v.toExponential(0);
    return String(+v.toPrecision(3));
  }
  function unitOf(u) { return u ? " " + u : ""; }
  function css(name, fallback) {
    var v = getComputedStyle(document.documentElement).getPropertyValue(name);
    return (v && v.trim()) || fallback;
  }
  function ramp(t) {
    var stops = [[255, 247, 220], [253, 174, 97], [215, 48, 39], [103, 0, 13]];
    t = Math.max(0, Math.min(1, t)) * (stops.length - 1);
    var i = Math.min(stops.length - 2, Math.floor(t)), f = t - i, a = stops[i], b = stops[i + 1];
    return "rgb(" + [0, 1, 2].map(function (k) { return Math.round(a[k] + (b[k] - a[k]) * f); }).join(",") + ")";
  }
  /* "0–3,7,9–12" */
  RS.rankRanges = function (ranks) {
    var rs = ranks.slice().sort(function (a, b) { return a - b; }), out = [], i = 0;
    while (i < rs.length) {
      var j = i;
      while (j + 1 < rs.length && rs[j + 1] === rs[j] + 1) j++;
      out.push(j > i ? rs[i] + "–" + rs[j] : String(rs[i]));
      i = j + 1;
    }
    return out.join(",");
  };
  /* a canvas chart: role img, named by the chart's title; its fallback content says what it draws */
  function canvas(fig, W, H, name, desc) {
    var dpr = window.devicePixelRatio || 1;
    var cv = h("canvas", { width: Math.round(W * dpr), height: Math.round(H * dpr), "class": "rs-canvas", role: "img",
      "aria-label": name + (desc ? ": " + desc : "") }, fig, desc || name);
    cv.style.width = "100%";
    cv.style.maxWidth = W + "px";
    cv.style.aspectRatio = W + " / " + H;
    var g = cv.getContext("2d");
    g.scale(dpr, dpr);
    g.font = "11px system-ui, sans-serif";
    return { cv: cv, g: g };
  }
  /* canvas pixel of a mouse event in the drawing's own units */
  function at(cv, W, ev) {
    var r = cv.getBoundingClientRect(), k = W / r.width;
    return { x: (ev.clientX - r.left) * k, y: (ev.clientY - r.top) * k };
  }
  /* buckets of consecutive items over `px` pixels: [start, end) per bucket */
  function buckets(n, px) {
    var nb = Math.min(n, Math.max(1, Math.floor(px))), out = [];
    for (var b = 0; b < nb; b++) out.push([Math.floor(b * n / nb), Math.floor((b + 1) * n / nb)]);
    return out;
  }

  /* ---- a bar per rank on a canvas ------------------------------------------------------------- */
  function rankbars(fig, c, S) {
    var ranks = c.ranks, n = ranks.length, names = c.series.map(function (x) { return S[x.name]; });
    var labels = c.labels ? c.labels.map(function (i) { return S[i]; }) : ranks.map(function (r) { return "rank " + r; });
    var W = 900, H = 260, m = { l: 64, r: 16, t: 10, b: 36 }, pw = W - m.l - m.r, ph = H - m.t - m.b;
    var sel = 0, tools = null;
    if (c.select) {
      tools = h("div", { "class": "rs-chart-tools" }, fig);
      h("span", null, tools, "headline: ");
      var box = h("select", { "aria-label": "headline" }, tools);
      names.forEach(function (nm, i) { h("option", { value: i }, box, nm + (c.series[i].unit ? " (" + c.series[i].unit + ")" : "")); });
      box.addEventListener("change", function () { sel = +box.value; draw(); });
    } else if (names.length > 1) {
      var lg = h("div", { "class": "rs-legend" }, fig);
      names.forEach(function (nm, i) {
        var sp = h("span", { "class": "rs-key" }, lg), sw = h("span", { "class": "rs-sw" }, sp);
        sw.style.background = RS.color(i);
        sp.appendChild(document.createTextNode(nm));
      });
    }
    var cc = canvas(fig, W, H, RS.chartName(c, "bars per rank"), (c.stacked ? "stacked " : "") + "bars of " + names.join(", ") +
      " for each of " + n + " ranks"), cv = cc.cv, g = cc.g;
    var bk = buckets(n, pw), rep = [], lo = 0, hi = 0, shown = [];
    function val(i, k) { var v = c.series[k].values[i]; return v == null || !isFinite(v) ? null : v; }
    function draw() {
      shown = c.select ? [sel] : c.series.map(function (_, k) { return k; });
      // per bucket: the rank with the largest total (stacked) or largest value: outliers stay visible
      lo = 0; hi = 0; rep = [];
      bk.forEach(function (b) {
        var best = -1, bestV = -Infinity;
        for (var i = b[0]; i < b[1]; i++) {
          var tot = 0, any = false;
          shown.forEach(function (k) {
            var v = val(i, k);
            if (v == null) return;
            any = true;
            tot = c.stacked ? tot + v : Math.max(tot, v);
            if (!c.stacked && v < lo) lo = v;
          });
          if (c.stacked) shown.forEach(function (k) { var v = val(i, k); if (v != null && v < 0) lo = Math.min(lo, v); });
          if (any && (best < 0 || Math.abs(tot) > bestV)) { best = i; bestV = Math.abs(tot); }
          if (any && tot > hi) hi = tot;
        }
        rep.push(best);
      });
      var tk = ticks(lo, hi > lo ? hi : lo + 1, 5), y0 = tk[0], y1 = tk[tk.length - 1];
      function ys(v) { return m.t + ph - (v - y0) / (y1 - y0) * ph; }
      g.clearRect(0, 0, W, H);
      var muted = css("--muted", "#5b6675"), line = css("--line", "#dde2e8");
      g.fillStyle = muted; g.strokeStyle = line; g.textAlign = "right";
      tk.forEach(function (t) {
        g.beginPath(); g.moveTo(m.l, ys(t) + 0.5); g.lineTo(W - m.r, ys(t) + 0.5); g.stroke();
        g.fillText(short(t), m.l - 6, ys(t) + 4);
      });
      var cw = pw / bk.length, drawn = 0;
      bk.forEach(function (b, j) {
        var i = rep[j];
        if (i < 0) return;
        var x = m.l + j * cw, w = Math.max(1, cw - (cw > 3 ? 1 : 0)), base = 0;
        var order = shown.slice();
        if (!c.stacked) order.sort(function (a, z) { return (val(i, z) || 0) - (val(i, a) || 0); });
        order.forEach(function (k) {
          var v = val(i, k);
          if (v == null) return;
          var a = c.stacked ? base : 0, z = c.stacked ? base + v : v;
          g.fillStyle = RS.color(c.select ? 0 : k);
          g.fillRect(x, Math.min(ys(a), ys(z)), w, Math.max(1, Math.abs(ys(a) - ys(z))));
          if (c.stacked) base += v;
          drawn++;
        });
      });
      if (RS.picked != null) {
        var pi = ranks.indexOf(RS.picked);
        if (pi >= 0) {
          var pj = Math.min(bk.length - 1, Math.floor(pi * bk.length / n));
          g.strokeStyle = css("--accent", "#2f6fb3"); g.lineWidth = 2;
          g.strokeRect(m.l + pj * cw - 1, m.t, Math.max(2, cw) + 2, ph);
          g.lineWidth = 1;
        }
      }
      g.fillStyle = muted; g.textAlign = "center";
      var every = Math.max(1, Math.ceil(bk.length / 12));
      for (var j = 0; j < bk.length; j += every) g.fillText(String(ranks[bk[j][0]]), m.l + j * cw + cw / 2, H - m.b + 14);
      g.fillText("rank" + (bk.length < n ? " (each column: " + (n / bk.length).toFixed(1) + " ranks, the largest shown)" : ""), m.l + pw / 2, H - 6);
      fig.setAttribute("data-points", n);
      fig.setAttribute("data-drawn", drawn);
    }
    function hit(ev) {
      var p = at(cv, W, ev), j = Math.floor((p.x - m.l) / (pw / bk.length));
      if (j < 0 || j >= bk.length || p.y < m.t || p.y > m.t + ph) return -1;
      return rep[j];
    }
    cv.addEventListener("mousemove", function (ev) {
      var i = hit(ev);
      if (i < 0) { RS.hideTip(); return; }
      var lines = [labels[i]];
      shown.forEach(function (k) {
        var u = c.select ? c.series[k].unit : c.unit;
        lines.push(names[k] + ": " + RS.fmt(val(i, k)) + unitOf(u));
      });
      lines.push("click: this rank's detail");
      RS.showTip(ev, lines);
    });
    cv.addEventListener("mouseleave", RS.hideTip);
    cv.addEventListener("click", function (ev) { var i = hit(ev); if (i >= 0) RS.pickRank(ranks[i], true); });
    RS.onPick(draw);
    RS.onTheme(draw);
    draw();
    fig.rsDraw = draw;
  }

  /* ---- heatmap on a canvas (rows bucketed beyond 600 px: a bucket shows its largest value) ---- */
  function heatmapCanvas(fig, c, S) {
    var rows = c.rows.map(function (i) { return S[i]; }), cols = c.cols.map(function (i) { return S[i]; });
    var nr = rows.length, nc = cols.length, byRow = c.scale === "row";
    var cellH = Math.max(1, Math.min(14, Math.floor(MAX_ROWS_PX / Math.max(1, nr))));
    var rb = buckets(nr, nr * cellH > MAX_ROWS_PX ? MAX_ROWS_PX : nr), bh = Math.max(1, Math.min(14, MAX_ROWS_PX / rb.length));
    var labelRows = rb.length === nr && bh >= 10;
    var maxLab = labelRows ? rows.reduce(function (a, t) { return Math.max(a, Math.min(String(t).length, 30)); }, 0) : 12;
    var W = 900, m = { l: 16 + maxLab * 6.5, r: 80, t: 10, b: 50 }, ph = rb.length * bh, H = m.t + m.b + Math.max(40, ph);
    var cc = canvas(fig, W, H, RS.chartName(c, "heatmap"), "heatmap of " + nr + " rows (" + (c.y_label || "rows") + ") by " + nc +
      " columns (" + (c.x_label || "columns") + ")" + (c.unit ? " in " + c.unit : "")), cv = cc.cv, g = cc.g, cw = (W - m.l - m.r) / Math.max(1, nc);
    var lo = Infinity, hi = -Infinity, rlo = [], rhi = [], pts = 0;
    c.values.forEach(function (r, i) {
      var a = Infinity, z = -Infinity;
      r.forEach(function (v) { if (v != null) { pts++; a = Math.min(a, v); z = Math.max(z, v); } });
      rlo.push(a); rhi.push(z); lo = Math.min(lo, a); hi = Math.max(hi, z);
      void i;
    });
    if (lo === Infinity) { lo = 0; hi = 1; }
    // per bucket and column: the row with the largest value
    var pick = rb.map(function (b) {
      return cols.map(function (_, j) {
        var best = -1, bv = -Infinity;
        for (var i = b[0]; i < b[1]; i++) {
          var v = c.values[i][j];
          if (v == null) continue;
          var t = byRow ? (rhi[i] > rlo[i] ? (v - rlo[i]) / (rhi[i] - rlo[i]) : 0.5) : v;
          if (t > bv) { bv = t; best = i; }
        }
        return best;
      });
    });
    function draw() {
      g.clearRect(0, 0, W, H);
      pick.forEach(function (row, bi) {
        row.forEach(function (i, j) {
          if (i < 0) return;
          var v = c.values[i][j], a = byRow ? rlo[i] : lo, z = byRow ? rhi[i] : hi;
          g.fillStyle = ramp(z > a ? (v - a) / (z - a) : 0.5);
          g.fillRect(m.l + j * cw, m.t + bi * bh, Math.max(0.5, cw - (cw > 3 ? 0.5 : 0)), Math.max(1, bh - (bh > 3 ? 1 : 0)));
        });
      });
      var muted = css("--muted", "#5b6675");
      g.fillStyle = muted; g.textAlign = "right";
      var everyR = labelRows ? 1 : Math.max(1, Math.ceil(rb.length / 20));
      for (var bi = 0; bi < rb.length; bi += everyR) {
        var t = labelRows ? rows[rb[bi][0]] : (c.row_ranks ? String(c.row_ranks[rb[bi][0]]) : rows[rb[bi][0]]);
        g.fillText(String(t).slice(0, 30), m.l - 6, m.t + bi * bh + Math.min(bh, 12) / 2 + 4);
      }
      g.textAlign = "center";
      var every = Math.max(1, Math.ceil(nc / 24));
      for (var j = 0; j < nc; j += every) g.fillText(String(cols[j]).slice(0, 10), m.l + j * cw + cw / 2, m.t + ph + 14);
      if (c.x_label) g.fillText(c.x_label, (m.l + W - m.r) / 2, H - 8);
      if (RS.picked != null && c.row_ranks) {
        var pr = c.row_ranks.indexOf(RS.picked);
        if (pr >= 0) {
          var pb = Math.min(rb.length - 1, Math.floor(pr * rb.length / nr));
          g.strokeStyle = css("--accent", "#2f6fb3"); g.lineWidth = 2;
          g.strokeRect(m.l - 1, m.t + pb * bh - 1, W - m.l - m.r + 2, Math.max(2, bh) + 2);
          g.lineWidth = 1;
        }
      }
      var lx = W - m.r + 20, lh = Math.max(40, ph);
      for (var k = 0; k < 20; k++) { g.fillStyle = ramp(k / 19); g.fillRect(lx, m.t + lh - (k + 1) * lh / 20, 12, lh / 20 + 0.5); }
      g.fillStyle = muted; g.textAlign = "left";
      g.fillText(byRow ? "row max" : short(hi) + (c.unit ? " " + c.unit : ""), lx + 16, m.t + 10);
      g.fillText(byRow ? "row min" : short(lo), lx + 16, m.t + lh);
    }
    function hit(ev) {
      var p = at(cv, W, ev), bi = Math.floor((p.y - m.t) / bh), j = Math.floor((p.x - m.l) / cw);
      if (bi < 0 || bi >= rb.length || j < 0 || j >= nc) return null;
      return { bi: bi, j: j, i: pick[bi][j] };
    }
    cv.addEventListener("mousemove", function (ev) {
      var q = hit(ev);
      if (!q) { RS.hideTip(); return; }
      var b = rb[q.bi], i = q.i >= 0 ? q.i : b[0], v = q.i >= 0 ? c.values[i][q.j] : null;
      var lines = [(c.y_label || "row") + ": " + rows[i] + (b[1] - b[0] > 1 ? " (largest of " + rows[b[0]] + " – " + rows[b[1] - 1] + ")" : ""),
        (c.x_label || "column") + ": " + cols[q.j], "value: " + (v == null ? "n/a" : RS.fmt(v) + unitOf(c.unit))];
      if (c.row_ranks) lines.push("click: this rank's detail");
      RS.showTip(ev, lines);
    });
    cv.addEventListener("mouseleave", RS.hideTip);
    if (c.row_ranks) cv.addEventListener("click", function (ev) {
      var q = hit(ev);
      if (q) RS.pickRank(c.row_ranks[q.i >= 0 ? q.i : rb[q.bi][0]], true);
    });
    RS.onPick(draw);
    RS.onTheme(draw);
    draw();
    fig.setAttribute("data-points", pts);
    fig.setAttribute("data-rows", nr);
  }

  /* ---- picking a rank ------------------------------------------------------------------------ */
  var listeners = [];
  RS.picked = null;
  RS.onPick = function (f) { listeners.push(f); };
  RS.pickRank = function (r, scroll) {
    RS.picked = r;
    listeners.forEach(function (f) { f(r); });
    if (scroll && RS.detailHost) RS.detailHost.scrollIntoView({ block: "start" });
  };

  /* every table of the report with an integer "rank" column */
  function rankTables() {
    var out = [];
    (RS.doc.sections || []).forEach(function (sec) {
      if (!sec.shown) return;
      sec.blocks.forEach(function (b) {
        if (b.type !== "table" || !b.columns) return;
        var ci = -1;
        b.columns.forEach(function (c, i) { if (c.name === "rank" && c.kind === "int") ci = i; });
        if (ci >= 0) out.push({ sec: sec, b: b, ci: ci });
      });
    });
    return out;
  }
  function stepHeatmaps() {
    var out = [];
    (RS.doc.sections || []).forEach(function (sec) {
      if (!sec.shown) return;
      sec.blocks.forEach(function (b) { if (b.type === "chart" && b.chart === "heatmap" && b.row_ranks) out.push(b); });
    });
    return out;
  }

  RS.rankdetail = function (parent, b, S) {
    var wrap = h("div", { "class": "rs-rankdetail", id: "rankdetail-" + b.id }, parent);
    RS.detailHost = wrap;
    var bar = h("div", { "class": "rs-table-bar rs-rankpick" }, wrap);
    h("label", { "for": "rs-rank-input" }, bar, "Rank ");
    var input = h("input", { type: "number", id: "rs-rank-input", min: 0, step: 1, "aria-label": "rank to show" }, bar);
    var go = h("button", { type: "button", "class": "rs-rank-go" }, bar, "show");
    var msg = h("span", { "class": "rs-count" }, bar);
    function chips(title, list, cls) {
      if (!list.length) return;
      var line = h("div", { "class": "rs-chips " + cls }, wrap);
      h("span", { "class": "rs-chip-title" }, line, title + ": ");
      list.slice(0, 24).forEach(function (r) {
        var btn = h("button", { type: "button", "class": "rs-chip", "data-rank": r }, line, String(r));
        btn.addEventListener("click", function () { RS.pickRank(r); });
      });
      if (list.length > 24) h("span", { "class": "rs-count" }, line, " … " + (list.length - 24) + " more");
    }
    chips("worst ranks", b.worst, "rs-worst");
    chips("outlier ranks", b.outliers, "rs-outliers");
    var panel = h("div", { "class": "rs-rank-panel" }, wrap);
    var known = {};
    b.ranks.forEach(function (r, i) { known[r] = i; });
    var focus = {};
    b.focus.forEach(function (r) { focus[r] = true; });
    function show(r) {
      while (panel.firstChild) panel.removeChild(panel.firstChild);
      if (!(r in known)) { msg.textContent = "no rank " + r + " in this run (ranks " + RS.rankRanges(b.ranks) + ")"; return; }
      msg.textContent = "";
      input.value = r;
      var i = known[r];
      panel.setAttribute("data-rank", r);
      var tags = [];
      if (b.worst.indexOf(r) >= 0) tags.push("one of the worst ranks");
      if (b.outliers.indexOf(r) >= 0) tags.push("outlier");
      h("h4", null, panel, "Rank " + r + (tags.length ? " · " + tags.join(" · ") : ""));
      // headlines: value, median over ranks, robust z
      var cols = [{ name: "headline", kind: "str" }, { name: "value", kind: "float" }, { name: "unit", kind: "str" },
        { name: "p50", kind: "float", help: "nearest-rank median over ranks" },
        { name: "robust_z", kind: "float", help: "(value − median) / (1.4826 · MAD); outlier beyond ±" + b.outlier_z },
        { name: "outlier", kind: "str" }];
      var local = [], data = cols.map(function () { return []; });
      function str(t) { local.push(String(t)); return S.length + local.length - 1; }
      b.metrics.forEach(function (mt) {
        var z = mt.z[i];
        data[0].push(mt.name); data[1].push(mt.values[i]); data[2].push(str(mt.unit));
        data[3].push(mt.p50); data[4].push(z);
        data[5].push(str(z != null && Math.abs(z) > b.outlier_z ? (z > 0 ? "high" : "low") : ""));
      });
      var S2 = S.concat(local);
      RS.table(panel, { id: "rank-headlines", title: "Headlines", columns: cols, data: data, rows: b.metrics.length, page_size: 50 }, S2);
      // per step, from the rank × step heatmaps
      stepHeatmaps().forEach(function (hm) {
        var ri = hm.row_ranks.indexOf(r);
        if (ri < 0) return;
        var sc = [{ name: "step", kind: "str" }, { name: "value", kind: "float", unit: hm.unit }];
        RS.table(panel, { id: "rank-" + hm.id, title: hm.title + " (" + hm.unit + ")", columns: sc,
          data: [hm.cols.slice(), hm.values[ri].slice()], rows: hm.cols.length, page_size: 10 }, S);
      });
      // the rank's rows in every per-rank table
      var tables = rankTables(), shown = 0;
      var det = h("div", { "class": "rs-rank-tables" }, panel);
      h("h4", null, det, "Its rows in every per-rank table (" + tables.length + ")");
      tables.forEach(function (t) {
        var rows = [], col = t.b.data[t.ci];
        for (var k = 0; k < col.length; k++) if (col[k] === r) rows.push(k);
        var d = h("details", { "class": "rs-rank-table", "data-table": t.b.id }, det);
        var sub = t.b.rank_subset && t.b.rank_subset.ranks.indexOf(r) < 0;
        h("summary", null, d, t.sec.title + " · " + (t.b.title || t.b.id) + " — " +
          (sub ? "not embedded" : rows.length + " row" + (rows.length === 1 ? "" : "s")));
        if (sub) {
          if (t.b.rank_subset.reason === "detail") h("p", { "class": "rs-help" }, d, "This operator-level table was computed for " +
            t.b.rank_subset.ranks.length + " of " + t.b.rank_subset.of + " ranks (the focus ranks): `ranksight report --detail-ranks " + r +
            "` adds this rank; `ranksight analyze " + (t.sec.needs[0] || "…") + " --rank " + r + " --format csv` writes its rows.");
          else h("p", { "class": "rs-help" }, d, "This table embeds the rows of " + t.b.rank_subset.ranks.length + " of " +
            t.b.rank_subset.of + " ranks (every rank's would exceed the report's size budget): `ranksight analyze " +
            (t.sec.needs[0] || "…") + " --rank " + r + " --format csv` writes this rank's.");
          return;
        }
        if (!rows.length) return;
        shown++;
        var data2 = t.b.data.map(function (c) { return rows.map(function (k) { return c[k]; }); });
        RS.table(d, { id: "rank-" + t.b.id, title: "", caption: t.sec.title + " · " + (t.b.title || t.b.id) + ": rank " + r,
          columns: t.b.columns, data: data2, rows: rows.length,
          page_size: 10, sort: t.b.sort }, S);
      });
      det.setAttribute("data-tables", shown);
    }
    go.addEventListener("click", function () { if (input.value !== "") RS.pickRank(parseInt(input.value, 10)); });
    input.addEventListener("keydown", function (ev) { if (ev.key === "Enter" && input.value !== "") RS.pickRank(parseInt(input.value, 10)); });
    RS.onPick(show);
    if (b.worst.length) RS.initialRank = b.worst[0];
    return wrap;
  };

  /* charts.js draws heatmaps in SVG; a many-rank report's (canvas: true) are drawn here */
  var svgHeatmap = RS.charts.heatmap;
  RS.charts.heatmap = function (fig, c, S) { return c.canvas ? heatmapCanvas(fig, c, S) : svgHeatmap(fig, c, S); };
  RS.charts.rankbars = rankbars;
})();
