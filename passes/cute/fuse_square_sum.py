"""`cute-fuse-square-sum`: square each element inside the sum that reads it, in fp32.

rms_norm decomposes into `square` -> `reduction` (tb-decompose-accumulators), which
convert-tb-to-cute prints as an elementwise pass storing `x^2` into a tile of x's type and a
`cute.reduce "sum"` over that tile.  In fp16 a square underflows to 0 below |x| ~ 2.4e-4
(the smallest fp16 subnormal is 2^-24 ~ 6e-8, IEEE 754-2008 binary16), so the rms_norm of a row
of values near 1e-6 divides 0 by 0 (fuzz seed 14 graph 337); bf16 keeps fp32's exponent
range but only 8 mantissa bits for each square.  torch squares in fp32 as well.  This pass
rewrites

    cute.elementwise "id"(%x) [square(, mul_scalar(c))*] "store" %sq   (no other op reads %sq)
    ...                                               (nothing that writes %x's bytes)
    cute.reduce "sum" %sq [epilogue] ...

into `cute.reduce "sum_squares" %x [(mul_scalar(c),)* epilogue] ...` (same outputs and
threads), which squares each element in fp32 as it reads it (`mx::reduce_sum_squares`,
compute.cuh) and scales the sum, and erases the elementwise pass -- one shared-memory round
trip fewer.  The ops between the two must leave %x's shared-memory bytes as they are, so %x
still holds the squared values' source when the reduce reads it (tb-plan-smem may have planned
its lifetime to end at the elementwise op and given its bytes to a later tile): barriers,
stores to global memory (the rms_norm of a square that is also a graph output stores the
square's operand between them; fp16 squares of it past |x| > 256 were inf and the norm 0, fuzz
seed 1139 graph 919), MMAs into registers, and passes and accumulator stores that write only
tiles elsewhere (an rms norm read by two matmuls computes `x^2 / n`, the MMAs and a residual's
copy of x before the sum: fp16 squares of rows near 1e-6 were 0 and the norm inf, fuzz seed
1144 graph 2064); a square in a register row chain only when no chain member sits between
(it must end its chain: fuzz seed 1146 graph 578 lost its chain's start when a later member
sat between); a softmax's chain ending in `x^2 / n` whose sum follows the two MMAs that read
the normalised row is one (fp16 terms near 6e-8 rounded to subnormals: the norm 0.8 % off and
the gated product 5 %, fuzz seed 1186 graph 941).  The pass runs before cute-grid-sum-epilogue: that epilogue keeps
a phase's values in registers but stores each one a later op reads rounded to its tile's type,
so a square of grid-summed values that only a sum after the phase reads was stored in fp16
(values near 632: squares inf, the rms_norm 0; fuzz seed 1151 graph 833); folded first, the sum
squares the stored grid sum in fp32.  Ops that an earlier cute decision took over (register
row chains, register accumulators: any `cute.` attribute other than `cute.reduce_threads`)
are left alone: those keep their values in fp32 registers already --
except a square that ends an elementwise register chain (cute-row-chains) and whose tile only
a sum outside the chain reads: the chain stored it rounded to the tile's type (fp16 squares of
a 4-row rms_norm over 256 columns: 0 beyond |x| > 256, 3 % off near 1e-4, fuzz seed 1134 graph
1579), so it leaves the chain and the sum squares its operand, which the chain stores too
(`cute.row_chain_stored`; not an input the chains read from global memory only).
Squares stored in fp32 tiles are left alone: exact enough.  An fp32 source whose squares are
stored in fp16 is folded like an fp16 one (the rms_norm of a forloop max accumulator, kept in
fp32: its values near 1e-5 squared to 0 in the fp16 tile and the norm was inf; fuzz seed 1192
graph 2510).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, Float32Type, ModuleOp, StringAttr
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from mirage_xdsl.dialects import cute
from mirage_xdsl.dialects.cute.row_chains import ROW_CHAIN, ROW_CHAIN_GLOBAL, ROW_CHAIN_RUN, ROW_CHAIN_STORED

_SQUARE = "square"
_SCALE = "mul_scalar"
_CHAIN_MEMBER = frozenset({ROW_CHAIN, ROW_CHAIN_STORED, ROW_CHAIN_RUN})
"""The attributes a register-chain member carries that still let its square leave the chain."""


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
    fns = [fn.fn_name for fn in square.epilogue.data if isinstance(fn, cute.UnaryFnAttr)]
    if (
        square.out is not tile
        or square.fn.data != "id"
        or len(square.ins) != 1
        or fns[:1] != [_SQUARE]
        or any(fn != _SCALE for fn in fns[1:])
        or len(fns) != len(square.epilogue.data)
        or square.mode.data != "store"
        or _decided(square, _CHAIN_MEMBER)
        or not _in_shared_memory(square.ins[0])
    ):
        return None
    source, squares = square.ins[0].type, tile.type
    assert isinstance(source, cute.SmemTensorType) and isinstance(squares, cute.SmemTensorType)
    # the rounding happens where the squares are stored: an fp32 source squared into fp16 too
    if isinstance(squares.element_type, Float32Type) or source.get_shape() != cute.smem_shape(tile):
        return None
    # a square in a register row chain must end it: no chain member may follow it before the
    # sum (a later member of its chain would lose the chain's start)
    in_chain = ROW_CHAIN in square.attributes
    between = square.next_op
    while between is not None and between is not reduce:
        if (in_chain and ROW_CHAIN in between.attributes) or not _keeps(between, square.ins[0]):
            return None
        between = between.next_op
    return square if between is reduce else None


_WRITE_NO_SHARED_MEMORY = (
    cute.BarrierOp, cute.CopyS2GOp, cute.MmaInitOp, cute.MmaOp, cute.CpAsyncCommitOp, cute.CpAsyncWaitOp
)
"""Ops that may sit between the square and its sum without a look at what they write: they
write registers or global memory only."""


def _keeps(op: Operation, source: SSAValue) -> bool:
    """Whether `op` leaves the shared-memory bytes of `source` as they are: it writes no shared
    memory, or only single-buffer tiles that share no byte with it (`cute.disjoint_tiles`;
    tb-plan-smem may give a tile whose lifetime has ended to another: such a write, or one the
    check cannot place, ends the fusion)."""
    if isinstance(op, _WRITE_NO_SHARED_MEMORY):
        return True
    if isinstance(op, (cute.ElementwiseOp, cute.FragStoreOp)):
        written: list[SSAValue] = [op.out]
    elif isinstance(op, cute.ReduceOp):
        written = list(op.outs)
    elif isinstance(op, cute.CopyG2SOp):
        written = [op.dst]
    else:
        return False
    return cute.disjoint_tiles(written, [source])


def _in_shared_memory(tile: SSAValue) -> bool:
    """Whether every write of `tile` reaches shared memory: no register-chain member keeps it
    in registers only, and no copy leaves it to chains that load it from global memory."""
    for use in tile.uses:
        op = use.operation
        if isinstance(op, cute.CopyG2SOp) and op.dst is tile and ROW_CHAIN_GLOBAL in op.attributes:
            return False
        writes = (isinstance(op, cute.ElementwiseOp) and op.out is tile) or (isinstance(op, cute.ReduceOp) and tile in op.outs)
        if writes and ROW_CHAIN in op.attributes and ROW_CHAIN_STORED not in op.attributes:
            return False
    return True


def fuse(square: cute.ElementwiseOp, reduce: cute.ReduceOp) -> None:
    """Make `reduce` a `sum_squares` of `square`'s operand and erase `square`, its tile's
    `cute.smem_alloc` when nothing else uses it, and the second of the two barriers around it,
    which then guard nothing."""
    reduce.operands = [square.ins[0], *reduce.outs]
    reduce.properties["kind"] = StringAttr("sum_squares")
    # sum(c * x^2) = c * sum(x^2): the square's scales move to the start of the sum's epilogue
    scales = list(square.epilogue.data[1:])
    if scales:
        reduce.properties["epilogue"] = ArrayAttr([*scales, *reduce.epilogue.data])
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
