/* ranksight charts: a small SVG chart library (bar, line, heatmap, histogram).
 * Every label comes from the payload's string table and is set with textContent or
 * setAttribute, never parsed as HTML. Each data mark has class "pt"; each figure carries
 * data-points = the number of values it draws. */
(function () {
  "use strict";
  var RS = (window.RS = window.RS || {});
  var NS = "http://www.w3.org/2000/svg";
  var PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac", "#1f77b4", "#d62728"];
  RS.color = function (i) { return PALETTE[i % PALETTE.length]; };

  function h(tag, attrs, parent, text) {
    var e = document.createElement(tag);
    if (attrs) for (var k in attrs) if (attrs[k] != null) e.setAttribute(k, attrs[k]);
    if (text != null) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  function s(tag, attrs, parent, text) {
    var e = document.createElementNS(NS, tag);
    if (attrs) for (var k in attrs) if (attrs[k] != null) e.setAttribute(k, attrs[k]);
    if (text != null) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  RS.h = h;
  RS.s = s;

  /* ---- theme: light or dark by the system's colour scheme (prefers-color-scheme) until the
   * switch sets data-theme on <html>; canvases that read the CSS colours redraw on a change ---- */
  var themed = [];
  RS.onTheme = function (f) { themed.push(f); };
  RS.isDark = function () {
    var t = document.documentElement.getAttribute("data-theme");
    if (t === "dark" || t === "light") return t === "dark";
    return !!(window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches);
  };
  RS.themeChanged = function () { themed.forEach(function (f) { f(); }); };
  if (window.matchMedia) {
    var mq = window.matchMedia("(prefers-color-scheme: dark)");
    if (mq.addEventListener) mq.addEventListener("change", function () { RS.themeChanged(); });
  }

  /* ---- numbers -------------------------------------------------------------------------- */
  RS.fmt = function (v) {
    if (v == null || (typeof v === "number" && !isFinite(v))) return "";
    if (typeof v !== "number") return String(v);
    var a = Math.abs(v);
    if (Number.isInteger(v)) return v.toLocaleString("en-US");
    if (a >= 1000) return v.toLocaleString("en-US", { maximumFractionDigits: 0 });
    if (a >= 1 || a === 0) return v.toLocaleString("en-US", { maximumFractionDigits: 2 });
    return v.toPrecision(3);
  };
  function short(v) {
    var a = Math.abs(v);
    if (a >= 1e9) return +(v / 1e9).toPrecision(3) + "G";
    if (a >= 1e6) return +(v / 1e6).toPrecision(3) + "M";
    if (a >= 1e4) return +(v / 1e3).toPrecision(3) + "k";
    if (a === 0) return "0";
    if (a < 0.01) return v.toExponential(0);
    return String(+v.toPrecision(3));
  }
  /* nice ticks from the last round tick at or below lo to the first at or above hi: an axis
   * drawn from the first tick to the last contains every value in [lo, hi] */
  function ticks(lo, hi, n) {
    if (!(hi > lo)) { hi = lo + 1; }
    var step = Math.pow(10, Math.floor(Math.log10((hi - lo) / n)));
    var err = (hi - lo) / n / step;
    if (err >= 7.5) step *= 10; else if (err >= 3.5) step *= 5; else if (err >= 1.5) step *= 2;
    var out = [], i0 = Math.floor(lo / step + 1e-9), i1 = Math.ceil(hi / step - 1e-9);
    for (var i = i0; i <= i1; i++) out.push(+(i * step).toPrecision(12));
    if (out.length < 2) out.push(+((i1 + 1) * step).toPrecision(12));
    return out;
  }
  RS.ticks = ticks;
  function logTicks(lo, hi) {
    var out = [];
    for (var e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
      var t = Math.pow(10, e);
      if (t >= lo * 0.999 && t <= hi * 1.001) out.push(t);
    }
    if (out.length < 2) { out = [lo, hi]; }
    return out;
  }
  function lin(d0, d1, r0, r1) {
    var k = d1 === d0 ? 0 : (r1 - r0) / (d1 - d0);
    var f = function (v) { return r0 + (v - d0) * k; };
    f.inv = function (p) { return k === 0 ? d0 : d0 + (p - r0) / k; };
    return f;
  }
  function logs(d0, d1, r0, r1) {
    var a = Math.log(d0), b = Math.log(d1), g = lin(a, b, r0, r1);
    var f = function (v) { return g(Math.log(v)); };
    f.inv = function (p) { return Math.exp(g.inv(p)); };
    return f;
  }
  function clip(t, n) { t = String(t); return t.length > n ? t.slice(0, n - 1) + "…" : t; }
  /* an SVG text of at most n characters; when cut, its <title> holds the full text (the browser's
   * tooltip, and what a screen reader reads) */
  function clipText(g, attrs, text, n) {
    var full = String(text), t = s("text", attrs, g, clip(full, n));
    if (full.length > n) s("title", null, t, full);
    return t;
  }
  RS.clipText = clipText;

  /* ---- tooltip -------------------------------------------------------------------------- */
  var tip = null;
  function showTip(ev, lines) {
    if (!tip) tip = h("div", { "class": "rs-tip", role: "tooltip" }, document.body);
    tip.textContent = lines.join("\n");
    tip.style.display = "block";
    var x = ev.pageX + 14, y = ev.pageY + 12;
    var w = tip.offsetWidth;
    if (x + w > window.scrollX + document.documentElement.clientWidth - 8) x = ev.pageX - w - 14;
    tip.style.left = x + "px";
    tip.style.top = y + "px";
  }
  function hideTip() { if (tip) tip.style.display = "none"; }
  RS.showTip = showTip;
  RS.hideTip = hideTip;
  function hover(el, lines) {
    el.addEventListener("mousemove", function (ev) { showTip(ev, lines()); });
    el.addEventListener("mouseleave", hideTip);
  }

  /* ---- shared pieces -------------------------------------------------------------------- */
  function legend(fig, names, hidden, redraw) {
    var lg = h("div", { "class": "rs-legend" }, fig);
    names.forEach(function (n, i) {
      var full = String(n);
      var sp = h("span", { "class": "rs-key", title: (full.length > 60 ? full + " — " : "") + "click to show or hide",
        role: "button", tabindex: "0", "aria-pressed": hidden[i] ? "false" : "true" }, lg);
      var sw = h("span", { "class": "rs-sw" }, sp);
      sw.style.background = RS.color(i);
      sp.appendChild(document.createTextNode(clip(full, 60)));
      if (hidden[i]) sp.classList.add("off");
      function flip() {
        hidden[i] = !hidden[i];
        sp.classList.toggle("off", hidden[i]);
        sp.setAttribute("aria-pressed", hidden[i] ? "false" : "true");
        redraw();
      }
      sp.addEventListener("click", flip);
      sp.addEventListener("keydown", function (ev) { if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); flip(); } });
    });
    return lg;
  }
  /* the chart's SVG: role img, named by the chart's title (aria-label and <title>) and described
   * (<desc>: the kind of chart and its series) */
  function svgRoot(fig, w, hgt, name, desc) {
    var svg = s("svg", { viewBox: "0 0 " + w + " " + hgt, role: "img", preserveAspectRatio: "xMinYMin meet",
      "aria-label": name }, fig);
    describe(svg, name, desc);
    return svg;
  }
  function describe(svg, name, desc) {
    s("title", null, svg, name);
    if (desc) s("desc", null, svg, desc);
  }
  /* every redraw empties the SVG but its <title> and <desc>; records the plot area (x0,y0,x1,y1
   * in SVG units), which every data mark lies in */
  function clear(svg, x0, y0, x1, y1) {
    for (var k = svg.childNodes.length - 1; k >= 0; k--) {
      var ch = svg.childNodes[k];
      if (ch.nodeName !== "title" && ch.nodeName !== "desc") svg.removeChild(ch);
    }
    svg.setAttribute("data-plot", [x0, y0, x1, y1].join(","));
  }
  function chartName(c, kind) { return c.title || c.y_label || c.x_label || kind; }
  function seriesDesc(kind, names, extra) {
    var shown = names.slice(0, 12).map(String).join(", ");
    return kind + (names.length ? ", " + names.length + " series: " + shown + (names.length > 12 ? ", …" : "") : "") + (extra || "");
  }
  RS.svgRoot = svgRoot;
  RS.chartName = chartName;
  function yAxis(g, sc, tk, x0, x1, fmtf) {
    var ax = s("g", { "class": "rs-axis" }, g), gr = s("g", { "class": "rs-grid" }, g);
    tk.forEach(function (t) {
      var y = sc(t);
      s("line", { x1: x0, x2: x1, y1: y, y2: y }, gr);
      s("text", { x: x0 - 6, y: y + 4, "text-anchor": "end" }, ax, (fmtf || short)(t));
    });
    s("line", { x1: x0, x2: x0, y1: sc(tk[0]), y2: sc(tk[tk.length - 1]) }, ax);
  }
  function xAxis(g, sc, tk, y0, fmtf) {
    var ax = s("g", { "class": "rs-axis" }, g);
    tk.forEach(function (t) {
      var x = sc(t);
      s("line", { x1: x, x2: x, y1: y0, y2: y0 + 4 }, ax);
      s("text", { x: x, y: y0 + 16, "text-anchor": "middle" }, ax, (fmtf || short)(t));
    });
  }
  function label(g, text, x, y, rot) {
    if (!text) return;
    var t = s("text", { x: x, y: y, "text-anchor": "middle" }, g, text);
    if (rot) t.setAttribute("transform", "rotate(-90 " + x + " " + y + ")");
  }
  function unitOf(u) { return u ? " " + u : ""; }

  /* ---- bar ------------------------------------------------------------------------------ */
  function bar(fig, c, S) {
    var cats = c.categories.map(function (i) { return S[i]; });
    var names = c.series.map(function (x) { return S[x.name]; });
    var hidden = names.map(function () { return false; });
    var W = 900, horiz = !!c.horizontal;
    var maxLab = cats.reduce(function (m, t) { return Math.max(m, Math.min(String(t).length, 48)); }, 0);
    var bandPx = horiz ? 22 : 0;
    var H = horiz ? Math.max(120, cats.length * bandPx + 60) : 320;
    var rotate = !horiz && cats.length > 12;
    var m = horiz ? { l: Math.min(380, 12 + maxLab * 6.2), r: 20, t: 10, b: 40 } : { l: 64, r: 16, t: 10, b: rotate ? 90 : 44 };
    if (names.length > 1) legend(fig, names, hidden, draw);
    var svg = svgRoot(fig, W, H, chartName(c, "bar chart"), seriesDesc((c.stacked ? "stacked " : "") + (horiz ? "horizontal " : "") +
      "bar chart of " + cats.length + " categories" + (c.unit ? " in " + c.unit : ""), names));
    function draw() {
      clear(svg, m.l, m.t, W - m.r, H - m.b);
      var vis = c.series.map(function (x, i) { return !hidden[i]; });
      var nvis = vis.filter(Boolean).length || 1;
      var totals = cats.map(function (_, j) {
        var pos = 0, neg = 0, mx = 0;
        c.series.forEach(function (x, i) {
          if (!vis[i]) return;
          var v = x.values[j] || 0;
          if (v >= 0) pos += v; else neg += v;
          mx = Math.max(mx, v);
        });
        return c.stacked ? pos : mx;
      });
      var hi = Math.max.apply(null, totals.concat([0])) || 1;
      var tk = ticks(0, hi, 5);
      hi = tk[tk.length - 1];
      var g = s("g", null, svg), pts = 0;
      var band, vsc;
      if (horiz) {
        band = (H - m.t - m.b) / Math.max(1, cats.length);
        vsc = lin(0, hi, m.l, W - m.r);
        var gr = s("g", { "class": "rs-grid" }, g);
        tk.forEach(function (t) { s("line", { x1: vsc(t), x2: vsc(t), y1: m.t, y2: H - m.b }, gr); });
        xAxis(g, vsc, tk, H - m.b);
        label(g, c.x_label, (m.l + W - m.r) / 2, H - 6);
      } else {
        band = (W - m.l - m.r) / Math.max(1, cats.length);
        vsc = lin(0, hi, H - m.b, m.t);
        yAxis(g, vsc, tk, m.l, W - m.r);
        label(g, c.y_label, 14, (H - m.b + m.t) / 2, true);
      }
      cats.forEach(function (cat, j) {
        var acc = 0, k = 0;
        var b0 = (horiz ? m.t : m.l) + j * band;
        var pad = band * 0.15, inner = band - 2 * pad;
        c.series.forEach(function (x, i) {
          if (!vis[i]) return;
          var v = x.values[j];
          if (v == null) { k++; return; }
          var r;
          if (c.stacked) {
            var a0 = acc, a1 = acc + Math.max(0, v);
            acc = a1;
            r = horiz
              ? { x: vsc(a0), y: b0 + pad, width: Math.max(0, vsc(a1) - vsc(a0)), height: inner }
              : { x: b0 + pad, y: vsc(a1), width: inner, height: Math.max(0, vsc(a0) - vsc(a1)) };
          } else {
            var w = inner / nvis;
            r = horiz
              ? { x: vsc(0), y: b0 + pad + k * w, width: Math.max(0, vsc(Math.max(0, v)) - vsc(0)), height: w }
              : { x: b0 + pad + k * w, y: vsc(Math.max(0, v)), width: w, height: Math.max(0, vsc(0) - vsc(Math.max(0, v))) };
            k++;
          }
          r["class"] = "pt";
          r.fill = RS.color(i);
          r["data-v"] = v;
          var rect = s("rect", r, g);
          pts++;
          hover(rect, function () {
            var lines = [String(cat), names[i] + ": " + RS.fmt(v) + unitOf(c.unit)];
            if (c.stacked && nvis > 1) lines.push("total: " + RS.fmt(totals[j]) + unitOf(c.unit));
            return lines;
          });
        });
        var cut = horiz ? 60 : 18;
        if (horiz) {
          var tl = clipText(g, { x: m.l - 6, y: b0 + band / 2 + 4, "text-anchor": "end" }, cat, cut);
          hover(tl, function () { return [String(cat)]; });
        } else if (rotate) {
          var x = b0 + band / 2, y = H - m.b + 10;
          var tr = clipText(g, { x: x, y: y, "text-anchor": "end", transform: "rotate(-45 " + x + " " + y + ")" }, cat, cut);
          hover(tr, function () { return [String(cat)]; });
        } else {
          var tc = clipText(g, { x: b0 + band / 2, y: H - m.b + 16, "text-anchor": "middle" }, cat, cut);
          hover(tc, function () { return [String(cat)]; });
        }
      });
      fig.setAttribute("data-points", pts);
    }
    draw();
  }

  /* ---- line (with drag-to-zoom) --------------------------------------------------------- */
  function line(fig, c, S) {
    var names = c.series.map(function (x) { return S[x.name]; });
    var hidden = names.map(function () { return false; });
    var W = 900, H = 300, m = { l: 64, r: 16, t: 10, b: 44 };
    var dom = null;
    var tools = h("div", { "class": "rs-chart-tools" }, fig, "drag to zoom, double-click to reset ");
    var reset = h("button", { type: "button" }, tools, "reset zoom");
    reset.addEventListener("click", function () { dom = null; draw(); });
    if (names.length > 1) legend(fig, names, hidden, draw);
    var svg = svgRoot(fig, W, H, chartName(c, "line chart"), seriesDesc((c.mode === "markers" ? "scatter" : c.mode === "step" ? "step" : "line") +
      " chart of " + (c.y_label || "y") + (c.y_unit ? " (" + c.y_unit + ")" : "") + " over " + (c.x_label || "x") + (c.x_unit ? " (" + c.x_unit + ")" : ""), names));
    function extent(f) {
      var lo = Infinity, hi = -Infinity;
      c.series.forEach(function (x, i) {
        if (hidden[i]) return;
        f(x).forEach(function (v) { if (v != null && isFinite(v)) { if (v < lo) lo = v; if (v > hi) hi = v; } });
      });
      return lo === Infinity ? [0, 1] : [lo, hi];
    }
    function draw() {
      clear(svg, m.l, m.t, W - m.r, H - m.b);
      var xe = dom || extent(function (x) { return x.x; });
      if (xe[1] === xe[0]) xe = [xe[0] - 1, xe[1] + 1];
      var ye = [Infinity, -Infinity];
      c.series.forEach(function (x, i) {
        if (hidden[i]) return;
        x.x.forEach(function (xv, k) {
          var v = x.y[k];
          if (xv >= xe[0] && xv <= xe[1] && v != null) { ye[0] = Math.min(ye[0], v); ye[1] = Math.max(ye[1], v); }
        });
      });
      if (ye[0] === Infinity) ye = [0, 1];
      ye[0] = Math.min(0, ye[0]);
      var ytk = ticks(ye[0], ye[1] === ye[0] ? ye[0] + 1 : ye[1], 5);
      var xs = lin(xe[0], xe[1], m.l, W - m.r), ys = lin(ytk[0], ytk[ytk.length - 1], H - m.b, m.t);
      var g = s("g", null, svg), pts = 0;
      yAxis(g, ys, ytk, m.l, W - m.r);
      xAxis(g, xs, ticks(xe[0], xe[1], 7), H - m.b);
      label(g, c.x_label + (c.x_unit ? " (" + c.x_unit + ")" : ""), (m.l + W - m.r) / 2, H - 6);
      label(g, c.y_label + (c.y_unit ? " (" + c.y_unit + ")" : ""), 14, (H - m.b + m.t) / 2, true);
      var clipId = "clip-" + c.id;
      var cp = s("clipPath", { id: clipId }, s("defs", null, g));
      s("rect", { x: m.l, y: m.t, width: W - m.l - m.r, height: H - m.t - m.b }, cp);
      var plot = s("g", { "clip-path": "url(#" + clipId + ")" }, g);
      c.series.forEach(function (x, i) {
        if (hidden[i]) return;
        var d = "", prev = null;
        for (var k = 0; k < x.x.length; k++) {
          var xv = x.x[k], yv = x.y[k];
          if (yv == null || xv == null) { prev = null; continue; }
          if (k + 1 < x.x.length && x.x[k + 1] < xe[0]) continue;
          if (k > 0 && x.x[k - 1] > xe[1]) break;
          var px = xs(xv).toFixed(1), py = ys(yv).toFixed(1);
          pts++;
          if (c.mode === "markers") {
            s("circle", { "class": "pt", cx: px, cy: py, r: 3, fill: RS.color(i), "data-v": yv }, plot);
            continue;
          }
          if (prev === null) d += "M" + px + "," + py;
          else if (c.mode === "step") d += "H" + px + "V" + py;
          else d += "L" + px + "," + py;
          prev = k;
        }
        if (d) s("path", { "class": "series", d: d, fill: "none", stroke: RS.color(i), "stroke-width": 1.5 }, plot);
      });
      fig.setAttribute("data-points", pts);
      var guide = s("line", { "class": "rs-guide", y1: m.t, y2: H - m.b, x1: -10, x2: -10, "pointer-events": "none" }, g);
      var overlay = s("rect", { x: m.l, y: m.t, width: W - m.l - m.r, height: H - m.t - m.b, fill: "transparent" }, g);
      var sel = null, x0 = null;
      function px(ev) {
        var p = svg.createSVGPoint(); p.x = ev.clientX; p.y = ev.clientY;
        return p.matrixTransform(svg.getScreenCTM().inverse()).x;
      }
      overlay.addEventListener("mousemove", function (ev) {
        var X = px(ev), xv = xs.inv(X);
        if (sel) { sel.setAttribute("x", Math.min(x0, X)); sel.setAttribute("width", Math.abs(X - x0)); return; }
        guide.setAttribute("x1", X); guide.setAttribute("x2", X);
        var lines = [(c.x_label || "x") + ": " + RS.fmt(xv) + unitOf(c.x_unit)];
        c.series.forEach(function (x, i) {
          if (hidden[i] || !x.x.length) return;
          var lo = 0, hi = x.x.length - 1;
          while (lo < hi) { var mid = (lo + hi + 1) >> 1; if (x.x[mid] <= xv) lo = mid; else hi = mid - 1; }
          if (c.mode !== "step" && lo + 1 < x.x.length && Math.abs(x.x[lo + 1] - xv) < Math.abs(x.x[lo] - xv)) lo++;
          lines.push(names[i] + ": " + RS.fmt(x.y[lo]) + unitOf(c.y_unit));
        });
        showTip(ev, lines);
      });
      overlay.addEventListener("mouseleave", function () {
        hideTip(); guide.setAttribute("x1", -10); guide.setAttribute("x2", -10);
        if (sel) { g.removeChild(sel); sel = null; }
      });
      overlay.addEventListener("mousedown", function (ev) {
        x0 = px(ev);
        sel = s("rect", { "class": "rs-sel", x: x0, y: m.t, width: 0, height: H - m.t - m.b, "pointer-events": "none" }, g);
        ev.preventDefault();
      });
      overlay.addEventListener("mouseup", function (ev) {
        if (!sel) return;
        var x1 = px(ev);
        g.removeChild(sel);
        sel = null;
        if (Math.abs(x1 - x0) > 4) { dom = [xs.inv(Math.min(x0, x1)), xs.inv(Math.max(x0, x1))]; draw(); }
      });
    }
    svg.addEventListener("dblclick", function () { dom = null; draw(); });
    draw();
  }

  /* ---- heatmap -------------------------------------------------------------------------- */
  function ramp(t) {
    // light yellow → orange → dark red
    var stops = [[255, 247, 220], [253, 174, 97], [215, 48, 39], [103, 0, 13]];
    t = Math.max(0, Math.min(1, t)) * (stops.length - 1);
    var i = Math.min(stops.length - 2, Math.floor(t)), f = t - i, a = stops[i], b = stops[i + 1];
    return "rgb(" + [0, 1, 2].map(function (k) { return Math.round(a[k] + (b[k] - a[k]) * f); }).join(",") + ")";
  }
  function heatmap(fig, c, S) {
    var rows = c.rows.map(function (i) { return S[i]; }), cols = c.cols.map(function (i) { return S[i]; });
    var maxLab = rows.reduce(function (m, t) { return Math.max(m, Math.min(String(t).length, 30)); }, 0);
    var W = 900, cell = Math.max(10, Math.min(28, 600 / Math.max(1, rows.length)));
    var m = { l: 16 + maxLab * 6.5, r: 80, t: 10, b: 50 };
    var H = m.t + m.b + rows.length * cell;
    var svg = svgRoot(fig, W, H, chartName(c, "heatmap"), "heatmap of " + rows.length + " rows (" + (c.y_label || "rows") + ") by " +
      cols.length + " columns (" + (c.x_label || "columns") + ")" + (c.unit ? " in " + c.unit : ""));
    clear(svg, m.l, m.t, W - m.r, H - m.b);
    var g = s("g", null, svg);
    var lo = Infinity, hi = -Infinity;
    c.values.forEach(function (r) { r.forEach(function (v) { if (v != null) { lo = Math.min(lo, v); hi = Math.max(hi, v); } }); });
    if (lo === Infinity) { lo = 0; hi = 1; }
    var cw = (W - m.l - m.r) / Math.max(1, cols.length), pts = 0, byRow = c.scale === "row";
    c.values.forEach(function (r, i) {
      var rlo = Infinity, rhi = -Infinity;
      r.forEach(function (v) { if (v != null) { rlo = Math.min(rlo, v); rhi = Math.max(rhi, v); } });
      r.forEach(function (v, j) {
        var a = byRow ? rlo : lo, z = byRow ? rhi : hi;
        var rect = s("rect", { "class": "pt", x: m.l + j * cw, y: m.t + i * cell, width: Math.max(0.5, cw - 0.5), height: cell - 1,
          fill: v == null ? "none" : ramp(z > a ? (v - a) / (z - a) : 0.5), "data-v": v }, g);
        pts++;
        hover(rect, function () {
          return [(c.y_label || "row") + ": " + rows[i], (c.x_label || "column") + ": " + cols[j],
            "value: " + (v == null ? "n/a" : RS.fmt(v) + unitOf(c.unit))];
        });
      });
      clipText(g, { x: m.l - 6, y: m.t + i * cell + cell / 2 + 4, "text-anchor": "end" }, rows[i], 30);
    });
    var every = Math.max(1, Math.ceil(cols.length / 24));
    cols.forEach(function (t, j) {
      if (j % every) return;
      clipText(g, { x: m.l + j * cw + cw / 2, y: H - m.b + 14, "text-anchor": "middle" }, t, 10);
    });
    label(g, c.x_label, (m.l + W - m.r) / 2, H - 8);
    // colour scale
    var lx = W - m.r + 20, lh = Math.max(40, rows.length * cell);
    for (var k = 0; k < 20; k++) s("rect", { x: lx, y: m.t + lh - (k + 1) * lh / 20, width: 12, height: lh / 20 + 0.5, fill: ramp(k / 19) }, g);
    s("text", { x: lx + 16, y: m.t + 10 }, g, byRow ? "row max" : short(hi) + (c.unit ? " " + c.unit : ""));
    s("text", { x: lx + 16, y: m.t + lh }, g, byRow ? "row min" : short(lo));
    fig.setAttribute("data-points", pts);
  }

  /* ---- histogram ------------------------------------------------------------------------ */
  function hist(fig, c, S) {
    var names = c.series.map(function (x) { return S[x.name]; });
    var hidden = names.map(function () { return false; });
    var W = 900, H = 280, m = { l: 64, r: 16, t: 10, b: 44 }, e = c.edges;
    if (names.length > 1) legend(fig, names, hidden, draw);
    var svg = svgRoot(fig, W, H, chartName(c, "histogram"), seriesDesc("histogram of " + (c.x_label || "values") + (c.unit ? " (" + c.unit + ")" : "") +
      (c.log_x ? ", log scale" : ""), names));
    function draw() {
      clear(svg, m.l, m.t, W - m.r, H - m.b);
      var hi = 1;
      c.series.forEach(function (x, i) { if (!hidden[i]) x.counts.forEach(function (v) { hi = Math.max(hi, v); }); });
      var ytk = ticks(0, hi, 5);
      var xs = c.log_x ? logs(e[0], e[e.length - 1], m.l, W - m.r) : lin(e[0], e[e.length - 1], m.l, W - m.r);
      var ys = lin(0, ytk[ytk.length - 1], H - m.b, m.t);
      var g = s("g", null, svg), pts = 0;
      yAxis(g, ys, ytk, m.l, W - m.r);
      xAxis(g, xs, c.log_x ? logTicks(e[0], e[e.length - 1]) : ticks(e[0], e[e.length - 1], 7), H - m.b);
      label(g, c.x_label + (c.unit ? " (" + c.unit + ")" : "") + (c.log_x ? ", log scale" : ""), (m.l + W - m.r) / 2, H - 6);
      label(g, "count", 14, (H - m.b + m.t) / 2, true);
      var nvis = hidden.filter(function (x) { return !x; }).length || 1, k = 0;
      c.series.forEach(function (x, i) {
        if (hidden[i]) return;
        x.counts.forEach(function (v, b) {
          var a = xs(e[b]), z = xs(e[b + 1]), w = (z - a) / nvis;
          var rect = s("rect", { "class": "pt", x: a + k * w, y: ys(v), width: Math.max(0.5, w - 0.5), height: ys(0) - ys(v),
            fill: RS.color(i), "data-v": v }, g);
          pts++;
          hover(rect, function () {
            return [RS.fmt(e[b]) + " – " + RS.fmt(e[b + 1]) + unitOf(c.unit), names[i] + ": " + RS.fmt(v)];
          });
        });
        k++;
      });
      fig.setAttribute("data-points", pts);
    }
    draw();
  }

  RS.charts = { bar: bar, line: line, heatmap: heatmap, hist: hist };
  RS.chart = function (parent, c, S) {
    var fig = h("figure", { "class": "rs-chart", "data-chart": c.chart, id: "chart-" + c.id }, parent);
    if (c.title) h("figcaption", null, fig, c.title);
    RS.charts[c.chart](fig, c, S);
    return fig;
  };
})();
