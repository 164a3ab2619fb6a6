/* Config pages: draw the charts from the shared specs and this page's data; copy buttons. */
(function () {
  "use strict";

  // "container" widths do not reach facets or dual-axis layers, so every chart
  // gets the box's width in pixels, less room for axes and legend.
  function sized(spec, width) {
    var w = Math.max(240, width - 150);
    if (spec.width === "container") spec.width = w;
    if (spec.spec && spec.spec.width === "container") spec.spec = Object.assign({}, spec.spec, { width: w });
    return spec;
  }

  // The page ships each dataset column by column (generator/site/chart_pack.py):
  // {n: rows, c: {field: [values], {cycle: [values]}, {seq: [start, step, period]}
  // or {runs: [[value, count], ...]}}}.
  function unpack(packed) {
    var rows = [];
    for (var i = 0; i < packed.n; i++) rows.push({});
    Object.keys(packed.c).forEach(function (key) {
      var column = packed.c[key], at = 0;
      if (Array.isArray(column)) {
        column.forEach(function (v, j) { rows[j][key] = v; });
      } else if (column.cycle) {
        rows.forEach(function (row, j) { row[key] = column.cycle[j % column.cycle.length]; });
      } else if (column.seq) {
        var s = column.seq;
        rows.forEach(function (row, j) { row[key] = s[0] + (j % s[2]) * s[1]; });
      } else {
        column.runs.forEach(function (run) {
          for (var k = 0; k < run[1]; k++) rows[at++][key] = run[0];
        });
      }
    });
    return rows;
  }

  function unpackAll(sets) {
    var out = {};
    Object.keys(sets).forEach(function (name) { out[name] = unpack(sets[name]); });
    return out;
  }

  // A layer drawn from an empty dataset (no breaking rate: no band to shade) is left
  // out, so Vega does not compute an infinite extent for it.
  function pruned(spec, datasets) {
    if (!spec.layer) return spec;
    var out = Object.assign({}, spec);
    out.layer = spec.layer.filter(function (l) {
      var name = l.data && l.data.name;
      return !(name && datasets[name] && datasets[name].length === 0);
    }).map(function (l) { return pruned(l, datasets); });
    return out;
  }

  function drawCharts() {
    var holder = document.getElementById("bp-chart-data");
    if (!holder || !window.vegaEmbed || !window.BP_SPECS) return;
    var data = JSON.parse(holder.textContent);
    document.querySelectorAll(".bp-chart[data-kind]").forEach(function (box) {
      var kind = box.getAttribute("data-kind");
      if (!data[kind] || !window.BP_SPECS[kind]) return;
      var datasets = unpackAll(data[kind]);
      var spec = sized(pruned(Object.assign({}, window.BP_SPECS[kind], { datasets: datasets }), datasets), box.clientWidth);
      var target = document.createElement("div");
      target.className = "bp-vega";
      box.appendChild(target);
      // ast: expressions are interpreted, never compiled with Function(): the pages'
      // Content-Security-Policy allows no eval.
      window.vegaEmbed(target, spec, { actions: false, renderer: "svg", ast: true }).then(function (result) {
        box.querySelectorAll(".bp-sketch").forEach(function (el) { el.remove(); });
        box.setAttribute("data-rendered", "svg");
        // a page's own script may change what the chart shows (the ranking's filters)
        box.bpView = result.view;
        box.dispatchEvent(new CustomEvent("bp-drawn"));
      }).catch(function (err) {
        target.remove();
        console.warn("chart " + kind + " kept its static fallback: " + err);
      });
    });
  }

  function absolutizeSnippet() {
    var code = document.getElementById("bp-snippet");
    if (!code || code.textContent.indexOf("](/") < 0 && code.textContent.indexOf("(/") < 0) return;
    var base = new URL(code.getAttribute("data-root") || "./", window.location.href).href.replace(/\/$/, "");
    code.textContent = code.textContent.split("(/").join("(" + base + "/");
  }

  function copyButtons() {
    document.querySelectorAll("button[data-copy]").forEach(function (btn) {
      btn.addEventListener("click", function () {
        var el = document.getElementById(btn.getAttribute("data-copy"));
        if (!el || !navigator.clipboard) return;
        navigator.clipboard.writeText(el.textContent).then(function () {
          btn.textContent = "Copied";
        });
      });
    });
  }

  // A selection to compare travels in the address (#cmp=a,b): the compare link adds this
  // config to it, and the links to other configs and to the ranking carry it on.
  function compareSelection() {
    var link = document.getElementById("bp-compare-link");
    if (!link) return;
    var id = link.getAttribute("data-id");
    var p = new URLSearchParams(window.location.hash.replace(/^#/, ""));
    var picked = (p.get("cmp") || "").split(",").filter(function (x, i, all) {
      return /^[A-Za-z0-9._-]+$/.test(x) && x !== id && all.indexOf(x) === i;
    }).slice(0, 3);
    if (!picked.length) return;
    var ids = picked.concat([id]).join(",");
    link.href = link.href.split("#")[0] + "#ids=" + ids;
    link.textContent = "Compare with the " + picked.length + " selected";
    var rank = document.getElementById("bp-rank-link");
    if (rank) rank.href = rank.href.split("#")[0] + "#cmp=" + ids;
    document.querySelectorAll(".bp-nearest a").forEach(function (a) {
      a.href = a.href.split("#")[0] + "#cmp=" + picked.join(",");
    });
  }

  compareSelection();
  absolutizeSnippet();
  copyButtons();
  drawCharts();
})();
