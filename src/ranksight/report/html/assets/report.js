/* ranksight report: reads the embedded payload (JSON, never evaluated as script) and draws
 * every block of every shown section. */
(function () {
  "use strict";
  var RS = (window.RS = window.RS || {});
  var h = RS.h;
  var t0 = performance.now();

  function kv(parent, b, S) {
    var dl = h("dl", { "class": "rs-kv", id: "kv-" + b.id }, parent);
    b.items.forEach(function (it) {
      h("dt", null, dl, it.label);
      h("dd", null, dl, it.text != null ? S[it.text] : RS.fmt(it.value));
    });
  }
  function text(parent, b, S) { h("p", { id: "text-" + b.id }, parent, S[b.text]); }
  function findings(parent, b, S) {
    var ul = h("ul", { "class": "rs-findings", id: "findings-" + b.id }, parent);
    if (!b.items.length) h("li", { "class": "sev-info" }, ul, "No findings: no rule crossed its threshold.");
    b.items.forEach(function (f) {
      var sev = String(f.severity || "info").toLowerCase().replace(/[^a-z]/g, "");
      var li = h("li", { "class": "sev-" + sev, "data-rule": f.rule || "" }, ul);
      h("span", { "class": "rs-sev" }, li, f.severity || "info");
      h("strong", null, li, S[f.title]);
      if (f.ranks && f.ranks.length) h("span", { "class": "rs-rank" }, li, " · rank" + (f.ranks.length > 1 ? "s " : " ") +
        (f.ranks.length > 32 ? f.ranks.length + ": " + RS.rankRanges(f.ranks) : f.ranks.join(", ")));
      if (f.evidence) {
        var a = h("a", { href: "#sec-" + f.evidence, "data-evidence": f.evidence }, li, "evidence →");
        a.setAttribute("title", "the section with the numbers behind this finding");
      }
      if (f.detail != null) h("span", { "class": "rs-detail" }, li, S[f.detail]);
      if (f.fixes && f.fixes.length) {
        var fx = h("ul", { "class": "rs-fixes" }, li);
        f.fixes.forEach(function (x) { h("li", null, fx, S[x]); });
      }
    });
  }
  var DRAW = {
    table: function (p, b, S) { return RS.table(p, b, S); },
    chart: function (p, b, S) { return RS.chart(p, b, S); },
    timeline: function (p, b, S) { return RS.timeline(p, b, S); },
    kv: kv,
    text: text,
    findings: findings,
    rankdetail: function (p, b, S) { return RS.rankdetail(p, b, S); },
  };

  /* a many-rank report holds its payload gzip-compressed in base64: the browser's own
   * DecompressionStream inflates it (no library, no network) */
  function unpack(p) {
    var bin = atob(p.data), n = bin.length, u = new Uint8Array(n);
    for (var i = 0; i < n; i++) u[i] = bin.charCodeAt(i);
    var stream = new Blob([u]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).text().then(function (t) { return JSON.parse(t); });
  }

  function start() {
    var raw = JSON.parse(document.getElementById("rs-data").textContent);
    if (raw.packed === "gzip-base64") {
      unpack(raw).then(main, function (err) {
        var p = document.createElement("p");
        p.className = "rs-error";
        p.textContent = "This report's data could not be decompressed by this browser: " + err;
        document.querySelector("main").prepend(p);
      });
    } else main(raw);
  }

  function main(doc) {
    var S = doc.strings;
    RS.doc = doc;
    RS.timings = [["parse", performance.now() - t0]];
    doc.sections.forEach(function (sec) {
      if (!sec.shown) return;
      var host = document.querySelector('section[data-slug="' + sec.slug + '"] .rs-blocks');
      if (!host) return;
      var ts = performance.now();
      sec.blocks.forEach(function (b) {
        var div = h("div", { "class": "rs-block rs-" + b.type, "data-block": b.id }, host);
        DRAW[b.type](div, b, S);
      });
      RS.timings.push([sec.slug, performance.now() - ts]);
    });
    if (RS.initialRank != null) RS.pickRank(RS.initialRank);
    var theme = document.getElementById("rs-theme");
    if (theme) {
      /* the report follows the system's colour scheme until the switch picks the other one */
      var label = function () {
        theme.setAttribute("aria-label", RS.isDark() ? "switch to the light theme" : "switch to the dark theme");
        theme.setAttribute("aria-pressed", RS.isDark() ? "true" : "false");
      };
      label();
      theme.addEventListener("click", function () {
        document.documentElement.setAttribute("data-theme", RS.isDark() ? "light" : "dark");
        label();
        RS.themeChanged();
      });
      RS.onTheme(label);
    }
    RS.renderMs = performance.now() - t0;
    document.body.setAttribute("data-ready", "1");
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
