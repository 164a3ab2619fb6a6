// Platform-independent elementary functions, as engine/sim/libm.py: only
// + - * / and sqrt (correctly rounded in IEEE 754), so the bits match Python's.

export const LN2 = 0.6931471805599453;
export const LN100 = 4.605170185988092;

const A = [
  -3.969683028665376e1, 2.209460984245205e2, -2.759285104469687e2, 1.38357751867269e2,
  -3.066479806614716e1, 2.506628277459239,
];
const B = [
  -5.447609879822406e1, 1.615858368580409e2, -1.556989798598866e2, 6.680131188771972e1,
  -1.328068155288572e1,
];
const C = [
  -7.784894002430293e-3, -3.223964580411365e-1, -2.400758277161838, -2.549732539343734,
  4.374664141464968, 2.938163982698783,
];
const D = [7.784695709041462e-3, 3.224671290700398e-1, 2.445134137142996, 3.754408661907416];
const P_LOW = 0.02425;

const view = new DataView(new ArrayBuffer(8));

// frexp for a positive normal double: [m, e] with x = m * 2**e, m in [0.5, 1).
function frexp(x) {
  view.setFloat64(0, x);
  const hi = view.getUint32(0);
  const e = ((hi >>> 20) & 0x7ff) - 1022;
  view.setUint32(0, (hi & 0x800fffff) | (1022 << 20));
  return [view.getFloat64(0), e];
}

// ln(x) for positive finite x (the inputs here are at least 1e-300: never subnormal).
export function ln(x) {
  const [m, e] = frexp(x);
  const s = (m - 1.0) / (m + 1.0);
  const s2 = s * s;
  let total = 0.0;
  for (let k = 35; k > 0; k -= 2) total = total * s2 + 1.0 / k;
  return 2.0 * s * total + e * LN2;
}

// Acklam's inverse normal CDF, both branches as libm.inverse_normal.
export function inverseNormal(u) {
  const tailP = Math.min(u, 1.0 - u);
  if (tailP < P_LOW) {
    const t = Math.sqrt(-2.0 * ln(Math.max(tailP, 1e-300)));
    const num = ((((C[0] * t + C[1]) * t + C[2]) * t + C[3]) * t + C[4]) * t + C[5];
    const den = (((D[0] * t + D[1]) * t + D[2]) * t + D[3]) * t + 1.0;
    return u < 0.5 ? num / den : -num / den;
  }
  const q = u - 0.5;
  const r = q * q;
  const num = ((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5];
  const den = ((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0;
  return (num * q) / den;
}

export const EXACT_POISSON_BELOW = 50.0;
const U_SHIFT = 2 ** -33; // centre the 2**-32 grid so a draw is never exactly 0

// One Poisson count by inverting the CDF at draw u (libm.poisson_quantile).
// Exact below 50 expected arrivals: the number of unnormalised CDF steps below
// u * total, the terms built to lam + 12 sqrt(lam) + 12 (past which adding a
// term changes no bit, so Python's batch-wide table gives the same count).
export function poissonCount(lam, u) {
  const v = u + U_SHIFT;
  if (!(lam < EXACT_POISSON_BELOW)) {
    const z = inverseNormal(v);
    return Math.max(Math.ceil(lam + Math.sqrt(lam) * z + (z * z - 1.0) / 6.0 - 0.5), 0.0);
  }
  const top = Math.ceil(lam + 12.0 * Math.sqrt(lam) + 12.0);
  const cdf = new Float64Array(top + 1);
  let term = 1.0;
  cdf[0] = 1.0;
  for (let k = 1; k <= top; k++) {
    term = (term * lam) / k;
    cdf[k] = cdf[k - 1] + term;
  }
  const target = v * cdf[top];
  let count = 0;
  while (count <= top && cdf[count] < target) count++;
  return count;
}

// A table for many draws at one mean (a constant source): the same counts.
export function poissonTable(lam) {
  if (!(lam < EXACT_POISSON_BELOW)) return null;
  const top = Math.ceil(lam + 12.0 * Math.sqrt(lam) + 12.0);
  const cdf = new Float64Array(top + 1);
  let term = 1.0;
  cdf[0] = 1.0;
  for (let k = 1; k <= top; k++) {
    term = (term * lam) / k;
    cdf[k] = cdf[k - 1] + term;
  }
  return cdf;
}

export function poissonFromTable(cdf, lam, u) {
  if (cdf === null) return poissonCount(lam, u);
  const v = u + U_SHIFT;
  const target = v * cdf[cdf.length - 1];
  let lo = 0;
  let hi = cdf.length; // first index with cdf >= target (searchsorted, side left)
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (cdf[mid] < target) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
