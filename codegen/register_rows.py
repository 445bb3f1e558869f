"""Register-resident row chains: a run of elementwise ops and whole-row sums over one
[1, ..., 1, C] tile kept in registers instead of shared memory.

Normalisation kernels (nTrans: rms_norm(X + alpha * (rms_norm(H) + X)), one 4096-wide row
per 512-thread block) are chains of elementwise passes and row sums.  Printed op by op, every
pass reads its operands from shared memory, writes its result back and waits at a block
barrier (nTrans: nine passes).  When every elementwise op walks the row in the natural order
(flat index i = tid + j * NT for the thread's j-th element) and every sum reduces the whole
row with the whole block, each thread only ever needs its own elements and the sums'
results, so the chain can run in registers: the sums become block reductions
(`mx::block_sum`, warp shuffles and one float per warp) whose result every thread holds.
A value is still written to its shared tile when an op outside the chain reads it.
Measured (NVIDIA H200, 2026-11-24): nTrans 5.1 -> 3.6 µs (a hand-written kernel that also
reads its inputs and writes its output straight from registers: 2.8 µs;
benchmarks/results/register-rows-h200-2026-11-24.md).

Numerics are unchanged: each value is rounded to its tile's element type (`mx::round_as`),
and `mx::block_sum` adds in the order of `mx::reduce_sum` with the whole block per output
(each thread's elements in j order, shuffles 16..1, the warps' sums in warp order).

Rules (anything else is printed op by op): elementwise ops with mode `store` or `add`, the
natural order and a shared output that is not register-resident; sums of a chain value over
its last dim with the whole block (`block_reduce_threads == NT`, one output); a row length
that is a multiple of the thread count (at most 16 elements per thread); operands are chain
values or shared tiles the chain does not write; no tile the chain stores overlaps a tile it
reads (other than an `add` op's own element); at least two ops.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass, field

from xdsl.ir import Operation, SSAValue

from mirage_xdsl.dialects import cute

MAX_TRIPS = 16
"""Elements per thread (registers: every value of the chain may be live at once)."""


@dataclass
class RowChain:
    length: int
    """C, the row's elements"""
    ops: list[Operation] = field(default_factory=list)
    """`cute.elementwise` and `cute.reduce` ops, in order"""
    stored: set[SSAValue] = field(default_factory=set)
    """chain values also written to their shared tile (read outside the chain)"""
    consumed: int = 0
    """how many ops from the chain's first one it replaces (barriers included)"""

    @property
    def values(self) -> list[SSAValue]:
        return [op.outs[0] if isinstance(op, cute.ReduceOp) else op.out for op in self.ops]  # type: ignore[attr-defined]


def _shape(value: SSAValue) -> tuple[int, ...]:
    typ = value.type
    assert isinstance(typ, cute.SmemTensorType)
    return tuple(typ.get_shape())


def row_length(shape: Sequence[int]) -> int | None:
    """C for a [1, ..., 1, C] tile, else None."""
    return shape[-1] if shape and all(d == 1 for d in shape[:-1]) else None


def _byte_range(value: SSAValue) -> tuple[int, int] | None:
    owner = value.owner
    if not isinstance(owner, cute.SmemAllocOp) or len(owner.byte_offsets) != 1:
        return None
    typ = value.type
    assert isinstance(typ, cute.SmemTensorType)
    start = owner.byte_offsets[0]
    return start, start + typ.cosize() * cute.elem_bytes(typ.element_type)


class _Builder:
    def __init__(self, nt: int, register_resident: Container[SSAValue], block_threads: Callable[[cute.ReduceOp], int]):
        self.nt = nt
        self.register_resident = register_resident
        self.block_threads = block_threads
        self.chain: RowChain | None = None

    def fits_length(self, c: int | None) -> bool:
        return c is not None and c % self.nt == 0 and c // self.nt <= MAX_TRIPS

    def elementwise_fits(self, op: cute.ElementwiseOp, values: list[SSAValue]) -> int | None:
        """The row length of `op` if it can join a chain holding `values`, else None."""
        if op.mode.data not in ("store", "add") or op.out in self.register_resident or op.out in values:
            return None
        shape = _shape(op.out)
        c = row_length(shape)
        rank = len(shape)
        if not self.fits_length(c) or cute.dense_ints(op.order)[0] != rank - 1:
            return None
        for v in op.ins:
            if v in values and _shape(v) not in (shape, (1,) * rank):
                return None
        return c

    def reduce_fits(self, op: cute.ReduceOp, values: list[SSAValue]) -> int | None:
        src = op.input
        if op.kind.data != "sum" or op.mode.data != "store" or src not in values:
            return None
        shape = _shape(src)
        c = row_length(shape)
        if c is None or op.dim.value.data != len(shape) - 1 or op.group.value.data != 1:
            return None
        if math.prod(_shape(op.outs[0])) != 1 or self.block_threads(op) != self.nt:
            return None
        return c

    def add(self, op: Operation) -> bool:
        values = self.chain.values if self.chain is not None else []
        if isinstance(op, cute.ElementwiseOp):
            c = self.elementwise_fits(op, values)
        elif isinstance(op, cute.ReduceOp):
            c = self.reduce_fits(op, values)
        else:
            return False
        if c is None or (self.chain is not None and c != self.chain.length):
            return False
        if self.chain is None:
            self.chain = RowChain(c)
        self.chain.ops.append(op)
        return True


def _mark_stored(chain: RowChain) -> None:
    inside = set(chain.ops)
    for op, v in zip(chain.ops, chain.values):
        if isinstance(op, cute.ElementwiseOp) and op.mode.data == "add":
            chain.stored.add(v)  # an accumulator: its tile is the result
        elif any(use.operation not in inside for use in v.uses):
            chain.stored.add(v)


def _hazard_free(chain: RowChain) -> bool:
    """No stored tile overlaps a shared tile the chain reads (an `add` op reading its own
    element is the same thread's read-modify-write)."""
    values = set(chain.values)
    reads = [(op, v) for op in chain.ops if isinstance(op, cute.ElementwiseOp) for v in op.ins if v not in values]
    read_ranges = [_byte_range(v) for _, v in reads]
    write_ranges = {v: _byte_range(v) for v in chain.stored}
    if any(r is None for r in read_ranges) or any(w is None for w in write_ranges.values()):
        return False
    for r in read_ranges:
        for w in write_ranges.values():
            if r[0] < w[1] and w[0] < r[1]:  # type: ignore[index]
                return False
    return True


def plan_row_chain(
    ops: Sequence[Operation],
    nt: int,
    register_resident: Container[SSAValue],
    block_threads: Callable[[cute.ReduceOp], int],
) -> RowChain | None:
    """The chain that starts at `ops[0]` (barriers between its ops included), or None."""
    builder = _Builder(nt, register_resident, block_threads)
    consumed = 0
    for k, op in enumerate(ops):
        if isinstance(op, cute.BarrierOp):
            continue
        if not builder.add(op):
            break
        consumed = k + 1
    chain = builder.chain
    if chain is None or len(chain.ops) < 2:
        return None
    if consumed < len(ops) and isinstance(ops[consumed], cute.BarrierOp):
        consumed += 1  # the chain ends with its own barrier
    chain.consumed = consumed
    _mark_stored(chain)
    return chain if _hazard_free(chain) else None
