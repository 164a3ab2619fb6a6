// A rig as the builder's URL fragment carries it, checked against the catalog
// data and turned into the engine's numbers: the port of generator/rig/doc.py
// (grammar), generator/rig/fields.py (field checks) and generator/rig/build.py
// (the spec), with the same rules and the same error messages.

import { poolBlocks, requestsHeld } from './engine/step.js';

export class RigError extends Error {}

export const VERSION = '1';
export const SHAPES = ['constant', 'ramp', 'step', 'bursty'];
export const ARRIVALS = ['poisson', 'deterministic'];
export const SHAPE_FIELDS = {
  constant: [],
  ramp: ['start_fraction', 'ramp_s'],
  step: ['base_fraction', 'at_s', 'until_s'],
  bursty: ['burst_bias'],
};
export const LOAD_FIELDS = ['start_fraction', 'ramp_s', 'base_fraction', 'at_s', 'until_s', 'burst_bias'];
export const SLO_FIELDS = ['p99_ms', 'ttft_ms', 'availability', 'soak_utilization', 'soak_s', 'window_s'];
const RULE_NAMES = ['ttft', 'p99', 'error_budget', 'soak'];
const NAME = /^[a-z][a-z0-9_-]{0,39}$/;
const RESERVED = ['load', 'slo'];
const FIELD = /^[a-z][a-z0-9_]{0,39}$/;
const INT = /^-?[0-9]+$/;
const FLOAT = /^-?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?$/;
const MAX_FRAGMENT = 8192;
const SEP = '--';
export const SOURCE = 'load';
export const CONFIG = 'config';

// -- the grammar (generator/rig/doc.py) -----------------------------------------

export function scalar(text) {
  if (text === 'none') return null;
  if (text === 'true' || text === 'false') return text === 'true';
  if (INT.test(text) || FLOAT.test(text)) return Number(text);
  return text;
}

function number(text, key, allowNone = false) {
  const value = scalar(text);
  if (value === null && allowNone) return null;
  if (typeof value !== 'number') throw new RigError(`${key}: expected a number, got '${text}'`);
  if (!Number.isFinite(value)) throw new RigError(`${key}: expected a finite number, got '${text}'`);
  return value;
}

function integer(text, key) {
  if (!INT.test(text)) throw new RigError(`${key}: expected a whole number, got '${text}'`);
  return Number(text);
}

function decode(text) {
  try {
    return decodeURIComponent(text);
  } catch {
    throw new RigError('fragment: bad percent-encoding');
  }
}

export function pairs(text) {
  const at = text.indexOf('#');
  const body = at >= 0 ? text.slice(at + 1) : text;
  if (body.length > MAX_FRAGMENT) throw new RigError(`fragment: longer than ${MAX_FRAGMENT} characters`);
  const out = [];
  for (const item of body.split('&')) {
    if (!item) continue;
    const eq = item.indexOf('=');
    if (eq < 0) throw new RigError(`fragment: '${decode(item)}' has no '=value'`);
    out.push([decode(item.slice(0, eq)), decode(item.slice(eq + 1))]);
  }
  return out;
}

export function parse(text) {
  const items = pairs(text);
  if (!items.length || items[0][0] !== 'v' || items[0][1] !== VERSION) {
    throw new RigError(`fragment: must start with v=${VERSION} (a rig builder link)`);
  }
  const top = new Map();
  const nodes = [];
  const byName = new Map();
  for (const [key, value] of items.slice(1)) {
    if (key === 'node') {
      const node = declare(value, byName);
      nodes.push(node);
      byName.set(node.name, node);
      continue;
    }
    const dot = key.indexOf('.');
    if (dot >= 0 && key.slice(0, dot) !== 'slo') {
      const head = key.slice(0, dot);
      const rest = key.slice(dot + 1);
      if (!byName.has(head)) throw new RigError(`${key}: no node '${head}' declared before it`);
      if (!FIELD.test(rest)) throw new RigError(`${key}: not a field name`);
      const fields = byName.get(head).fields;
      if (fields.some(([k]) => k === rest)) throw new RigError(`${key}: given twice`);
      fields.push([rest, scalar(value)]);
      continue;
    }
    if (top.has(key)) throw new RigError(`${key}: given twice`);
    top.set(key, value);
  }
  return rigOf(top, nodes);
}

function declare(value, byName) {
  const bits = value.split(':');
  if (bits.length !== 3) throw new RigError(`node: expected NAME:PART:AFTER, got '${value}'`);
  const [name, part, after] = bits;
  if (!NAME.test(name) || RESERVED.includes(name)) {
    throw new RigError(`node: '${name}' is not a node name (a-z, 0-9, - and _; not load or slo)`);
  }
  if (byName.has(name)) throw new RigError(`node: '${name}' declared twice`);
  return { name, part, after, fields: [] };
}

function rigOf(top, nodes) {
  const known = new Set(['seed', 't', 'load', 'rps', 'arrivals', 'sweep', 'claim', 'breaking', ...LOAD_FIELDS]);
  for (const f of SLO_FIELDS) known.add(`slo.${f}`);
  for (const key of top.keys()) if (!known.has(key)) throw new RigError(`${key}: unknown key`);
  const shape = top.get('load') ?? 'constant';
  if (!SHAPES.includes(shape)) throw new RigError(`load: expected one of ${SHAPES.join(', ')}, got '${shape}'`);
  const arrivals = top.get('arrivals') ?? 'poisson';
  if (!ARRIVALS.includes(arrivals)) {
    throw new RigError(`arrivals: expected one of ${ARRIVALS.join(', ')}, got '${arrivals}'`);
  }
  const load = LOAD_FIELDS.filter((f) => top.has(f)).map((f) => [f, number(top.get(f), f, f === 'until_s')]);
  const slo = SLO_FIELDS.filter((f) => top.has(`slo.${f}`)).map((f) => [
    f,
    number(top.get(`slo.${f}`), `slo.${f}`, f === 'p99_ms'),
  ]);
  return {
    seed: top.has('seed') ? seedOf(top.get('seed')) : 1,
    duration_s: top.has('t') ? number(top.get('t'), 't') : 600.0,
    shape,
    rps: top.has('rps') ? number(top.get('rps'), 'rps') : null,
    arrivals,
    load,
    nodes,
    slo,
    sweep: top.has('sweep') ? sweepOf(top.get('sweep')) : null,
    claim: top.has('claim') ? claimOf(top.get('claim')) : null,
    breaking: top.has('breaking') ? [number(top.get('breaking'), 'breaking', true)] : null,
  };
}

function seedOf(text) {
  const seed = integer(text, 'seed');
  if (!(seed >= 0 && seed <= 4294967295)) throw new RigError('seed: a whole number from 0 to 4294967295');
  return seed;
}

function sweepOf(text) {
  const bits = text.split(':');
  if (bits.length !== 3) throw new RigError(`sweep: expected START:STEP:POINTS, got '${text}'`);
  return [number(bits[0], 'sweep start'), number(bits[1], 'sweep step'), integer(bits[2], 'sweep points')];
}

function claimOf(text) {
  if (text === 'pass') return { passed: true, rule: null, node: null };
  const bits = text.split(':');
  if (bits.length !== 3 || bits[0] !== 'fail' || !RULE_NAMES.includes(bits[1])) {
    throw new RigError(`claim: expected pass or fail:RULE:NODE, got '${text}'`);
  }
  return { passed: false, rule: bits[1], node: bits[2] };
}

export function valueText(value) {
  if (value === null) return 'none';
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  return String(value);
}

function enc(text, colon = false) {
  const out = encodeURIComponent(text);
  return colon ? out.replace(/%3A/g, ':') : out;
}

// The fragment of a rig (without the '#'), in the canonical key order.
export function fragment(rig) {
  const out = [['v', 1], ['seed', rig.seed], ['t', rig.duration_s], ['load', rig.shape]];
  if (rig.rps !== null) out.push(['rps', rig.rps]);
  out.push(['arrivals', rig.arrivals]);
  out.push(...rig.load);
  for (const n of rig.nodes) {
    out.push(['node', `${n.name}:${n.part}:${n.after}`]);
    for (const [k, v] of n.fields) out.push([`${n.name}.${k}`, v]);
  }
  for (const [k, v] of rig.slo) out.push([`slo.${k}`, v]);
  if (rig.sweep !== null) out.push(['sweep', rig.sweep.map(valueText).join(':')]);
  if (rig.claim !== null) {
    out.push(['claim', rig.claim.passed ? 'pass' : `fail:${rig.claim.rule}:${rig.claim.node}`]);
  }
  if (rig.breaking !== null) out.push(['breaking', rig.breaking[0]]);
  return out.map(([k, v]) => `${enc(k)}=${enc(valueText(v), true)}`).join('&');
}

// -- field checks (generator/rig/fields.py) -----------------------------------------

function numberText(x) {
  return String(x);
}

export function checkValue(spec, value, where) {
  const kind = spec.type;
  if (value === null) {
    if (!spec.nullable) throw new RigError(`${where}: must be given (none is not allowed)`);
    return;
  }
  if (kind === 'boolean') {
    if (typeof value !== 'boolean') throw new RigError(`${where}: expected true or false, got '${valueText(value)}'`);
    return;
  }
  if (kind === 'string' || kind === CONFIG) {
    if (typeof value !== 'string' || (spec.enum && !spec.enum.includes(value))) {
      const choices = spec.enum ? `one of ${spec.enum.join(', ')}` : 'a word';
      throw new RigError(`${where}: expected ${choices}, got '${valueText(value)}'`);
    }
    return;
  }
  if (typeof value !== 'number') throw new RigError(`${where}: expected a number, got '${valueText(value)}'`);
  if (!Number.isFinite(value)) throw new RigError(`${where}: expected a finite number`);
  if (kind === 'integer' && !Number.isInteger(value)) throw new RigError(`${where}: expected a whole number`);
  const bounds = [
    ['minimum', (b) => value >= b, 'at least'],
    ['exclusiveMinimum', (b) => value > b, 'greater than'],
    ['maximum', (b) => value <= b, 'at most'],
    ['exclusiveMaximum', (b) => value < b, 'less than'],
  ];
  for (const [key, ok, words] of bounds) {
    if (key in spec && !ok(spec[key])) throw new RigError(`${where}: must be ${words} ${numberText(spec[key])}`);
  }
}

// -- the spec (generator/rig/build.py) -----------------------------------------

export function contextTokens(label) {
  if (/^[0-9]+k$/.test(label)) return Number(label.slice(0, -1)) * 1024;
  return /^[0-9]+$/.test(label) ? Number(label) : null;
}

export function parseConfigId(cid, node = 'llm') {
  const bits = cid.split(SEP);
  let kv = 'auto';
  if (bits.length === 5 && bits[4].startsWith('kv-')) kv = bits.pop().slice(3);
  const ctx = bits.length === 4 ? contextTokens(bits[3]) : null;
  if (ctx === null) {
    throw new RigError(`${node}.config: '${cid}' is not a config id (device--model--quant--context)`);
  }
  return { device: bits[0], model: bits[1], quant: bits[2], context: ctx, label: bits[3], kv };
}

function sourceOf(rig, index) {
  if (rig.rps === null) throw new RigError('rps: required (the load level in requests/s)');
  checkValue(index.load.rps, rig.rps, 'rps');
  if (!(rig.duration_s > 0 && rig.duration_s <= index.limits.max_duration_s)) {
    throw new RigError(`t: the run lasts more than 0 and at most ${numberText(index.limits.max_duration_s)} s`);
  }
  const load = Object.fromEntries(rig.load);
  for (const [name, value] of rig.load) checkValue(index.load[name], value, name);
  const at = 'at_s' in load ? load.at_s : 0.0;
  const until = load.until_s ?? null;
  if (until !== null && at !== null && until <= at) throw new RigError('until_s: must be after at_s');
  const src = { shape: rig.shape, rps: rig.rps, arrivals: rig.arrivals };
  for (const f of LOAD_FIELDS) src[f] = f in load ? load[f] : index.load_defaults[f];
  return src;
}

function rulesOf(rig, index) {
  for (const [name, value] of rig.slo) checkValue(index.slo[name], value, `slo.${name}`);
  const given = Object.fromEntries(rig.slo);
  if (given.soak_s !== undefined && given.soak_s !== null && given.soak_s < index.limits.min_soak_s) {
    throw new RigError(`slo.soak_s: must be at least ${numberText(index.limits.min_soak_s)}`);
  }
  const slo = { ...index.slo_defaults, ...given };
  return {
    p99_slo_ms: slo.p99_ms,
    ttft_budget_ms: slo.ttft_ms,
    availability: slo.availability,
    soak_utilization: slo.soak_utilization,
    soak_s: slo.soak_s,
    window_s: slo.window_s,
  };
}

export function graphOrder(nodes, index) {
  if (!nodes.length) throw new RigError('nodes: the rig is empty; add at least one node after the load');
  if (nodes.length > index.limits.max_nodes) {
    throw new RigError(`nodes: at most ${numberText(index.limits.max_nodes)} nodes`);
  }
  const byName = new Map(nodes.map((n) => [n.name, n]));
  for (const n of nodes) {
    if (n.after !== SOURCE && !byName.has(n.after)) {
      throw new RigError(`${n.name}.after: no node '${n.after}' (and it is not the load)`);
    }
    if (n.after === n.name) throw new RigError(`${n.name}.after: a node cannot come after itself`);
  }
  const order = [];
  const placed = new Set([SOURCE]);
  while (order.length < nodes.length) {
    const ready = nodes.filter((n) => !placed.has(n.name) && placed.has(n.after));
    if (!ready.length) {
      const stuck = nodes.find((n) => !placed.has(n.name));
      throw new RigError(`nodes: cycle ${cycle(stuck, byName)} never reaches the load`);
    }
    order.push(ready[0]);
    placed.add(ready[0].name);
  }
  return order;
}

function cycle(start, byName) {
  const path = [start.name];
  let name = start.after;
  while (!path.includes(name)) {
    path.push(name);
    name = byName.get(name).after;
  }
  const loop = path.slice(path.indexOf(name));
  return [...loop, loop[0]].join(' -> ');
}

// The node's part fields with its overrides applied, checked.
export function partOf(node, index) {
  const base = index.parts[node.part];
  if (base === undefined) {
    const known = Object.keys(index.parts).sort().join(', ');
    throw new RigError(`${node.name}.part: unknown part '${node.part}' (one of ${known})`);
  }
  const specs = index.fields[base.kind];
  for (const [key, value] of node.fields) {
    if (!(key in specs)) throw new RigError(`${node.name}.${key}: not a field of a ${base.kind} node`);
    checkValue(specs[key], value, `${node.name}.${key}`);
  }
  const merged = { ...base.values, ...Object.fromEntries(node.fields) };
  const holds = Boolean(merged.max_depth);
  if (merged.discipline === 'buffer' && (!holds || merged.max_age_s === null)) {
    throw new RigError(`${node.name}.discipline: buffer needs max_depth > 0 and max_age_s`);
  }
  if (merged.discipline === 'shed' && holds) {
    throw new RigError(`${node.name}.max_depth: a shed node holds nothing; use buffer or block`);
  }
  if (base.kind === 'llm') {
    if (typeof merged.config !== 'string') {
      throw new RigError(`${node.name}.config: required (a config id, as on its config page)`);
    }
    merged.parsed = parseConfigId(merged.config, node.name);
  }
  return { kind: base.kind, values: merged };
}

// The devices whose data files a rig's LLM nodes need.
export function devicesOf(rig) {
  const out = new Set();
  for (const n of rig.nodes) {
    for (const [k, v] of n.fields) {
      if (k === CONFIG && typeof v === 'string') {
        try {
          out.add(parseConfigId(v, n.name).device);
        } catch {
          // reported when the spec is built
        }
      }
    }
  }
  return [...out];
}

function llmOf(node, p, devices) {
  const c = p.parsed;
  const data = devices[c.device];
  const tail = c.label + (c.kv === 'auto' ? '' : `--kv-${c.kv}`);
  const entry = data?.configs?.[c.model]?.[c.quant];
  const limits = entry?.contexts?.[tail];
  if (limits === undefined) {
    throw new RigError(`${node.name}.config: no config '${p.config}' that fits in the catalog`);
  }
  const [policy, kvBlocks, blockTokens, maxSeqs, batched, ubatch] = limits;
  const blocks = poolBlocks(entry.pool, blockTokens, kvBlocks, p.prompt_tokens + p.output_tokens - 1);
  const held = requestsHeld(policy, blocks, blockTokens, maxSeqs, p.prompt_tokens, p.output_tokens);
  if (held < 1) {
    throw new RigError(`${node.name}.config: the model does not fit: no room for one request of this profile`);
  }
  return {
    slots: held,
    cost: entry.cost,
    num_experts: entry.experts[0],
    experts_per_token: entry.experts[1],
    expert_pair_below: entry.experts[2],
    max_batched_tokens: batched,
    ubatch_tokens: ubatch,
    prompt_tokens: p.prompt_tokens,
    output_tokens: p.output_tokens,
  };
}

function nodeSpec(node, part, llm) {
  const v = part.values;
  let servers;
  let service;
  let cap = null;
  let word;
  if (part.kind === 'app') [servers, service, word] = [v.workers, v.service_time_s, 'workers'];
  else if (part.kind === 'database') [servers, service, word] = [v.pool_size, v.query_time_s, 'pool'];
  else if (part.kind === 'queue') [servers, service, cap, word] = [1, v.service_time_s, v.throughput_rps, 'queue'];
  else [servers, service, cap, word] = [llm.slots, 0.0, 0.0, 'slots'];
  return {
    name: node.name,
    parent: node.after,
    kind: llm === null ? 'server' : 'llm',
    discipline: v.discipline,
    servers,
    service_s: service,
    capacity_rps: cap !== null ? cap : servers / service,
    max_depth: v.max_depth || 0,
    max_age_s: v.max_age_s,
    lifo: v.lifo,
    lifo_after_s: v.lifo_after_s,
    resource: word,
    llm,
  };
}

// The engine's scenario for a rig (spec_json of generator/rig/build.py spec_of).
// `devices` maps device ids to their data files (rig/data/gpu/<device>.json).
export function specOf(rig, index, devices) {
  const source = sourceOf(rig, index);
  const rules = rulesOf(rig, index);
  const nodes = [];
  for (const node of graphOrder(rig.nodes, index)) {
    const part = partOf(node, index);
    const llm = part.kind === 'llm' ? llmOf(node, part.values, devices) : null;
    nodes.push(nodeSpec(node, part, llm));
  }
  return { name: 'rig', duration_s: rig.duration_s, source, nodes, rules };
}

// The sweep's levels, start + i * step.
export function levels(rig, index) {
  if (rig.sweep === null) throw new RigError('sweep: not given (START:STEP:POINTS)');
  const [start, step, points] = rig.sweep;
  const most = index.limits.max_sweep_points;
  if (!(start > 0 && step > 0 && points >= 1 && points <= most)) {
    throw new RigError(`sweep: start and step above 0, 1 to ${numberText(most)} points`);
  }
  return Array.from({ length: points }, (_, i) => start + i * step);
}
