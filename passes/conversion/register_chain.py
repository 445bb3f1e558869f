"""Matmul -> unary epilogue -> matmul chains whose intermediate can stay in registers.

Flash decoding's loop body is `P = exp(Q @ K)`, `L += P`, `O += P @ V`.  Lowered op by op,
P goes through shared memory twice per iteration (stored by the first MMA's epilogue, read
back by the row-sum accumulator and by the second MMA, with barriers between), and for
decode-sized tiles (16 query rows) those round trips and their address arithmetic are most
of the kernel's instructions.  When the chain has exactly that shape, convert-tb-to-cute
emits one `cute.mma_chain` instead (mx::mma_chain_run, codegen/include/mirage_xdsl/mma.cuh):
the MMA fragments of P are the A operand of the second MMA (the register reuse of
FlashAttention-2, Dao 2023), and L accumulates in registers in P's fragment layout until
the loop ends.

The pattern (all in the loop stage, chains from tb-fusion-chains):

* `first`  = [tb.matmul, unary ops...]; its result P is used by exactly two ops:
* `total`  = a `nored` tb.forloop_accum of P alone in its chain (the row-sum partials), and
* `second` = [tb.matmul with lhs P, `nored` register accumulator (`tb.accum_in_reg`)];

with 16-bit operands of one type and a first-MMA warp layout (TGM, W) over all of the
block's warps with one 16-row block per warp row (M <= 16 TGM) and an even number of atom
blocks per warp (N1 % 16W == 0).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import BFloat16Type, Float16Type
from xdsl.ir import Operation

from mirage_xdsl.dialects import cute, tb
from mirage_xdsl.dialects.kn import element_type_of, shape_of


@dataclass(frozen=True)
class RegisterChain:
    """One fusible chain: the three tb chains that `cute.mma_chain` replaces."""

    first: Sequence[Operation]
    total: tb.ForloopAccumOp
    second: Sequence[Operation]

    @property
    def first_matmul(self) -> tb.MatmulOp:
        """The `tb.matmul` that computes P (the head of `first`)."""
        mm = self.first[0]
        assert isinstance(mm, tb.MatmulOp)
        return mm

    @property
    def second_matmul(self) -> tb.MatmulOp:
        """The `tb.matmul` P @ V (the head of `second`)."""
        mm = self.second[0]
        assert isinstance(mm, tb.MatmulOp)
        return mm


def chain_thr_layout(rows: int, warps: int) -> tuple[int, int]:
    """(TGM, W) of P = A @ B in a chain: a warp row per 16-row block of A (FlashAttention-2
    gives every warp its own rows and all keys), the rest of the warps side by side along
    the keys; (1, warps) when the row blocks do not divide the warps (not fusible unless
    A has at most 16 rows)."""
    blocks = -(-rows // 16)
    return (blocks, warps // blocks) if warps % blocks == 0 else (1, warps)


def chain_shape_fits(rows: int, keys: int, thr_layout: tuple[int, int], warps: int) -> bool:
    """Whether P (rows x keys) with warp layout (TGM, W) fits `mx::mma_chain_run`: all of the
    block's warps, one 16-row block per warp row, two atom blocks per warp and k16 step."""
    tgm, w = thr_layout
    return tgm * w == warps and rows <= 16 * tgm and keys % (16 * w) == 0


def _is_register_accum(op: Operation) -> bool:
    return isinstance(op, tb.ForloopAccumOp) and op.accum_kind == "nored" and "tb.accum_in_reg" in op.attributes


def find_register_chains(
    loop_chains: Sequence[Sequence[Operation]],
    is_unary: Callable[[Operation], bool],
    first_mma: Callable[[tb.MatmulOp], cute.TiledMmaAttr],
    warps: int,
) -> list[RegisterChain]:
    """The fusible chains among the loop stage's `loop_chains` (module docstring).
    `is_unary`: whether an op can be an epilogue function; `first_mma`: the tiled MMA the
    lowering gives a matmul chain."""
    by_leader = {ops[0]: ops for ops in loop_chains}
    found: list[RegisterChain] = []
    for first in loop_chains:
        mm = first[0]
        if not isinstance(mm, tb.MatmulOp) or not all(is_unary(op) for op in first[1:]):
            continue
        p = first[-1].results[0]
        users = {use.operation for use in p.uses}
        seconds = [u for u in users if isinstance(u, tb.MatmulOp) and u.lhs is p and u.rhs is not p]
        totals = [u for u in users if isinstance(u, tb.ForloopAccumOp)]
        if len(users) != 2 or len(seconds) != 1 or len(totals) != 1:
            continue
        total, second = totals[0], by_leader.get(seconds[0])
        if total.accum_kind != "nored" or "tb.accum_in_reg" in total.attributes or list(by_leader.get(total, ())) != [total]:
            continue
        if second is None or len(second) != 2 or not _is_register_accum(second[1]):
            continue
        if not _shapes_fit(mm, seconds[0], first_mma(mm), warps):
            continue
        found.append(RegisterChain(tuple(first), total, tuple(second)))
    return found


def _shapes_fit(first: tb.MatmulOp, second: tb.MatmulOp, mma: cute.TiledMmaAttr, warps: int) -> bool:
    elems = {type(element_type_of(v)) for v in (first.lhs, first.rhs, first.result, second.rhs)}
    if len(elems) != 1 or elems.pop() not in (Float16Type, BFloat16Type):
        return False
    m, n1 = shape_of(first.result)[-2:]
    return mma.atom_shape == (16, 8, 16) and chain_shape_fits(m, n1, mma.tg, warps)
