"""How the megakernel's workers find their tasks (`mpk.dispatch`, dialects/mpk/ops.py).

The assignment is static (passes/mpk/assign.py), so a worker's task sequence is known when the
kernel is printed.  Three ways to print it, from the smallest code to the fastest dispatch:

* `table`: every worker loops over its queue in `__constant__` tables and switches on the
  task's kernel.  Code size does not grow with the task count, but each task pays dependent
  table loads, an indirect branch and the first fetch of its switch case: ~0.3 us between two
  tasks of one worker;
* `straight`: each worker's tasks printed in order, as calls with literal arguments;
* `inline`: `straight` with the task bodies inlined at every call, so code grows with
  tasks x body size.

Measured on an H200 (2026-11-27, examples/megakernel, one process): seed 003's 40 dependent
tasks (one worker) 30.0 / 18.6 / 12.8 us for table / straight / inline; chain3 (260 tasks)
13.5 / 12.4 / 11.8 us, inline compiling in 28 s against 2.5 s; the decoder layer (1794 tasks,
1.1 MB of source straight-line, 43 s of nvcc) 118.4 us with tables and 130.3 us straight-line,
whose 1.3 MB of code misses the instruction caches.  `choose_dispatch` follows: inline for a
few dozen tasks, straight-line for a few hundred, tables beyond.

A fourth mode, `scheduler`, is taken only on request (`dispatch=scheduler`): seed 003's run-time
dispatch, a scheduler CTA that hands each task to its worker's queue once its dependencies are
met (codegen/megakernel_scheduler.py).  It is slower on every workload measured (H200,
2026-11-27, µs, scheduler / static): the decoder layer 202 / 120, at batch 8 280 / 151, chain40
127 / 12.3, chain3 32.6 / 12.3 -- a hand-over costs ~3 µs (the producer's release, the
scheduler's poll, its fence, the worker's acquire), and a task handed over only once ready can
no longer issue its ring-prologue weight loads while it waits.
"""

from __future__ import annotations

INLINE_MAX_TASKS = 64
"""Task graphs with at most this many tasks inline the bodies (`inline`; module docstring)."""
STRAIGHT_MAX_TASKS = 512
"""Task graphs with at most this many tasks print straight-line worker programs (`straight`)."""


def choose_dispatch(num_tasks: int) -> str:
    """The `mpk.dispatch` mode for a graph of `num_tasks` tasks (module docstring)."""
    if num_tasks <= INLINE_MAX_TASKS:
        return "inline"
    if num_tasks <= STRAIGHT_MAX_TASKS:
        return "straight"
    return "table"
