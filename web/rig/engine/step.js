// The serving model's step cost, as engine/serving/step.py step_parts, and the
// LLM node's per-tick service built on it, as engine/sim/llm.py. Integer
// arithmetic stays exact in doubles (every count is far below 2**53).

const W_DENSE = 0;
const W_EXPERT = 1;
const KV_FULL = 2;
const KV_WINDOW = 3;
const WINDOW = 4;
const BANDWIDTH = 5;
const FLOPS_TOKEN = 6;
const FLOPS_PAIR = 7;
const FLOPS = 8;
const PASS_S = 9;
const STEP_S = 10;
const AR_S = 11;
const AR_TOKEN_S = 12;
const SEQ_S = 13;
const REQUEST_S = 14;
const LATENCY_S = 15;
const STATE = 16;
const EXPERT_FLOPS_TOKEN = 17;
const MOE_FLOPS = 18;
const A2A_S = 19;
const A2A_TOKEN_S = 20;
const HOST_SERIAL = 21;
const FLOPS_PAIR_WINDOW = 22;
// llama.cpp's Metal kernels: the mat-vec limit, the small-batch kernel's first
// token count, the tile, and the tokens one weight read serves for 2 .. 8 tokens
const MAT_VEC_MAX = 23;
const EXT_FROM = 24;
const TILE = 25;
const EXT_COLUMNS = 26;
// CUDA graphs: the most tokens a captured graph runs, and what a step above it adds
const GRAPH_TOKENS = 33;
const EAGER_S = 34;
export const COST_FIELDS = 35;

const SEQ_DUST = 1e-9;

// Floor division of non-negative integers.
export function idiv(a, b) {
  let q = Math.floor(a / b);
  if (q * b > a) q -= 1;
  else if ((q + 1) * b <= a) q += 1;
  return q;
}

// E[t] = n (1 - (1 - k/n)^t) for t = 0 .. maxTokens, powers by repeated product.
export function distinctExperts(numExperts, perToken, maxTokens) {
  const table = new Float64Array(maxTokens + 1);
  if (numExperts <= 0) return table;
  const miss = 1.0 - perToken / numExperts;
  let power = 1.0;
  for (let t = 1; t <= maxTokens; t++) {
    power = power * miss;
    table[t] = numExperts * (1.0 - power);
  }
  return table;
}

// Experts read per MoE layer: distinctExperts, except below pairBelow tokens a pass,
// where the runtime's kernel reads one expert per (token, chosen expert) pair: t k.
export function expertReads(numExperts, perToken, pairBelow, maxTokens) {
  const table = distinctExperts(numExperts, perToken, maxTokens);
  const below = Math.min(pairBelow, maxTokens + 1);
  if (numExperts <= 0 || below <= 2) return table;
  for (let t = 0; t < below; t++) table[t] = t * perToken;
  return table;
}

export function stepTime(cost, experts, decode, kvTokens, prefill, prefixTokens, pairs, passes, seqs) {
  const tokens = decode + prefill;
  if (tokens <= 0) return 0.0;
  const perPass = idiv(tokens + passes - 1, passes);
  let dense = cost[W_DENSE];
  let computed = tokens;
  const matVec = cost[MAT_VEC_MAX];
  if (matVec > 0) {
    // llama.cpp on Metal (engine/serving/step.py step_parts): dense weight reads of
    // the mat-vec kernels up to the limit, whole tiles above it
    if (perPass >= 2 && perPass <= matVec) {
      let reads = perPass;
      const ext = cost[EXT_FROM];
      if (ext > 0 && perPass >= ext) {
        const columns = cost[EXT_COLUMNS + perPass - 2];
        reads = idiv(perPass + columns - 1, columns);
      }
      dense = dense * reads;
    } else if (perPass > matVec) {
      const tile = cost[TILE];
      if (tile > 0) computed = Math.max(tokens, passes * idiv(perPass + tile - 1, tile) * tile);
    }
  }
  const weights = passes * (dense + cost[W_EXPERT] * experts[perPass]);
  const window = cost[WINDOW];
  const windowed = window <= 0.0 ? kvTokens : Math.min(kvTokens, decode * window);
  const kv =
    (kvTokens + prefixTokens) * cost[KV_FULL] + (windowed + prefixTokens) * cost[KV_WINDOW];
  const memory = (weights + kv + decode * cost[STATE]) / cost[BANDWIDTH];
  let attention = cost[FLOPS_PAIR] * (kvTokens + pairs);
  if (window > 0.0) {
    // a windowed layer's query meets at most `window` keys
    attention += cost[FLOPS_PAIR_WINDOW] * (windowed + Math.min(pairs, prefill * window));
  }
  let compute = (cost[FLOPS_TOKEN] * computed + attention) / cost[FLOPS];
  if (cost[EXPERT_FLOPS_TOKEN] > 0.0) {
    // the grouped expert GEMMs run after the dense ones, at their own rate
    compute = compute + (cost[EXPERT_FLOPS_TOKEN] * tokens) / cost[MOE_FLOPS];
  }
  // summed in the order engine/serving/step.py sums them: the bytes must agree
  const link = cost[AR_S] + tokens * cost[AR_TOKEN_S] + cost[A2A_S] + tokens * cost[A2A_TOKEN_S];
  let device = Math.max(memory, compute) + passes * cost[PASS_S] + link;
  // too many tokens for a captured graph: the layers launch eagerly (1 above it, else 0)
  device += cost[EAGER_S] * Math.min(Math.max(tokens - cost[GRAPH_TOKENS], 0.0), 1.0);
  const host = cost[STEP_S] + seqs * cost[SEQ_S];
  // vLLM V1: the device waits while the host schedules the step and takes in its outputs
  if (cost[HOST_SERIAL] > 0.0) return device + host;
  // llama.cpp: the host prepares the next step while the device runs this one
  return host > device ? host : device;
}

function batch(inflight, slots) {
  if (inflight <= SEQ_DUST) return 0;
  return Math.min(Math.ceil(inflight - SEQ_DUST), slots);
}

function promptStep(llm, decoding) {
  const { cost, experts, prompt, output, budget, ubatch } = llm;
  const chunk = Math.min(prompt, Math.max(budget - decoding, 1));
  const chunks = idiv(prompt + chunk - 1, chunk);
  const passes = idiv(decoding + chunk + ubatch - 1, ubatch);
  const kv = decoding * (prompt + 0.5 * output);
  const prefix = chunk * (chunks - 1) * 0.5;
  const pairs = chunk * (prompt + 1) * 0.5;
  return [stepTime(cost, experts, decoding, kv, chunk, prefix, pairs, passes, decoding + 1), chunks];
}

// Seconds one request holds a slot with `inflight` sequences running (llm.slot_s).
export function slotS(llm, inflight) {
  const n = Math.max(batch(inflight, llm.slots), 1);
  const [withPrompt, chunks] = promptStep(llm, n - 1);
  const passes = idiv(n + llm.ubatch - 1, llm.ubatch);
  const kv = n * (llm.prompt + 0.5 * llm.output);
  const decode = stepTime(llm.cost, llm.experts, n, kv, 0, 0.0, 0.0, passes, n);
  const prompts = n * chunks;
  const steps = Math.max(llm.output - 1 + chunks, prompts);
  return prompts * withPrompt + (steps - prompts) * decode;
}

// Seconds from admission to the first token (llm.first_token_s).
export function firstTokenS(llm, inflight) {
  const [step, chunks] = promptStep(llm, batch(inflight, llm.slots));
  return chunks * step + llm.cost[REQUEST_S] + llm.cost[LATENCY_S];
}

// vLLM admits by the blocks a request holds; llama.cpp by its slots
// (engine/serving/spec.py requests_held).
// vLLM's hybrid pool as blocks of a full-attention pool for requests of `tokens`
// (engine/serving/spec.py pool_blocks): `groups` rows [kind, groups, window],
// kind 0 full, 1 sliding, 2 chunked, 3 state.
export function poolBlocks(groups, blockTokens, reported, tokens) {
  if (!groups || groups.length < 2 || tokens <= 0) return reported;
  const full = Math.ceil(tokens / blockTokens);
  let count = 0;
  let held = 0;
  for (const [kind, g, window] of groups) {
    let pages = full;
    if (kind === 3) pages = 1;
    else if (kind === 1) pages = Math.min(full, Math.ceil((window - 1) / blockTokens) + 1);
    else if (kind === 2) pages = Math.min(full, Math.ceil(window / blockTokens));
    count += g;
    held += g * pages;
  }
  if (held <= 0) return reported * count;
  return idiv(reported * count * full, held);
}

export function requestsHeld(policy, kvBlocks, blockTokens, maxSeqs, prompt, output) {
  if (policy === 1) return maxSeqs;
  const perRequest = Math.ceil((prompt + output - 1) / blockTokens);
  return Math.min(maxSeqs, idiv(kvBlocks, Math.max(perRequest, 1)));
}

// The node's LLM numbers, with the expert-reads table it indexes.
export function llmOf(spec) {
  const len = Math.max(spec.max_batched_tokens, spec.slots + 1) + 1;
  return {
    slots: spec.slots,
    cost: Float64Array.from(spec.cost),
    experts: expertReads(spec.num_experts, spec.experts_per_token, spec.expert_pair_below, len - 1),
    prompt: spec.prompt_tokens,
    output: spec.output_tokens,
    budget: spec.max_batched_tokens,
    ubatch: spec.ubatch_tokens,
  };
}
