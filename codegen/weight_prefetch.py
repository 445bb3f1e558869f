"""Weight prefetch across programmatic dependent launch (PDL, sm_90+).

A generated kernel calls `mx::wait_for_prior_grids()` (`griddepcontrol.wait`) before it touches
global memory, because the previous kernel of the stream may still run.  Inputs marked
`kn.weight` (dialects/kn/tensors.py `WEIGHT_ATTR`) are promised not to be written by anything
queued before the launch, so a kernel may issue the cp.async loads of its ring prologue for
them *before* the wait: while the previous grid finishes its epilogue (a grid-sum combine, the
output stores), this grid's first stages of W are already streaming.

Three parts work together; on an H200 (2026-11-25) they took rmsnorm bs1 from 16.0 to 14.9 µs
and bs8 from 17.2 to 16.8, and any one part alone gained nothing or lost:

- `split_at_dependency_wait`: the kernel's top-level ops before its main loop, in the order
  "declarations and weight prologue loads" / wait / "everything else".  The cp.async commit
  groups are unchanged: the hoisted loads join the first group committed after the wait, which
  the first iteration waits for anyway.
- `triggers_dependents`: a kernel that streams weights calls `griddepcontrol.launch_dependents`
  at its start, before its wait.  The next grid is then launched at once, and its blocks take
  the SM slots of this grid's blocks as those exit, each prefetching its weights there.  Without
  a trigger the next grid starts only when every block has exited, and there is nothing to
  overlap; triggered after the main loop (the first version), it waits for this grid's slowest
  block, whose loop ends about 2 µs after the median one: 0.2-0.6 µs slower per launch
  (H200, 2026-11-25).
- `KernelLaunch.one_wave` (runtime): such a kernel is launched with its dynamic shared memory
  raised so that no SM holds more than ceil(blocks / SMs) of its blocks.  Without the cap, the
  early-launched grid's blocks pile onto the SMs that have room while this grid still runs, and
  the uneven placement cost 0.5-3 µs (trigger alone: rmsnorm bs1 15.7 -> 16.3 µs).

The choices are made by the `cute-weight-prefetch` pass (passes/cute/weight_prefetch.py) and
read here from the IR: `cute.before_pdl_wait` on the ops printed before the wait,
`cute.trigger_dependents` on a kernel that triggers at its start (and launches one wave at a
time), `cute.pdl_prefetch` on every kernel once the pass has run.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import Operation

from mirage_xdsl.dialects import cute


def split_at_dependency_wait(ops: Sequence[Operation]) -> tuple[list[Operation], list[Operation]]:
    """(ops printed before `wait_for_prior_grids`, ops printed after it) of a kernel body,
    in their order: the ops marked `cute.before_pdl_wait` and the others."""
    early = [op for op in ops if cute.BEFORE_PDL_WAIT in op.attributes]
    return early, [op for op in ops if cute.BEFORE_PDL_WAIT not in op.attributes]


def split_task_prologue(ops: Sequence[Operation]) -> tuple[list[Operation], list[Operation], list[Operation]]:
    """(ops printed before the worker's wait for the previous grid, ops printed before the
    task's dependency wait, the others) of a megakernel task body, in their order: the ops
    marked `cute.before_grid_wait`, the other ops marked `cute.before_pdl_wait`, the rest.
    The commit groups stay as they are (see `split_at_dependency_wait`)."""
    early, late = split_at_dependency_wait(ops)
    grid = [op for op in early if cute.BEFORE_GRID_WAIT in op.attributes]
    return grid, [op for op in early if cute.BEFORE_GRID_WAIT not in op.attributes], late


def triggers_dependents(kernel: cute.KernelOp) -> bool:
    """Whether `kernel` triggers its dependent grid at its start (`cute.trigger_dependents`)."""
    return cute.TRIGGER_DEPENDENTS in kernel.attributes
