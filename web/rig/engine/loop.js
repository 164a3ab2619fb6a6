// The tick loop of one lane, as engine/sim/loop.py and engine/sim/nodes.py:
// every tick each node first ages out old work and states its room (begin),
// then, upstream first, admits, queues and serves (advance). A node whose
// children block cannot pass on more than their smallest room; what they turn
// away is their pressure. Lanes are independent in the Python engine, so one
// lane here is lane i of a Python sweep.

import { Cohorts } from './queue.js';
import { firstTokenS, llmOf, slotS } from './step.js';

export const TICK_S = 0.1;
export const SOURCE = 'load';

const RULES = {
  shed: { holds: false, refuse: false, agesOut: false },
  buffer: { holds: true, refuse: false, agesOut: true },
  block: { holds: true, refuse: true, agesOut: true },
};

// Python's round() of a float: half to even.
export function pyRound(x) {
  const r = Math.round(x);
  return r - x === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

export function ticksOf(spec) {
  return Math.max(1, pyRound(spec.duration_s / TICK_S));
}

function newNode(spec, ticks) {
  const rule = RULES[spec.discipline];
  const holds = rule.holds && spec.max_depth > 0;
  const maxAge =
    rule.agesOut && spec.max_age_s !== null ? Math.trunc(spec.max_age_s / TICK_S + 1e-9) : null;
  const cols = {};
  for (const c of ['admitted', 'served', 'backlog', 'w50', 'w99', 'aged', 'pressure', 'inflight', 'slot', 'first']) {
    cols[c] = new Float64Array(ticks);
  }
  return {
    spec,
    rule,
    fedBySource: spec.parent === SOURCE,
    queue: holds ? new Cohorts(ticks) : null,
    maxAge,
    cap: spec.capacity_rps * TICK_S,
    depth: spec.max_depth,
    llm: spec.llm === null ? null : llmOf(spec.llm),
    inflight: 0.0,
    lifo: false,
    room: 0.0,
    pressure: 0.0,
    blocked: 0.0,
    aged: 0.0,
    done: 0.0,
    slotS: 0.0,
    firstS: 0.0,
    out: cols,
    blocking: [],
  };
}

function begin(run, t) {
  const q = run.queue;
  run.aged = 0.0;
  if (q !== null && run.maxAge !== null && q.backlog > 0.0) run.aged = q.ageOut(t - run.maxAge);
  run.pressure = 0.0;
  if (run.llm !== null) {
    const b = run.inflight;
    run.slotS = slotS(run.llm, b);
    run.firstS = firstTokenS(run.llm, b);
    run.done = Math.min(b, (b * TICK_S) / run.slotS);
    run.cap = run.llm.slots - b + run.done;
  }
  run.room = q === null ? run.cap : Math.max(run.cap + run.depth - q.backlog, 0.0);
}

function advance(run, t, offered, limit) {
  const q = run.queue;
  const backlogBefore = q === null ? 0.0 : q.backlog;
  let cap = run.cap;
  let room = run.room;
  if (limit !== null) {
    cap = Math.min(run.cap, limit);
    room = q === null ? cap : Math.max(cap + run.depth - backlogBefore, 0.0);
  }
  const admitted = Math.min(offered, room);
  let started = admitted;
  let w50 = 0;
  let w99 = 0;
  if (q !== null && (backlogBefore > 0.0 || admitted > cap)) {
    q.enqueue(t, admitted);
    started = Math.min(q.backlog, cap);
    const [a, b, head] = q.serve(t, started, run.lifo);
    w50 = a;
    w99 = b;
    if (run.spec.lifo) run.lifo = head * TICK_S > run.spec.lifo_after_s;
  }
  if (limit !== null) run.blocked = Math.min(backlogBefore + offered, run.cap) - started;
  const o = run.out;
  o.admitted[t] = admitted;
  if (q !== null) {
    o.backlog[t] = q.backlog;
    o.w50[t] = w50;
    o.w99[t] = w99;
    o.aged[t] = run.aged;
  }
  o.pressure[t] = run.pressure;
  if (run.llm === null) {
    o.served[t] = started;
    return started;
  }
  run.inflight = run.inflight - run.done + started;
  o.served[t] = run.done;
  o.inflight[t] = run.inflight;
  o.slot[t] = run.slotS;
  o.first[t] = run.firstS;
  return run.done;
}

// Every node's raw columns for one lane, given its arrivals per tick.
export function runTicks(spec, arrived) {
  const ticks = arrived.length;
  const runs = spec.nodes.map((n) => newNode(n, ticks));
  const byName = new Map(runs.map((r) => [r.spec.name, r]));
  for (const r of runs) {
    const parent = byName.get(r.spec.parent);
    if (parent !== undefined && r.spec.discipline === 'block') parent.blocking.push(r);
  }
  const parents = runs.map((r) => byName.get(r.spec.parent) ?? null);
  const sent = new Float64Array(runs.length);
  const index = new Map(runs.map((r, i) => [r, i]));
  for (let t = 0; t < ticks; t++) {
    for (const r of runs) begin(r, t);
    for (let i = 0; i < runs.length; i++) {
      const r = runs[i];
      const parent = parents[i];
      const fed = parent === null ? arrived[t] : sent[index.get(parent)];
      let limit = null;
      for (const child of r.blocking) limit = limit === null ? child.room : Math.min(limit, child.room);
      const out = advance(r, t, fed, limit);
      sent[i] = out;
      for (const child of r.blocking) {
        child.pressure = Math.min(Math.max(out + r.blocked - child.room, 0.0), r.blocked);
      }
    }
  }
  return runs.map((r, i) => ({
    run: r,
    offered: parents[i] === null ? arrived : parents[i].out.served,
  }));
}

// The derived columns of nodes.columns: drops, refusals, losses, utilization, tokens/s.
export function columns(node) {
  const { run, offered } = node;
  const o = run.out;
  const ticks = offered.length;
  const c = {
    offered,
    admitted: o.admitted,
    served: o.served,
    backlog: o.backlog,
    dropped_aged: o.aged,
    slot: o.slot,
    first: o.first,
    w50: o.w50,
    w99: o.w99,
    dropped_shed: new Float64Array(ticks),
    refused_block: new Float64Array(ticks),
    lost: new Float64Array(ticks),
    utilization: new Float64Array(ticks),
    tokens_per_s: new Float64Array(ticks),
  };
  const spec = run.spec;
  for (let t = 0; t < ticks; t++) {
    const overflow = offered[t] - o.admitted[t];
    if (run.rule.refuse) {
      c.refused_block[t] = overflow + o.pressure[t];
      c.lost[t] = run.fedBySource ? o.aged[t] + overflow : o.aged[t];
    } else {
      c.dropped_shed[t] = overflow;
      c.refused_block[t] = o.pressure[t];
      c.lost[t] = o.aged[t] + overflow;
    }
    if (spec.llm === null) {
      c.utilization[t] = o.served[t] / (spec.capacity_rps * TICK_S);
    } else {
      c.utilization[t] = o.inflight[t] / spec.llm.slots;
      c.tokens_per_s[t] = o.served[t] * (spec.llm.output_tokens / TICK_S);
    }
  }
  return c;
}
