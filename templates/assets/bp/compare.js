/* Compare page (compare/#ids=a,b,c): two to four configs side by side, each read from its
   model's JSON index (api/models/<model>.json, generator/site/model_json.py). A config id
   is device--model--quant--context[--kv-dtype]; an id that is malformed or not in its
   model's index is reported, and the rest are still shown. Text goes in by textContent. */
(function () {
  "use strict";
  var holder = document.getElementById("bp-compare");
  if (!holder) return;
  var root = new URL(holder.getAttribute("data-root") || "./", window.location.href);
  var status = document.getElementById("bp-compare-status");
  var errors = document.getElementById("bp-compare-errors");
  var table = document.getElementById("bp-compare-table");
  var MAX = 4;
  var SEP = "--";
  var ID = /^[A-Za-z0-9._-]+$/;
  var RULES = { ttft: "TTFT", p99: "p99 latency", error_budget: "error budget (shedding)", soak: "soak" };
  var STATUS = {
    serves: "serves",
    "fails-at-any-load": "fails at any load",
    "too-slow": "too slow to use",
    "does-not-fit": "does not fit",
    "not-simulated": "fits, not simulated"
  };
  var loaded = {}; // model id -> promise of its document

  function num(x, digits) { return x === null || x === undefined ? "–" : String(Number(x.toPrecision(digits || 3))); }
  function money(x) { return x === null || x === undefined ? "–" : "$" + num(x); }
  function ctx(n) { return n % 1024 === 0 ? n / 1024 + "k" : String(n); }

  // Each field: label, and the text of one config (null: a dash).
  var FIELDS = [
    ["device", function (c) { return c.gpu_name; }],
    ["quant", function (c) { return c.quant + (c.kv_dtype !== "auto" ? " (KV " + c.kv_dtype + ")" : ""); }],
    ["context", function (c) { return ctx(c.context) + " tokens"; }],
    ["runtime", function (c) { return c.runtime; }],
    ["status", function (c) { return STATUS[c.status] || c.status; }],
    ["rate within the SLO", function (c) {
      return c.breaking_rps === null ? null : num(c.breaking_rps) + " rps ±" + c.serving_band_pct + " % (" +
        num(c.breaking_rps_low) + " to " + num(c.breaking_rps_high) + ")";
    }],
    ["rule that fires first", function (c) { return RULES[c.breaking_rule] || null; }],
    ["saturation (closed loop)", function (c) { return c.saturation_rps === null ? null : num(c.saturation_rps) + " rps"; }],
    ["KV slots at full context", function (c) { return String(c.slots); }],
    ["requests held at once", function (c) { return c.max_concurrency === null ? null : String(c.max_concurrency); }],
    ["binding ceiling", function (c) { return c.binding_ceiling; }],
    ["tokens/s per user at the breaking rate", function (c) { return c.tokens_per_s_per_user === null ? null : c.tokens_per_s_per_user.toFixed(1); }],
    ["one stream alone", function (c) { return c.single_stream_tokens_per_s === null ? null : c.single_stream_tokens_per_s.toFixed(1) + " tokens/s"; }],
    ["$ / hour", function (c) {
      return c.usd_per_hour === null ? "unpriced: " + (c.unpriced_reason || "no price") :
        money(c.usd_per_hour) + " (" + c.price_basis + ", as of " + c.price_as_of + ")";
    }],
    ["$ / M output tokens", function (c) {
      return c.usd_per_million_output_tokens === null ? null : money(c.usd_per_million_output_tokens) + " (" +
        money(c.usd_per_million_output_tokens_low) + " to " + money(c.usd_per_million_output_tokens_high) + ")";
    }]
  ];

  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = text;
    if (cls) e.className = cls;
    return e;
  }

  function wanted() {
    var p = new URLSearchParams(window.location.hash.replace(/^#/, ""));
    var raw = (p.get("ids") || "").split(",").map(function (s) { return s.trim(); }).filter(Boolean);
    return raw.filter(function (id, i) { return raw.indexOf(id) === i; });
  }

  function modelOf(id) {
    var parts = id.split(SEP);
    if (!ID.test(id) || parts.length < 4 || id.indexOf("..") >= 0) return null;
    return parts[1];
  }

  function doc(model) {
    if (!loaded[model]) {
      loaded[model] = fetch(new URL("api/models/" + model + ".json", root)).then(function (r) {
        if (!r.ok) throw new Error("no index for model " + model + " (HTTP " + r.status + ")");
        return r.json();
      });
    }
    return loaded[model];
  }

  function find(id) {
    var model = modelOf(id);
    if (model === null) return Promise.resolve({ id: id, error: "not a config id" });
    return doc(model).then(function (d) {
      var c = (d.configs || []).filter(function (x) { return x.id === id; })[0];
      return c ? { id: id, config: c, model: d } : { id: id, error: "no such config of " + (d.name || model) };
    }, function (err) { return { id: id, error: err.message }; });
  }

  function link(ids) { return "#ids=" + ids.join(","); }

  function draw(ids, found) {
    errors.replaceChildren();
    found.filter(function (f) { return f.error; }).forEach(function (f) {
      var li = el("li", null, "bp-no");
      li.appendChild(el("code", f.id));
      li.appendChild(document.createTextNode(": " + f.error + "."));
      errors.appendChild(li);
    });
    var ok = found.filter(function (f) { return f.config; });
    var head = el("tr");
    head.appendChild(el("th", ""));
    ok.forEach(function (f) {
      var th = el("th");
      var a = el("a", f.config.gpu_name + " · " + f.config.quant + " · " + ctx(f.config.context));
      a.href = new URL(f.config.url, root).href;
      th.appendChild(a);
      var rest = ids.filter(function (id) { return id !== f.id; });
      var drop = el("a", "remove", "bp-remove");
      drop.href = link(rest);
      th.appendChild(el("br"));
      th.appendChild(drop);
      head.appendChild(th);
    });
    table.tHead.replaceChildren(head);
    var body = document.createDocumentFragment();
    if (ok.length) {
      FIELDS.forEach(function (field) {
        var tr = el("tr");
        tr.appendChild(el("th", field[0]));
        ok.forEach(function (f) {
          var text = field[1](f.config);
          tr.appendChild(el("td", text === null || text === undefined ? "–" : text, text === null ? "bp-dim" : ""));
        });
        body.appendChild(tr);
      });
    }
    table.tBodies[0].replaceChildren(body);
    var msg;
    if (!ids.length) msg = "No configs named: open this page with #ids= and two to four config ids.";
    else if (ids.length > MAX) msg = "Only the first " + MAX + " of the " + ids.length + " configs named are compared.";
    else if (ok.length < 2) msg = "Name at least two configs to compare; " + ok.length + " found.";
    else msg = ok.length + " configs compared.";
    var models = {};
    ok.forEach(function (f) { models[f.config.id.split(SEP)[1]] = f.model.name; });
    status.replaceChildren(document.createTextNode(msg + " "));
    Object.keys(models).sort().forEach(function (m) {
      var a = el("a", "add more " + models[m] + " configs");
      a.href = new URL("model/" + m + "/rank/#cmp=" + ok.map(function (f) { return f.id; }).join(","), root).href;
      status.appendChild(a);
      status.appendChild(document.createTextNode(" "));
    });
  }

  function run() {
    var all = wanted();
    var ids = all.slice(0, MAX);
    Promise.all(ids.map(find)).then(function (found) { draw(all, found); });
  }

  window.addEventListener("hashchange", run);
  run();
})();
