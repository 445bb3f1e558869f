"""`mirage-megakernel`: a plain kernel graph -> per-op kernels -> one persistent megakernel.

    mirage-opt graph.mlir -p mirage-megakernel -t cuda

runs `kn-fuse{per-op=true, block-threads=T, share-sms=true}` (one kernel per op, lone matmuls
included, every block with T threads: a megakernel runs its tasks with one thread count; the
kernels of one dependency level planned for their shares of the SMs, as they run side by
side), then the
`mirage-transpile` passes without fusion and without cute-late-finisher (its split-K
partners wait on each other inside a task, which a megakernel task never does; the grid
sums combine by the last block to arrive instead), `cute-weight-prefetch{inputs-ready}` (a
task issues the prologue loads of any graph input, not only of kn.weight ones, before its
dependency wait), then `kn-to-task-graph`.  Options: `threads` (T, default 128, Mirage's block),
`per-op` (false: keep kn-fuse's aggregation, fewer and larger tasks), `ctas-per-sm` (the
worker CTAs each SM should hold: every kernel is planned within that share of the SM's shared
memory, `worker_smem_budget`; 0 plans with the per-block limit), `workers` and
`blocks-per-task`, `trace`, `watchdog-ms`, `reuse-workspace` and `dispatch` (forwarded to
kn-to-task-graph).  Graphs that already hold threadblock
graphs (saved muGraphs) are lowered as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from mirage_xdsl.passes.cute.weight_prefetch import WeightPrefetchPass
from mirage_xdsl.passes.mpk.task_graph import SMEM_MARGIN, KnToTaskGraphPass
from mirage_xdsl.passes.pipeline import MirageTranspilePass, fuse_plain_graphs
from mirage_xdsl.target import SM90

DEFAULT_CTAS_PER_SM = 3
"""Worker CTAs per SM the megakernel plans for by default.  One 128-thread CTA per SM keeps too
few loads in flight to stream weights (seed 003's decoder layer: ~1.4 TB/s with one worker per
SM on an H200); three leave each task 74 KiB of shared memory, so the projections keep the
deep rings and tiles their standalone kernels have.  Issue #32's decoder layer with three
against four workers per SM (share-sms on, one process per GPU, 2026-11-26): H100 154.5 vs
158.9 us (batch 8: 197.8 vs 211.7, four layers 624.7 vs 636.2); H200 116.5 vs 118.7 (146.5 vs
160.1, 473.3 vs 485.2); the 40-task chain of one-block tasks is 2 % faster with four (H200
28.9 vs 29.4 us)."""


def worker_smem_budget(ctas_per_sm: int) -> int:
    """Shared memory (bytes) one task may plan so that `ctas_per_sm` worker CTAs fit one SM:
    the SM's shared memory / CTAs, less the per-block reservation (CUDA C++ Programming Guide,
    "Shared Memory" of compute capability 9.0) and the printer's appended scratch (SMEM_MARGIN).

    Raises:
        ValueError: `ctas_per_sm` < 1."""
    if ctas_per_sm < 1:
        raise ValueError(f"mirage-megakernel: ctas-per-sm must be at least 1, got {ctas_per_sm}")
    return min(SM90.smem_for_blocks(ctas_per_sm) - SMEM_MARGIN, SM90.smem_per_block_optin)


@dataclass(frozen=True)
class MirageMegakernelPass(ModulePass):
    """Fuse per op, lower every kernel, build the megakernel's task graph (module docstring)."""

    name = "mirage-megakernel"

    threads: int = 128
    per_op: bool = True
    ctas_per_sm: int = DEFAULT_CTAS_PER_SM
    workers: int = 0
    blocks_per_task: int = 1
    num_sms: int = SM90.num_sms
    trace: bool = False
    watchdog_ms: int = 500
    reuse_workspace: bool = False
    dispatch: str = "auto"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Fuse the plain kernel graphs of `op` (one group per op with `per_op`), lower every kernel
        with `mirage-transpile{fuse=false}`, then run `kn-to-task-graph` with this pass's options.

        Raises:
            PassFailedException: from any of the three steps (the op and rule named).
        """
        limit = worker_smem_budget(self.ctas_per_sm) if self.ctas_per_sm else SM90.smem_per_block_optin
        # every kernel becomes a task of the persistent workers: none may be an sm_90a library-like
        # kernel of its own (the flash-attention kernel keeps no task protocol)
        fuse_plain_graphs(
            ctx, op, per_op=self.per_op, block_threads=self.threads, smem_limit=limit, share_sms=True, hopper_attention=False
        )
        MirageTranspilePass(fuse=False, smem_limit=limit, tuning="late_finisher=0").apply(ctx, op)
        # a task may load any graph input before its dependency wait (nothing in the launch writes one)
        WeightPrefetchPass(inputs_ready=True).apply(ctx, op)
        KnToTaskGraphPass(
            workers=self.workers,
            blocks_per_task=self.blocks_per_task,
            num_sms=self.num_sms,
            trace=self.trace,
            watchdog_ms=self.watchdog_ms,
            reuse_workspace=self.reuse_workspace,
            dispatch=self.dispatch,
        ).apply(ctx, op)
