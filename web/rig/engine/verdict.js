// Per-run verdicts, as engine/sim/verdict.py: which rule fired first, which
// node to blame, the one-line bottleneck.

import { pyFixed, pyFixedGrouped, pyGeneral, pyRoundTo } from './format.js';
import { TICK_S, pyRound } from './loop.js';
import {
  ANY_NODE, NEVER, RULES, ancestors, cumsum, descendants, rollingMean, warmed, windowTicks,
} from './rules.js';

function total(x) {
  return x.length ? cumsum(x)[x.length - 1] : 0.0;
}

function maxOf(x) {
  let m = -Infinity;
  for (let t = 0; t < x.length; t++) if (x[t] > m || Number.isNaN(x[t])) m = x[t];
  return m;
}

export function fmtRps(rps) {
  return rps >= 100 || rps === Math.trunc(rps) ? pyFixedGrouped(rps, 0) : pyGeneral(rps, 3, true);
}

export function fmtMs(ms) {
  return ms < 1000 ? `${pyFixedGrouped(ms, 0)} ms` : `${pyFixedGrouped(ms / 1000, 1)} s`;
}

function state(node, util) {
  if (node.llm !== null) {
    const slots = node.llm.slots;
    if (util >= 0.99) return `slots full (${slots} of ${slots})`;
    return `slots ${pyFixed(util * 100, 0)} % full (${slots} slots)`;
  }
  if (util >= 0.99) return `${node.resource} saturated`;
  return `${node.resource} ${pyFixed(util * 100, 0)} % busy`;
}

function summary(node, f, lat, rolled) {
  const ticks = f.utilization.length;
  return {
    node: node.name,
    mean_utilization: total(f.utilization) / ticks,
    peak_utilization: maxOf(rolled.rho[node.name]),
    max_backlog: maxOf(f.backlog),
    worst_p99_ms: maxOf(rolled.p99[node.name]),
    worst_ttft_ms: maxOf(rolled.ttft[node.name]),
    offered: total(f.offered),
    served: total(f.served),
    dropped_shed: total(f.dropped_shed),
    dropped_aged: total(f.dropped_aged),
    refused_block: total(f.refused_block),
    error_budget_left: lat.budgetLeft[node.name][ticks - 1],
  };
}

function earliest(spec, fails) {
  const order = new Map(spec.nodes.map((n, i) => [n.name, i]));
  order.set(ANY_NODE, -1);
  let best = null;
  for (const [rule, node, tick] of fails) {
    if (tick === NEVER) continue;
    const key = [tick, RULES.indexOf(rule), order.get(node)];
    if (
      best === null ||
      key[0] < best.key[0] ||
      (key[0] === best.key[0] && (key[1] < best.key[1] || (key[1] === best.key[1] && key[2] < best.key[2])))
    ) {
      best = { key, tick, rule, node };
    }
  }
  return best;
}

function blame(spec, tick, rule, node, flows, lat) {
  let candidates;
  if (rule === 'error_budget') {
    let top = null;
    let most = -Infinity;
    for (const n of spec.nodes) {
      const lost = cumsum(flows[n.name].lost)[tick];
      if (top === null || lost > most) {
        top = n.name;
        most = lost;
      }
    }
    candidates = descendants(spec, top);
  } else if (rule === 'soak') {
    return node;
  } else {
    candidates = ancestors(spec, node);
  }
  let busiest = -Infinity;
  for (const c of candidates) busiest = Math.max(busiest, lat.rho[c][tick]);
  return candidates.find((c) => lat.rho[c][tick] === busiest);
}

function failLine(spec, node, rps, rule, s, detail, tick, flows) {
  const head = `${node.name}: ${state(node, s.peak_utilization)} at ${fmtRps(rps)} rps`;
  const r = spec.rules;
  if (rule === 'ttft') return `${head}; TTFT ${fmtMs(detail)} over the ${fmtMs(r.ttft_budget_ms)} budget`;
  if (rule === 'p99') return `${head}; p99 ${fmtMs(detail)} over the ${fmtMs(r.p99_slo_ms ?? 0.0)} SLO`;
  if (rule === 'soak') {
    const window = pyRound(r.soak_s / TICK_S);
    const util = flows[node.name].utilization.slice(tick - window + 1, tick + 1);
    const mean = total(util);
    const busy = node.llm !== null ? 'full' : 'busy';
    return (
      `${node.name}: ${node.resource} ${pyFixed((100 * mean) / window, 0)} % ${busy} for ` +
      `${pyGeneral(r.soak_s / 60)} min at ${fmtRps(rps)} rps; soak limit ` +
      `${pyFixed(r.soak_utilization * 100, 0)} %`
    );
  }
  const offered = total(flows[spec.nodes[0].name].offered);
  let lost = 0;
  for (const n of spec.nodes) lost += total(flows[n.name].lost);
  const share = offered > 0 ? (100 * lost) / offered : 0.0;
  return (
    `${head}; ${pyFixed(share, 1)} % of requests lost, error budget ` +
    `(${pyGeneral(100 * (1 - r.availability))} %) spent at ${pyFixed(tick * TICK_S, 1)} s`
  );
}

function passLine(spec, node, rps, s, worstP99, worstTtft) {
  const head = `${node.name}: ${state(node, s.peak_utilization)} at ${fmtRps(rps)} rps; holds`;
  const r = spec.rules;
  const parts = [];
  if (r.p99_slo_ms !== null && worstP99 > 0) {
    parts.push(`p99 ${fmtMs(worstP99)} within the ${fmtMs(r.p99_slo_ms)} SLO`);
  }
  if (worstTtft > 0) parts.push(`TTFT ${fmtMs(worstTtft)} within the ${fmtMs(r.ttft_budget_ms)} budget`);
  return parts.length ? `${head} (${parts.join('; ')})` : `${head} every rule`;
}

// The RunReport of one lane at `rps`.
export function report(spec, rps, flows, lat, fails) {
  const window = windowTicks(spec.rules);
  const rolled = { p99: {}, path: {}, ttft: {}, rho: {} };
  for (const n of spec.nodes) {
    rolled.p99[n.name] = warmed(lat.p99Rolled[n.name], window);
    rolled.path[n.name] = warmed(lat.pathRolled[n.name], window);
    rolled.ttft[n.name] = warmed(lat.ttftRolled[n.name], window);
    rolled.rho[n.name] = warmed(rollingMean(lat.rho[n.name], 1), window);
  }
  const nodes = spec.nodes.map((n) => summary(n, flows[n.name], lat, rolled));
  const leaves = spec.nodes.filter((n) => n.llm === null && !spec.nodes.some((c) => c.parent === n.name));
  const llms = spec.nodes.filter((n) => n.llm !== null);
  const worstP99 = leaves.length ? Math.max(...leaves.map((n) => maxOf(rolled.path[n.name]))) : 0.0;
  const worstTtft = llms.length ? Math.max(...llms.map((n) => maxOf(rolled.ttft[n.name]))) : 0.0;
  const budgetLeft = lat.totalLeft[lat.totalLeft.length - 1];
  const base = { rps, worst_p99_ms: worstP99, worst_ttft_ms: worstTtft, error_budget_left: budgetLeft, nodes };
  const event = earliest(spec, fails);
  const specOf = (name) => spec.nodes.find((n) => n.name === name);
  if (event === null) {
    let top = nodes[0];
    for (const s of nodes) if (s.mean_utilization > top.mean_utilization) top = s;
    const line = passLine(spec, specOf(top.node), rps, top, worstP99, worstTtft);
    return { ...base, passed: true, failing_rule: null, failing_node: null, fail_s: null, bottleneck: line };
  }
  const { tick, rule, node } = event;
  const blamed = blame(spec, tick, rule, node, flows, lat);
  const s = nodes.find((x) => x.node === blamed);
  const detail = rule === 'ttft' ? worstTtft : rule === 'p99' ? worstP99 : 0.0;
  const line = failLine(spec, specOf(blamed), rps, rule, s, detail, tick, flows);
  return {
    ...base,
    passed: false,
    failing_rule: rule,
    failing_node: blamed,
    fail_s: pyRoundTo(tick * TICK_S, 6),
    bottleneck: line,
  };
}
