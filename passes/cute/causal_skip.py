"""`cute-causal-skip`: a causal flash kernel walks only the key tiles up to its diagonal.

The attributes and the arithmetic are described in dialects/cute/causal_skip.py; this pass
decides which kernels get them and writes them.  A `cute.kernel` qualifies when

- its body has exactly one `cute.for`, and no `cute.grid_sum` (a split loop's blocks share
  one key range);
- the loop body holds only copies into shared memory, cp.async commits and waits, barriers
  and exactly one online `cute.mma_chain` carrying a causal mask -- nothing else that an
  iteration past the diagonal would still have to compute;
- the mask's row origin does not move with the iteration and its column origin is the
  iteration alone, one key tile (`mask_cols = (0, 0, 0, BK)` with BK = the chain's keys).

Then, with BM the chain's query rows and `offset` the mask's:

- the `cute.for` gets `cute.causal_trips = (row coefficients, BM + offset, BK)`: the loop
  stops after the last key tile holding a kept element (the loads of the ring prologue and of
  the loop are guarded by the same runtime count, so every commit group past it is empty and
  the ring drains as before);
- the chain gets `cute.mask_from = (row coefficients, offset + 1, BK)`: the key tiles fully
  below the diagonal run without the per-element mask, only the diagonal ones with it;
- the kernel gets `cute.heavy_first = axis` when its grid has more blocks than the device has
  SMs (option `num-sms`) and option `heavy-first` is on: on the grid axis of the query blocks
  (the largest row coefficient) the heavier half of the blocks is dispatched first, heaviest
  first (longest-processing-time first, Graham 1969), then the lighter half lightest first,
  which pairs a heavy and a light block on an SM that holds two (the order and its
  measurement: dialects/cute/causal_skip.py).

Kernels that do not qualify are left as they are (the printer walks every key tile then).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.passes import ModulePass

from mirage_xdsl.dialects import cute
from mirage_xdsl.dialects.cute.causal_skip import CAUSAL_TRIPS, HEAVY_FIRST, MASK_FROM, BlockBound
from mirage_xdsl.target import SM90

_LOOP_OPS = (cute.CopyG2SOp, cute.CpAsyncCommitOp, cute.CpAsyncWaitOp, cute.BarrierOp, cute.YieldOp)


@dataclass(frozen=True)
class CausalSkipPass(ModulePass):
    """Bound the key loop of every causal flash kernel by its diagonal (module docstring)."""

    name = "cute-causal-skip"

    num_sms: int = SM90.num_sms
    """SMs of the device; a grid with more blocks than this walks its query blocks heaviest first."""
    heavy_first: bool = True
    """Write `cute.heavy_first` on kernels whose grid has more blocks than `num_sms`."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Mark every qualifying `cute.kernel` in `op` (`mark_kernel`).

        Raises:
            Nothing: a kernel that does not qualify is left unchanged.
        """
        for kernel in op.walk():
            if isinstance(kernel, cute.KernelOp):
                mark_kernel(kernel, self.num_sms if self.heavy_first else None)


def masked_chain(kernel: cute.KernelOp) -> tuple[cute.ForOp, cute.MmaChainOp] | None:
    """(the loop, its masked online chain) of a kernel that qualifies (module docstring), else None."""
    loops = [o for o in kernel.body.block.ops if isinstance(o, cute.ForOp)]
    if len(loops) != 1 or any(isinstance(o, cute.GridSumOp) for o in kernel.walk()):
        return None
    body = list(loops[0].body.block.ops)
    chains = [o for o in body if isinstance(o, cute.MmaChainOp)]
    if len(chains) != 1 or any(not isinstance(o, (*_LOOP_OPS, cute.MmaChainOp)) for o in body):
        return None
    chain = chains[0]
    mask = chain.mask
    if chain.online is None or mask is None:
        return None
    _, rows, cols = mask
    total = chain.sum.type
    assert isinstance(total, cute.FragmentType)
    keys = total.get_shape()[1]
    if rows[3] != 0 or tuple(cols) != (0, 0, 0, keys):
        return None
    return loops[0], chain


def mark_kernel(kernel: cute.KernelOp, num_sms: int | None) -> None:
    """Write the attributes of the module docstring on a qualifying `kernel` (`num_sms`: None
    = never reorder the blocks)."""
    found = masked_chain(kernel)
    if found is None:
        return
    loop, chain = found
    mask = chain.mask
    assert mask is not None
    offset, rows, _ = mask
    bm, bk = chain.sum.type.get_shape()  # type: ignore[attr-defined]
    coefs = (rows[0], rows[1], rows[2])
    loop.attributes[CAUSAL_TRIPS] = BlockBound(coefs, bm + offset, bk).attr()
    chain.attributes[MASK_FROM] = BlockBound(coefs, offset + 1, bk).attr()
    grid = kernel.grid
    axis = max(range(3), key=lambda a: (coefs[a], -a))
    if num_sms is not None and math.prod(grid) > num_sms and coefs[axis] > 0 and grid[axis] > 1:
        kernel.attributes[HEAVY_FIRST] = IntegerAttr(axis, i64)
