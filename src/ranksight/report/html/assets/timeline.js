/* ranksight timeline: one step of every shown rank on a canvas (docs/timeline.md).
 * The block packs events as little-endian typed arrays in base64, sorted by (track, depth, start):
 * each lane is culled with a binary search on its running maximum of end times, sub-pixel events
 * are merged into one mark per pixel column, and marks are filled in one path per colour.
 * Every name is drawn with fillText or set with textContent, never parsed as HTML.
 * RS.timelines[id] is the control surface the browser tests drive. */
(function () {
  "use strict";
  var RS = (window.RS = window.RS || {});
  RS.timelines = RS.timelines || {};
  var h = RS.h;

  var CAT_COLORS = {
    "cpu_op": "#4e79a7", "user_annotation": "#b07aa1", "python_function": "#9c755f",
    "cuda_runtime": "#f28e2b", "cuda_driver": "#e8a33d", "kernel": "#59a14f",
    "communication kernel": "#e15759", "memory kernel": "#76b7b2", "memcpy": "#edc948",
    "memset": "#bab0ac", "gpu_user_annotation": "#d4a6c8", "sync": "#6b6b6b"
  };
  var CAUSE_COLORS = {
    "dataloader": "#8c564b", "collective_wait": "#d62728", "sync": "#7f7f7f", "cpu_op": "#1f77b4",
    "launch_latency": "#ff7f0e", "unexplained": "#c7c7c7"
  };
  var PATH_COLORS = ["#d62728", "#ff7f0e", "#9467bd", "#17becf", "#bcbd22", "#8c564b", "#e377c2", "#7f7f7f"];
  /* the job path's categories (analyses/critical_path.py CATEGORIES) */
  var PATH_CAT_COLORS = {
    "compute": "#59a14f", "communication": "#e15759", "host": "#4e79a7", "data_loading": "#8c564b",
    "waiting_on_rank": "#d62728", "idle": "#c7c7c7"
  };
  function pathColor(P, i) {
    if (P.category) return PATH_CAT_COLORS[P.categories[P.category[i]]] || "#999";
    return PATH_COLORS[P.type[i] % PATH_COLORS.length];
  }
  var FLAG = { critical: 1, collective: 2, late: 4, clipped: 8 };
  var LANE = 15, IDLE_H = 9, RANK_H = 18, AXIS_H = 22, GUTTER = 178, MAX_H = 620, MAX_LINKS = 300;

  var LITTLE = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
  var TYPES = { uint8: Uint8Array, uint16: Uint16Array, uint32: Uint32Array, int32: Int32Array };
  function decode(col, n) {
    var T = TYPES[col.dtype];
    var bin = atob(col.data);
    var u8 = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) u8[i] = bin.charCodeAt(i);
    if (LITTLE || T.BYTES_PER_ELEMENT === 1) return new T(u8.buffer, 0, n);
    var dv = new DataView(u8.buffer), out = new T(n), w = T.BYTES_PER_ELEMENT;
    for (var j = 0; j < n; j++) {
      out[j] = w === 2 ? dv.getUint16(j * 2, true) : col.dtype === "int32" ? dv.getInt32(j * 4, true) : dv.getUint32(j * 4, true);
    }
    return out;
  }
  /* first index in [a, b) whose value >= x (arr ascending over the range) */
  function lowerBound(arr, a, b, x) {
    while (a < b) { var m = (a + b) >>> 1; if (arr[m] < x) a = m + 1; else b = m; }
    return a;
  }
  /* running maximum of start + dur within each lane */
  function runningEnd(S, D, lanes) {
    var pm = new Float64Array(S.length);
    for (var l = 0; l < lanes.first.length; l++) {
      var m = -Infinity, a = lanes.first[l], b = a + lanes.count[l];
      for (var i = a; i < b; i++) { var e = S[i] + D[i]; if (e > m) m = e; pm[i] = m; }
    }
    return pm;
  }
  function css(name, fallback) {
    var v = getComputedStyle(document.documentElement).getPropertyValue(name);
    return v && v.trim() ? v.trim() : fallback;
  }

  RS.timeline = function (parent, b, S) {
    var t0 = performance.now();
    var unit = b.unit_ns;
    var names = b.names.map(function (i) { return S[i]; });
    var ev = b.events, n = ev.n;
    var E = {
      start: decode(ev.start, n), dur: decode(ev.dur, n), name: decode(ev.name, n),
      cat: decode(ev.cat, n), row: decode(ev.row, n), flags: decode(ev.flags, n)
    };
    E.end = runningEnd(E.start, E.dur, ev.lanes);
    var G = null;
    if (b.gaps) {
      var gn = b.gaps.n;
      G = { n: gn, start: decode(b.gaps.start, gn), dur: decode(b.gaps.dur, gn), cause: decode(b.gaps.cause, gn),
        site: decode(b.gaps.site, gn), detail: decode(b.gaps.detail, gn), lanes: b.gaps.lanes, causes: b.gaps.causes };
      G.end = runningEnd(G.start, G.dur, G.lanes);
    }
    var P = null;
    if (b.path) {
      var pn = b.path.n;
      P = { n: pn, start: decode(b.path.start, pn), dur: decode(b.path.dur, pn), rank: decode(b.path.rank, pn),
        event: decode(b.path.event, pn), type: decode(b.path.type, pn), name: decode(b.path.name, pn), types: b.path.types,
        categories: b.path.categories || null, category: b.path.category ? decode(b.path.category, pn) : null };
      P.lanes = { first: [0], count: [pn] };
      P.end = runningEnd(P.start, P.dur, P.lanes);
    }
    var C = null, collOf = null;
    if (b.collectives) {
      var cn = b.collectives.n;
      C = { n: cn, instance: decode(b.collectives.instance, cn), offsets: decode(b.collectives.offsets, cn + 1),
        type: decode(b.collectives.type, cn), late: decode(b.collectives.late, cn) };
      var ne = C.offsets[cn];
      C.events = decode(b.collectives.events, ne);
      C.wait = decode(b.collectives.wait, ne);
      collOf = new Int32Array(n).fill(-1);
      var slotOf = new Int32Array(n).fill(-1);
      C.lo = new Float64Array(cn); C.hi = new Float64Array(cn);
      for (var c = 0; c < cn; c++) {
        var lo = Infinity, hi = -Infinity;
        for (var j = C.offsets[c]; j < C.offsets[c + 1]; j++) {
          var e = C.events[j]; collOf[e] = c; slotOf[e] = j;
          if (E.start[e] < lo) lo = E.start[e];
          if (E.start[e] + E.dur[e] > hi) hi = E.start[e] + E.dur[e];
        }
        C.lo[c] = lo; C.hi[c] = hi;
      }
      C.slotOf = slotOf;
    }

    /* ---- layout: display tracks, lanes and their y ----------------------------------------- */
    var T = b.tracks, nt = T.rank.length;
    var tracks = [];
    var y = 0, prevRank = null;
    for (var t = 0; t < nt; t++) {
      var r = T.rank[t];
      var kind = T.kind[t];
      if (r !== prevRank && r >= 0) { tracks.push({ header: true, rank: r, y: y, h: RANK_H }); y += RANK_H; }
      prevRank = r;
      var lh = kind === "idle" ? IDLE_H : LANE;
      var tr = { t: t, rank: r, kind: kind, label: S[T.label[t]], y: y, lanes: T.lanes[t], laneH: lh, h: T.lanes[t] * lh + 3 };
      tracks.push(tr);
      y += tr.h;
    }
    var contentH = y;
    var byIndex = {};
    tracks.forEach(function (tr) { if (!tr.header) byIndex[tr.t] = tr; });
    /* lanes of each kind, with their track */
    function laneList(lanes) {
      var out = [];
      for (var l = 0; l < lanes.first.length; l++) {
        out.push({ track: lanes.track ? lanes.track[l] : null, depth: lanes.depth ? lanes.depth[l] : 0,
          a: lanes.first[l], b: lanes.first[l] + lanes.count[l] });
      }
      return out;
    }
    var evLanes = laneList(ev.lanes);
    var gapLanes = G ? laneList(G.lanes) : [];
    var pathTrack = null;
    tracks.forEach(function (tr) { if (tr.kind === "path") pathTrack = tr; });
    var offsetOf = {};
    b.ranks.forEach(function (r, i) { offsetOf[r] = b.offsets_ns[i]; });

    /* ---- DOM ------------------------------------------------------------------------------- */
    var wrap = h("div", { "class": "rs-timeline", id: "timeline-" + b.id }, parent);
    h("h4", null, wrap, b.title);
    var bar = h("div", { "class": "rs-tl-bar" }, wrap);
    var bOut = h("button", { type: "button", "class": "rs-tl-out", title: "zoom out" }, bar, "−");
    var bIn = h("button", { type: "button", "class": "rs-tl-in", title: "zoom in" }, bar, "+");
    var bFit = h("button", { type: "button", "class": "rs-tl-fit", title: "the whole window" }, bar, "fit");
    function toggle(label, on, key) {
      var l = h("label", { "class": "rs-tl-opt" }, bar);
      var c = h("input", { type: "checkbox", "data-opt": key }, l);
      c.checked = on;
      l.appendChild(document.createTextNode(" " + label));
      c.addEventListener("change", function () { opts[key] = c.checked; redraw(); });
      return c;
    }
    var opts = { links: !!C, idle: !!G, path: !!P };
    if (C) toggle("collective links", true, "links");
    if (G) toggle("idle causes", true, "idle");
    if (P) toggle("critical path", true, "path");
    var info = h("span", { "class": "rs-tl-info" }, bar);
    var legend = h("div", { "class": "rs-legend rs-tl-legend" }, wrap);
    var present = {};
    for (var q = 0; q < n; q++) present[E.cat[q]] = 1;
    b.categories.forEach(function (c, i) {
      if (!present[i]) return;
      var k = h("span", { "class": "rs-key" }, legend);
      h("span", { "class": "rs-sw", style: "background:" + (CAT_COLORS[c] || "#999") }, k);
      k.appendChild(document.createTextNode(c));
    });
    if (P && P.categories) P.categories.forEach(function (c) {
      var k = h("span", { "class": "rs-key rs-tl-path" }, legend);
      h("span", { "class": "rs-sw", style: "background:" + (PATH_CAT_COLORS[c] || "#999") }, k);
      k.appendChild(document.createTextNode("path: " + c));
    });
    if (G) G.causes.forEach(function (c) {
      var k = h("span", { "class": "rs-key rs-tl-cause" }, legend);
      h("span", { "class": "rs-sw", style: "background:" + (CAUSE_COLORS[c] || "#999") }, k);
      k.appendChild(document.createTextNode("idle: " + c));
    });
    var box = h("div", { "class": "rs-tl-box" }, wrap);
    var canvas = h("canvas", { "class": "rs-tl-canvas", tabindex: "0", "data-events": String(n), role: "img",
      "aria-label": b.title + ": " + n + " events of " + b.ranks.length + " rank" + (b.ranks.length === 1 ? "" : "s") +
      " (wheel, + and − to zoom; drag or the arrow keys to pan; click an event for its details)" }, box,
      "A timeline of " + n + " events; the tables of this report hold the same numbers.");
    var details = h("div", { "class": "rs-tl-details", "aria-live": "polite" }, wrap);
    h("p", { "class": "rs-tl-hint" }, details, "Click an event for its details.");
    var g2 = canvas.getContext("2d");

    /* ---- view -------------------------------------------------------------------------------- */
    var span = Math.max(1, Math.round(b.span_ns / unit));
    var view = { v0: 0, v1: span, y: 0 };
    var W = 800, H = 400, dpr = 1, plotW = 600, viewH = 300;
    var selected = -1, selectedGap = -1, selectedSeg = -1, hoverKey = "";
    var stats = { frames: 0, last_ms: 0, drawn: 0 };
    function size() {
      W = Math.max(320, Math.floor(box.clientWidth || parent.clientWidth || 800));
      viewH = Math.min(contentH, MAX_H - AXIS_H);
      H = AXIS_H + viewH;
      dpr = window.devicePixelRatio || 1;
      canvas.width = Math.round(W * dpr);
      canvas.height = Math.round(H * dpr);
      canvas.style.width = W + "px";
      canvas.style.height = H + "px";
      plotW = W - GUTTER;
    }
    function k() { return plotW / (view.v1 - view.v0); }
    function xOf(u) { return GUTTER + (u - view.v0) * k(); }
    function uOf(x) { return view.v0 + (x - GUTTER) / k(); }
    function clampView() {
      var w = view.v1 - view.v0;
      var minW = Math.min(span, Math.max(1, 20 / unit));
      if (w < minW) { var c = (view.v0 + view.v1) / 2; view.v0 = c - minW / 2; view.v1 = c + minW / 2; w = minW; }
      if (w > span) { view.v0 = 0; view.v1 = span; }
      if (view.v0 < 0) { view.v1 -= view.v0; view.v0 = 0; }
      if (view.v1 > span) { view.v0 -= view.v1 - span; view.v1 = span; }
      view.y = Math.max(0, Math.min(view.y, contentH - viewH));
    }
    function fmtNs(ns) {
      var a = Math.abs(ns);
      if (a >= 1e9) return (ns / 1e9).toFixed(3) + " s";
      if (a >= 1e6) return (ns / 1e6).toFixed(3) + " ms";
      if (a >= 1e3) return (ns / 1e3).toFixed(3) + " µs";
      return Math.round(ns) + " ns";
    }
    /* a tick label: the unit of the tick step, only the decimals the step needs */
    function fmtTick(ns, step) {
      var u = step >= 1e9 ? [1e9, "s"] : step >= 1e6 ? [1e6, "ms"] : step >= 1e3 ? [1e3, "µs"] : [1, "ns"];
      var d = Math.max(0, -Math.floor(Math.log10(step / u[0]) + 1e-9));
      return (ns / u[0]).toFixed(d) + " " + u[1];
    }
    function clip(s, px) {
      var n = Math.floor((px - 4) / 6.2);
      if (n <= 0) return "";
      return s.length > n ? (n > 1 ? s.slice(0, n - 1) + "…" : "") : s;
    }

    /* ---- drawing ------------------------------------------------------------------------------ */
    var buckets = {};
    function push(color, x, y, w, hh) {
      var bk = buckets[color];
      if (!bk) bk = buckets[color] = [];
      bk.push(x, y, w, hh);
    }
    function flush() {
      for (var color in buckets) {
        var a = buckets[color];
        if (!a.length) continue;
        g2.fillStyle = color;
        g2.beginPath();
        for (var i = 0; i < a.length; i += 4) g2.rect(a[i], a[i + 1], a[i + 2], a[i + 3]);
        g2.fill();
        a.length = 0;
      }
    }
    /* draw one lane: returns marks drawn; texts collects labels of wide marks */
    function drawLane(St, Du, En, a, bb, y0, hh, colorOf, texts, nameOf) {
      var kk = k(), v0 = view.v0, v1 = view.v1;
      var i = lowerBound(En, a, bb, v0);
      var lastCol = -1, drawn = 0;
      /* a run of adjacent one-pixel columns of one colour is filled as one rectangle */
      var runColor = null, runX0 = 0, runX1 = 0;
      for (; i < bb; i++) {
        var s = St[i];
        if (s > v1) break;
        var e = s + Du[i];
        if (e < v0) continue;
        var x0 = GUTTER + (s - v0) * kk, x1 = GUTTER + (e - v0) * kk;
        if (x0 < GUTTER) x0 = GUTTER;
        if (x1 > W) x1 = W;
        var w = x1 - x0;
        if (w < 1) {
          var col = Math.floor(x0);
          if (col <= lastCol) continue; /* this pixel column is drawn already */
          lastCol = col;
          var color = colorOf(i);
          if (runColor === color && col === runX1) runX1 = col + 1;
          else {
            if (runColor !== null) push(runColor, runX0, y0, runX1 - runX0, hh);
            runColor = color; runX0 = col; runX1 = col + 1;
          }
        } else {
          if (runColor !== null) { push(runColor, runX0, y0, runX1 - runX0, hh); runColor = null; }
          lastCol = Math.floor(x1);
          push(colorOf(i), x0, y0, Math.max(1, w - (w > 3 ? 0.5 : 0)), hh);
          if (texts && w > 28) texts.push(x0 + 2, y0 + hh - 4, w - 3, nameOf(i));
        }
        drawn++;
      }
      if (runColor !== null) push(runColor, runX0, y0, runX1 - runX0, hh);
      return drawn;
    }
    var fg = "#1d2430", muted = "#5b6675", line = "#dde2e8", panel = "#f6f8fa", bg = "#fff";
    function draw() {
      var tStart = performance.now();
      fg = css("--fg", fg); muted = css("--muted", muted); line = css("--line", line); panel = css("--panel", panel); bg = css("--bg", bg);
      g2.setTransform(dpr, 0, 0, dpr, 0, 0);
      g2.fillStyle = bg;
      g2.fillRect(0, 0, W, H);
      g2.font = "11px system-ui, sans-serif";
      var drawn = 0;
      var texts = [];
      /* tracks */
      g2.save();
      g2.beginPath(); g2.rect(0, AXIS_H, W, viewH); g2.clip();
      var oy = AXIS_H - view.y;
      tracks.forEach(function (tr, idx) {
        var ty = tr.y + oy;
        if (ty > H || ty + tr.h < AXIS_H) return;
        if (tr.header) {
          g2.fillStyle = panel; g2.fillRect(0, ty, W, tr.h);
          g2.fillStyle = fg; g2.font = "600 11px system-ui, sans-serif";
          var off = offsetOf[tr.rank];
          g2.fillText("rank " + tr.rank + (off ? "  (clock offset " + fmtNs(off) + ")" : ""), 6, ty + 13);
          g2.font = "11px system-ui, sans-serif";
          return;
        }
        g2.fillStyle = muted;
        g2.fillText(clip(tr.label, GUTTER - 12), 10, ty + Math.min(tr.h, LANE) - 4);
        g2.strokeStyle = line; g2.beginPath(); g2.moveTo(0, ty + tr.h - 0.5); g2.lineTo(W, ty + tr.h - 0.5); g2.stroke();
      });
      g2.beginPath(); g2.rect(GUTTER, AXIS_H, W - GUTTER, viewH); g2.clip();
      var evColor = function (i) { return CAT_COLORS[b.categories[E.cat[i]]] || "#999"; };
      var evName = function (i) { return names[E.name[i]]; };
      for (var l = 0; l < evLanes.length; l++) {
        var L = evLanes[l], tr = byIndex[L.track];
        var y0 = tr.y + oy + L.depth * LANE + 1;
        if (y0 > H || y0 + LANE < AXIS_H) continue;
        drawn += drawLane(E.start, E.dur, E.end, L.a, L.b, y0, LANE - 2, evColor, texts, evName);
      }
      if (G && opts.idle) {
        var gColor = function (i) { return CAUSE_COLORS[G.causes[G.cause[i]]] || "#999"; };
        for (var gl = 0; gl < gapLanes.length; gl++) {
          var GL = gapLanes[gl], gt = byIndex[GL.track];
          var gy = gt.y + oy + 1;
          if (gy > H || gy + IDLE_H < AXIS_H) continue;
          drawn += drawLane(G.start, G.dur, G.end, GL.a, GL.b, gy, IDLE_H - 1, gColor, null, null);
        }
      }
      if (P && pathTrack) {
        var py = pathTrack.y + oy + 1;
        var pColor = function (i) { return pathColor(P, i); };
        var pName = function (i) { return names[P.name[i]]; };
        drawn += drawLane(P.start, P.dur, P.end, 0, P.n, py, LANE - 2, pColor, texts, pName);
      }
      flush();
      /* critical-path events outlined in their tracks */
      if (P && opts.path) {
        /* only the segments in view (binary search on their running end), only events at least
         * 3 px wide: narrower ones are seen on the path's own track */
        g2.strokeStyle = "#d62728"; g2.lineWidth = 1.5; g2.beginPath();
        for (var p = lowerBound(P.end, 0, P.n, view.v0); p < P.n && P.start[p] <= view.v1; p++) {
          var pe = P.event[p];
          if (pe < 0 || E.dur[pe] * k() < 3) continue;
          var rr = evRect(pe, oy);
          if (rr && rr[1] < H && rr[1] + rr[3] > AXIS_H) g2.rect(rr[0], rr[1], rr[2], rr[3]);
        }
        g2.stroke(); g2.lineWidth = 1;
      }
      /* labels of wide marks */
      g2.fillStyle = "#fff";
      for (var q = 0; q < texts.length; q += 4) {
        var s = clip(texts[q + 3], texts[q + 2]);
        if (s) g2.fillText(s, texts[q], texts[q + 1]);
      }
      /* collectives: each instance's kernels linked at their starts, the last arrival marked */
      var nLinks = 0;
      if (C && opts.links) {
        for (var c0 = 0; c0 < C.n; c0++) if (!(C.hi[c0] < view.v0 || C.lo[c0] > view.v1)) nLinks++;
      }
      if (C && opts.links && nLinks <= MAX_LINKS) {
        g2.strokeStyle = fg; g2.globalAlpha = 0.55; g2.beginPath();
        var marks = [];
        for (var c = 0; c < C.n; c++) {
          if (C.hi[c] < view.v0 || C.lo[c] > view.v1) continue;
          var first = true;
          for (var kk2 = C.offsets[c]; kk2 < C.offsets[c + 1]; kk2++) {
            var ei = C.events[kk2];
            var rc = evRect(ei, oy);
            if (!rc) continue;
            var cx = Math.max(GUTTER, Math.min(W, xOf(E.start[ei]))), cy = rc[1] + rc[3] / 2;
            if (first) { g2.moveTo(cx, cy); first = false; } else g2.lineTo(cx, cy);
            if (ei === C.late[c]) marks.push(cx, cy);
          }
        }
        g2.stroke(); g2.globalAlpha = 1;
        g2.fillStyle = "#d62728";
        for (var mi = 0; mi < marks.length; mi += 2) { g2.beginPath(); g2.arc(marks[mi], marks[mi + 1], 3, 0, 6.283); g2.fill(); }
      }
      /* selection */
      if (selected >= 0) {
        var sr = evRect(selected, oy);
        g2.strokeStyle = fg; g2.lineWidth = 2;
        if (sr) g2.strokeRect(sr[0] - 1, sr[1] - 1, Math.max(3, sr[2] + 2), sr[3] + 2);
        if (collOf && collOf[selected] >= 0) {
          var ci = collOf[selected];
          g2.strokeStyle = "#d62728";
          for (var k3 = C.offsets[ci]; k3 < C.offsets[ci + 1]; k3++) {
            var r3 = evRect(C.events[k3], oy);
            if (r3) g2.strokeRect(r3[0] - 1, r3[1] - 1, Math.max(3, r3[2] + 2), r3[3] + 2);
          }
        }
        g2.lineWidth = 1;
      }
      g2.restore();
      /* axis */
      g2.fillStyle = panel; g2.fillRect(0, 0, W, AXIS_H);
      g2.fillStyle = muted; g2.strokeStyle = line;
      var ns0 = view.v0 * unit, ns1 = view.v1 * unit;
      var nTicks = Math.max(2, Math.floor(plotW / 95));
      var step = Math.pow(10, Math.floor(Math.log10((ns1 - ns0) / nTicks || 1)));
      var err = (ns1 - ns0) / nTicks / step;
      if (err >= 5) step *= 10; else if (err >= 2) step *= 5; else if (err > 1) step *= 2;
      g2.beginPath();
      for (var tk = Math.ceil(ns0 / step) * step; tk <= ns1; tk += step) {
        var tx = GUTTER + (tk / unit - view.v0) * k();
        g2.moveTo(tx + 0.5, AXIS_H - 5); g2.lineTo(tx + 0.5, AXIS_H);
        g2.fillText(fmtTick(tk, step), tx + 3, 14);
      }
      g2.stroke();
      g2.fillText("from the window start", 6, 14);
      stats.drawn = drawn;
      stats.frames++;
      stats.last_ms = performance.now() - tStart;
      canvas.setAttribute("data-drawn", String(drawn));
      canvas.setAttribute("data-view", Math.round(view.v0 * unit) + "," + Math.round(view.v1 * unit));
      info.textContent = fmtNs(ns1 - ns0) + " shown of " + fmtNs(b.span_ns) + " · " + n.toLocaleString("en-US") + " events" +
        (nLinks > MAX_LINKS ? " · zoom in to see the " + nLinks + " collectives linked" : "");
    }
    /* the rectangle of event i on screen (null when its lane is scrolled away) */
    var laneOf = new Int32Array(n);
    evLanes.forEach(function (L, li) { for (var i = L.a; i < L.b; i++) laneOf[i] = li; });
    function evRect(i, oy) {
      var L = evLanes[laneOf[i]], tr = byIndex[L.track];
      var y0 = tr.y + oy + L.depth * LANE + 1;
      var x0 = xOf(E.start[i]), x1 = xOf(E.start[i] + E.dur[i]);
      if (x1 < GUTTER || x0 > W) return null;
      x0 = Math.max(GUTTER, x0); x1 = Math.min(W, x1);
      return [x0, y0, Math.max(1, x1 - x0), LANE - 2];
    }
    var pending = false;
    function redraw() {
      if (pending) return;
      pending = true;
      requestAnimationFrame(function () { pending = false; draw(); });
    }

    /* ---- picking -------------------------------------------------------------------------------- */
    function pickIn(St, Du, En, a, bb, u, tol) {
      var best = -1, bestD = Infinity;
      for (var i = lowerBound(En, a, bb, u - tol); i < bb && St[i] <= u + tol; i++) {
        var s = St[i], e = s + Du[i];
        var d = u < s ? s - u : u > e ? u - e : 0;
        if (d <= tol && (d < bestD || (d === bestD && Du[i] < Du[best]))) { best = i; bestD = d; }
      }
      return best;
    }
    function pick(mx, my) {
      if (mx < GUTTER || my < AXIS_H) return null;
      var cy = my - AXIS_H + view.y, u = uOf(mx), tol = 2 / k();
      for (var ti = 0; ti < tracks.length; ti++) {
        var tr = tracks[ti];
        if (tr.header || cy < tr.y || cy >= tr.y + tr.h) continue;
        if (tr.kind === "path") {
          var pi = P ? pickIn(P.start, P.dur, P.end, 0, P.n, u, tol) : -1;
          return pi >= 0 ? { seg: pi } : null;
        }
        if (tr.kind === "idle") {
          if (!G || !opts.idle) return null;
          for (var gl = 0; gl < gapLanes.length; gl++) {
            if (gapLanes[gl].track !== tr.t) continue;
            var gi = pickIn(G.start, G.dur, G.end, gapLanes[gl].a, gapLanes[gl].b, u, tol);
            return gi >= 0 ? { gap: gi } : null;
          }
          return null;
        }
        var depth = Math.floor((cy - tr.y) / LANE);
        for (var l = 0; l < evLanes.length; l++) {
          var L = evLanes[l];
          if (L.track !== tr.t || L.depth !== depth) continue;
          var ei = pickIn(E.start, E.dur, E.end, L.a, L.b, u, tol);
          return ei >= 0 ? { ev: ei } : null;
        }
        return null;
      }
      return null;
    }
    function trackOfEvent(i) { return byIndex[evLanes[laneOf[i]].track]; }
    function describe(hit) {
      var lines = [];
      if (hit.ev != null) {
        var i = hit.ev, tr = trackOfEvent(i), f = E.flags[i];
        lines.push(["name", names[E.name[i]]]);
        lines.push(["kind", b.categories[E.cat[i]]]);
        lines.push(["rank", String(tr.rank)]);
        lines.push(["track", tr.label]);
        lines.push(["start", "+" + fmtNs(E.start[i] * unit) + " from the window start" + (f & FLAG.clipped ? " (cut to the window)" : "")]);
        lines.push(["duration", fmtNs(E.dur[i] * unit)]);
        lines.push(["row", String(E.row[i]) + " (position in the rank's traceEvents)"]);
        if (f & FLAG.critical) lines.push(["critical path", "on the path"]);
        if (collOf && collOf[i] >= 0) {
          var c = collOf[i];
          var late = C.late[c] >= 0 ? trackOfEvent(C.late[c]).rank : null;
          lines.push(["collective", names[C.type[c]] + " #" + C.instance[c] + " · " + (C.offsets[c + 1] - C.offsets[c]) + " ranks shown"]);
          lines.push(["arrived last", late == null ? "not shown" : "rank " + late + (f & FLAG.late ? " (this one)" : "")]);
          lines.push(["waited", fmtNs(C.wait[C.slotOf[i]] * unit)]);
        }
      } else if (hit.gap != null) {
        var g = hit.gap;
        lines.push(["GPU idle", G.causes[G.cause[g]]]);
        lines.push(["call site", names[G.site[g]]]);
        lines.push(["detail", names[G.detail[g]]]);
        lines.push(["start", "+" + fmtNs(G.start[g] * unit)]);
        lines.push(["duration", fmtNs(G.dur[g] * unit)]);
      } else if (hit.seg != null) {
        var sg = hit.seg;
        lines.push(["critical path", P.types[P.type[sg]] + (P.category ? " (" + P.categories[P.category[sg]] + ")" : "")]);
        lines.push(["name", names[P.name[sg]]]);
        lines.push(["rank", String(P.rank[sg])]);
        lines.push(["start", "+" + fmtNs(P.start[sg] * unit)]);
        lines.push(["duration", fmtNs(P.dur[sg] * unit)]);
      }
      return lines;
    }
    function showDetails(hit) {
      details.textContent = "";
      if (!hit) { h("p", { "class": "rs-tl-hint" }, details, "Click an event for its details."); return; }
      var dl = h("dl", { "class": "rs-kv" }, details);
      describe(hit).forEach(function (kv) { h("dt", null, dl, kv[0]); h("dd", null, dl, kv[1]); });
    }
    function select(hit) {
      selected = hit && hit.ev != null ? hit.ev : -1;
      selectedGap = hit && hit.gap != null ? hit.gap : -1;
      selectedSeg = hit && hit.seg != null ? hit.seg : -1;
      canvas.setAttribute("data-selected", String(selected));
      showDetails(hit);
      redraw();
    }

    /* ---- interaction ------------------------------------------------------------------------ */
    function zoom(factor, atX) {
      var u = uOf(atX == null ? GUTTER + plotW / 2 : atX);
      view.v0 = u - (u - view.v0) / factor;
      view.v1 = u + (view.v1 - u) / factor;
      clampView();
      redraw();
    }
    function local(e) { var r = canvas.getBoundingClientRect(); return [e.clientX - r.left, e.clientY - r.top]; }
    canvas.addEventListener("wheel", function (e) {
      e.preventDefault();
      if (e.shiftKey) { view.y += e.deltaY; clampView(); redraw(); return; }
      zoom(Math.pow(1.0015, -e.deltaY), local(e)[0]);
    }, { passive: false });
    var drag = null;
    canvas.addEventListener("mousedown", function (e) { var p = local(e); drag = { x: p[0], y: p[1], v0: view.v0, v1: view.v1, sy: view.y, moved: false }; });
    window.addEventListener("mousemove", function (e) {
      if (!drag) return;
      var p = local(e), dx = p[0] - drag.x, dy = p[1] - drag.y;
      if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
      if (!drag.moved) return;
      var du = dx / k();
      view.v0 = drag.v0 - du; view.v1 = drag.v1 - du; view.y = drag.sy - dy;
      clampView(); redraw();
    });
    window.addEventListener("mouseup", function (e) {
      if (!drag) return;
      var moved = drag.moved;
      drag = null;
      if (!moved) { var p = local(e); select(pick(p[0], p[1])); }
    });
    canvas.addEventListener("mousemove", function (e) {
      if (drag && drag.moved) return;
      var p = local(e), hit = pick(p[0], p[1]);
      var key = hit ? JSON.stringify(hit) : "";
      if (!hit) { if (hoverKey) RS.hideTip(); hoverKey = ""; return; }
      hoverKey = key;
      RS.showTip(e, describe(hit).slice(0, 6).map(function (kv) { return kv[0] + ": " + kv[1]; }));
    });
    canvas.addEventListener("mouseleave", function () { hoverKey = ""; RS.hideTip(); });
    canvas.addEventListener("dblclick", function () { view.v0 = 0; view.v1 = span; clampView(); redraw(); });
    canvas.addEventListener("keydown", function (e) {
      var w = view.v1 - view.v0;
      if (e.key === "w" || e.key === "+" || e.key === "=") zoom(1.5);
      else if (e.key === "s" || e.key === "-") zoom(1 / 1.5);
      else if (e.key === "a" || e.key === "ArrowLeft") { view.v0 -= w * 0.15; view.v1 -= w * 0.15; clampView(); redraw(); }
      else if (e.key === "d" || e.key === "ArrowRight") { view.v0 += w * 0.15; view.v1 += w * 0.15; clampView(); redraw(); }
      else return;
      e.preventDefault();
    });
    bIn.addEventListener("click", function () { zoom(2); });
    bOut.addEventListener("click", function () { zoom(0.5); });
    bFit.addEventListener("click", function () { view.v0 = 0; view.v1 = span; view.y = 0; redraw(); });
    window.addEventListener("resize", function () { size(); clampView(); redraw(); });
    /* the light/dark switch changes the colours read from the CSS variables */
    if (window.MutationObserver) {
      new MutationObserver(redraw).observe(document.documentElement, { attributes: true, attributeFilter: ["data-theme"] });
    }
    /* and so does the system's colour scheme, which the report follows until the switch is used */
    if (window.matchMedia) {
      var mq = window.matchMedia("(prefers-color-scheme: dark)");
      if (mq.addEventListener) mq.addEventListener("change", redraw);
    }

    size();
    draw();

    /* ---- control surface (tests, and the console) ------------------------------------------- */
    var api = {
      n: n,
      stats: stats,
      initMs: performance.now() - t0,
      view: function () { return [view.v0 * unit, view.v1 * unit]; },
      setView: function (ns0, ns1) { view.v0 = ns0 / unit; view.v1 = ns1 / unit; clampView(); draw(); },
      zoom: function (f, x) { zoom(f, x); draw(); },
      draw: draw,
      selected: function () { return selected; },
      select: function (i) { select(i >= 0 ? { ev: i } : null); draw(); },
      find: function (name, rank) {
        for (var i = 0; i < n; i++) if (names[E.name[i]] === name && (rank == null || trackOfEvent(i).rank === rank)) return i;
        return -1;
      },
      /* the client (page) coordinates of the middle of event i after scrolling it into view */
      pointOf: function (i) {
        var tr = trackOfEvent(i), L = evLanes[laneOf[i]];
        var yIn = tr.y + L.depth * LANE + LANE / 2;
        if (yIn - view.y < 0 || yIn - view.y > viewH) { view.y = yIn - viewH / 2; clampView(); }
        draw();
        var rc = evRect(i, AXIS_H - view.y);
        if (!rc) return null;
        var r = canvas.getBoundingClientRect();
        return { x: r.left + rc[0] + rc[2] / 2, y: r.top + rc[1] + rc[3] / 2 };
      },
      event: function (i) { var hit = { ev: i }; var o = {}; describe(hit).forEach(function (kv) { o[kv[0]] = kv[1]; }); return o; },
      details: function () { return details.innerText; },
      /* frame times over zoom levels from the whole window down to 1/4096 of it, centred on
       * the middle; each frame is drawn and read back (copied into a 1-pixel canvas and read
       * there) so rasterising counts */
      bench: function (frames) {
        frames = frames || 60;
        var probe = document.createElement("canvas");
        probe.width = probe.height = 1;
        var pg = probe.getContext("2d", { willReadFrequently: true });
        var times = [], drawnMax = 0;
        var c = span / 2;
        for (var f = 0; f < frames; f++) {
          var w = span / Math.pow(4096, (f % 20) / 19);
          view.v0 = c - w / 2; view.v1 = c + w / 2; clampView();
          var ts = performance.now();
          draw();
          pg.drawImage(canvas, 0, 0, 1, 1);
          pg.getImageData(0, 0, 1, 1);
          times.push(performance.now() - ts);
          if (stats.drawn > drawnMax) drawnMax = stats.drawn;
        }
        view.v0 = 0; view.v1 = span; draw();
        var sorted = times.slice().sort(function (a, b2) { return a - b2; });
        var mean = times.reduce(function (a, x) { return a + x; }, 0) / times.length;
        return { frames: frames, mean_ms: mean, p50_ms: sorted[Math.floor(frames * 0.5)],
          p95_ms: sorted[Math.min(frames - 1, Math.floor(frames * 0.95))], max_ms: sorted[frames - 1], max_drawn: drawnMax };
      }
    };
    RS.timelines[b.id] = api;
    return api;
  };
})();
