// mulberry32: the one source of randomness, as engine/rng.py (which matches this
// JavaScript original bit for bit; seed 0 gives 0.26642920868471265, ...).

export class Mulberry32 {
  constructor(seed) {
    this.state = seed >>> 0;
  }

  next() {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  // The next n draws, as Mulberry32.block(n) in Python.
  block(n) {
    const out = new Float64Array(Math.max(n, 0));
    for (let i = 0; i < n; i++) out[i] = this.next();
    return out;
  }
}
