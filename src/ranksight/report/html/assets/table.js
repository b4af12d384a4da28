/* ranksight tables: paged, sortable (click a header), searchable (all text columns) and
 * filterable (one box per column: text contains, or for numbers ">10", "<=5", "=3", "1..9").
 * Only the visible page is in the DOM; cells are set with textContent. */
(function () {
  "use strict";
  var RS = (window.RS = window.RS || {});
  var h = RS.h;
  var lowerCache = null;

  function lower(S, i) {
    if (!lowerCache) lowerCache = new Array(S.length);
    var v = lowerCache[i];
    if (v === undefined) v = lowerCache[i] = String(S[i]).toLowerCase();
    return v;
  }

  function numFilter(text) {
    var t = text.replace(/\s+/g, "");
    var m = /^(>=|<=|>|<|=)?(-?[\d.]+(?:e-?\d+)?)$/i.exec(t);
    if (m) {
      var x = parseFloat(m[2]), op = m[1] || "=";
      return function (v) {
        if (v == null) return false;
        return op === ">" ? v > x : op === "<" ? v < x : op === ">=" ? v >= x : op === "<=" ? v <= x : v === x;
      };
    }
    m = /^(-?[\d.]+)\.\.(-?[\d.]+)$/.exec(t);
    if (m) {
      var a = parseFloat(m[1]), b = parseFloat(m[2]);
      return function (v) { return v != null && v >= a && v <= b; };
    }
    var q = text.toLowerCase();
    return function (v) { return v != null && String(v).indexOf(q) >= 0; };
  }

  RS.table = function (parent, b, S) {
    var cols = b.columns, data = b.data, n = b.rows;
    var state = { sort: -1, desc: false, page: 0, size: b.page_size || 25, query: "", filters: cols.map(function () { return null; }) };
    if (b.sort) {
      cols.forEach(function (c, i) { if (c.name === b.sort.column) { state.sort = i; state.desc = !!b.sort.descending; } });
    }
    var wrap = h("div", { "class": "rs-table-block", id: "table-" + b.id, "data-rows": n }, parent);
    if (b.title) h("h4", null, wrap, b.title);
    if (b.rank_subset && b.rank_subset.reason === "detail") h("p", { "class": "rs-help rs-truncated rs-subset" }, wrap,
      "Operator-level detail computed for " + b.rank_subset.ranks.length + " of " + b.rank_subset.of + " ranks (the worst, " +
      "outlier, minimum and maximum ranks and any asked for: " + RS.rankRanges(b.rank_subset.ranks) + "): " + RS.fmt(n) + " rows. " +
      "`ranksight report --detail-ranks all` computes every rank's; `--detail-ranks N` adds rank N.");
    else if (b.rank_subset) h("p", { "class": "rs-help rs-truncated rs-subset" }, wrap, "Rows of " + b.rank_subset.ranks.length +
      " of " + b.rank_subset.of + " ranks (the worst, outlier, minimum and maximum ranks: " + RS.rankRanges(b.rank_subset.ranks) +
      "): " + RS.fmt(n) + " of " + RS.fmt(b.total_rows) + " rows. " + (b.rank_subset.reason === "rows" ? "The table has too many rows" :
      "Every rank's rows would exceed the report's size budget") + "; `ranksight analyze … --rank N --format csv` writes any rank's.");
    else if (b.total_rows) h("p", { "class": "rs-help rs-truncated" }, wrap, "The first " + RS.fmt(n) + " of " + RS.fmt(b.total_rows) +
      " rows" + (b.sort ? " by " + b.sort.column : "") + "; `ranksight analyze … --format csv` writes them all.");
    var bar = h("div", { "class": "rs-table-bar" }, wrap);
    var search = h("input", { type: "search", placeholder: "search " + n + " rows", "aria-label": "search" }, bar);
    var prev = h("button", { type: "button", "class": "rs-prev" }, bar, "‹ prev");
    var next = h("button", { type: "button", "class": "rs-next" }, bar, "next ›");
    var count = h("span", { "class": "rs-count" }, bar);
    var scroller = h("div", { "class": "rs-table-wrap" }, wrap);
    var table = h("table", { "class": "rs-table" }, scroller);
    /* every table has a caption (its title, read by screen readers; the title shows above) */
    var caption = h("caption", { "class": "rs-sr" }, table, b.title || b.caption || String(b.id).replace(/[-_]/g, " "));
    var thead = h("thead", null, table), hr = h("tr", null, thead), fr = h("tr", { "class": "rs-filters" }, thead);
    var tbody = h("tbody", null, table);
    var ths = cols.map(function (c, i) {
      var num = c.kind === "int" || c.kind === "float";
      var th = h("th", { scope: "col", "class": num ? "num" : "str", "data-col": c.name, title: (c.help || c.name) + (c.unit ? " (" + c.unit + ")" : "") + " — click to sort" }, hr, c.name);
      function sortBy() {
        if (state.sort === i) state.desc = !state.desc; else { state.sort = i; state.desc = num; }
        state.page = 0;
        render();
      }
      th.setAttribute("tabindex", "0");
      th.addEventListener("click", sortBy);
      th.addEventListener("keydown", function (ev) { if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); sortBy(); } });
      var f = h("input", { type: "text", placeholder: num ? ">, <, a..b" : "filter", "aria-label": "filter " + c.name }, h("th", { scope: "col" }, fr));
      f.addEventListener("input", function () {
        state.filters[i] = f.value.trim() ? (num ? numFilter(f.value.trim()) : f.value.trim().toLowerCase()) : null;
        state.page = 0;
        render();
      });
      return th;
    });
    search.addEventListener("input", function () { state.query = search.value.trim().toLowerCase(); state.page = 0; render(); });
    prev.addEventListener("click", function () { if (state.page > 0) { state.page--; render(); } });
    next.addEventListener("click", function () { state.page++; render(); });

    function cell(ci, r) {
      var v = data[ci][r];
      return cols[ci].kind === "str" && v != null ? S[v] : v;
    }
    function rowsMatching() {
      var out = [], strCols = [];
      cols.forEach(function (c, i) { if (c.kind === "str") strCols.push(i); });
      for (var r = 0; r < n; r++) {
        var ok = true;
        if (state.query) {
          ok = false;
          for (var k = 0; k < strCols.length && !ok; k++) {
            var v = data[strCols[k]][r];
            if (v != null && lower(S, v).indexOf(state.query) >= 0) ok = true;
          }
          if (!ok) for (var ci = 0; ci < cols.length && !ok; ci++) {
            if (cols[ci].kind !== "str" && data[ci][r] != null && String(data[ci][r]).indexOf(state.query) >= 0) ok = true;
          }
        }
        for (var fi = 0; ok && fi < cols.length; fi++) {
          var f = state.filters[fi];
          if (!f) continue;
          if (typeof f === "function") ok = f(data[fi][r]);
          else { var sv = data[fi][r]; ok = sv != null && (cols[fi].kind === "str" ? lower(S, sv) : String(sv).toLowerCase()).indexOf(f) >= 0; }
        }
        if (ok) out.push(r);
      }
      if (state.sort >= 0) {
        var sc = state.sort, str = cols[sc].kind === "str", d = state.desc ? -1 : 1;
        out.sort(function (a, b2) {
          var x = cell(sc, a), y = cell(sc, b2);
          if (x == null && y == null) return a - b2;
          if (x == null) return 1;
          if (y == null) return -1;
          var c = str ? (x < y ? -1 : x > y ? 1 : 0) : x - y;
          return c ? c * d : a - b2;
        });
      }
      return out;
    }
    function render() {
      var rows = rowsMatching(), pages = Math.max(1, Math.ceil(rows.length / state.size));
      state.page = Math.min(state.page, pages - 1);
      var first = state.page * state.size, last = Math.min(rows.length, first + state.size);
      while (tbody.firstChild) tbody.removeChild(tbody.firstChild);
      var frag = document.createDocumentFragment();
      for (var k = first; k < last; k++) {
        var tr = h("tr", null, frag);
        for (var ci = 0; ci < cols.length; ci++) {
          var v = cell(ci, rows[k]), kind = cols[ci].kind;
          var num = kind === "int" || kind === "float";
          var td = h("td", { "class": num ? "num" : "str" }, tr, num ? RS.fmt(v) : v == null ? "" : String(v));
          if (!num && v != null && String(v).length > 40) td.setAttribute("title", String(v));
        }
      }
      tbody.appendChild(frag);
      ths.forEach(function (th, i) {
        if (i === state.sort) th.setAttribute("aria-sort", state.desc ? "descending" : "ascending");
        else th.removeAttribute("aria-sort");
      });
      count.textContent = rows.length ? "rows " + (first + 1) + "–" + last + " of " + rows.length + (rows.length < n ? " (filtered from " + n + ")" : "") : "no rows match";
      prev.disabled = state.page === 0;
      next.disabled = state.page >= pages - 1;
      var hidePager = n <= state.size;
      prev.style.display = next.style.display = hidePager ? "none" : "";
      if (n <= 5) { search.style.display = "none"; fr.style.display = "none"; }
    }
    render();
    return wrap;
  };
})();
