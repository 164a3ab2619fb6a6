// The sweep runs here, off the page's thread: one run per level, lowest first,
// until one fails (the breaking rate), reporting each level as it goes.
import { sweep } from './engine/run.js';

self.addEventListener('message', (event) => {
  const { spec, seed, levels } = event.data;
  const result = sweep(spec, seed, levels, (level, rep) => {
    self.postMessage({ kind: 'level', level, passed: rep.passed, bottleneck: rep.bottleneck });
  });
  self.postMessage({ kind: 'done', breaking_rps: result.breaking_rps, bottleneck: result.bottleneck });
});
