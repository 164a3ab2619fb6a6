// The rig builder page: wire a rig from catalog parts, run it with the tick
// engine (the port of the Python engine, byte for byte), watch it on live
// health bars, find its breaking rate, and share the run as a link whose
// fragment holds the rig, its parameters and its seed.

import { Data } from './data.js';
import { Editor, el, readNumber } from './editor.js';
import { simulate, sweep as sweepLevels } from './engine/run.js';
import { fmtRps } from './engine/verdict.js';
import { Health } from './health.js';
import { RigError, devicesOf, fragment, levels, parse, specOf } from './rig.js';

const PLAY_TICKS_PER_S = 600; // ten simulated minutes in ten seconds

function defaultRig(index) {
  return parse(
    'v=1&seed=1&t=600&load=constant&rps=3&arrivals=poisson' +
      '&node=app:app-tier:load&node=postgres:postgres:app&node=queue:queue:app' +
      `&node=llm:llm-server:queue&llm.discipline=block&llm.config=${encodeURIComponent(index.default_config)}`,
  );
}

// A round step near x: 1, 2 or 5 times a power of ten.
function niceStep(x) {
  const p = 10 ** Math.floor(Math.log10(x));
  const m = x / p;
  return Number(((m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p).toPrecision(1));
}

function claimText(claim) {
  return claim.passed ? 'holds' : `fails ${claim.rule} at ${claim.node}`;
}

class App {
  constructor(root) {
    this.root = root;
    this.data = new Data(new URL(root.dataset.data || 'data/', window.location.href));
    this.status = el('p', { class: 'bp-rig-status', role: 'status', 'aria-live': 'polite', text: 'Loading the catalog data…' });
    this.error = el('p', { class: 'bp-rig-error', role: 'alert', id: 'bp-rig-error' });
    this.error.hidden = true;
    this.editorHost = el('div', { class: 'bp-rig-editor' });
    this.runButton = el('button', { type: 'submit', class: 'md-button md-button--primary', id: 'bp-rig-run', text: 'Run' });
    this.playButton = el('button', { type: 'button', class: 'md-button', id: 'bp-rig-play', text: 'Pause' });
    this.sweepStart = el('input', { id: 'bp-rig-sweep-start', type: 'text', inputmode: 'decimal', 'aria-label': 'sweep from [rps]' });
    this.sweepStep = el('input', { id: 'bp-rig-sweep-step', type: 'text', inputmode: 'decimal', 'aria-label': 'sweep step [rps]' });
    this.sweepPoints = el('input', { id: 'bp-rig-sweep-points', type: 'text', inputmode: 'numeric', 'aria-label': 'sweep levels' });
    this.sweepButton = el('button', { type: 'button', class: 'md-button', id: 'bp-rig-sweep', text: 'Find the breaking rate' });
    const sweepBox = el(
      'span',
      { class: 'bp-rig-sweepbox' },
      el('span', { text: 'sweep from ' }), this.sweepStart,
      el('span', { text: ' by ' }), this.sweepStep,
      el('span', { text: ' for ' }), this.sweepPoints,
      el('span', { text: ' levels ' }), this.sweepButton,
    );
    this.runButton.type = 'button';
    this.form = el('div', { class: 'bp-rig-form' }, this.editorHost);
    this.actions = el('div', { class: 'bp-rig-actions' }, this.runButton, this.playButton, sweepBox);
    this.verdict = el('div', { class: 'bp-verdict', id: 'bp-rig-verdict' });
    this.clock = el('span', { class: 'bp-rig-clock', id: 'bp-rig-clock' });
    this.slider = el('input', { type: 'range', min: 0, max: 0, value: 0, id: 'bp-rig-slider', 'aria-label': 'tick' });
    this.healthHost = el('div', { class: 'bp-rig-health-grid', id: 'bp-rig-health' });
    this.bottleneck = el('p', { class: 'bp-rig-bottleneck', id: 'bp-rig-bottleneck' });
    this.sweepResult = el('p', { class: 'bp-rig-sweep-result', id: 'bp-rig-sweep-result' });
    this.link = el('input', { type: 'text', readonly: true, id: 'bp-rig-link', 'aria-label': 'link to this run' });
    this.copyButton = el('button', { type: 'button', class: 'md-button', id: 'bp-rig-copy', text: 'Copy link' });
    this.timing = el('p', { class: 'bp-rig-note', id: 'bp-rig-timing' });
    this.results = el(
      'section',
      { class: 'bp-rig-results', id: 'bp-rig-results' },
      this.verdict,
      el('div', { class: 'bp-rig-timeline' }, this.slider, this.clock),
      this.healthHost,
      this.bottleneck,
      this.sweepResult,
      el('p', { class: 'bp-rig-share' }, this.link, this.copyButton),
      this.timing,
    );
    this.results.hidden = true;
    const side = el('div', { class: 'bp-rig-side' }, this.actions, this.error, this.results);
    root.replaceChildren(this.status, el('div', { class: 'bp-rig-layout' }, side, this.form));
    this.health = new Health(this.healthHost, this.clock, this.slider);
    this.editor = new Editor(this.editorHost, this.data, () => this.edited());
    this.result = null;
    this.worker = null;
  }

  async start() {
    try {
      await this.data.load();
    } catch (e) {
      this.fail(e.message);
      this.status.textContent = 'The catalog data did not load.';
      return;
    }
    this.wire();
    await this.fromLocation();
  }

  wire() {
    this.runButton.addEventListener('click', () => this.run(performance.now()));
    this.playButton.addEventListener('click', () => {
      if (this.health.playing) this.pause();
      else this.play();
    });
    this.healthHost.addEventListener('bp-rig-ended', () => {
      this.playButton.textContent = 'Replay';
    });
    this.sweepButton.addEventListener('click', () => this.runSweep());
    this.copyButton.addEventListener('click', () => this.copy());
    window.addEventListener('hashchange', () => {
      if (window.location.hash.slice(1) !== this.written) this.fromLocation();
    });
  }

  async fromLocation() {
    const hash = window.location.hash.slice(1);
    let rig = null;
    let claimed = null;
    if (hash) {
      try {
        rig = parse(hash);
        claimed = { claim: rig.claim, breaking: rig.breaking };
      } catch (e) {
        if (!(e instanceof RigError)) throw e;
        // the link does not parse: offer the default rig, but keep the message up
        this.rig = defaultRig(this.data.index);
        this.setSweepFields();
        this.editor.show(this.rig);
        this.status.textContent = 'A five-node rig to start from: edit it and run.';
        this.fail(`This link cannot be run: ${e.message}`);
        return;
      }
    }
    this.rig = rig ?? defaultRig(this.data.index);
    this.setSweepFields();
    this.editor.show(this.rig);
    this.status.textContent = rig ? 'Replaying the run of this link.' : 'A five-node rig to start from: edit it and run.';
    await this.run(performance.now(), claimed, rig ? 'This link cannot be run: ' : '');
  }

  setSweepFields() {
    let sweep = this.rig.sweep;
    if (sweep === null) {
      const rps = typeof this.rig.rps === 'number' && this.rig.rps > 0 ? this.rig.rps : 1;
      const step = niceStep(rps / 6);
      sweep = [step, step, 24];
    }
    [this.sweepStart.value, this.sweepStep.value, this.sweepPoints.value] = sweep.map(String);
  }

  edited() {
    this.rig.claim = null;
    this.rig.breaking = null;
    this.rig.sweep = null;
    this.sweepResult.textContent = '';
    this.results.classList.add('bp-rig-stale');
    this.writeLink();
  }

  writeLink() {
    this.written = fragment(this.rig);
    window.history.replaceState(null, '', `#${this.written}`);
    this.link.value = window.location.href;
  }

  fail(message) {
    this.error.textContent = message;
    this.error.hidden = false;
    this.root.dataset.state = 'error';
  }

  async spec() {
    const seed = this.rig.seed;
    if (!(Number.isInteger(seed) && seed >= 0 && seed <= 4294967295)) {
      throw new RigError('seed: a whole number from 0 to 4294967295');
    }
    await this.data.devicesFor(devicesOf(this.rig));
    return specOf(this.rig, this.data.index, this.data.devices);
  }

  async run(clicked, claimed = null, context = '') {
    this.error.hidden = true;
    this.pause();
    let spec;
    try {
      spec = await this.spec();
    } catch (e) {
      this.fail(context + e.message); // a RigError names the field; a failed fetch says which file
      this.results.classList.add('bp-rig-stale');
      return;
    }
    const started = performance.now();
    const result = simulate(spec, this.rig.seed);
    this.result = result;
    this.health.load(result);
    this.results.hidden = false;
    this.results.classList.remove('bp-rig-stale');
    const rep = result.report;
    this.verdict.className = `bp-verdict ${rep.passed ? 'bp-fit' : 'bp-nofit'}`;
    const rate = `${fmtRps(rep.rps)} rps`;
    const head = rep.passed
      ? `Holds at ${rate} for ${spec.duration_s} s`
      : `Fails at ${rate}: the ${rep.failing_rule} rule fires at ${rep.fail_s} s`;
    this.verdict.replaceChildren(el('p', {}, el('strong', { text: head })));
    this.bottleneck.textContent = rep.bottleneck;
    const ms = performance.now() - clicked;
    this.root.dataset.firstResultMs = ms.toFixed(1);
    this.root.dataset.engineMs = (performance.now() - started).toFixed(1);
    this.timing.textContent =
      `${result.ticks.toLocaleString('en-US')} ticks × ${spec.nodes.length} nodes computed in ` +
      `${(performance.now() - started).toFixed(0)} ms (first result ${ms.toFixed(0)} ms after Run).`;
    const fresh = { passed: rep.passed, rule: rep.failing_rule, node: rep.failing_node };
    if (claimed && claimed.claim) {
      const same = claimText(claimed.claim) === claimText(fresh);
      this.verdict.append(el('p', { text: same ? 'The link said the same: its verdict holds.' : `The link said it ${claimText(claimed.claim)}; recomputed, it ${claimText(fresh)}.` }));
    }
    this.rig.claim = fresh;
    if (claimed && claimed.breaking && this.rig.sweep) {
      this.rig.breaking = claimed.breaking;
      this.runSweep(claimed.breaking[0]);
    }
    this.writeLink();
    this.root.dataset.state = rep.passed ? 'holds' : 'fails';
    this.play();
  }

  play() {
    this.health.play(PLAY_TICKS_PER_S);
    this.playButton.textContent = 'Pause';
  }

  pause() {
    this.health.pause();
    this.playButton.textContent = 'Play';
  }

  async runSweep(claimedRate = undefined) {
    this.error.hidden = true;
    const sweep = [readNumber(this.sweepStart.value), readNumber(this.sweepStep.value), readNumber(this.sweepPoints.value)];
    const trial = { ...this.rig, sweep };
    let spec;
    let lv;
    try {
      if (!sweep.every((x) => typeof x === 'number')) throw new RigError('sweep: start, step and levels must be numbers');
      lv = levels(trial, this.data.index);
      spec = await this.spec();
    } catch (e) {
      if (!(e instanceof RigError)) throw e;
      this.fail(e.message);
      return;
    }
    this.rig.sweep = sweep;
    this.sweepButton.disabled = true;
    this.root.dataset.sweep = 'running';
    const finish = (rate, bottleneck) => {
      this.sweepButton.disabled = false;
      this.rig.breaking = [rate];
      this.sweepResult.textContent =
        rate === null
          ? `Holds at every level swept, up to ${fmtRps(lv[lv.length - 1])} rps: ${bottleneck}`
          : `The breaking rate: ${fmtRps(rate)} rps. ${bottleneck}`;
      if (claimedRate !== undefined && claimedRate !== rate) {
        this.sweepResult.append(` (the link said ${claimedRate === null ? 'it holds everywhere' : `${fmtRps(claimedRate)} rps`})`);
      }
      this.root.dataset.sweep = 'done';
      this.root.dataset.breakingRps = rate === null ? 'none' : String(rate);
      this.writeLink();
    };
    const progress = (level, passed, done, total) => {
      this.sweepResult.textContent = `Sweeping: level ${done} of ${total}, ${fmtRps(level)} rps ${passed ? 'holds' : 'fails'}…`;
    };
    let worker = null;
    try {
      worker = new Worker(new URL('./sweep-worker.js', import.meta.url), { type: 'module' });
    } catch {
      worker = null;
    }
    if (worker === null) {
      let done = 0;
      const out = sweepLevels(spec, this.rig.seed, lv, (level, rep) => progress(level, rep.passed, ++done, lv.length));
      finish(out.breaking_rps, out.bottleneck);
      return;
    }
    let done = 0;
    worker.addEventListener('message', (event) => {
      const msg = event.data;
      if (msg.kind === 'level') progress(msg.level, msg.passed, ++done, lv.length);
      else {
        worker.terminate();
        finish(msg.breaking_rps, msg.bottleneck);
      }
    });
    worker.postMessage({ spec, seed: this.rig.seed, levels: lv });
  }

  async copy() {
    this.link.select();
    try {
      await navigator.clipboard.writeText(this.link.value);
      this.copyButton.textContent = 'Copied';
    } catch {
      this.copyButton.textContent = 'Select and copy';
    }
  }
}

const root = document.getElementById('bp-rig');
if (root) new App(root).start();
