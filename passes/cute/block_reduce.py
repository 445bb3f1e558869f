"""`cute-block-reduce`: how many threads sum each output of a `cute.reduce`.

A `cute.reduce` carries the threads per output convert-tb-to-cute chose (at most a warp,
shuffle-reduced).  A sum whose outputs would occupy at most a quarter of the block's warps
(nTrans: one row sum per 512-thread block) leaves most of the block idle; this pass lets the
whole block reduce each output instead, its warps combining their shuffled sums through one
float per warp of shared memory that the printer appends to the kernel's plan.  Mirage's
running max (an online softmax's per-iteration row max, `mx::reduce_max_running`) does the
same when it reduces more than `RUNNING_MAX_WARP_ELEMENTS` elements per output.  The choice is
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

RUNNING_MAX_WARP_ELEMENTS = 512
"""A running max over at most this many elements per output stays with one warp (16 per
lane): the whole block's combine (a barrier and a round through shared memory) paid off for
the cross-entropy's 1024-element loop tiles (H200, 2026-11-27: fp16 72.2 -> 70.2 us, bf16
73.0 -> 70.8) and not for its 512-element fp32 tiles (80.1 -> 81.2)."""


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
    """Threads per output of a sum or max reduction (a plain max or Mirage's running max) in a
    block of `nt` threads: the op's own (at most a warp) or, when its outputs would occupy at
    most a quarter of the block's warps, the whole block -- a power of two of at least 128
    threads per output.  A running max over a cross-entropy row's loop tile (one output per
    block) was reduced by one warp while the other three waited at the next barrier; one over
    at most `RUNNING_MAX_WARP_ELEMENTS` elements keeps its warp."""
    out = op.outs[0].type
    assert isinstance(out, cute.SmemTensorType)
    n_out = math.prod(out.get_shape())
    g = op.threads.value.data
    if op.kind.data not in ("sum", "sum_squares", "max") or n_out * 32 * 4 > nt:
        return g  # the warps of one output per warp already keep a quarter of the block busy
    wide = 1 << ((nt // n_out).bit_length() - 1)
    if len(op.outs) == 2 and _elements_per_output(op) <= RUNNING_MAX_WARP_ELEMENTS:
        return g  # one warp, no block barrier (RUNNING_MAX_WARP_ELEMENTS)
    return max(g, wide)


def _elements_per_output(op: cute.ReduceOp) -> int:
    """Input elements `op` reduces into each output (the reduced dim's extent / group)."""
    src = op.input.type
    assert isinstance(src, cute.SmemTensorType)
    return src.get_shape()[op.dim.value.data] // op.group.value.data
