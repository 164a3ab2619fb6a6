// After the tick loop, as engine/sim/rules.py: latency along the M/M/1 curve,
// TTFT, the error budget and the first tick each failure rule fires.

import { LN2, LN100 } from './libm.js';
import { SOURCE, TICK_S, pyRound } from './loop.js';

const RHO_CAP = 0.99;
export const RULES = ['ttft', 'p99', 'error_budget', 'soak'];
export const ANY_NODE = '*';
export const NEVER = -1;

export function cumsum(x) {
  const out = new Float64Array(x.length);
  let acc = 0.0;
  for (let t = 0; t < x.length; t++) {
    acc = t === 0 ? x[0] : acc + x[t];
    out[t] = acc;
  }
  return out;
}

export function rollingFrom(c, window) {
  const n = c.length;
  const out = new Float64Array(n);
  const w = Math.min(window, n);
  for (let t = 0; t < w; t++) out[t] = c[t] / (t + 1);
  for (let t = w; t < n; t++) out[t] = (c[t] - c[t - w]) / window;
  return out;
}

export function rollingMean(x, window) {
  return rollingFrom(cumsum(x), window);
}

export function warmed(rolled, skip) {
  const out = rolled.slice();
  if (skip < out.length) out.fill(0.0, 0, Math.max(skip - 1, 0));
  return out;
}

// numpy's rint: round half to even.
export function rint(x) {
  const r = Math.round(x);
  return r - x === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

function add(a, b) {
  const out = new Float64Array(a.length);
  for (let t = 0; t < a.length; t++) out[t] = a[t] + b[t];
  return out;
}

function left(cumLost, budget) {
  const out = new Float64Array(cumLost.length);
  for (let t = 0; t < out.length; t++) {
    out[t] = budget > 0.0 ? 1.0 - cumLost[t] / budget : cumLost[t] > 0.0 ? 0.0 : 1.0;
  }
  return out;
}

export function windowTicks(rules) {
  return Math.max(1, pyRound(rules.window_s / TICK_S));
}

export function latency(spec, flows, rates) {
  const window = windowTicks(spec.rules);
  const lat = {
    rho: {}, p50: {}, p99: {}, path: {}, ttft: {}, budgetLeft: {},
    p99Rolled: {}, pathRolled: {}, ttftRolled: {}, utilCum: {},
  };
  const ticks = rates.length;
  const zeros = new Float64Array(ticks);
  for (const node of spec.nodes) {
    const f = flows[node.name];
    lat.utilCum[node.name] = cumsum(f.utilization);
    const rho = rollingFrom(lat.utilCum[node.name], window);
    lat.rho[node.name] = rho;
    const p50 = new Float64Array(ticks);
    const p99 = new Float64Array(ticks);
    for (let t = 0; t < ticks; t++) {
      const w50 = f.w50[t] * TICK_S;
      const w99 = f.w99[t] * TICK_S;
      if (node.llm !== null) {
        p50[t] = (w50 + f.slot[t]) * 1000.0;
        p99[t] = (w99 + f.slot[t]) * 1000.0;
      } else {
        const r = Math.min(Math.max(rho[t], 0.0), RHO_CAP);
        const sojourn = node.service_s * (1.0 / (1.0 - r));
        p50[t] = (w50 + sojourn * LN2) * 1000.0;
        p99[t] = (w99 + sojourn * LN100) * 1000.0;
      }
    }
    lat.p50[node.name] = p50;
    lat.p99[node.name] = p99;
    lat.p99Rolled[node.name] = rollingMean(p99, window);
    const up = lat.path[node.parent];
    if (up === undefined) {
      lat.path[node.name] = p99;
      lat.pathRolled[node.name] = lat.p99Rolled[node.name];
    } else {
      lat.path[node.name] = add(p99, up);
      lat.pathRolled[node.name] = rollingMean(lat.path[node.name], window);
    }
    if (node.llm === null) {
      lat.ttft[node.name] = zeros;
      lat.ttftRolled[node.name] = zeros;
    } else {
      const own = new Float64Array(ticks);
      for (let t = 0; t < ticks; t++) own[t] = (f.w99[t] * TICK_S + f.first[t]) * 1000.0;
      lat.ttft[node.name] = up === undefined ? own : add(up, own);
      lat.ttftRolled[node.name] = rollingMean(lat.ttft[node.name], window);
    }
  }
  const offered = new Float64Array(ticks);
  for (let t = 0; t < ticks; t++) offered[t] = rates[t] * TICK_S;
  const total = ticks ? cumsum(offered)[ticks - 1] : 0.0;
  const budget = (1.0 - spec.rules.availability) * total;
  const cum = {};
  for (const n of spec.nodes) {
    cum[n.name] = cumsum(flows[n.name].lost);
    lat.budgetLeft[n.name] = left(cum[n.name], budget);
  }
  if (spec.nodes.length === 1) {
    lat.lostCum = cum[spec.nodes[0].name];
    lat.totalLeft = lat.budgetLeft[spec.nodes[0].name];
  } else {
    let sum = new Float64Array(ticks);
    for (const n of spec.nodes) sum = add(sum, flows[n.name].lost);
    lat.lostCum = cumsum(sum);
    lat.totalLeft = left(lat.lostCum, budget);
  }
  return lat;
}

function first(ticks, pred) {
  for (let t = 0; t < ticks; t++) if (pred(t)) return t;
  return NEVER;
}

function isLeaf(spec, name) {
  return !spec.nodes.some((n) => n.parent === name);
}

// The first tick each (rule, node) fires, as a list of [rule, node, tick].
export function ruleTicks(spec, flows, lat) {
  const r = spec.rules;
  const window = windowTicks(r);
  const ticks = lat.totalLeft.length;
  const out = [];
  for (const n of spec.nodes) {
    if (n.llm !== null) {
      const ttft = warmed(lat.ttftRolled[n.name], window);
      out.push(['ttft', n.name, first(ticks, (t) => ttft[t] > r.ttft_budget_ms)]);
    } else if (r.p99_slo_ms !== null && isLeaf(spec, n.name)) {
      const path = warmed(lat.pathRolled[n.name], window);
      out.push(['p99', n.name, first(ticks, (t) => path[t] > r.p99_slo_ms)]);
    }
  }
  out.push([
    'error_budget',
    ANY_NODE,
    first(ticks, (t) => lat.totalLeft[t] <= 0.0 && lat.lostCum[t] > 0),
  ]);
  const soakW = pyRound(r.soak_s / TICK_S);
  for (const n of spec.nodes) {
    const mean = rollingFrom(lat.utilCum[n.name], soakW);
    for (let t = 0; t < ticks; t++) mean[t] = t < soakW - 1 ? 0.0 : rint(mean[t] * 1e6) / 1e6;
    out.push(['soak', n.name, first(ticks, (t) => mean[t] >= r.soak_utilization)]);
  }
  return out;
}

export function ancestors(spec, name) {
  const byName = new Map(spec.nodes.map((n) => [n.name, n]));
  const chain = [];
  while (name !== SOURCE) {
    chain.push(name);
    name = byName.get(name).parent;
  }
  return chain.reverse();
}

export function descendants(spec, name) {
  const keep = new Set([name]);
  for (const n of spec.nodes) if (keep.has(n.parent)) keep.add(n.name);
  return spec.nodes.filter((n) => keep.has(n.name)).map((n) => n.name);
}
