"""`cute-fuse-square-sum`: square each element inside the sum that reads it, in fp32.

rms_norm decomposes into `square` -> `reduction` (tb-decompose-accumulators), which
convert-tb-to-cute prints as an elementwise pass storing `x^2` into a tile of x's type and a
`cute.reduce "sum"` over that tile.  In fp16 a square underflows to 0 below |x| ~ 2.4e-4
(the smallest fp16 subnormal is 2^-24 ~ 6e-8, IEEE 754-2008 binary16), so the rms_norm of a row
of values near 1e-6 divides 0 by 0 (fuzz seed 14 graph 337); bf16 keeps fp32's exponent
range but only 8 mantissa bits for each square.  torch squares in fp32 as well.  This pass
rewrites

    cute.elementwise "id"(%x) [square] "store" %sq     (no other op reads %sq)
    cute.barrier                                      (only barriers in between)
    cute.reduce "sum" %sq ...

into `cute.reduce "sum_squares" %x ...` (same outputs, epilogue and threads), which squares
each element in fp32 as it reads it (`mx::reduce_sum_squares`, compute.cuh), and erases the
elementwise pass -- one shared-memory round trip fewer.  Only barriers may sit between the two,
so %x still holds the squared values' source when the reduce reads it (tb-plan-smem planned its
lifetime to end at the elementwise op).  Ops that an earlier cute decision took over (register
row chains, the grid-sum epilogue, register accumulators: any `cute.` attribute other than
`cute.reduce_threads`) are left alone: those keep their values in fp32 registers already.
Tiles of fp32 are left alone: their squares are exact enough.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import Float32Type, ModuleOp, StringAttr
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from mirage_xdsl.dialects import cute

_SQUARE = "square"


@dataclass(frozen=True)
class FuseSquareSumPass(ModulePass):
    """Fold a square-only elementwise pass into the `cute.reduce "sum"` that alone reads it."""

    name = "cute-fuse-square-sum"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Fold every fusable square into the `cute.reduce "sum"` that reads it, in every `cute.kernel` of `op`.

        Raises:
            Nothing.
        """
        for kernel in op.walk():
            if isinstance(kernel, cute.KernelOp):
                for reduce in [r for r in kernel.walk() if isinstance(r, cute.ReduceOp)]:
                    square = fusable_square(reduce)
                    if square is not None:
                        fuse(square, reduce)


def _decided(op: Operation, allowed: frozenset[str] = frozenset()) -> bool:
    """Whether an earlier cute decision pass wrote on `op` (an attribute `cute.*` not in `allowed`)."""
    return any(name.startswith("cute.") and name not in allowed for name in op.attributes)


def fusable_square(reduce: cute.ReduceOp) -> cute.ElementwiseOp | None:
    """The `cute.elementwise "id"(x) [square] "store"` whose tile only `reduce` reads, when the
    rewrite of the module docstring applies; else None."""
    if reduce.kind.data != "sum" or _decided(reduce, frozenset({cute.REDUCE_THREADS})):
        return None
    tile = reduce.input
    writers = [use.operation for use in tile.uses if use.operation is not reduce]
    if len(writers) != 1 or not isinstance(writers[0], cute.ElementwiseOp):
        return None
    square = writers[0]
    if (
        square.out is not tile
        or square.fn.data != "id"
        or len(square.ins) != 1
        or [fn.fn_name for fn in square.epilogue.data if isinstance(fn, cute.UnaryFnAttr)] != [_SQUARE]
        or len(square.epilogue.data) != 1
        or square.mode.data != "store"
        or _decided(square)
    ):
        return None
    source = square.ins[0].type
    assert isinstance(source, cute.SmemTensorType)
    if isinstance(source.element_type, Float32Type) or source.get_shape() != cute.smem_shape(tile):
        return None
    between = square.next_op
    while between is not None and between is not reduce:
        if not isinstance(between, cute.BarrierOp):
            return None
        between = between.next_op
    return square if between is reduce else None


def fuse(square: cute.ElementwiseOp, reduce: cute.ReduceOp) -> None:
    """Make `reduce` a `sum_squares` of `square`'s operand and erase `square`, its tile's
    `cute.smem_alloc` when nothing else uses it, and the second of the two barriers around it,
    which then guard nothing."""
    reduce.operands = [square.ins[0], *reduce.outs]
    reduce.properties["kind"] = StringAttr("sum_squares")
    before, after = square.prev_op, square.next_op
    tile = square.out
    square.detach()
    square.erase()
    if isinstance(tile.owner, cute.SmemAllocOp) and not tile.uses:
        tile.owner.detach()  # its tile is dead: no unused pointer in the printed kernel
        tile.owner.erase()
    if isinstance(before, cute.BarrierOp) and isinstance(after, cute.BarrierOp):
        after.detach()
        after.erase()
