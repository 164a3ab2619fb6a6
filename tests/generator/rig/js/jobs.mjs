// Run a batch of comparison jobs with the JavaScript engine (in Node or in a
// browser): each job is a Python SimSpec as JSON, or a rig fragment built here
// from the catalog data. Returns, per job, the tick file (or its SHA-256), the
// verdict, and for a rig the spec it built; or the error it raised.

export async function runJobs(input, mods, sha256) {
  const { run, rig, format } = mods;
  const out = [];
  for (const job of input.jobs) {
    try {
      let spec;
      let seed = job.seed;
      if (job.kind === 'rig') {
        const doc = rig.parse(job.fragment);
        spec = rig.specOf(doc, input.index, input.devices);
        seed = doc.seed;
        if (job.sweep) {
          const s = run.sweep(spec, seed, rig.levels(doc, input.index));
          out.push({ ok: true, spec, breaking_rps: s.breaking_rps, bottleneck: s.bottleneck });
          continue;
        }
      } else if (job.kind === 'format') {
        const values = job.values.map(([x, p]) => [decodeFloat(x), p]);
        out.push({
          ok: true,
          fixed: values.map(([x, p]) => format.pyFixed(x, p)),
          fixed_grouped: values.map(([x, p]) => format.pyFixedGrouped(x, p)),
          general: values.map(([x, p]) => format.pyGeneral(x, p)),
          general_grouped: values.map(([x, p]) => format.pyGeneral(x, p, true)),
          rounded: values.map(([x, p]) => format.pyRoundTo(x, p)).map((v) => (Object.is(v, -0) ? '-0' : String(v))),
          num: values.map(([x, p]) => run.num(x, p)),
        });
        continue;
      } else {
        spec = job.spec;
      }
      const result = run.simulate(spec, seed);
      const text = run.tickFile(result, job.fmt ?? 'csv');
      const rep = result.report;
      out.push({
        ok: true,
        spec: job.kind === 'rig' ? spec : null,
        ticks: input.output === 'sha256' ? await sha256(text) : text,
        report: {
          passed: rep.passed,
          failing_rule: rep.failing_rule,
          failing_node: rep.failing_node,
          fail_s: rep.fail_s,
          bottleneck: rep.bottleneck,
        },
      });
    } catch (e) {
      if (!(e instanceof rig.RigError)) throw e;
      out.push({ ok: false, error: e.message });
    }
  }
  return out;
}

// Floats that JSON cannot carry arrive as strings.
function decodeFloat(x) {
  if (typeof x === 'number') return x;
  return { nan: NaN, inf: Infinity, '-inf': -Infinity, '-0': -0 }[x];
}
