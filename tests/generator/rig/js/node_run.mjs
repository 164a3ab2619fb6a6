// Node entry of the comparison tests: a JSON batch on stdin, results on stdout.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import * as format from '../../../../web/rig/engine/format.js';
import * as run from '../../../../web/rig/engine/run.js';
import * as rig from '../../../../web/rig/rig.js';
import { runJobs } from './jobs.mjs';

const input = JSON.parse(readFileSync(0, 'utf8'));
const sha256 = async (text) => createHash('sha256').update(text, 'utf8').digest('hex');
const results = await runJobs(input, { run, rig, format }, sha256);
process.stdout.write(JSON.stringify(results));
