// Live health bars: the run plays tick by tick (ten simulated minutes in about
// ten seconds), each node's bars showing that tick's state.

import { el } from './editor.js';
import { fmtMs } from './engine/verdict.js';
import { TICK_S } from './engine/loop.js';

function pct(x) {
  return `${Math.round(100 * Math.max(0, Math.min(1, x)))}%`;
}

function level(share) {
  return share >= 1 ? 'bad' : share >= 0.85 ? 'warn' : 'ok';
}

function bar(label) {
  const fill = el('span', { class: 'bp-rig-fill' });
  const value = el('span', { class: 'bp-rig-value' });
  const row = el('div', { class: 'bp-rig-bar' }, el('span', { class: 'bp-rig-label', text: label }), el('span', { class: 'bp-rig-track' }, fill), value);
  return { row, fill, value };
}

function setBar(b, share, text, badness = share) {
  b.fill.style.setProperty('width', pct(share));
  b.fill.dataset.level = level(badness);
  b.value.textContent = text;
}

export class Health {
  constructor(host, clock, slider) {
    this.host = host;
    this.clock = clock;
    this.slider = slider;
    this.result = null;
    this.tick = 0;
    this.playing = false;
    this.frame = null;
    this.rows = [];
    slider.addEventListener('input', () => {
      this.pause();
      this.show(Number(slider.value));
    });
  }

  load(result) {
    this.pause();
    this.result = result;
    const spec = result.spec;
    this.rows = spec.nodes.map((n) => {
      const bars = {
        util: bar(n.llm ? 'slots' : 'utilization'),
        queue: bar('queue'),
        p99: bar('p99'),
        budget: bar('error budget'),
      };
      if (n.llm) {
        bars.ttft = bar('TTFT');
        bars.tokens = bar('tokens/s');
      }
      const card = el('div', { class: 'bp-rig-health', 'data-node': n.name }, el('h4', { text: n.name }));
      for (const b of Object.values(bars)) card.append(b.row);
      return { node: n, bars, card };
    });
    this.host.replaceChildren(...this.rows.map((r) => r.card));
    this.judged = new Set(spec.nodes.filter((n) => n.llm === null && !spec.nodes.some((c) => c.parent === n.name)).map((n) => n.name));
    this.peakP99 = {};
    for (const n of spec.nodes) this.peakP99[n.name] = Math.max(1e-9, ...result.latency.path[n.name]);
    this.peakTokens = {};
    for (const r of this.rows) {
      if (r.node.llm) this.peakTokens[r.node.name] = Math.max(1, ...result.flows[r.node.name].tokens_per_s);
    }
    this.slider.max = String(result.ticks - 1);
    this.show(0);
  }

  show(t) {
    const res = this.result;
    if (!res) return;
    this.tick = Math.max(0, Math.min(res.ticks - 1, t));
    this.slider.value = String(this.tick);
    const rules = res.spec.rules;
    for (const { node, bars } of this.rows) {
      const f = res.flows[node.name];
      const lat = res.latency;
      const rho = lat.rho[node.name][this.tick];
      const util = f.utilization[this.tick];
      setBar(bars.util, rho, `${Math.round(100 * util)} %`);
      const depth = node.max_depth > 0 ? f.backlog[this.tick] / node.max_depth : 0;
      setBar(bars.queue, depth, node.max_depth > 0 ? `${Math.round(f.backlog[this.tick])} of ${node.max_depth}` : 'none');
      // the p99 rule judges the path's p99 at a server with nothing after it
      const p99 = lat.path[node.name][this.tick];
      const slo = rules.p99_slo_ms;
      if (slo !== null && this.judged.has(node.name)) setBar(bars.p99, p99 / slo, fmtMs(p99));
      else setBar(bars.p99, p99 / this.peakP99[node.name], fmtMs(p99), 0);
      const left = lat.budgetLeft[node.name][this.tick];
      setBar(bars.budget, left, `${Math.round(100 * Math.max(0, left))} %`, 1 - left);
      if (node.llm) {
        const ttft = lat.ttft[node.name][this.tick];
        setBar(bars.ttft, ttft / rules.ttft_budget_ms, fmtMs(ttft));
        const tokens = f.tokens_per_s[this.tick];
        setBar(bars.tokens, tokens / this.peakTokens[node.name], `${Math.round(tokens).toLocaleString('en-US')}`, 0);
      }
    }
    const s = this.tick * TICK_S;
    this.clock.textContent = `t = ${s.toFixed(1)} s of ${(res.ticks * TICK_S).toFixed(0)} s`;
    this.host.dataset.tick = String(this.tick);
  }

  play(ticksPerSecond) {
    if (!this.result) return;
    if (this.tick >= this.result.ticks - 1) this.show(0);
    this.playing = true;
    let last = performance.now();
    let carry = 0;
    const step = (now) => {
      if (!this.playing) return;
      carry += ((now - last) / 1000) * ticksPerSecond;
      last = now;
      const whole = Math.floor(carry);
      carry -= whole;
      if (whole) this.show(this.tick + whole);
      if (this.tick >= this.result.ticks - 1) {
        this.playing = false;
        this.host.dispatchEvent(new CustomEvent('bp-rig-ended'));
        return;
      }
      this.frame = requestAnimationFrame(step);
    };
    this.frame = requestAnimationFrame(step);
  }

  pause() {
    this.playing = false;
    if (this.frame !== null) cancelAnimationFrame(this.frame);
    this.frame = null;
  }
}
