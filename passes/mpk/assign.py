"""Static worker assignment of megakernel tasks: a cost model and list scheduling.

Cost of a task (ns): `TASK_OVERHEAD_NS` + bytes it moves / `SM_BYTES_PER_NS`.  The bytes are
its footprint (reads + writes); the per-SM bandwidth is the measured H100 copy bandwidth
(~3.0 TB/s, shared/reference/next-anchors.md, "Measured on one NVIDIA H100") over its 132
SMs; the overhead (event wait, dispatch, the block's prologue) is an assumption of this
model, not a measurement.  Compute is not modelled: the megakernel's first workloads are
memory- and latency-bound (batch 1 decode, seed 003's small tasks).

List scheduling (earliest start, region order): tasks are taken in the graph's linear
order; a task is ready `EVENT_LATENCY_NS` after its last producer ends and goes to the
worker on which it can start first (ties: the lowest worker id, so a chain stays on one
worker and its events stay hot in one SM's path).  Each worker's queue is its tasks in
region order, which keeps every producer ahead of its consumers on each queue.

Deferral of tasks with slack: a task off the critical path (its slack -- how long it may start
after its earliest start without lengthening the graph's critical path, both from these costs
without contention -- exceeds its own cost) that becomes ready while at least `num_sms` workers
are busy (one streaming task per SM saturates the memory bandwidth in this model) does not
take an idle worker: it queues behind the busy worker that frees first, as long as that start
is within its slack.  Started on an idle worker it would share the bandwidth with the tasks
on the critical path and delay them; queued, it streams when they are done, beside the
latency-bound tasks after them (the K and V projections of a decoder layer, graph outputs
that nothing in the layer reads, run beside its attention instead of beside the Q projection).

SM-aware ties (`num_sms`, when the workers are a whole number per SM): worker w runs on SM
w % num_sms (the megakernel maps its CTAs so, codegen/megakernel.py), and among the workers
free when a task is ready the one on the least loaded SM wins -- the SM whose other workers
have the least estimated work left.  The workers of one SM share its bandwidth, so tasks
piled on one SM finish late: seed 003's decoder layer on an H200 (2026-11-26, trace with
%smid) ran its 384 gated-MLP tasks 2, 3 or 4 to an SM with median durations 48.9, 56.6 and
63.5 us under the plain lowest-id ties.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

SM_BYTES_PER_NS = 3.0e12 / 132 / 1e9
"""~22.7 B/ns: 3.0 TB/s measured copy bandwidth (next-anchors.md, H100) / 132 SMs."""
TASK_OVERHEAD_NS = 300
"""Assumed fixed cost of one task (wait, dispatch, prologue); model assumption."""
EVENT_LATENCY_NS = 500
"""Assumed delay from a producer's release to its consumer's acquire (an L2 round trip plus
the back-off sleep); model assumption."""


def task_cost_ns(nbytes: int) -> int:
    """Estimated run time (ns) of a task moving `nbytes` bytes of global memory."""
    return int(TASK_OVERHEAD_NS + nbytes / SM_BYTES_PER_NS)


@dataclass(frozen=True)
class Assignment:
    """Worker and estimated start (ns) of every task, and the estimated makespan (ns)."""

    worker: list[int]
    start_ns: list[int]
    makespan_ns: int


def assign_workers(
    costs: Sequence[int], deps: Sequence[Sequence[int]], workers: int, num_sms: int = 0, slots: int = 0
) -> Assignment:
    """List-schedule tasks `0..n-1` (a topological order: `deps[t]` < t) on `workers`; with
    `num_sms` dividing the CTA slots the workers are numbered over (`slots`, default
    `workers`; one more under scheduler dispatch, whose scheduler takes the last), ties go to
    the least loaded SM (module docstring).

    Raises:
        ValueError: a dependency does not precede its task, or workers < 1."""
    if workers < 1:
        raise ValueError(f"assign_workers: need at least one worker, got {workers}")
    sms = sm_major(slots or workers, num_sms)
    latest = latest_starts(costs, deps)
    saturated = num_sms if num_sms > 0 else workers + 1
    free = [(0, w) for w in range(workers)]  # (time the worker is free, worker)
    heapq.heapify(free)
    free_at = [0] * workers
    finish: list[int] = []
    worker: list[int] = []
    start: list[int] = []
    for t, cost in enumerate(costs):
        ready = 0
        for p in deps[t]:
            if p >= t:
                raise ValueError(f"assign_workers: task {t} depends on the later task {p}")
            ready = max(ready, finish[p] + EVENT_LATENCY_NS)
        w = _deferral_worker(free_at, ready, latest[t], saturated)
        if w is not None:
            s = free_at[w]
            start.append(s)
            finish.append(s + cost)
            worker.append(w)
            free_at[w] = s + cost
            free = [(f, v) for f, v in free if v != w]
            free.append((s + cost, w))
            heapq.heapify(free)
            continue
        # the earliest-free worker; among workers already free at `ready`, the lowest id
        popped = []
        while free and free[0][0] <= ready:
            popped.append(heapq.heappop(free))
        if popped:
            if sms and len(popped) > 1:
                loads = {sm: _sm_load(free_at, sm, sms, ready) for sm in {w % sms for _, w in popped}}
                popped.sort(key=lambda fw: (loads[fw[1] % sms], fw[1]))
            else:
                popped.sort(key=lambda fw: fw[1])
            t_free, w = popped[0]
            for item in popped[1:]:
                heapq.heappush(free, item)
        else:
            t_free, w = heapq.heappop(free)
        s = max(t_free, ready)
        start.append(s)
        finish.append(s + cost)
        worker.append(w)
        free_at[w] = s + cost
        heapq.heappush(free, (s + cost, w))
    return Assignment(worker, start, max(finish, default=0))


def latest_starts(costs: Sequence[int], deps: Sequence[Sequence[int]]) -> list[int]:
    """Per task, the latest start (ns) that keeps the graph's critical path (costs plus
    `EVENT_LATENCY_NS` per edge, no contention, unlimited workers) as short as it is: a task on
    the critical path may start no later than its earliest start.

    Raises:
        ValueError: a dependency does not precede its task."""
    n = len(costs)
    earliest = [0] * n
    consumers: list[list[int]] = [[] for _ in range(n)]
    for t in range(n):
        for p in deps[t]:
            if p >= t:
                raise ValueError(f"assign_workers: task {t} depends on the later task {p}")
            earliest[t] = max(earliest[t], earliest[p] + costs[p] + EVENT_LATENCY_NS)
            consumers[p].append(t)
    span = max((earliest[t] + costs[t] for t in range(n)), default=0)
    latest = [0] * n
    for t in range(n - 1, -1, -1):
        latest[t] = min((latest[c] - EVENT_LATENCY_NS for c in consumers[t]), default=span) - costs[t]
    return latest


def _deferral_worker(free_at: list[int], ready: int, latest_start: int, saturated: int) -> int | None:
    """The busy worker a task ready at `ready` queues behind (module docstring): the one that
    frees first, when at least `saturated` workers are busy at `ready` and it frees by
    `latest_start`; else None."""
    busy = [(f, w) for w, f in enumerate(free_at) if f > ready]
    if len(busy) < saturated:
        return None
    f, w = min(busy)
    return w if f <= latest_start else None


def sm_major(workers: int, num_sms: int) -> int:
    """`num_sms` if `workers` is a whole number (> 1) of workers per SM, so that worker w can run
    on SM w % num_sms, else 0 (no SM-aware placement)."""
    return num_sms if num_sms > 0 and workers % num_sms == 0 and workers > num_sms else 0


def _sm_load(free_at: list[int], w: int, sms: int, now: int) -> int:
    """Estimated work (ns) left at `now` on the SM of worker `w` (workers w mod `sms`)."""
    return sum(max(0, free_at[v] - now) for v in range(w % sms, len(free_at), sms))
