"""The serving loop: a model server's scheduler, step by step, over discrete requests.

Each iteration the scheduler picks the next step's mix of decode tokens and
prompt chunks the way its runtime does (SPEC §4), the step model prices it
(:func:`backpressure.engine.serving.step.step_time`, inlined here: numba's
cache keys on this file, so a change to the step model must touch this file
too, or a stale compiled loop keeps the old one), time advances by that
much, and the requests the step touched move on: a prompt whose last chunk ran
gets its first token, a sequence that reached its output length finishes and
frees its KV, arrivals join the waiting queue.

vLLM (V1 engine, ``vllm/v1/core/sched/scheduler.py``):
  running requests first, in admission order: every decoding sequence takes
  one token of the ``max_num_batched_tokens`` budget and, when it crosses a
  block boundary, one KV block; partly prefilled prompts take chunks of what
  budget is left (chunked prefill). When blocks run out, the most recently
  admitted running request is preempted: its blocks are freed and it goes back
  to the front of the waiting queue to recompute what it had (prompt and output
  so far). The prefix cache (on by default) keeps its full blocks in the free
  queue, tail block first in line for eviction (``vllm/v1/core/kv_cache_manager.py``,
  ``free``: "We free the blocks in reverse order so that the tail blocks are
  evicted first"), until new allocations reach them: on readmission the blocks
  still there are hits and only the rest is recomputed. Only in a step without
  preemption are waiting requests admitted, first come first served, while
  ``max_num_seqs``, the budget and the free blocks allow; a request whose first
  chunk finds too few free blocks blocks the queue behind it.
llama.cpp (``tools/server``): ``-np`` slots of ``ctx / np`` tokens each, reserved
  whole. A waiting request takes a free slot at the start of an iteration; the
  batch holds one decode token per generating slot, then prompt chunks slot by
  slot up to ``n_batch``, run in ``n_ubatch`` passes. No preemption.

Sequences that decode are tracked in aggregate so that a step costs O(1)
however many run: the KV tokens they hold (each decode step adds one per
sequence), how many cross a block boundary this step (a histogram of their
position modulo the block size, read at the step's phase) and which finish
(a calendar of doubly linked lists by finishing step). So a run costs time in
proportion to its steps and requests, not steps times batch.

A request reaches the scheduler through the front end (vLLM's API server: one
event loop parsing and tokenizing requests), which shares its time among the
requests it is taking in (processor sharing): each needs the same work, and
while ``k`` are in, each gets ``1/k`` of it. A request alone takes the work's
time; a burst of ``N`` arriving together reaches the scheduler together, after
``N`` times it, instead of one by one.

Times are seconds; a request's record holds its arrival, first-token and finish
time and its fate (:data:`DONE`, :data:`SHED`, :data:`ABANDONED`,
:data:`TOO_LONG`, or :data:`PENDING` when the run stopped first).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from backpressure.engine.serving.step import LATENCY_S, REQUEST_S, WINDOW, step_parts
from backpressure.engine.sim.jit import compiled

# A request's fate.
PENDING, DONE, SHED, ABANDONED, TOO_LONG = 0, 1, 2, 3, 4
# Its phase while the run holds it.
NOT_YET, WAITING, PREFILL, DECODE, GONE = 0, 1, 2, 3, 4
# Why a run stopped.
DRAINED, STOP_TIME, STOP_LOST, STOP_SLOW = 0, 1, 2, 3
NONE = -1

_step_parts = compiled(step_parts, "always")


def _serve_py(
    policy: int,
    kv_blocks: int,
    block_tokens: int,
    max_seqs: int,
    max_tokens: int,
    ubatch: int,
    slot_tokens: int,
    queue_depth: int,
    max_wait_s: float,
    cost: Any,
    experts: Any,
    arrival: Any,
    prompt: Any,
    output: Any,
    users: int,
    stop_s: float,
    lost_limit: int,
    slow_limit: int,
    slow_s: float,
    bin_s: float,
    first: Any,
    finish: Any,
    status: Any,
    preempts: Any,
    occupancy: Any,
    queued: Any,
    counters: Any,
    sums: Any,
    step_by_step: bool,
) -> int:  # pragma: no cover - compiled
    n = arrival.shape[0]
    bins = occupancy.shape[0]
    vllm = policy == 0
    # per request
    phase = np.zeros(n, np.int64)
    computed = np.zeros(n, np.int64)  # tokens whose KV is stored
    target = np.zeros(n, np.int64)  # tokens to compute before decoding: prompt (+ output so far)
    generated = np.zeros(n, np.int64)
    blocks = np.zeros(n, np.int64)
    since = np.zeros(n)  # when it last started waiting
    key = np.zeros(n, np.int64)  # decode position phase modulo the block size
    start = np.zeros(n, np.int64)  # step its decoding (re)started
    start_done = np.zeros(n, np.int64)  # tokens computed then
    epoch = np.zeros(n, np.int64)  # bumped at each preemption: stale queue entries skip
    # vLLM's prefix cache keeps a preempted request's full blocks until the free
    # queue hands them out again: how many it left, and the allocation count at
    # which their eviction begins (tail block first).
    cached = np.zeros(n, np.int64)
    cache_from = np.zeros(n, np.int64)
    allocated = 0  # blocks handed out from the free queue so far
    # waiting queue: a ring, preempted requests pushed at the front
    cap = n + 1
    wq = np.zeros(cap, np.int64)
    w_head = 0
    w_len = 0
    # running requests in admission order (a stack with stale entries skipped)
    stack = np.zeros(2 * n + 2, np.int64)
    stack_epoch = np.zeros(2 * n + 2, np.int64)
    s_top = 0
    n_running = 0
    # prompts being prefilled, in admission order (a ring with stale entries skipped)
    pq = np.zeros(cap, np.int64)
    pq_epoch = np.zeros(cap, np.int64)
    p_head = 0
    p_len = 0
    # decoding sequences in aggregate
    max_out = 1
    for i in range(n):
        max_out = max(max_out, output[i])
    span = max_out + 2
    b_head = np.full(span, NONE, np.int64)
    b_next = np.full(n, NONE, np.int64)
    b_prev = np.full(n, NONE, np.int64)
    b_slot = np.full(n, NONE, np.int64)
    hist = np.zeros(max(block_tokens, 1), np.int64)
    n_dec = 0
    kv_dec = 0.0
    used = 0  # blocks held (vLLM) or slots busy (llama.cpp)
    total_res = kv_blocks if vllm else max_seqs
    # load
    next_arrival = 0  # open loop: next request to arrive
    issued = 0  # closed loop: requests issued so far
    # Each request passes the front end (parsing, tokenizing), which shares its
    # time among the requests in it, and then a latency that overlaps other
    # requests': it reaches the scheduler at ``ready``. The front end's state:
    # its clock, the service each request in it has had since the run began
    # (its virtual time), the first request still in it (every one before it
    # has left) and the last one that came in; ``served`` is each request's
    # virtual time when it came in. Scalars, not an array: the hot loop reads
    # ``head`` every step, and with the state in an array every step ran
    # slower (benchmarks/sweep.txt, 2026-12-06).
    work = cost[REQUEST_S]
    latency = cost[LATENCY_S]
    ready = np.zeros(n)
    served = np.zeros(n)
    clock = 0.0
    vtime = 0.0
    head = 0
    last = -1
    intake_due = 0.0  # the front end's next event, while no request is issued
    if users > 0:
        issued = min(users, n)
        for i in range(issued):
            arrival[i] = 0.0
    else:
        # open loop: every arrival is known and nothing the scheduler does
        # feeds back into the front end, so all of it runs now, once
        issued = n
        intake_due, clock, vtime, head, last = _take_in(
            np.inf, clock, vtime, head, last, served, ready, arrival, issued, work, latency
        )
    resolved = 0
    lost = 0
    slow = 0
    t = 0.0
    step = 0
    steps_run = 0
    n_preempt = 0
    reason = DRAINED
    chunk_r = np.zeros(cap, np.int64)
    parts = np.zeros(4)  # a stretch: its time and that time by what bound it
    los = np.empty(64, np.int64)  # the stretch's stack of intervals, reused
    his = np.empty(64, np.int64)
    chunk_n = np.zeros(cap, np.int64)
    last_age_check = -1.0
    slot = 0  # step % span: the finishing calendar's slot of this step
    phase_at = 0  # (-step) % block_tokens: decode positions that cross a block boundary
    empty_to = 0  # calendar slots of steps from `step` up to this one are empty

    issued_seen = issued
    while True:
        if t >= intake_due or issued != issued_seen:
            intake_due, clock, vtime, head, last = _take_in(
                t, clock, vtime, head, last, served, ready, arrival, issued, work, latency
            )
            issued_seen = issued
        # -- arrivals up to now join the queue (or are shed, or cannot fit at all)
        while next_arrival < head and ready[next_arrival] <= t:
            r = next_arrival
            next_arrival += 1
            need = prompt[r] + output[r]
            # vLLM refuses more than max_model_len tokens, and a request that no pool holds
            fits = need <= slot_tokens and (not vllm or -(-(need - 1) // block_tokens) <= kv_blocks)
            if not fits or w_len >= queue_depth:
                status[r] = TOO_LONG if not fits else SHED
                phase[r] = GONE
                resolved += 1
                lost += 1
                issued = _next_request(t, users, issued, n, arrival)
            else:
                phase[r] = WAITING
                target[r] = prompt[r]
                since[r] = ready[r]
                wq[_ring(w_head + w_len, cap)] = r
                w_len += 1
        # -- requests that waited too long are abandoned (checked once a second). The
        # queue is in arrival order but for preempted requests put back at its
        # front, so the scan stops at the first request never preempted that is
        # still young enough: everything behind it arrived later.
        if w_len > 0 and t - last_age_check >= 1.0:
            last_age_check = t
            kept = 0
            k = 0
            while k < w_len:
                r = wq[_ring(w_head + k, cap)]
                if t - since[r] > max_wait_s:
                    status[r] = ABANDONED
                    phase[r] = GONE
                    resolved += 1
                    lost += 1
                    issued = _next_request(t, users, issued, n, arrival)
                    k += 1
                    continue
                if preempts[r] == 0:
                    break
                wq[_ring(w_head + kept, cap)] = r  # a young preempted request: keep its place
                kept += 1
                k += 1
            # close the gap between the kept front and the untouched rest
            if k > kept:
                for j in range(kept - 1, -1, -1):
                    wq[_ring(w_head + j + k - kept, cap)] = wq[_ring(w_head + j, cap)]
                w_head = _ring(w_head + k - kept, cap)
                w_len -= k - kept
        if lost > lost_limit:
            reason = STOP_LOST
            break
        if slow > slow_limit:
            reason = STOP_SLOW
            break
        if resolved >= n or (users > 0 and resolved >= issued and issued >= n):
            break
        if t > stop_s:
            reason = STOP_TIME
            break

        # -- schedule the step
        budget = max_tokens
        preempted = False
        n_chunks = 0
        prefill = 0
        prefix = 0.0
        pairs = 0.0
        need_dec = hist[phase_at] if vllm and n_dec > 0 else 0
        if vllm:
            # every decoding sequence that crosses a block boundary needs a block
            while need_dec > kv_blocks - used and n_running > 0:
                v, s_top = _pop_running(stack, stack_epoch, s_top, phase, epoch)
                if phase[v] == DECODE:
                    if key[v] == phase_at:
                        need_dec -= 1
                    n_dec, kv_dec = _leave_decode(
                        v,
                        step,
                        hist,
                        key,
                        start,
                        start_done,
                        b_head,
                        b_next,
                        b_prev,
                        b_slot,
                        n_dec,
                        kv_dec,
                        span,
                        computed,
                        generated,
                        blocks,
                        block_tokens,
                    )
                evict_from = allocated + kv_blocks - used  # its blocks' place in the free queue
                used -= blocks[v]
                blocks[v] = 0
                n_running -= 1
                w_head, w_len = _requeue(
                    v,
                    t,
                    wq,
                    w_head,
                    w_len,
                    cap,
                    phase,
                    computed,
                    target,
                    generated,
                    prompt,
                    since,
                    epoch,
                    preempts,
                    cached,
                    cache_from,
                    evict_from,
                    block_tokens,
                )
                n_preempt += 1
                preempted = True
            used += need_dec
            allocated += need_dec
        budget -= n_dec
        # prompts under way, in admission order
        k = 0
        while k < p_len and budget > 0:
            idx = _ring(p_head + k, cap)
            r = pq[idx]
            k += 1
            if pq_epoch[idx] != epoch[r] or phase[r] != PREFILL:
                continue
            take = min(target[r] - computed[r], budget)
            if vllm:
                want = -(-(computed[r] + take) // block_tokens) - blocks[r]
                while want > kv_blocks - used and n_running > 0:
                    v, s_top = _pop_running(stack, stack_epoch, s_top, phase, epoch)
                    if phase[v] == DECODE:
                        n_dec, kv_dec = _leave_decode(
                            v,
                            step,
                            hist,
                            key,
                            start,
                            start_done,
                            b_head,
                            b_next,
                            b_prev,
                            b_slot,
                            n_dec,
                            kv_dec,
                            span,
                            computed,
                            generated,
                            blocks,
                            block_tokens,
                        )
                        budget += 1
                        if key[v] == phase_at:
                            used -= 1  # the block it was given for this step
                    evict_from = allocated + kv_blocks - used  # its blocks' place in the free queue
                    used -= blocks[v]
                    blocks[v] = 0
                    n_running -= 1
                    w_head, w_len = _requeue(
                        v,
                        t,
                        wq,
                        w_head,
                        w_len,
                        cap,
                        phase,
                        computed,
                        target,
                        generated,
                        prompt,
                        since,
                        epoch,
                        preempts,
                        cached,
                        cache_from,
                        evict_from,
                        block_tokens,
                    )
                    n_preempt += 1
                    preempted = True
                    if v == r:
                        break
                if phase[r] != PREFILL:
                    break
                used += want
                allocated += want
                blocks[r] += want
            chunk_r[n_chunks] = r
            chunk_n[n_chunks] = take
            n_chunks += 1
            prefill += take
            prefix += computed[r]
            pairs += take * computed[r] + take * (take + 1) * 0.5
            budget -= take
        # admissions
        while w_len > 0 and budget > 0 and not preempted:
            r = wq[w_head]
            if vllm:
                if n_running >= max_seqs:
                    break
                # A preempted request finds the blocks it left that are not yet
                # handed out again; the last token is always computed afresh.
                hit = 0
                if cached[r] > 0:
                    kept = cached[r] - max(0, allocated - cache_from[r])
                    hit = min(
                        max(kept, 0) * block_tokens, (target[r] - 1) // block_tokens * block_tokens
                    )
                take = min(target[r] - hit, budget)
                want = -(-(hit + take) // block_tokens) - blocks[r]
                if want > kv_blocks - used:
                    break
                used += want
                allocated += want
                blocks[r] += want
                computed[r] = hit
                cached[r] = 0
            else:
                if used >= max_seqs:
                    break
                take = min(target[r] - computed[r], budget)
                used += 1
            w_head = _ring(w_head + 1, cap)
            w_len -= 1
            phase[r] = PREFILL
            n_running += 1
            if s_top >= stack.shape[0]:
                s_top = _compact(stack, stack_epoch, s_top, phase, epoch)
            stack[s_top] = r
            stack_epoch[s_top] = epoch[r]
            s_top += 1
            if p_len >= cap:
                p_head, p_len = _compact_ring(pq, pq_epoch, p_head, p_len, cap, phase, epoch)
            tail = _ring(p_head + p_len, cap)
            pq[tail] = r
            pq_epoch[tail] = epoch[r]
            p_len += 1
            if not vllm:
                # llama.cpp fills the batch slot by slot after the decode tokens
                take = min(take, budget)
            chunk_r[n_chunks] = r
            chunk_n[n_chunks] = take
            n_chunks += 1
            prefill += take
            prefix += computed[r]
            pairs += take * computed[r] + take * (take + 1) * 0.5
            budget -= take

        if n_dec == 0 and n_chunks == 0:
            # idle: nothing happens until the next request reaches the scheduler,
            # so the front end runs until it lets that one go (a closed loop's
            # requests; an open loop's all left it before the first step)
            if next_arrival < issued:
                while next_arrival >= head:
                    intake_due, clock, vtime, head, last = _take_in(
                        intake_due,
                        clock,
                        vtime,
                        head,
                        last,
                        served,
                        ready,
                        arrival,
                        issued,
                        work,
                        latency,
                    )
                t = max(t, ready[next_arrival])
                continue
            break

        # -- run it
        tokens = n_dec + prefill
        passes = 1 if vllm else (tokens + ubatch - 1) // ubatch
        dt, bound = _step_parts(
            cost, experts, n_dec, kv_dec + n_dec, prefill, prefix, pairs, passes, n_dec + n_chunks
        )
        util = _load(used, total_res, n_running, max_seqs, vllm)
        t0 = t
        t = t + dt
        _spread(occupancy, queued, bin_s, bins, t0, t, util, w_len)
        sums[0] += n_running * dt
        sums[1] += dt
        sums[2] += n_dec
        sums[3] += prefill
        sums[4 + bound] += dt
        kv_dec += n_dec
        # sequences that finish with this step
        r = b_head[slot]
        quiet = n_chunks == 0 and not preempted and r == NONE
        while r != NONE:
            nxt = b_next[r]
            n_dec, kv_dec = _leave_decode(
                r,
                step + 1,
                hist,
                key,
                start,
                start_done,
                b_head,
                b_next,
                b_prev,
                b_slot,
                n_dec,
                kv_dec,
                span,
                computed,
                generated,
                blocks,
                block_tokens,
            )
            generated[r] = output[r]
            n_running, used, resolved, issued = _finish(
                r,
                t,
                vllm,
                blocks,
                phase,
                status,
                finish,
                n_running,
                used,
                resolved,
                users,
                issued,
                n,
                arrival,
            )
            r = nxt
        # prompt chunks that ran
        for c in range(n_chunks):
            r = chunk_r[c]
            computed[r] += chunk_n[c]
            if computed[r] < target[r]:
                continue
            generated[r] += 1
            if generated[r] == 1:
                first[r] = t
                if t - arrival[r] > slow_s:
                    slow += 1
            if generated[r] >= output[r]:
                n_running, used, resolved, issued = _finish(
                    r,
                    t,
                    vllm,
                    blocks,
                    phase,
                    status,
                    finish,
                    n_running,
                    used,
                    resolved,
                    users,
                    issued,
                    n,
                    arrival,
                )
                continue
            # joins the decoding sequences from the next step on
            phase[r] = DECODE
            start[r] = step + 1
            start_done[r] = computed[r]
            key[r] = (computed[r] - (step + 1)) % block_tokens
            hist[key[r]] += 1
            n_dec += 1
            kv_dec += computed[r]
            end = (step + output[r] - generated[r]) % span
            empty_to = min(empty_to, step + output[r] - generated[r])
            b_slot[r] = end
            b_prev[r] = NONE
            b_next[r] = b_head[end]
            if b_head[end] != NONE:
                b_prev[b_head[end]] = r
            b_head[end] = r
        # drop finished prompts from the head of the prefill ring
        while p_len > 0 and (phase[pq[p_head]] != PREFILL or pq_epoch[p_head] != epoch[pq[p_head]]):
            p_head = _ring(p_head + 1, cap)
            p_len -= 1
        step += 1
        steps_run += 1
        # the step's phases, kept up to date without an integer division per step
        slot = slot + 1 if slot + 1 < span else 0
        phase_at = phase_at - 1 if phase_at > 0 else block_tokens - 1
        if quiet and n_dec > 0 and not step_by_step and (not vllm or w_len == 0):
            # A quiet step (decode only: no prompt chunk, no finish; for vLLM
            # nothing waiting either) changes nothing its scheduler decides by:
            # until a sequence is due to finish, a request arrives, an age check
            # or the run's end falls due (for vLLM: or a sequence crosses a block
            # boundary and takes a block), every step is another of the same
            # kind, whose KV read grows by one token per sequence. Those steps
            # are summed in closed form (:func:`_stretch_py`) instead of run one
            # by one.
            # the scan resumes where the last one stopped: the slots it passed are
            # still empty unless a sequence joined before there (empty_to is lowered)
            due = empty_to if empty_to > step else step
            d = due % span
            while b_head[d] == NONE and due - step < span:
                due += 1
                d = d + 1 if d + 1 < span else 0
            empty_to = due
            until = np.inf
            if next_arrival < issued:
                # the next request reaches the scheduler at ``ready`` once it
                # has left the front end; until then no sooner than the front
                # end's next event (a quiet step issues none, so that is current)
                until = ready[next_arrival] if next_arrival < head else intake_due + latency
            if w_len > 0:
                until = min(until, last_age_check + 1.0)
            most = due - step
            if vllm:
                # the stretch ends before the next step that takes a block: the
                # blocks in use, and so the pool's occupancy, change there
                j = 0
                p = phase_at
                while j < most and hist[p] == 0:
                    j += 1
                    p = p - 1 if p > 0 else block_tokens - 1
                most = j
            if most > 0 and t < until and t <= stop_s:
                passes = 1 if vllm else (n_dec + ubatch - 1) // ubatch
                j = _stretch(
                    cost,
                    experts,
                    n_dec,
                    kv_dec,
                    passes,
                    t,
                    until,
                    stop_s,
                    most,
                    parts,
                    los,
                    his,
                )
                if j > 0:
                    dt = parts[0]
                    util = _load(used, total_res, n_running, max_seqs, vllm)
                    _spread(occupancy, queued, bin_s, bins, t, t + dt, util, w_len)
                    t = t + dt
                    sums[0] += n_running * dt
                    sums[1] += dt
                    sums[2] += n_dec * j
                    sums[4] += parts[1]
                    sums[5] += parts[2]
                    sums[6] += parts[3]
                    kv_dec += n_dec * j
                    step += j
                    steps_run += j
                    slot = step % span
                    phase_at = (-step) % block_tokens

    counters[0] = steps_run
    counters[1] = n_preempt
    counters[2] = lost
    counters[3] = slow
    sums[7] = t  # when the run stopped: later arrivals never reached the server
    return reason


def _ring_py(i: int, cap: int) -> int:  # pragma: no cover - compiled
    """``i % cap`` for ``0 <= i < 2 cap``: a ring index without an integer division."""
    return i - cap if i >= cap else i


def _pop_running_py(
    stack: Any, stack_epoch: Any, s_top: int, phase: Any, epoch: Any
) -> tuple[int, int]:  # pragma: no cover - compiled
    """The most recently admitted running request, off the top of the stack."""
    while True:
        s_top -= 1
        v = stack[s_top]
        if stack_epoch[s_top] == epoch[v] and (phase[v] == PREFILL or phase[v] == DECODE):
            return v, s_top


def _compact_py(
    stack: Any, stack_epoch: Any, s_top: int, phase: Any, epoch: Any
) -> int:  # pragma: no cover - compiled
    """Drop stale entries from the running stack, keeping the order; returns the new top."""
    kept = 0
    for k in range(s_top):
        v = stack[k]
        if stack_epoch[k] == epoch[v] and (phase[v] == PREFILL or phase[v] == DECODE):
            stack[kept] = v
            stack_epoch[kept] = stack_epoch[k]
            kept += 1
    return kept


def _compact_ring_py(
    pq: Any, pq_epoch: Any, head: int, length: int, cap: int, phase: Any, epoch: Any
) -> tuple[int, int]:  # pragma: no cover - compiled
    """Drop stale entries from the prefill ring, keeping the order."""
    kept = 0
    for k in range(length):
        idx = _ring(head + k, cap)
        r = pq[idx]
        if pq_epoch[idx] == epoch[r] and phase[r] == PREFILL:
            to = _ring(head + kept, cap)
            pq[to] = r
            pq_epoch[to] = pq_epoch[idx]
            kept += 1
    return head, kept


def _leave_decode_py(
    r: int,
    step: int,
    hist: Any,
    key: Any,
    start: Any,
    start_done: Any,
    b_head: Any,
    b_next: Any,
    b_prev: Any,
    b_slot: Any,
    n_dec: int,
    kv_dec: float,
    span: int,
    computed: Any,
    generated: Any,
    blocks: Any,
    block_tokens: int,
) -> tuple[int, float]:  # pragma: no cover - compiled
    """Take ``r`` out of the decoding aggregates as of the start of ``step``.

    Its computed and generated counts and the blocks it holds are brought up to date.
    """
    ran = step - start[r]
    computed[r] = start_done[r] + ran
    generated[r] += ran
    blocks[r] = -(-computed[r] // block_tokens)
    hist[key[r]] -= 1
    kv_dec -= computed[r]
    n_dec -= 1
    slot = b_slot[r]
    if b_prev[r] != NONE:
        b_next[b_prev[r]] = b_next[r]
    else:
        b_head[slot] = b_next[r]
    if b_next[r] != NONE:
        b_prev[b_next[r]] = b_prev[r]
    b_slot[r] = NONE
    b_next[r] = NONE
    b_prev[r] = NONE
    return n_dec, kv_dec


def _requeue_py(
    v: int,
    t: float,
    wq: Any,
    w_head: int,
    w_len: int,
    cap: int,
    phase: Any,
    computed: Any,
    target: Any,
    generated: Any,
    prompt: Any,
    since: Any,
    epoch: Any,
    preempts: Any,
    cached: Any,
    cache_from: Any,
    evict_from: int,
    block_tokens: int,
) -> tuple[int, int]:  # pragma: no cover - compiled
    """Preempt ``v``: first in line again, to recompute its prompt and output so far.

    Its full blocks stay in the prefix cache (``cached``) until the free queue has
    handed out ``evict_from`` blocks in all (``cache_from``); what is still there on
    readmission is not recomputed.
    """
    cached[v] = computed[v] // block_tokens
    cache_from[v] = evict_from
    computed[v] = 0
    target[v] = prompt[v] + generated[v]
    phase[v] = WAITING
    since[v] = t
    epoch[v] += 1
    preempts[v] += 1
    w_head = w_head - 1 if w_head > 0 else cap - 1
    wq[w_head] = v
    return w_head, w_len + 1


def _finish_py(
    r: int,
    t: float,
    vllm: bool,
    blocks: Any,
    phase: Any,
    status: Any,
    finish: Any,
    n_running: int,
    used: int,
    resolved: int,
    users: int,
    issued: int,
    n: int,
    arrival: Any,
) -> tuple[int, int, int, int]:  # pragma: no cover
    """``r`` is done: free what it held; in a closed loop its user sends the next request."""
    phase[r] = GONE
    status[r] = DONE
    finish[r] = t
    n_running -= 1
    used -= blocks[r] if vllm else 1
    blocks[r] = 0
    resolved += 1
    issued = _next_request(t, users, issued, n, arrival)
    return n_running, used, resolved, issued


def _next_request_py(
    t: float, users: int, issued: int, n: int, arrival: Any
) -> int:  # pragma: no cover
    """Closed loop: a user whose request ended (done or lost) sends the next one now."""
    if users > 0 and issued < n:
        arrival[issued] = t
        issued += 1
    return issued


def _intake_event_py(
    clock: float,
    vtime: float,
    head: int,
    last: int,
    served: Any,
    arrival: Any,
    issued: int,
    work: float,
) -> tuple[float, float]:  # pragma: no cover - compiled
    """When the front end next takes a request in, and when it next lets one go.

    The first request in it leaves once its virtual time has grown by ``work``;
    with ``k`` in, the virtual time grows ``1/k`` as fast as the clock.
    """
    arrive = arrival[last + 1] if last + 1 < issued else np.inf
    leave = np.inf
    if last >= head:
        left = max(served[head] + work - vtime, 0.0)
        leave = clock + left * (last - head + 1)
    return arrive, leave


def _take_in_py(
    upto: float,
    clock: float,
    vtime: float,
    head: int,
    last: int,
    served: Any,
    ready: Any,
    arrival: Any,
    issued: int,
    work: float,
    latency: float,
) -> tuple[float, float, float, int, int]:  # pragma: no cover - compiled
    """Run the front end up to ``upto``: when it next has something to do, and its state.

    Requests come in in the order they arrive and leave for the scheduler,
    which they reach (``ready``) a latency later. Between events the state
    need not be brought up to date: with the same requests in, the service
    each has had grows linearly, so the next event catches it up.
    """
    while True:
        arrive, leave = _intake_event(clock, vtime, head, last, served, arrival, issued, work)
        due = min(arrive, leave)
        if due > upto or due == np.inf:
            return float(due), clock, vtime, head, last
        if leave <= arrive:
            vtime = served[head] + work
            clock = leave
            ready[head] = leave + latency
            head += 1
        else:
            if last >= head and arrive > clock:
                vtime += (arrive - clock) / (last - head + 1)
            clock = max(clock, arrive)
            last += 1
            served[last] = vtime


def _stretch_py(
    cost: Any,
    experts: Any,
    n: int,
    kv0: float,
    passes: int,
    t: float,
    until: float,
    stop_s: float,
    most: int,
    parts: Any,
    los: Any,
    his: Any,
) -> int:  # pragma: no cover - compiled
    """Steps of a quiet stretch that start before ``until`` (and by ``stop_s``), summed.

    Step ``k`` of the stretch decodes ``n`` sequences holding ``kv0 + n (k + 1)``
    KV tokens; its time is a maximum of terms linear in ``k`` (memory, compute,
    host), with a kink where a sliding window fills. On a run of steps where the
    same term wins at both ends and the window is on the same side of full, the
    time is linear in ``k`` throughout (a maximum of linear terms that agree at
    both ends of an interval agrees inside it), so its sum is the trapezoid;
    elsewhere the run is halved until it is so. At most ``most`` steps.

    Returns the number of steps ``j`` and puts their total time and its split
    by bound (memory, compute, host) into ``parts``.
    """
    parts[0] = 0.0
    parts[1] = 0.0
    parts[2] = 0.0
    parts[3] = 0.0
    window = cost[WINDOW]
    full = n * window
    # intervals [a, b) to sum, left to right (a stack: the right half pushed first;
    # ``los`` and ``his`` hold 64 entries, allocated once per run by the caller)
    los[0] = 0
    his[0] = most
    top = 1
    acc = 0.0
    while top > 0:
        top -= 1
        a = los[top]
        b = his[top]
        kv_a = kv0 + n * (a + 1)
        kv_b = kv0 + n * b
        dt_a, bound_a = _step_parts(cost, experts, n, kv_a, 0, 0.0, 0.0, passes, n)
        dt_b, bound_b = _step_parts(cost, experts, n, kv_b, 0, 0.0, 0.0, passes, n)
        same_side = window <= 0.0 or (kv_a >= full) == (kv_b >= full)
        if (bound_a != bound_b or not same_side) and b - a > 1 and top < 62:
            mid = (a + b) // 2
            los[top] = mid
            his[top] = b
            los[top + 1] = a
            his[top + 1] = mid
            top += 2
            continue
        length = b - a
        slope = (dt_b - dt_a) / (length - 1) if length > 1 else 0.0
        # how many of these steps start in time: the start of step a + i - 1 is
        # t + acc + (i - 1) dt_a + slope (i - 1)(i - 2) / 2, increasing in i
        lo, hi = 0, length
        while lo < hi:
            i = (lo + hi + 1) // 2
            start = t + acc + (i - 1) * dt_a + slope * (i - 1) * (i - 2) * 0.5
            if start < until and start <= stop_s:
                lo = i
            else:
                hi = i - 1
        took = lo * dt_a + slope * lo * (lo - 1) * 0.5
        acc += took
        parts[1 + bound_a] += took
        if lo < length:
            parts[0] = acc
            return int(a + lo)
    parts[0] = acc
    return most


def _load_py(
    used: float, total: float, running: int, max_seqs: int, vllm: bool
) -> float:  # pragma: no cover - compiled
    """How full the server is during a step (the occupancy series).

    The share of its KV pool in use; for vLLM, the share of its sequence limit
    where that is higher.
    """
    util = used / total
    if vllm:
        util = max(util, running / max_seqs)
    return util


def _spread_py(
    occupancy: Any,
    queued: Any,
    bin_s: float,
    bins: int,
    t0: float,
    t1: float,
    util: float,
    waiting: int,
) -> None:  # pragma: no cover - compiled
    """Add ``util`` and ``waiting`` times the overlap of ``[t0, t1)`` with each bin."""
    # t0 / 1.0 is t0 itself: the common one-second bins skip the division
    b = int(t0) if bin_s == 1.0 else int(t0 / bin_s)
    while b < bins:
        lo = max(t0, b * bin_s)
        hi = min(t1, (b + 1) * bin_s)
        if hi <= lo:
            break
        occupancy[b] += util * (hi - lo)
        queued[b] += waiting * (hi - lo)
        b += 1


# Helpers first: a compiled function calls the compiled versions of the globals
# as they are when it is first compiled.
_ring = compiled(_ring_py, "always")
_pop_running = compiled(_pop_running_py, "always")
_compact = compiled(_compact_py, "always")
_compact_ring = compiled(_compact_ring_py, "always")
_leave_decode = compiled(_leave_decode_py, "always")
_requeue = compiled(_requeue_py, "always")
_next_request = compiled(_next_request_py, "always")
_intake_event = compiled(_intake_event_py, "always")
_take_in = compiled(_take_in_py, "always")
_finish = compiled(_finish_py, "always")
_load = compiled(_load_py, "always")
_spread = compiled(_spread_py, "always")
_stretch = compiled(_stretch_py, "always")
serve: Callable[..., int] = compiled(_serve_py)
