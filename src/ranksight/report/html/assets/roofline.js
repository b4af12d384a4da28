/* ranksight roofline chart (op-perf, docs/op-perf.md): a log-log SVG of operators (x FLOP/byte,
 * y achieved TFLOP/s, area ∝ kernel time) under the GPU's ceilings: one horizontal line per peak
 * the operators were held to, and the memory bandwidth's diagonal (y = bandwidth × x).
 * Labels come from the payload's string table and are set with textContent, never parsed as
 * HTML. Each point has class "pt"; the figure carries data-points = the points drawn. */
(function () {
  "use strict";
  var RS = (window.RS = window.RS || {});
  function logScale(d0, d1, r0, r1) {
    var a = Math.log10(d0), b = Math.log10(d1);
    return function (v) { return r0 + (Math.log10(v) - a) * (r1 - r0) / (b - a); };
  }
  function decades(lo, hi) {
    var out = [];
    for (var e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
      var t = Math.pow(10, e);
      if (t >= lo * 0.999 && t <= hi * 1.001) out.push(t);
    }
    return out;
  }
  function fmt(v) {
    if (v >= 1000 || v < 0.01) return v.toExponential(0).replace("e+", "e");
    return String(+v.toPrecision(3));
  }
  function roofline(fig, c, S) {
    var s = RS.s, h = RS.h;
    var W = 760, H = 420, m = { l: 64, r: 180, t: 14, b: 44 };
    var bw = c.bandwidth_tb_per_s;
    var peaks = c.ceilings.map(function (x) { return x.peak; });
    var xs = [], ys = [], ts = [];
    c.series.forEach(function (g) {
      g.x.forEach(function (v, i) {
        if (v > 0 && g.y[i] > 0) { xs.push(v); ys.push(g.y[i]); ts.push(g.time_us[i] || 0); }
      });
    });
    var pmax = Math.max.apply(null, peaks.concat([1e-9]));
    var ridge = peaks.map(function (p) { return p / bw; });
    var x0 = Math.min.apply(null, xs.concat(ridge)) / 4, x1 = Math.max.apply(null, xs.concat(ridge)) * 4;
    // the axes contain every point and ceiling (an operator above its held-to peak included)
    var y0 = Math.min.apply(null, ys.concat([bw * x0])) / 2, y1 = Math.max.apply(null, ys.concat([pmax])) * 2;
    var X = logScale(x0, x1, m.l, W - m.r), Y = logScale(y0, y1, H - m.b, m.t);
    var svg = RS.svgRoot(fig, W, H, RS.chartName(c, "roofline"), "roofline, log-log: " + c.x_label + " against " + c.y_label +
      ", " + xs.length + " operators under " + c.ceilings.length + " peak ceiling" + (c.ceilings.length === 1 ? "" : "s") + " and the memory bandwidth");
    svg.setAttribute("data-plot", [m.l, m.t, W - m.r, H - m.b].join(","));
    var grid = s("g", { "class": "rs-grid" }, svg), ax = s("g", { "class": "rs-axis" }, svg);
    decades(x0, x1).forEach(function (t) {
      s("line", { x1: X(t), x2: X(t), y1: m.t, y2: H - m.b }, grid);
      s("text", { x: X(t), y: H - m.b + 16, "text-anchor": "middle" }, ax, fmt(t));
    });
    decades(y0, y1).forEach(function (t) {
      s("line", { x1: m.l, x2: W - m.r, y1: Y(t), y2: Y(t) }, grid);
      s("text", { x: m.l - 6, y: Y(t) + 4, "text-anchor": "end" }, ax, fmt(t));
    });
    s("text", { x: (m.l + W - m.r) / 2, y: H - 6, "text-anchor": "middle" }, ax, c.x_label + ", log scale");
    var yl = s("text", { x: 14, y: (m.t + H - m.b) / 2, "text-anchor": "middle" }, ax, c.y_label + ", log scale");
    yl.setAttribute("transform", "rotate(-90 14 " + (m.t + H - m.b) / 2 + ")");
    // ceilings: the bandwidth diagonal up to the highest peak, each peak from its ridge point
    var roof = s("g", { "class": "rs-roof" }, svg);
    var bx1 = Math.min(x1, pmax / bw);
    var diag = s("line", { x1: X(x0), y1: Y(bw * x0), x2: X(bx1), y2: Y(bw * bx1), stroke: "#444", "stroke-width": 1.5 }, roof);
    diag.setAttribute("data-ceiling", "bandwidth");
    var lx = Math.pow(10, Math.log10(x0) + 0.12 * (Math.log10(bx1) - Math.log10(x0)));
    var ang = Math.atan2(Y(bw * bx1) - Y(bw * x0), X(bx1) - X(x0)) * 180 / Math.PI;
    var bl = s("text", { x: X(lx), y: Y(bw * lx) - 6, "font-size": 11 }, roof, S[c.bandwidth_name]);
    bl.setAttribute("transform", "rotate(" + ang + " " + X(lx) + " " + (Y(bw * lx) - 6) + ")");
    c.ceilings.forEach(function (cl, i) {
      var xr = Math.max(x0, cl.peak / bw);
      var ln = s("line", { x1: X(xr), y1: Y(cl.peak), x2: X(x1), y2: Y(cl.peak), stroke: "#444",
        "stroke-width": 1.5, "stroke-dasharray": i ? "5 3" : null }, roof);
      ln.setAttribute("data-ceiling", "peak");
      s("text", { x: W - m.r + 4, y: Y(cl.peak) + 4, "font-size": 11 }, roof, S[cl.name]);
    });
    // points, area ∝ kernel time
    var tmax = Math.max.apply(null, ts.concat([1e-9])), n = 0;
    var pts = s("g", null, svg);
    c.series.forEach(function (g, k) {
      g.x.forEach(function (v, i) {
        var y = g.y[i];
        if (!(v > 0 && y > 0)) return;
        var r = 2.5 + 14 * Math.sqrt((g.time_us[i] || 0) / tmax);
        var dot = s("circle", { "class": "pt", cx: X(v), cy: Y(y), r: r, fill: RS.color(k), "fill-opacity": 0.55,
          stroke: RS.color(k) }, pts);
        n++;
        dot.addEventListener("mousemove", function (ev) {
          RS.showTip(ev, [S[g.labels[i]], S[g.name], "FLOP/byte " + RS.fmt(v), "TFLOP/s " + RS.fmt(y),
            "kernel time " + RS.fmt(g.time_us[i]) + " µs", "% of roofline " + RS.fmt(g.pct[i])]);
        });
        dot.addEventListener("mouseleave", RS.hideTip);
      });
    });
    var lg = h("div", { "class": "rs-legend" }, fig);
    c.series.forEach(function (g, k) {
      var sp = h("span", { "class": "rs-key" }, lg);
      var sw = h("span", { "class": "rs-sw" }, sp);
      sw.style.background = RS.color(k);
      sp.appendChild(document.createTextNode(S[g.name]));
    });
    fig.setAttribute("data-points", n);
  }
  RS.charts = RS.charts || {};
  RS.charts.roofline = roofline;
})();
