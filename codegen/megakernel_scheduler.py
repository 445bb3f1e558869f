"""`scheduler` dispatch of the persistent megakernel: a scheduler CTA and per-worker queues.

Seed 003 (sections 2 and 4) dispatches tasks at run time: scheduler CTAs watch the event
counters and push every task whose dependencies are met into its worker's single-producer /
single-consumer queue, so a worker never spins on an event, only on its own queue.  With
`mpk.dispatch = "scheduler"` (kn-to-task-graph `dispatch=scheduler`) the megakernel is printed
so:

* the grid holds the task graph's `workers` worker CTAs plus one scheduler CTA (the CTA whose
  worker index equals `workers`; under SM-major numbering the last slot of the last SM), all
  co-resident like the workers;
* warp 0 of the scheduler polls the events with ld.acquire.gpu, lane l the events l, l + 32,
  ... in order, without sleeping (the CTA does nothing else); it first hands over the tasks
  without a wait, then, round by round, the consumers of every event reached: the lanes
  write their task indices into the workers' next queue slots (positions from shared-memory
  atomics on the per-worker push counts), every lane fences once, then the lanes publish each
  touched queue's head (its final count) with relaxed stores -- one fence per batch, not per
  task (a release store per task cost ~0.6 us each: the decoder layer took 1140 us).  The warp
  is the only producer of every queue;
* worker w pops its `n_w` tasks in turn: thread 0 waits until the head passes the position
  (`mx::mpk_pop`, ld.acquire.gpu, the same back-off and watchdog as an event wait), reads the
  slot and hands it to the block through shared memory; the task runs with a disarmed gate
  (its dependencies are met; the ring-prologue loads still issue first) and triggers its
  events as in the other modes.

The assignment stays static (passes/mpk/assign.py, visible in the IR as each task's worker):
the scheduler decides *when* a task is handed over, not *where*.  Queue heads are 64-bit and
monotonic (launch g's head runs from g x n_w to (g + 1) x n_w), so the launch replays in a CUDA
graph without resetting them; the scheduler zeroes its per-worker push counts at its start.

Deadlocks end in the watchdog: the scheduler records error 4 (the event it waits on, its count
and its first consumer) after `mpk.watchdog_ns` without progress; a worker waiting on its queue
records error 3 after twice that, so the scheduler's report, which names the event, comes first.
"""

from __future__ import annotations

from collections.abc import Sequence

QUEUE_WAIT_FACTOR = 2
"""A worker's queue wait gives up after this many watchdog periods (module docstring)."""


def scheduler_tables(
    tasks_wait: Sequence[int], task_worker: Sequence[int], num_events: int
) -> list[tuple[str, str, list[int]]]:
    """(C type, name, values) of the scheduler's tables: the tasks without a wait
    (`sched_initial`), each event's consumers (`ev_cons_off` [events + 1], `ev_cons`, in task
    order) and each task's worker (`task_worker`)."""
    consumers: list[list[int]] = [[] for _ in range(num_events)]
    for t, e in enumerate(tasks_wait):
        if e >= 0:
            consumers[e].append(t)
    off = [0]
    for c in consumers:
        off.append(off[-1] + len(c))
    return [
        ("unsigned", "sched_initial", [t for t, e in enumerate(tasks_wait) if e < 0]),
        ("unsigned", "ev_cons_off", off),
        ("unsigned", "ev_cons", [t for c in consumers for t in c]),
        ("unsigned", "task_worker", list(task_worker)),
    ]


def scheduler_branch(workers: int, num_events: int, num_initial: int, queue_word: int, watchdog: int) -> str:
    """The scheduler CTA's code (printed before the workers' loop; it returns): warp 0 hands
    ready tasks over as the module docstring says, then thread 0 counts the CTA done.  Tables and
    `events`, `state`, `gen`, `w`, `tid`, `mpk_dyn_smem` are the kernel's
    (codegen/megakernel.py); the per-worker push counts live in the scheduler's shared memory."""
    return f"""  if (w == {workers}u) {{  // the scheduler CTA (mpk.dispatch = scheduler)
    unsigned long long* heads = reinterpret_cast<unsigned long long*>(mpk_counters + {queue_word});
    unsigned* slots = mpk_counters + {queue_word + 2 * workers};
    unsigned* pushed = reinterpret_cast<unsigned*>(mpk_dyn_smem);  // per worker, this launch
    if (tid < 32) {{
      const unsigned lane = tid;
      for (unsigned v = lane; v < {workers}u; v += 32) pushed[v] = 0;
      __syncwarp();
      // the lanes write the slots of a batch of ready tasks (positions from shared atomics),
      // fence once, then publish each touched queue's head with its final count
      auto slot_of = [&](unsigned t) {{
        const unsigned v = task_worker[t];
        slots[queue_off[v] + atomicAdd(pushed + v, 1u)] = t;
      }};
      auto head_of = [&](unsigned t) {{
        const unsigned v = task_worker[t];
        mx::mpk_st_relaxed(heads + v, gen * (queue_off[v + 1] - queue_off[v]) + pushed[v]);
      }};
      for (unsigned i = lane; i < {num_initial}u; i += 32) slot_of(sched_initial[i]);
      __syncwarp();
      __threadfence();  // each lane: every slot written above before the heads below (a release pattern)
      for (unsigned i = lane; i < {num_initial}u; i += 32) head_of(sched_initial[i]);
      unsigned e = lane;  // this lane's next event
      unsigned long long t0 = mx::mpk_globaltimer();
      while (true) {{
        const bool live = e < {num_events}u;
        if (!__any_sync(0xffffffffu, live)) break;
        const bool ready = live && mx::mpk_ld_acquire(events + e) >= (gen + 1ull) * event_count[e];
        const unsigned ball = __ballot_sync(0xffffffffu, ready);
        if (ball) {{  // the consumers of every event reached in this round, as one batch
          for (unsigned b = ball; b; b &= b - 1) {{
            const unsigned ev = __shfl_sync(0xffffffffu, e, __ffs(b) - 1);
            for (unsigned c = ev_cons_off[ev] + lane; c < ev_cons_off[ev + 1]; c += 32) slot_of(ev_cons[c]);
          }}
          __syncwarp();
          __threadfence();
          for (unsigned b = ball; b; b &= b - 1) {{
            const unsigned ev = __shfl_sync(0xffffffffu, e, __ffs(b) - 1);
            for (unsigned c = ev_cons_off[ev] + lane; c < ev_cons_off[ev + 1]; c += 32) head_of(ev_cons[c]);
          }}
          __syncwarp();
          if (ready) e += 32;
          t0 = mx::mpk_globaltimer();
          continue;
        }}
        // decided by lane 0 for the whole warp: the lanes leave the loop together
        if (__shfl_sync(0xffffffffu, *reinterpret_cast<volatile unsigned long long*>(state + mx::kMpkError) != 0ull, 0)) break;
        if (__shfl_sync(0xffffffffu, mx::mpk_globaltimer() - t0 > {watchdog}ull, 0)) {{
          const unsigned first = __ffs(__ballot_sync(0xffffffffu, live)) - 1;
          const unsigned ev = __shfl_sync(0xffffffffu, e, first);
          if (lane == 0) mx::mpk_schedule_timeout(state, events + ev, gen * event_count[ev], event_count[ev], ev_cons[ev_cons_off[ev]], ev);
          break;
        }}
      }}
    }}
    if (tid == 0) mx::mpk_finish(state, gen, {workers + 1}u);
    return;
  }}
"""


def worker_loop(workers: int, queue_word: int, watchdog: int, cases: str, trace: bool) -> str:
    """Worker w's loop of scheduler dispatch: pop its tasks in turn (thread 0, `mx::mpk_pop`),
    run each with a disarmed gate through the kernel `switch` (`cases`, the table dispatch's),
    then stamp and trigger as the table dispatch does."""
    trace_slot = "trace + 2 * t" if trace else "nullptr"
    trace_end = "      if (tid == 0) trace[2 * t + 1] = mx::mpk_globaltimer();\n" if trace else ""
    return f"""  const unsigned n = queue_off[w + 1] - queue_off[w];
  const unsigned long long* heads = reinterpret_cast<const unsigned long long*>(mpk_counters + {queue_word});
  const unsigned* slots = mpk_counters + {queue_word + 2 * workers} + queue_off[w];
  __shared__ unsigned mpk_task;
  for (unsigned i = 0; i < n; ++i) {{
    if (tid == 0) mpk_task = mx::mpk_pop(heads + w, slots, gen * n, i, state, w, {QUEUE_WAIT_FACTOR * watchdog}ull);
    __syncthreads();
    const unsigned t = mpk_task;
    if (t == ~0u) return;  // the watchdog fired (here, in the scheduler or another worker)
    // pushed once its dependencies were met: the gate has nothing to wait for
    mx::MpkGate gate{{nullptr, 0ull, state, t, ~0u, {watchdog}ull, &mpk_abort, {trace_slot}, &mpk_launch, false}};
    {{
      const unsigned lo = task_lo[t], hi = task_hi[t];
      switch (task_kernel[t]) {{
{cases}
      }}
    }}
{trace_end}    const unsigned t0 = trig_off[t], t1 = trig_off[t + 1];
    if (tid == 0 && t0 < t1) {{
      __threadfence();
      (void)mx::mpk_add_release(events + trig[t0], 1ull);
      for (unsigned j = t0 + 1; j < t1; ++j) mx::mpk_add_relaxed(events + trig[j], 1ull);  // ordered by the fence above
    }}
  }}
"""
