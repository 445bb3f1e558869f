"""`cute-late-finisher`: split-K grid sums combined by a late finisher with unequal splits.

A split-K kernel (`cute.grid_sum` over grid axis d, `split` blocks per group) normally gives
every block the same K range, and every block stores its partials and arrives at the group's
counter; the last to arrive sums the slots.  All blocks then end together, and the combine
(store, atomic, L2 loads of every slot) sits on the grid's tail.  This pass hands `shift`
iterations of each of the first `split - 1` blocks (the partners) to the last one (the
finisher): the partners end their loops earlier, publish their partials and leave, and the
finisher, whose loop is still running, has its partners' words in flight before it ends
(`cute.grid_sum` `partner_trips`, printed by codegen/grid_sum_printer.py with the device side in
codegen/include/mirage_xdsl/grid.cuh).  With option `evict-first`, the kn.weight streams of
such a kernel load with an L2 evict_first policy (`cute.l2_evict_first`), so the partner
words, kept evict_last, stay in L2 under them; it is off by default because ptxas (CUDA
13.0) miscompiles some of these kernels: it gives the policy-carrying cp.async memory
descriptor an odd uniform-register pair (`LDGSTS ... desc[UR1]` in the SASS), which faults
with an illegal instruction.  The genetic tuner found this on an H100 (2026-11-25) for
rmsnorm_linear with 8 cp.async stages (shift 1 and 2) and 4 stages (shift 2); every failing
kernel had an odd descriptor pair and every passing one only even pairs (compute-sanitizer
put the fault on that instruction).  Without the policy the descriptor is a constant and
all 21 stage/shift combinations ran correctly; the policy was worth 0.3-0.4 us on
rmsnorm bs8 on an H200.

On rmsnorm bs8 (X [16, 4096] @ W [4096, 6144], 96 x 4 blocks, 16 iterations each), one stage
per partner (15 / 15 / 15 / 19) took a hand-written version from 15.1 to 13.3-13.4 us on an
H200, and equal splits with the same protocol were slower (15.7 us): the gain is the
partners publishing about 1 us early (2026-11-25).

Option `shift` (default 1): iterations each partner hands over; kernels whose loop has no
more than `shift` iterations, or whose finisher would hold more than `MAX_PARTNER_WORDS`
partner words per thread, are left as they are.  Run after convert-tb-to-cute
(`mirage-transpile` does by default, `tuning="late_finisher=N"`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, UnitAttr, i64
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from mirage_xdsl.dialects import cute, kn


@dataclass(frozen=True)
class LateFinisherPass(ModulePass):
    """Give every split-K `cute.grid_sum` a late finisher (`partner_trips`)."""

    name = "cute-late-finisher"

    shift: int = 1
    evict_first: bool = False
    """Mark the kernel's weight streams `cute.l2_evict_first` (see the module docstring for
    why it is off by default)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Give the grid sum of every qualifying `cute.kernel` in `op` a late finisher (`rewrite_kernel`).

        Raises:
            PassFailedException: `shift` < 1.
        """
        if self.shift < 1:
            raise PassFailedException(f"{self.name}: shift must be at least 1, got {self.shift}")
        for fn in op.walk():
            if not isinstance(fn, func.FuncOp):
                continue
            weights = kn.weight_inputs(fn)
            for kernel in fn.walk():
                if isinstance(kernel, cute.KernelOp):
                    self.rewrite_kernel(kernel, weights)

    def rewrite_kernel(self, kernel: cute.KernelOp, weight_args: frozenset[int]) -> None:
        """Set `partner_trips = trips - shift` on the kernel's `cute.grid_sum`, if it qualifies.

        It qualifies with one top-level `cute.for` of more than `shift` trips, no partial-iteration
        offset on the grid-sum axis, no `partner_trips` yet and at most `MAX_PARTNER_WORDS` partner
        words per thread.  With `evict_first`, the async copies of the kernel parameters in
        `weight_args` (kn.weight func arguments) get `cute.l2_evict_first`.

        Raises:
            VerifyException: the updated `cute.grid_sum` fails its verifier.
        """
        grid_sum = next((o for o in kernel.walk() if isinstance(o, cute.GridSumOp)), None)
        loops = [o for o in kernel.body.block.ops if isinstance(o, cute.ForOp)]
        if grid_sum is None or grid_sum.partner_trip_count is not None or len(loops) != 1:
            return
        trips = loops[0].trip_count
        if trips <= self.shift or cute.partial_iteration_offset(kernel, grid_sum.grid_axis, trips) is not None:
            return
        if partner_words_per_thread(kernel, grid_sum) > MAX_PARTNER_WORDS:
            return
        grid_sum.partner_trips = IntegerAttr(trips - self.shift, i64)
        grid_sum.verify()
        if not self.evict_first:
            return
        streams = cute.weight_params(kernel, weight_args)
        for copy in kernel.walk():
            if isinstance(copy, cute.CopyG2SOp) and copy.mode.data == "async" and copy.src in streams:
                copy.attributes[cute.L2_EVICT_FIRST] = UnitAttr()


MAX_PARTNER_WORDS = 32
"""Registers per thread the finisher may spend on its partners' words, which it holds across
its last iteration.  rmsnorm bs8's 8-way splits need 63 and 119: their kernels spilled, and
ptxas (CUDA 13.0) then addressed a cp.async descriptor as an odd uniform register pair
(desc[UR1]), an illegal instruction on the H200; the 4-way split needs 27."""


def partner_words_per_thread(kernel: cute.KernelOp, grid_sum: cute.GridSumOp) -> int:
    """Words of the partners' tiles one finisher thread loads: (split - 1) x its elements."""
    nt = kernel.num_threads
    mine = sum(-(-math.prod(cute.smem_shape(v)) // nt) for v in grid_sum.ins)
    return (kernel.grid[grid_sum.grid_axis] - 1) * mine

