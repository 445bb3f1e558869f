"""`cute-block-reduce`: how many threads sum each output of a `cute.reduce`.

A `cute.reduce` carries the threads per output convert-tb-to-cute chose (at most a warp,
shuffle-reduced).  A sum whose outputs would occupy at most a quarter of the block's warps
(nTrans: one row sum per 512-thread block) leaves most of the block idle; this pass lets the
whole block reduce each output instead, its warps combining their shuffled sums through one
float per warp of shared memory that the printer appends to the kernel's plan.  The choice is
written on every `cute.reduce` as `cute.reduce_threads = G : i64` (dialects/cute/compute_ops.py
`REDUCE_THREADS`); the CUDA printer reads it and refuses a reduce without it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.passes import ModulePass

from mirage_xdsl.dialects import cute


@dataclass(frozen=True)
class BlockReducePass(ModulePass):
    """Write `cute.reduce_threads` on every `cute.reduce` of every `cute.kernel`."""

    name = "cute-block-reduce"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Set `cute.reduce_threads` (threads per output, `block_reduce_threads`) on every `cute.reduce` in `op`.

        Raises:
            Nothing.
        """
        for kernel in op.walk():
            if not isinstance(kernel, cute.KernelOp):
                continue
            for reduce in kernel.walk():
                if isinstance(reduce, cute.ReduceOp):
                    threads = block_reduce_threads(reduce, kernel.num_threads)
                    reduce.attributes[cute.REDUCE_THREADS] = IntegerAttr(threads, i64)


def block_reduce_threads(op: cute.ReduceOp, nt: int) -> int:
    """Threads per output of a sum or plain max reduction in a block of `nt` threads: the op's own (at
    most a warp) or, when its outputs would occupy at most a quarter of the block's warps,
    the whole block -- a power of two of at least 128 threads per output."""
    out = op.outs[0].type
    assert isinstance(out, cute.SmemTensorType)
    n_out = math.prod(out.get_shape())
    g = op.threads.value.data
    plain = op.kind.data in ("sum", "sum_squares") or (op.kind.data == "max" and len(op.outs) == 1)  # not a running max
    if not plain or n_out * 32 * 4 > nt:
        return g  # the warps of one output per warp already keep a quarter of the block busy
    wide = 1 << ((nt // n_out).bit_length() - 1)
    return max(g, wide)
