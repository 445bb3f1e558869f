"""Row sums of squares on the tensor cores, beside the matmul that reads the same tile.

rms_norm(X) @ W accumulates, in its for-loop, both X @ W (cute.mma, X the A operand) and
sum_k X[r, k]^2 (an elementwise `o + square(a) [* c]` into a register-resident accumulator,
codegen/kernel_resources.register_accumulators).  The second equals the diagonal of X X^T, and
the B fragment of X^T is X's A fragment register for register, so the printer can replace
the elementwise pass over the tile (one shared load and one FMA per element and thread) by
one ldmatrix and two mma.sync per warp and k-step (`mx::SquareSumMma`, mma.cuh).  Measured
on rmsnorm bs8 (H200, 2026-11-25, hand-written late-finisher kernel): 0.3-0.4 us of 14.4.

The accumulator then holds each row's total in one element per row (thread tid's element
0 for row tid % 16, the other elements 0), so the rest of the kernel, which stores the tile
and reduces its rows, is unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from xdsl.dialects.builtin import Float16Type
from xdsl.ir import SSAValue

from mirage_xdsl.dialects import cute

ATOM_ROWS = 16
"""Rows of an m16n8k16 MMA atom: the A tile must have exactly this many rows."""


@dataclass(frozen=True)
class SquareSum:
    """The accumulator update `update` (`o + square(a) * scale`) computed as diag(A A^T) of
    `mma`'s A operand."""

    update: cute.ElementwiseOp
    mma: cute.MmaOp
    scale: float


def plan_square_sums(
    kernel: cute.KernelOp, reg_acc: Mapping[SSAValue, int], ldmatrix_a: Callable[[cute.MmaOp], bool]
) -> dict[SSAValue, SquareSum]:
    """Register accumulators of `kernel` (keys of `reg_acc`) whose one loop update is a sum
    of squares of a tensor-core matmul's A tile: accumulator -> SquareSum.

    Conditions: the update is an elementwise `add` of fn `id` with epilogue `square` or
    `square, mul_scalar(c)` on one input, which is the A operand of an mma.sync (m16n8k16,
    fp16/bf16) in the same loop whose A tile is [16, K] with K % 16 == 0 and read by ldmatrix
    (`ldmatrix_a`); the update walks rows first (order (0, 1)), so the thread of flat index i
    holds row i % 16; the block has whole warps."""
    if kernel.num_threads % 32:
        return {}
    out: dict[SSAValue, SquareSum] = {}
    for loop in kernel.body.block.ops:
        if not isinstance(loop, cute.ForOp):
            continue
        ops = list(loop.body.block.ops)
        mmas = [o for o in ops if isinstance(o, cute.MmaOp)]
        for op in ops:
            if not isinstance(op, cute.ElementwiseOp) or op.out not in reg_acc:
                continue
            scale = square_scale(op)
            mma = next((m for m in mmas if len(op.ins) == 1 and m.a == op.ins[0]), None)
            if scale is None or mma is None:
                continue
            same_shape = op.out.type.get_shape() == mma.a.type.get_shape()  # type: ignore[attr-defined]
            if same_shape and tensor_core_a(mma, ldmatrix_a):
                out[op.out] = SquareSum(op, mma, scale)
    return out


def square_scale(op: cute.ElementwiseOp) -> float | None:
    """c of an update `o + square(a) * c` (1.0 without mul_scalar), else None."""
    fns = [(fn.fn_name, fn.values) for fn in op.epilogue.data]
    if op.mode.data != "add" or op.fn.data != "id" or list(cute.dense_ints(op.order)) != [0, 1]:
        return None
    if len(fns) == 1 and fns[0][0] == "square":
        return 1.0
    if len(fns) == 2 and fns[0][0] == "square" and fns[1][0] == "mul_scalar":
        return float(fns[1][1][0])
    return None


def tensor_core_a(mma: cute.MmaOp, ldmatrix_a: Callable[[cute.MmaOp], bool]) -> bool:
    """`mma` runs m16n8k16 atoms on a [16, K] fp16/bf16 A tile, K % 16 == 0, read by ldmatrix."""
    frag, ta = mma.acc.type, mma.a.type
    if not isinstance(frag, cute.FragmentType) or not isinstance(ta, cute.SmemTensorType):
        return False
    atom = frag.mma.atom_name
    shape = ta.get_shape()
    if atom == "UniversalFMA" or frag.mma.atom_shape[2] != 16 or len(shape) != 2:
        return False
    bf16 = "BF16" in atom
    if not (bf16 or isinstance(ta.element_type, Float16Type)):
        return False
    return shape[0] == ATOM_ROWS and shape[1] % 16 == 0 and ldmatrix_a(mma)
