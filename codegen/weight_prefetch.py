"""Weight prefetch across programmatic dependent launch (PDL, sm_90+).

A generated kernel calls `mx::wait_for_prior_grids()` (`griddepcontrol.wait`) before it touches
global memory, because the previous kernel of the stream may still run.  Inputs marked
`kn.weight` (dialects/kn/ops.py `WEIGHT_ATTR`) are promised not to be written by anything
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
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from xdsl.ir import Operation, SSAValue

from mirage_xdsl.dialects import cute


def _is_weight_load(op: Operation, weights: Collection[SSAValue]) -> bool:
    return isinstance(op, cute.CopyG2SOp) and op.mode.data == "async" and op.src in weights


def split_at_dependency_wait(
    ops: Sequence[Operation], weights: Collection[SSAValue], pinned: Collection[Operation]
) -> tuple[list[Operation], list[Operation]]:
    """(ops printed before `wait_for_prior_grids`, ops printed after it) of a kernel body.

    Only a body with a main loop (`cute.for`) and at least one cp.async load of a weight before
    it is split.  Before the wait go, in their order: shared-memory allocations (pointer
    declarations), accumulator initialisations and the weight loads.  Everything else keeps its
    order after the wait.  Ops in `pinned` (the first op of a multi-op form the printer emits
    together, such as a register row chain) are never split off: their presence before the
    loop leaves the body unsplit."""
    first_loop = next((i for i, op in enumerate(ops) if isinstance(op, cute.ForOp)), None)
    if first_loop is None or not weights:
        return [], list(ops)
    prologue = ops[:first_loop]
    if any(op in pinned for op in prologue) or not any(_is_weight_load(op, weights) for op in prologue):
        return [], list(ops)
    early = [op for op in prologue if isinstance(op, (cute.SmemAllocOp, cute.MmaInitOp)) or _is_weight_load(op, weights)]
    late = [op for op in prologue if op not in early]
    return early, late + list(ops[first_loop:])


def triggers_dependents(kernel: cute.KernelOp, weights: Collection[SSAValue]) -> bool:
    """Whether `kernel` triggers its dependent grid at its start: it has a loop and streams at
    least one weight in it."""
    loops = [op for op in kernel.body.block.ops if isinstance(op, cute.ForOp)]
    return bool(loops) and any(_is_weight_load(op, weights) for loop in loops for op in loop.body.block.ops)
