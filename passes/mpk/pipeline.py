"""`mirage-megakernel`: a plain kernel graph -> per-op kernels -> one persistent megakernel.

    mirage-opt graph.mlir -p mirage-megakernel -t cuda

runs `kn-fuse{per-op=true, block-threads=T}` (one kernel per op, lone matmuls included, every
block with T threads: a megakernel runs its tasks with one thread count), then the
`mirage-transpile` passes without fusion and without cute-late-finisher (its split-K
partners wait on each other inside a task, which a megakernel task never does; the grid
sums combine by the last block to arrive instead), then `kn-to-task-graph`.  Options: `threads` (T, default 128, Mirage's block),
`per-op` (false: keep kn-fuse's aggregation, fewer and larger tasks), `workers` and
`blocks-per-task`, `trace`, `watchdog-ms` and `reuse-workspace` (forwarded to
kn-to-task-graph).  Graphs that already hold threadblock
graphs (saved muGraphs) are lowered as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from mirage_xdsl.passes.mpk.task_graph import KnToTaskGraphPass
from mirage_xdsl.passes.pipeline import MirageTranspilePass, fuse_plain_graphs
from mirage_xdsl.target import SM90


@dataclass(frozen=True)
class MirageMegakernelPass(ModulePass):
    """Fuse per op, lower every kernel, build the megakernel's task graph (module docstring)."""

    name = "mirage-megakernel"

    threads: int = 128
    per_op: bool = True
    workers: int = 0
    blocks_per_task: int = 1
    num_sms: int = SM90.num_sms
    trace: bool = False
    watchdog_ms: int = 500
    reuse_workspace: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Fuse the plain kernel graphs of `op` (one group per op with `per_op`), lower every kernel
        with `mirage-transpile{fuse=false}`, then run `kn-to-task-graph` with this pass's options.

        Raises:
            PassFailedException: from any of the three steps (the op and rule named).
        """
        fuse_plain_graphs(ctx, op, per_op=self.per_op, block_threads=self.threads)
        MirageTranspilePass(fuse=False, late_finisher=0).apply(ctx, op)
        KnToTaskGraphPass(
            workers=self.workers,
            blocks_per_task=self.blocks_per_task,
            num_sms=self.num_sms,
            trace=self.trace,
            watchdog_ms=self.watchdog_ms,
            reuse_workspace=self.reuse_workspace,
        ).apply(ctx, op)
