"""`cute-weight-prefetch`: kn.weight loads issued before the PDL wait, and the early trigger.

The design (and its measurements) is described in codegen/weight_prefetch.py, which prints
it; this pass makes the choices and writes them into the IR (dialects/cute/kernel.py):

- the ops of a kernel printed before `mx::wait_for_prior_grids()` carry
  `cute.before_pdl_wait` (unit): in a body with a main loop (`cute.for`) and at least one
  cp.async load of a kn.weight parameter before it, the shared-memory allocations, the
  accumulator initialisations and those weight loads of the prologue.  A prologue holding a
  `cute.elementwise` or `cute.reduce` is left unsplit: such an op may start a register row
  chain (passes/cute/row_chains.py), which the printer emits as one piece after the wait;
- a kernel that streams a weight in its loop carries `cute.trigger_dependents` (unit): it
  calls `griddepcontrol.launch_dependents` at its start and, under PDL, is launched one wave
  at a time (`KernelLaunch.one_wave`);
- every kernel carries `cute.pdl_prefetch = i64`, the number of weight loads it hoists (0 =
  none), which says that the decision was made.

With `inputs-ready` (mirage-megakernel: every graph input is read-only while the megakernel
runs) the ops before a task's dependency wait are those of the ring prologue's loads of every
graph input, and the subset that `cute.before_pdl_wait` would mark for the kn.weight inputs
alone also carries `cute.before_grid_wait`: a worker's first task issues them before it waits
for the previous grid (codegen/megakernel.py), since only weights are never written by an
earlier launch.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, UnitAttr, i64
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from mirage_xdsl.dialects import cute, kn


@dataclass(frozen=True)
class WeightPrefetchPass(ModulePass):
    """Mark the weight prefetch and the early trigger of every `cute.kernel` (module
    docstring)."""

    name = "cute-weight-prefetch"

    inputs_ready: bool = False
    """Treat every graph input as a weight: for a persistent megakernel, which is launched
    without PDL, so nothing writes a graph input while it runs (its tasks hoist the prologue
    loads of, e.g., a KV cache above their dependency wait too)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Mark every `cute.kernel` of every func in `op`, given the kernel parameters that are
        the func's kn.weight inputs (all its inputs with `inputs_ready`).

        Raises:
            Nothing.
        """
        for fn in op.walk():
            if not isinstance(fn, func.FuncOp):
                continue
            weight_args = kn.weight_inputs(fn)
            ready_args = set(range(len(fn.args))) if self.inputs_ready else weight_args
            for kernel in fn.walk():
                if isinstance(kernel, cute.KernelOp):
                    before_grid = cute.weight_params(kernel, weight_args) if self.inputs_ready else ()
                    mark_kernel(kernel, cute.weight_params(kernel, ready_args), before_grid)


def mark_kernel(kernel: cute.KernelOp, weights: Collection[SSAValue], grid_weights: Collection[SSAValue] = ()) -> None:
    """Write the attributes of the module docstring on `kernel` and its ops, replacing those
    of an earlier run: `weights` are the parameters whose prologue loads go before the wait,
    `grid_weights` (a subset; megakernel tasks) those whose loads also go before the wait for
    the previous grid."""
    ops = list(kernel.body.block.ops)
    early = set(hoisted_ops(ops, weights))
    before_grid = set(hoisted_ops(ops, grid_weights)) if grid_weights else set()
    # a re-run decides anew (mirage-megakernel re-runs the pass with every input ready)
    for op in ops:
        for attr, marked in ((cute.BEFORE_PDL_WAIT, early), (cute.BEFORE_GRID_WAIT, before_grid)):
            if op in marked:
                op.attributes[attr] = UnitAttr()
            else:
                op.attributes.pop(attr, None)
    if triggers_dependents(kernel, weights):
        kernel.attributes[cute.TRIGGER_DEPENDENTS] = UnitAttr()
    else:
        kernel.attributes.pop(cute.TRIGGER_DEPENDENTS, None)
    loads = sum(1 for op in early if _is_weight_load(op, weights))
    kernel.attributes[cute.PDL_PREFETCH] = IntegerAttr(loads, i64)


def _is_weight_load(op: Operation, weights: Collection[SSAValue]) -> bool:
    return isinstance(op, cute.CopyG2SOp) and op.mode.data == "async" and op.src in weights


def hoisted_ops(ops: Sequence[Operation], weights: Collection[SSAValue]) -> list[Operation]:
    """The top-level ops of a kernel body to print before the PDL wait, in order (empty:
    the body is not split)."""
    first_loop = next((i for i, op in enumerate(ops) if isinstance(op, cute.ForOp)), None)
    if first_loop is None or not weights:
        return []
    prologue = ops[:first_loop]
    if any(isinstance(op, (cute.ElementwiseOp, cute.ReduceOp)) for op in prologue):
        return []  # a possible register row chain, printed in one piece after the wait
    if not any(_is_weight_load(op, weights) for op in prologue):
        return []
    return [op for op in prologue if isinstance(op, (cute.SmemAllocOp, cute.MmaInitOp)) or _is_weight_load(op, weights)]


def triggers_dependents(kernel: cute.KernelOp, weights: Collection[SSAValue]) -> bool:
    """Whether `kernel` triggers its dependent grid at its start: it has a loop and streams
    at least one weight in it."""
    loops = [op for op in kernel.body.block.ops if isinstance(op, cute.ForOp)]
    return bool(loops) and any(_is_weight_load(op, weights) for loop in loops for op in loop.body.block.ops)
