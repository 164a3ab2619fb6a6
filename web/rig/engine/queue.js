// The cohort queue of a holding node, one lane: waiting work by arrival tick in a
// doubly linked list (engine/sim/cohorts.py; the scalar form of engine/sim/kernel.py).

export const DUST = 1e-9;
const NONE = -1;

export class Cohorts {
  constructor(ticks) {
    this.counts = new Float64Array(ticks);
    this.newer = new Int32Array(ticks);
    this.older = new Int32Array(ticks);
    this.oldest = NONE;
    this.newest = NONE;
    this.backlog = 0.0;
  }

  // Drop work that arrived before tick keepFrom, oldest first; return it (age_out).
  ageOut(keepFrom) {
    if (this.oldest === NONE || !(this.oldest < keepFrom)) return 0.0;
    let k = this.oldest;
    let lost = this.counts[k];
    let gone = k === this.newest;
    let oldest = gone ? NONE : this.newer[k];
    while (oldest !== NONE && oldest < keepFrom) {
      k = oldest;
      lost = lost + this.counts[k];
      const last = k === this.newest;
      gone = gone || last;
      oldest = last ? NONE : this.newer[k];
    }
    const left = Math.max(this.backlog - lost, 0.0);
    if (left < DUST || gone) this.clear();
    else {
      this.oldest = oldest;
      this.backlog = left;
    }
    return lost;
  }

  clear() {
    this.oldest = NONE;
    this.newest = NONE;
    this.backlog = 0.0;
  }

  // This tick's admitted work joins as the newest cohort (enqueue).
  enqueue(t, admitted) {
    this.counts[t] = admitted;
    this.backlog = this.backlog + admitted;
    if (!(admitted > 0.0)) return;
    this.older[t] = this.newest;
    if (this.newest !== NONE) this.newer[this.newest] = t;
    else this.oldest = t;
    this.newest = t;
  }

  // Take amt, oldest first or newest first: [wait p50, wait p99, head age] in ticks (serve).
  serve(t, amt, lifo) {
    if (!(amt > 0.0)) {
      const head = this.backlog > 0.0 ? t - this.oldest : 0;
      return [head, head, head];
    }
    const first = lifo ? this.newest : this.oldest;
    const end = lifo ? this.oldest : this.newest;
    const [c50, c99, lastK] = this.walk(amt, lifo, first, end);
    const emptied = this.counts[lastK] === 0.0;
    const beyond = emptied ? (lifo ? this.older[lastK] : this.newer[lastK]) : lastK;
    if (lifo) this.newest = beyond;
    else this.oldest = beyond;
    const left = amt >= this.backlog ? 0.0 : this.backlog - amt;
    if (left < DUST || (emptied && lastK === end) || left === 0.0) {
      this.clear();
      return [t - c50, t - c99, 0];
    }
    this.backlog = left;
    return [t - c50, t - c99, t - this.oldest];
  }

  walk(amt, lifo, first, end) {
    // FIFO: the p-quantile cohort is the last with before <= (1 - p) amt; LIFO:
    // the last with before < p amt; both allow DUST (cohorts._take).
    const lim50 = lifo ? amt * 0.5 - DUST : amt * 0.5 + DUST;
    const lim99 = lifo ? amt * 0.99 - DUST : amt * (1.0 - 0.99) + DUST;
    const counts = this.counts;
    let w = counts[first];
    let res = w - Math.min(amt, w);
    counts[first] = res < DUST ? 0.0 : res;
    let c50 = first;
    let c99 = first;
    let k = first;
    if (!(w < amt && first !== end)) return [c50, c99, k];
    let before = w;
    for (;;) {
      k = lifo ? this.older[k] : this.newer[k];
      if (before < lim50) c50 = k;
      if (before < lim99) c99 = k;
      w = counts[k];
      res = w - Math.min(amt - before, w);
      counts[k] = res < DUST ? 0.0 : res;
      before += w;
      if (!(before < amt && k !== end)) return [c50, c99, k];
    }
  }
}
