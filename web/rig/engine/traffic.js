// Load sources, as engine/sim/traffic.py: the rate profile and the seeded
// arrivals of one lane. The bursty shape is a b-model multiplicative cascade:
// an approximation of self-similar traffic, NOT fractional Brownian motion.

import { poissonFromTable, poissonTable, poissonCount } from './libm.js';

function bitLength(n) {
  let bits = 0;
  while (n > 0) {
    bits++;
    n = Math.floor(n / 2);
  }
  return bits;
}

export function cascade(ticks, bias, rng) {
  const levels = bitLength(Math.max(ticks, 1) - 1);
  let mult = new Float64Array([1.0]);
  for (let l = 0; l < levels; l++) {
    const flips = rng.block(mult.length);
    const next = new Float64Array(2 * mult.length);
    for (let i = 0; i < mult.length; i++) {
      const left = flips[i] < 0.5 ? 2.0 * bias : 2.0 * (1.0 - bias);
      next[2 * i] = mult[i] * left;
      next[2 * i + 1] = mult[i] * (2.0 - left);
    }
    mult = next;
  }
  const out = mult.slice(0, ticks);
  let sum = 0.0;
  for (let i = 0; i < ticks; i++) sum += out[i];
  const scale = ticks / sum;
  for (let i = 0; i < ticks; i++) out[i] *= scale;
  return out;
}

// Rate multiplier per tick (shape_profile).
export function profile(source, ticks, tickS, rng) {
  const out = new Float64Array(ticks);
  if (source.shape === 'ramp') {
    for (let i = 0; i < ticks; i++) {
      const t = i * tickS;
      const frac = source.ramp_s > 0 ? Math.min(t / source.ramp_s, 1.0) : 1.0;
      out[i] = source.start_fraction + (1.0 - source.start_fraction) * frac;
    }
    return out;
  }
  if (source.shape === 'step') {
    const until = source.until_s === null ? Infinity : source.until_s;
    for (let i = 0; i < ticks; i++) {
      const t = i * tickS;
      const inside = t >= source.at_s - 1e-9 && t < until - 1e-9;
      out[i] = inside ? 1.0 : source.base_fraction;
    }
    return out;
  }
  if (source.shape === 'bursty') return cascade(ticks, source.burst_bias, rng);
  out.fill(1.0);
  return out;
}

// [rates, arrived] of one lane at `level` (offered_rates, then arrivals).
export function arrivals(source, level, ticks, tickS, rng) {
  const shape = profile(source, ticks, tickS, rng);
  const rates = new Float64Array(ticks);
  const arrived = new Float64Array(ticks);
  for (let i = 0; i < ticks; i++) {
    rates[i] = level * shape[i];
    arrived[i] = rates[i] * tickS;
  }
  if (source.arrivals === 'deterministic') return [rates, arrived];
  const u = rng.block(ticks);
  if (source.shape === 'constant' && ticks > 0) {
    const lam = arrived[0];
    const table = poissonTable(lam);
    for (let i = 0; i < ticks; i++) arrived[i] = poissonFromTable(table, lam, u[i]);
    return [rates, arrived];
  }
  for (let i = 0; i < ticks; i++) arrived[i] = poissonCount(arrived[i], u[i]);
  return [rates, arrived];
}
