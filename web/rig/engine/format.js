// Python's float formatting, exactly: f"{x:.Nf}", f"{x:,.Nf}", f"{x:.Ng}", f"{x:g}"
// and round(x, n). A double's decimal expansion is finite, so it is formatted
// from its exact value with BigInt where JavaScript's own formatting could
// differ: exact ties (Python rounds half to even, toFixed half up), numbers of
// 1e21 and more (toFixed switches to exponents), and every 'g' format.

const view = new DataView(new ArrayBuffer(8));

// [mantissa, exponent] with |x| = mantissa * 2**exponent exactly.
function decompose(x) {
  view.setFloat64(0, Math.abs(x));
  const hi = view.getUint32(0);
  const lo = view.getUint32(4);
  const biased = (hi >>> 20) & 0x7ff;
  let mant = (BigInt(hi & 0xfffff) << 32n) | BigInt(lo);
  let exp;
  if (biased === 0) exp = -1074;
  else {
    mant |= 1n << 52n;
    exp = biased - 1075;
  }
  return [mant, exp];
}

// |x| scaled by 10**places and rounded half to even, as a BigInt.
function scaledInt(x, places) {
  const [mant, exp] = decompose(x);
  let num = mant;
  let den = 1n;
  if (places >= 0) num *= 10n ** BigInt(places);
  else den *= 10n ** BigInt(-places);
  if (exp >= 0) num <<= BigInt(exp);
  else den <<= BigInt(-exp);
  const q = num / den;
  const r2 = 2n * (num % den);
  if (r2 > den || (r2 === den && q % 2n === 1n)) return q + 1n;
  return q;
}

function digitsFixed(q, places) {
  let s = q.toString();
  if (places === 0) return s;
  if (s.length <= places) s = '0'.repeat(places - s.length + 1) + s;
  return `${s.slice(0, s.length - places)}.${s.slice(s.length - places)}`;
}

function special(x) {
  if (Number.isNaN(x)) return 'nan';
  if (x === Infinity) return 'inf';
  if (x === -Infinity) return '-inf';
  return null;
}

function negative(x) {
  return x < 0 || Object.is(x, -0);
}

// f"{x:.{places}f}"
export function pyFixed(x, places) {
  const sp = special(x);
  if (sp !== null) return sp;
  const a = Math.abs(x);
  let s;
  const t = a * 2 ** (places + 1);
  if (a < 1e21 && !(Number.isInteger(t) && t % 2 === 1)) s = a.toFixed(places);
  else s = digitsFixed(scaledInt(a, places), places);
  return negative(x) ? `-${s}` : s;
}

function group(intPart) {
  return intPart.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

function grouped(s) {
  const neg = s.startsWith('-');
  const body = neg ? s.slice(1) : s;
  const dot = body.indexOf('.');
  const head = dot < 0 ? body : body.slice(0, dot);
  const tail = dot < 0 ? '' : body.slice(dot);
  return (neg ? '-' : '') + group(head) + tail;
}

// f"{x:,.{places}f}"
export function pyFixedGrouped(x, places) {
  const sp = special(x);
  return sp !== null ? sp : grouped(pyFixed(x, places));
}

// [digits, exponent]: |x| rounded to `precision` significant digits (half to
// even), d.ddd x 10**exponent; x nonzero and finite.
function significant(x, precision) {
  const a = Math.abs(x);
  let e = Math.floor(Math.log10(a));
  // log10 may be off by one near powers of ten: settle on the exact exponent
  for (;;) {
    const q = scaledInt(a, precision - 1 - e);
    const len = q.toString().length;
    if (len > precision) e += 1;
    else if (len < precision) e -= 1;
    else return [q.toString(), e];
  }
}

// f"{x:.{precision}g}" (f"{x:g}" is precision 6), with "," grouping if asked.
export function pyGeneral(x, precision = 6, comma = false) {
  const sp = special(x);
  if (sp !== null) return sp;
  const p = precision === 0 ? 1 : precision;
  const sign = negative(x) ? '-' : '';
  if (x === 0) return `${sign}0`;
  const [digits, e] = significant(x, p);
  let body;
  if (e >= -4 && e < p) {
    const places = p - 1 - e;
    body = digitsFixed(BigInt(digits), places > 0 ? places : 0);
    if (places < 0) body = digits + '0'.repeat(-places);
    if (body.includes('.')) body = body.replace(/0+$/, '').replace(/\.$/, '');
    if (comma) body = grouped(body);
  } else {
    let mant = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    if (mant.includes('.')) mant = mant.replace(/0+$/, '').replace(/\.$/, '');
    const ex = Math.abs(e).toString().padStart(2, '0');
    body = `${mant}e${e < 0 ? '-' : '+'}${ex}`;
  }
  return sign + body;
}

// round(x, places) for a float, as Python computes it (exactly, half to even).
export function pyRoundTo(x, places) {
  if (!Number.isFinite(x) || x === 0) return x;
  const s = digitsFixed(scaledInt(x, places), places);
  const v = Number(s);
  return negative(x) ? -v : v;
}
