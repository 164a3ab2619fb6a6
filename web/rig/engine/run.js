// One run of a rig, as engine/sim/run.py simulate() for one lane, and its tick
// file, as generator/simulate.py tick_lines(). `spec` is the JSON form of a
// Python SimSpec (generator/rig/build.py spec_json; web/rig/rig.js builds the
// same from a rig and the catalog data).

import { pyFixed, pyGeneral } from './format.js';
import { TICK_S, columns, runTicks, ticksOf } from './loop.js';
import { Mulberry32 } from './rng.js';
import { latency, ruleTicks } from './rules.js';
import { arrivals } from './traffic.js';
import { fmtRps, report } from './verdict.js';

export function simulate(spec, seed, level = spec.source.rps) {
  const ticks = ticksOf(spec);
  const rng = new Mulberry32(seed);
  const [rates, arrived] = arrivals(spec.source, level, ticks, TICK_S, rng);
  const nodes = runTicks(spec, arrived);
  const flows = {};
  spec.nodes.forEach((n, i) => {
    flows[n.name] = columns(nodes[i]);
  });
  const lat = latency(spec, flows, rates);
  const fails = ruleTicks(spec, flows, lat);
  return { spec, seed, level, ticks, rates, flows, latency: lat, fails, report: report(spec, level, flows, lat, fails) };
}

// The lowest level that fails, evaluated in ascending order until one does;
// null when every level holds (SweepReport.breaking_rps). `onLevel` sees each run.
export function sweep(spec, seed, levels, onLevel = () => {}) {
  let last = null;
  for (const level of levels) {
    const rep = simulate(spec, seed, level).report;
    onLevel(level, rep);
    last = rep;
    if (!rep.passed) {
      return { breaking_rps: level, bottleneck: rep.bottleneck, failing_node: rep.failing_node, failing_rule: rep.failing_rule, report: rep };
    }
  }
  return { breaking_rps: null, bottleneck: last ? last.bottleneck : '', failing_node: null, failing_rule: null, report: last };
}

export const TICK_DECIMALS = [
  ['offered', 3], ['admitted', 3], ['served', 3], ['backlog', 3], ['dropped_shed', 3],
  ['dropped_aged', 3], ['refused_block', 3], ['utilization', 4], ['p50_ms', 1], ['p99_ms', 1],
  ['ttft_ms', 1], ['tokens_per_s', 1], ['error_budget_left', 4],
];
export const TICK_FIELDS = ['node', 'tick', ...TICK_DECIMALS.map(([k]) => k)];

// generator/simulate.py _num: fixed places, and no minus sign on a zero.
export function num(value, places) {
  const text = pyFixed(value, places);
  return text.startsWith('-') && Number(text) === 0 ? text.slice(1) : text;
}

function value(result, name, field, t) {
  const f = result.flows[name];
  const lat = result.latency;
  switch (field) {
    case 'p50_ms': return lat.p50[name][t];
    case 'p99_ms': return lat.p99[name][t];
    case 'ttft_ms': return lat.ttft[name][t];
    case 'error_budget_left': return lat.budgetLeft[name][t];
    default: return f[field][t];
  }
}

// The tick file, line by line: a parameter header, then CSV or JSON lines.
export function tickLines(result, fmt = 'csv') {
  const spec = result.spec;
  const lines = [
    `# scenario ${spec.name}; seed ${result.seed}; rps ${fmtRps(spec.source.rps)}; ` +
      `duration ${pyGeneral(spec.duration_s)} s; tick ${pyGeneral(TICK_S * 1000)} ms`,
  ];
  if (fmt === 'csv') lines.push(TICK_FIELDS.join(','));
  for (let t = 0; t < result.ticks; t++) {
    for (const n of spec.nodes) {
      const cells = TICK_DECIMALS.map(([field, places]) => num(value(result, n.name, field, t), places));
      if (fmt === 'csv') lines.push([n.name, String(t), ...cells].join(','));
      else {
        const body = TICK_DECIMALS.map(([field], i) => `"${field}": ${cells[i]}`).join(', ');
        lines.push(`{"node": "${n.name}", "tick": ${t}, ${body}}`);
      }
    }
  }
  return lines;
}

export function tickFile(result, fmt = 'csv') {
  return `${tickLines(result, fmt).join('\n')}\n`;
}
