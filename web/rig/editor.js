// The rig editor: the load, the nodes and the rules as form controls, read back
// into the rig document of rig.js. Every value goes through the same checks as
// a link (rig.js specOf) when the rig runs; the editor only keeps the form and
// the document in step.

import { CONFIG, LOAD_FIELDS, SHAPE_FIELDS, SLO_FIELDS, parseConfigId } from './rig.js';

const LABELS = {
  discipline: 'discipline',
  max_depth: 'queue depth',
  max_age_s: 'max age [s]',
  lifo: 'adaptive LIFO',
  lifo_after_s: 'LIFO after [s]',
  workers: 'workers',
  service_time_s: 'service time [s]',
  pool_size: 'pool size',
  query_time_s: 'query time [s]',
  throughput_rps: 'throughput [rps]',
  prompt_tokens: 'prompt [tokens]',
  output_tokens: 'output [tokens]',
  start_fraction: 'start [x rps]',
  ramp_s: 'ramp [s]',
  base_fraction: 'outside [x rps]',
  at_s: 'from [s]',
  until_s: 'until [s]',
  burst_bias: 'burst bias',
  p99_ms: 'p99 SLO [ms]',
  ttft_ms: 'TTFT budget [ms]',
  availability: 'availability',
  soak_utilization: 'soak at',
  soak_s: 'soak window [s]',
  window_s: 'rolling window [s]',
};

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'class') node.className = v;
    else if (k === 'text') node.textContent = v;
    else node.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children) if (c !== null && c !== undefined) node.append(c);
  return node;
}

let ids = 0;
function uid(stem) {
  ids += 1;
  return `bp-rig-${stem}-${ids}`;
}

// One labelled control for a field spec; onChange(value) gets the parsed value.
function control(name, spec, value, onChange, extra = {}) {
  const id = uid(name);
  const label = el('label', { for: id, text: LABELS[name] ?? name });
  let input;
  if (spec.type === 'boolean') {
    input = el('input', { id, type: 'checkbox', name });
    input.checked = Boolean(value);
    input.addEventListener('change', () => onChange(input.checked));
    return el('div', { class: 'bp-rig-field bp-rig-check' }, input, label);
  }
  if (spec.enum) {
    input = el('select', { id, name });
    for (const option of spec.enum) input.append(el('option', { value: option, text: option }));
    input.value = value ?? spec.enum[0];
    input.addEventListener('change', () => onChange(input.value));
  } else {
    input = el('input', { id, name, type: 'text', inputmode: 'decimal', autocomplete: 'off', ...extra });
    input.value = value === null || value === undefined ? '' : String(value);
    if (spec.nullable) input.placeholder = 'none';
    input.addEventListener('change', () => onChange(readNumber(input.value)));
  }
  return el('div', { class: 'bp-rig-field' }, label, input);
}

// A typed number, 'none' for a blank, or the text itself (refused when the rig runs).
export function readNumber(text) {
  const t = text.trim();
  if (t === '' || t === 'none') return null;
  const x = Number(t);
  return Number.isNaN(x) ? t : x;
}

function setField(fields, name, value) {
  const i = fields.findIndex(([k]) => k === name);
  if (i >= 0) fields[i] = [name, value];
  else fields.push([name, value]);
}

function fieldValue(fields, name, fallback) {
  const hit = fields.find(([k]) => k === name);
  return hit ? hit[1] : fallback;
}

// Every field of a node, explicit: the part's defaults where the link gave none.
export function fillNode(node, index) {
  const part = index.parts[node.part];
  if (!part) return node;
  const fields = [];
  for (const name of Object.keys(index.fields[part.kind])) {
    const given = node.fields.find(([k]) => k === name);
    if (given) fields.push(given);
    else if (name === CONFIG) fields.push([CONFIG, index.default_config]);
    else fields.push([name, part.values[name]]);
  }
  for (const f of node.fields) if (!fields.some(([k]) => k === f[0])) fields.push(f);
  return { ...node, fields };
}

export class Editor {
  constructor(host, data, onChange) {
    this.host = host;
    this.data = data;
    this.onChange = onChange;
    this.rig = null;
    this.open = new Set(); // the node cards the visitor opened
  }

  get index() {
    return this.data.index;
  }

  show(rig) {
    this.rig = rig;
    this.rig.nodes = rig.nodes.map((n) => fillNode(n, this.index));
    this.render();
  }

  changed(structural = false) {
    if (structural) this.render();
    this.onChange(this.rig);
  }

  render() {
    this.host.replaceChildren(this.loadSection(), this.nodesSection(), this.rulesSection());
  }

  loadSection() {
    const rig = this.rig;
    const ix = this.index;
    const grid = el('div', { class: 'bp-rig-grid' });
    grid.append(
      control('shape', ix.load.shape, rig.shape, (v) => {
        rig.shape = v;
        this.changed(true);
      }),
      control('rps', { type: 'number' }, rig.rps, (v) => {
        rig.rps = v;
        this.changed();
      }, { 'data-field': 'rps' }),
      control('arrivals', ix.load.arrivals, rig.arrivals, (v) => {
        rig.arrivals = v;
        this.changed();
      }),
    );
    for (const name of SHAPE_FIELDS[rig.shape]) {
      const spec = ix.load[name];
      const value = fieldValue(rig.load, name, ix.load_defaults[name]);
      grid.append(control(name, spec, value, (v) => {
        setField(rig.load, name, v);
        rig.load.sort((a, b) => LOAD_FIELDS.indexOf(a[0]) - LOAD_FIELDS.indexOf(b[0]));
        this.changed();
      }));
    }
    grid.append(
      control('t', { type: 'number' }, rig.duration_s, (v) => {
        rig.duration_s = v;
        this.changed();
      }),
      control('seed', { type: 'integer' }, rig.seed, (v) => {
        rig.seed = v;
        this.changed();
      }),
    );
    relabel(grid, 'rps', 'load [rps]');
    relabel(grid, 't', 'duration [s]');
    relabel(grid, 'seed', 'seed');
    relabel(grid, 'shape', 'shape');
    relabel(grid, 'arrivals', 'arrivals');
    return el('fieldset', { class: 'bp-rig-load' }, el('legend', { text: 'Load' }), grid);
  }

  nodesSection() {
    const box = el('fieldset', { class: 'bp-rig-nodes' }, el('legend', { text: 'Nodes' }));
    box.append(el('p', { class: 'bp-rig-wiring', id: 'bp-rig-wiring', text: wiring(this.rig.nodes) }));
    this.rig.nodes.forEach((node, i) => box.append(this.nodeCard(node, i)));
    const add = el('button', { type: 'button', class: 'md-button', 'data-action': 'add-node', text: 'Add a node' });
    add.addEventListener('click', () => {
      const names = new Set(this.rig.nodes.map((n) => n.name));
      let k = this.rig.nodes.length + 1;
      while (names.has(`node${k}`)) k += 1;
      const last = this.rig.nodes.at(-1);
      this.rig.nodes.push(fillNode({ name: `node${k}`, part: 'app-tier', after: last ? last.name : 'load', fields: [] }, this.index));
      this.open.add(`node${k}`);
      this.changed(true);
    });
    box.append(add);
    return box;
  }

  nodeCard(node, i) {
    const ix = this.index;
    const card = el('details', { class: 'bp-rig-node', 'data-node': node.name });
    if (this.open.has(node.name)) card.open = true;
    card.addEventListener('toggle', () => {
      if (card.open) this.open.add(node.name);
      else this.open.delete(node.name);
    });
    const discipline = fieldValue(node.fields, 'discipline', ix.parts[node.part]?.values.discipline ?? '');
    card.append(el('summary', {}, el('strong', { text: node.name }), ` ${node.part} after ${node.after} · ${discipline}`));
    const head = el('div', { class: 'bp-rig-grid' });
    const nameId = uid('name');
    const name = el('input', { id: nameId, type: 'text', value: node.name, 'data-field': 'name', autocomplete: 'off' });
    name.addEventListener('change', () => {
      const old = node.name;
      node.name = name.value.trim();
      if (this.open.delete(old)) this.open.add(node.name);
      for (const n of this.rig.nodes) if (n.after === old) n.after = node.name;
      this.changed(true);
    });
    head.append(el('div', { class: 'bp-rig-field' }, el('label', { for: nameId, text: 'name' }), name));
    const partSpec = { type: 'string', enum: Object.keys(ix.parts) };
    head.append(control('part', partSpec, node.part, (v) => {
      this.rig.nodes[i] = fillNode({ ...node, part: v, fields: [] }, ix);
      this.changed(true);
    }));
    relabel(head, 'part', 'part');
    const afterSpec = { type: 'string', enum: ['load', ...this.rig.nodes.filter((n) => n !== node).map((n) => n.name)] };
    if (!afterSpec.enum.includes(node.after)) afterSpec.enum.push(node.after);
    head.append(control('after', afterSpec, node.after, (v) => {
      node.after = v;
      this.changed(true); // the wiring line follows
    }));
    relabel(head, 'after', 'after');
    const remove = el('button', { type: 'button', class: 'bp-rig-remove', 'data-action': 'remove-node', text: 'Remove' });
    remove.addEventListener('click', () => {
      this.rig.nodes.splice(i, 1);
      this.changed(true);
    });
    head.append(remove);
    card.append(head);
    const part = ix.parts[node.part];
    if (!part) return card;
    const grid = el('div', { class: 'bp-rig-grid' });
    for (const [fname, spec] of Object.entries(ix.fields[part.kind])) {
      if (fname === CONFIG) continue;
      const value = fieldValue(node.fields, fname, part.values[fname]);
      grid.append(control(fname, spec, value, (v) => {
        setField(node.fields, fname, v);
        if (fname === 'discipline') this.fixQueue(node, v);
        this.changed(fname === 'discipline');
      }));
    }
    card.append(grid);
    if (part.kind === 'llm') card.append(this.configPicker(node));
    return card;
  }

  // Switching discipline keeps the node runnable: shed holds nothing, buffer needs a queue.
  fixQueue(node, discipline) {
    const depth = fieldValue(node.fields, 'max_depth', null);
    if (discipline === 'shed') setField(node.fields, 'max_depth', null);
    if (discipline === 'buffer') {
      if (!depth) setField(node.fields, 'max_depth', 100);
      if (fieldValue(node.fields, 'max_age_s', null) === null) setField(node.fields, 'max_age_s', 30);
    }
  }

  configPicker(node) {
    const ix = this.index;
    const box = el('div', { class: 'bp-rig-grid bp-rig-config' });
    const cid = fieldValue(node.fields, CONFIG, ix.default_config);
    let c;
    try {
      c = parseConfigId(String(cid), node.name);
    } catch {
      c = parseConfigId(ix.default_config, node.name);
    }
    const set = (parts) => {
      const next = { ...c, ...parts };
      setField(node.fields, CONFIG, `${next.device}--${next.model}--${next.quant}--${next.label}`);
      this.changed(true);
    };
    const devSpec = { type: 'string', enum: ix.devices.map(([d]) => d) };
    const dev = control('device', devSpec, c.device, async (v) => {
      const data = await this.data.device(v);
      const model = data.configs[c.model] ? c.model : Object.keys(data.configs)[0];
      const quant = data.configs[model][c.quant] ? c.quant : Object.keys(data.configs[model])[0];
      const contexts = Object.keys(data.configs[model][quant].contexts);
      set({ device: v, model, quant, label: contexts.includes(c.label) ? c.label : contexts[0] });
    });
    box.append(dev);
    relabel(box, 'device', 'device');
    const data = this.data.devices[c.device];
    if (!data) {
      this.data.device(c.device).then((d) => d && this.render());
      return box;
    }
    const models = Object.keys(data.configs);
    const m = control('model', { type: 'string', enum: models }, c.model, (v) => {
      const quants = Object.keys(data.configs[v]);
      const quant = quants.includes(c.quant) ? c.quant : quants[0];
      const contexts = Object.keys(data.configs[v][quant].contexts);
      set({ model: v, quant, label: contexts.includes(c.label) ? c.label : contexts[0] });
    });
    box.append(m);
    relabel(box, 'model', 'model');
    const entry = data.configs[c.model];
    if (entry) {
      const q = control('quant', { type: 'string', enum: Object.keys(entry) }, c.quant, (v) => {
        const contexts = Object.keys(entry[v].contexts);
        set({ quant: v, label: contexts.includes(c.label) ? c.label : contexts[0] });
      });
      box.append(q);
      relabel(box, 'quant', 'quant');
      if (entry[c.quant]) {
        const ctx = control('context', { type: 'string', enum: Object.keys(entry[c.quant].contexts) }, c.label, (v) => set({ label: v }));
        box.append(ctx);
        relabel(box, 'context', 'context');
        box.append(el('p', { class: 'bp-rig-note', text: `served by ${entry[c.quant].runtime}` }));
      }
    }
    return box;
  }

  rulesSection() {
    const rig = this.rig;
    const ix = this.index;
    const grid = el('div', { class: 'bp-rig-grid' });
    for (const name of SLO_FIELDS) {
      const value = fieldValue(rig.slo, name, ix.slo_defaults[name]);
      grid.append(control(name, ix.slo[name], value, (v) => {
        setField(rig.slo, name, v);
        rig.slo.sort((a, b) => SLO_FIELDS.indexOf(a[0]) - SLO_FIELDS.indexOf(b[0]));
        this.changed();
      }));
    }
    return el('fieldset', { class: 'bp-rig-rules' }, el('legend', { text: 'Failure rules' }), grid);
  }
}

// The graph in one line, every path from the load: "load → app → postgres; app → queue → llm".
// What the load never reaches (a cycle, a missing parent) is named, not drawn.
export function wiring(nodes) {
  const kids = new Map();
  for (const n of nodes) kids.set(n.after, [...(kids.get(n.after) ?? []), n.name]);
  const seen = new Set();
  const paths = [];
  const walk = (from, path) => {
    const next = (kids.get(from) ?? []).filter((k) => !seen.has(k));
    if (next.length === 0) {
      if (path.length > 1) paths.push(path.join(' → '));
      return;
    }
    next.forEach((k, i) => {
      seen.add(k);
      walk(k, i === 0 ? [...path, k] : [from, k]);
    });
  };
  seen.add('load');
  walk('load', ['load']);
  const lost = nodes.map((n) => n.name).filter((n) => !seen.has(n));
  const text = paths.length ? paths.join('; ') : 'load alone';
  return lost.length ? `${text}; not reached from the load: ${lost.join(', ')}` : text;
}

function relabel(box, name, text) {
  const input = box.querySelector(`[name="${name}"]`);
  if (!input) return;
  const label = box.querySelector(`label[for="${input.id}"]`);
  if (label) label.textContent = text;
}
