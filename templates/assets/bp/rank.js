/* Ranking page (model/<id>/rank/): every config of one model from its JSON index
   (api/models/<id>.json, generator/site/model_json.py), sorted, filtered, replicas for a
   target rate, and a selection to compare. The page's state lives in its address
   (#context=8192&quant=q4_k_m&kind=discrete&serves=1&rps=20&sort=cost&dir=asc&cmp=a,b), so a
   view can be linked. Catalog text reaches the page through textContent only. */
(function () {
  "use strict";
  var box = document.getElementById("bp-rank");
  if (!box) return;
  var tbody = document.querySelector("#bp-rank-table tbody");
  var status = document.getElementById("bp-rank-status");
  var go = document.getElementById("bp-compare-go");
  var count = document.getElementById("bp-compare-count");
  var root = new URL(box.getAttribute("data-root") || "./", window.location.href);
  var f = {
    context: document.getElementById("bp-f-context"),
    quant: document.getElementById("bp-f-quant"),
    kind: document.getElementById("bp-f-kind"),
    serves: document.getElementById("bp-f-serves"),
    target: document.getElementById("bp-target")
  };
  var MAX_COMPARE = 4;
  var ID = /^[A-Za-z0-9._-]+$/;
  // The planner's rule (generator/plan/planner.py): a quotient within 1e-12 of a whole
  // number counts as that number.
  var CEIL_SLACK = 1e-12;
  var RULES = { ttft: "TTFT", p99: "p99", error_budget: "shed", soak: "soak" };
  // Sort keys: value of a config, and whether the first click sorts descending.
  var KEYS = {
    device: [function (c) { return c.gpu_name; }, false],
    quant: [function (c) { return c.quant; }, false],
    context: [function (c) { return c.context; }, false],
    rate: [function (c) { return c.breaking_rps_low; }, true],
    per_user: [function (c) { return c.tokens_per_s_per_user; }, true],
    cost: [function (c) { return c.usd_per_million_output_tokens_high; }, false],
    usd_per_hour: [function (c) { return c.usd_per_hour; }, false],
    replicas: [function (c) { return replicas(c); }, false]
  };
  var state = { sort: "rate", desc: true, cmp: [] };
  var configs = [];
  var loaded = false;

  function rps(x) {
    if (x >= 100) return Math.round(x).toLocaleString("en-US");
    if (x >= 10) return x.toFixed(1);
    return String(Number(x.toPrecision(3)));
  }
  function usd(x) {
    if (x >= 100) return "$" + Math.round(x).toLocaleString("en-US");
    return "$" + String(Number(x.toPrecision(3)));
  }
  function gib(bytes) { return (bytes / 1073741824).toFixed(1) + " GiB"; }

  function target() {
    var t = parseFloat(f.target.value);
    return isFinite(t) && t > 0 ? t : null;
  }
  function replicas(c) {
    var t = target();
    if (t === null || !(c.breaking_rps_low > 0)) return null;
    return Math.max(1, Math.ceil((t / c.breaking_rps_low) * (1 - CEIL_SLACK)));
  }

  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = text;
    if (cls) e.className = cls;
    return e;
  }
  function cell(main, sub, cls, title) {
    var td = el("td", null, cls);
    td.appendChild(el("span", main));
    if (sub) td.appendChild(el("small", sub));
    if (title) td.title = title;
    return td;
  }
  function blank(c) {
    if (c.status === "does-not-fit") return "does not fit (short by " + gib(c.shortfall_bytes) + ")";
    if (c.status === "too-slow") return "too slow";
    if (c.status === "fails-at-any-load") return "fails at any load (" + (RULES[c.breaking_rule] || "a rule") + ")";
    return "not simulated";
  }

  function row(c) {
    var tr = el("tr");
    tr.setAttribute("data-id", c.id);
    var pick = el("td", null, "bp-pick");
    var tick = el("input");
    tick.type = "checkbox";
    tick.value = c.id;
    tick.checked = state.cmp.indexOf(c.id) >= 0;
    tick.disabled = !tick.checked && state.cmp.length >= MAX_COMPARE;
    tick.setAttribute("aria-label", "compare " + c.gpu_name + " " + c.quant + " " + c.context);
    pick.appendChild(tick);
    tr.appendChild(pick);
    var dev = el("td", null, "bp-dev");
    var a = el("a", c.gpu_name);
    a.href = new URL(c.url, root).href;
    dev.appendChild(a);
    tr.appendChild(dev);
    tr.appendChild(cell(c.quant, c.kv_dtype !== "auto" ? "KV " + c.kv_dtype : c.runtime));
    tr.appendChild(cell(c.context >= 1024 && c.context % 1024 === 0 ? c.context / 1024 + "k" : String(c.context)));
    if (c.status === "serves") {
      tr.appendChild(cell(rps(c.breaking_rps) + " rps ±" + c.serving_band_pct + " %",
        rps(c.breaking_rps_low) + " to " + rps(c.breaking_rps_high) + " · " + (RULES[c.breaking_rule] || "")));
    } else {
      tr.appendChild(cell(blank(c), null, "bp-no"));
    }
    tr.appendChild(c.tokens_per_s_per_user === null ? cell("–", null, "bp-dim")
      : cell(c.tokens_per_s_per_user.toFixed(1)));
    var unpriced = c.usd_per_hour === null;
    if (unpriced) {
      tr.appendChild(cell("unpriced", null, "bp-dim", c.unpriced_reason || ""));
    } else if (c.usd_per_million_output_tokens === null) {
      tr.appendChild(cell("–", null, "bp-dim"));
    } else {
      tr.appendChild(cell(usd(c.usd_per_million_output_tokens),
        usd(c.usd_per_million_output_tokens_low) + " to " + usd(c.usd_per_million_output_tokens_high)));
    }
    tr.appendChild(unpriced ? cell("unpriced", null, "bp-dim", c.unpriced_reason || "")
      : cell(usd(c.usd_per_hour), c.price_basis + ", as of " + c.price_as_of));
    var n = replicas(c);
    tr.appendChild(n === null ? cell("–", null, "bp-dim bp-replicas")
      : cell(String(n), unpriced ? null : usd(n * c.usd_per_hour) + " / h", "bp-replicas"));
    return tr;
  }

  function shown() {
    var ctx = f.context.value, q = f.quant.value, k = f.kind.value, serves = f.serves.checked;
    return configs.filter(function (c) {
      return (!ctx || String(c.context) === ctx) && (!q || c.quant === q) &&
        (!k || c.device_kind === k) && (!serves || c.status === "serves");
    });
  }

  function ordered(list) {
    var key = KEYS[state.sort][0], sign = state.desc ? -1 : 1;
    return list.map(function (c) { return [key(c), c]; }).sort(function (x, y) {
      var a = x[0], b = y[0];
      var na = a === null || a === undefined, nb = b === null || b === undefined;
      if (na !== nb) return na ? 1 : -1; // blanks last, either direction
      if (!na && a !== b) return (a < b ? -1 : 1) * sign;
      return x[1].id < y[1].id ? -1 : x[1].id > y[1].id ? 1 : 0;
    }).map(function (p) { return p[1]; });
  }

  // The cost chart plots what the table lists: its points are filtered with the rows.
  var chartBox = document.querySelector('.bp-chart[data-kind="cost"]');
  var allPoints = null;
  function followChart(list) {
    var view = chartBox && chartBox.bpView;
    if (!view || !window.vega || !loaded) return; // drawn before the rows came: wait for them
    if (allPoints === null) {
      allPoints = view.data("cost").map(function (p) {
        var copy = {};
        Object.keys(p).forEach(function (k) { copy[k] = p[k]; });
        return copy;
      });
    }
    var on = {};
    list.forEach(function (c) { on[c.id] = true; });
    var keep = allPoints.filter(function (p) { return on[p.id] === true; });
    view.change("cost", window.vega.changeset().remove(window.vega.truthy).insert(keep)).run();
    chartBox.setAttribute("data-points", String(keep.length));
  }

  function render() {
    var list = ordered(shown());
    followChart(list);
    var frag = document.createDocumentFragment();
    list.forEach(function (c) { frag.appendChild(row(c)); });
    tbody.replaceChildren(frag);
    document.querySelectorAll("#bp-rank-table th button[data-sort]").forEach(function (b) {
      var on = b.getAttribute("data-sort") === state.sort;
      b.parentNode.setAttribute("aria-sort", on ? (state.desc ? "descending" : "ascending") : "none");
    });
    status.textContent = list.length + " of " + configs.length + " configs shown.";
    go.href = new URL("compare/#ids=" + state.cmp.join(","), root).href;
    go.classList.toggle("bp-off", state.cmp.length < 2);
    count.textContent = state.cmp.length ? state.cmp.length + " selected (2 to 4)" : "none selected: tick 2 to 4";
  }

  function writeHash() {
    var p = new URLSearchParams();
    if (f.context.value) p.set("context", f.context.value);
    if (f.quant.value) p.set("quant", f.quant.value);
    if (f.kind.value) p.set("kind", f.kind.value);
    if (f.serves.checked) p.set("serves", "1");
    if (target() !== null) p.set("rps", f.target.value);
    p.set("sort", state.sort);
    p.set("dir", state.desc ? "desc" : "asc");
    if (state.cmp.length) p.set("cmp", state.cmp.join(","));
    history.replaceState(null, "", "#" + p.toString().replace(/%2C/g, ","));
  }

  function choose(select, value) {
    var ok = Array.prototype.some.call(select.options, function (o) { return o.value === value; });
    select.value = ok ? value : "";
  }

  function readHash() {
    var p = new URLSearchParams(window.location.hash.replace(/^#/, ""));
    choose(f.context, p.get("context") || "");
    choose(f.quant, p.get("quant") || "");
    choose(f.kind, p.get("kind") || "");
    f.serves.checked = p.get("serves") === "1";
    var t = parseFloat(p.get("rps") || "");
    f.target.value = isFinite(t) && t > 0 ? String(t) : "";
    var s = p.get("sort");
    state.sort = KEYS[s] ? s : "rate";
    state.desc = p.get("dir") ? p.get("dir") === "desc" : KEYS[state.sort][1];
    state.cmp = (p.get("cmp") || "").split(",").filter(function (id, i, all) {
      return ID.test(id) && all.indexOf(id) === i;
    }).slice(0, MAX_COMPARE);
  }

  function changed() { writeHash(); render(); }

  function wire() {
    [f.context, f.quant, f.kind, f.serves].forEach(function (c) { c.addEventListener("change", changed); });
    f.target.addEventListener("input", changed);
    document.querySelectorAll("#bp-rank-table th button[data-sort]").forEach(function (b) {
      b.addEventListener("click", function () {
        var k = b.getAttribute("data-sort");
        state.desc = k === state.sort ? !state.desc : KEYS[k][1];
        state.sort = k;
        changed();
      });
    });
    tbody.addEventListener("change", function (e) {
      var t = e.target;
      if (!t || t.type !== "checkbox") return;
      state.cmp = state.cmp.filter(function (id) { return id !== t.value; });
      if (t.checked && state.cmp.length < MAX_COMPARE) state.cmp.push(t.value);
      changed();
    });
    window.addEventListener("hashchange", function () { readHash(); render(); });
    if (chartBox) chartBox.addEventListener("bp-drawn", function () { followChart(shown()); });
  }

  readHash();
  fetch(new URL(box.getAttribute("data-src"), window.location.href))
    .then(function (r) {
      if (!r.ok) throw new Error("HTTP " + r.status);
      return r.json();
    })
    .then(function (doc) {
      configs = Array.isArray(doc.configs) ? doc.configs : [];
      loaded = true;
      wire();
      render();
    })
    .catch(function (err) {
      status.textContent = "The ranking could not be loaded (" + err.message + ").";
    });
})();
