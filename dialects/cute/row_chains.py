"""Register-resident row chains as IR: the attributes `cute-row-chains` writes and the CUDA
printer reads (passes/cute/row_chains.py explains what a chain is and when one is formed).

* `ROW_CHAIN` (`i64`) on every `cute.elementwise` / `cute.reduce` of a chain: the chain's
  index in its kernel; a chain's ops are consecutive in their block (barriers between them
  belong to the chain).
* `ROW_CHAIN_STORED` (unit) on a chain op whose value is also written to its shared tile
  (an op outside the chain reads it, or it is an accumulator).
* `ROW_CHAIN_GLOBAL` (unit) on a `cute.copy_g2s` whose tile only chains read (they load it
  from global memory), a `cute.copy_s2g` of an accumulator a chain stores straight to global
  memory, and that accumulator's zero `cute.fill`: the printer skips them.
* `ROW_CHAIN_LATE` (unit) on such a `cute.copy_g2s` whose tile every block reads alike (a
  norm's gain and bias): the chain loads it just before its first use instead of with its
  other inputs, so its registers are not live across the row sums; after the first block
  it comes from the caches.
* `ROW_CHAIN_FP32` (unit) on a chain op that only squares its operand and whose value only
  the chain's row sums read: the value stays an fp32 register, unrounded (an fp16 square
  underflows below |x| ~ 2.4e-4; as `cute-fuse-square-sum` does outside chains).
* `ROW_CHAIN_RUN` (`i64`) on the first op of a chain: which of the chain tile's elements (flat,
  walked row-major) each thread holds in its registers: 0 -- every NT-th (thread tid: tid +
  j x NT); T, the elements per thread -- T consecutive ones (tid x T + j), moved as 16-byte
  vectors where a tensor allows; PER < T -- 16-byte vectors of PER elements interleaved
  across the block (vector c of thread tid at (c x NT + tid) x PER), so that a warp-wide
  access covers whole 32-byte sectors.
* `ROW_CHAIN_VECTORS` (`i1`: `true` / `false`) on every `ROW_CHAIN_GLOBAL` `cute.copy_g2s` /
  `cute.copy_s2g`: whether the chains move its global tensor as 16-byte vectors -- each
  thread's runs of `ROW_CHAIN_RUN` consecutive elements are whole vectors (`mx::load_row` /
  `mx::load_vectors` and their stores) -- or element by element.  Only a chain whose threads
  hold runs (`ROW_CHAIN_RUN` > 0) reads it: with every NT-th element there are no runs.  A
  `false` is written too, so a copy without the attribute is a pass that did not run.
* `ROW_CHAINS` (`i64`) on the `cute.kernel`: the number of chains (its presence says the
  decision was made).
* `ROW_CHAIN_SMEM` (`i64`) on a `cute.kernel` whose chains leave tiles of its plan unused:
  the bytes of the plan its printed code still touches (the header and the live tiles); a
  launch asks for that much (and the scratch after the plan) instead of `smem_size`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import Operation, SSAValue

from mirage_xdsl.dialects import cute

ROW_CHAIN = "cute.row_chain"
ROW_CHAIN_STORED = "cute.row_chain_stored"
ROW_CHAIN_GLOBAL = "cute.row_chain_global"
ROW_CHAIN_FP32 = "cute.row_chain_fp32"
ROW_CHAINS = "cute.row_chains"
ROW_CHAIN_SMEM = "cute.row_chain_smem"
ROW_CHAIN_RUN = "cute.row_chain_run"
ROW_CHAIN_VECTORS = "cute.row_chain_vectors"
ROW_CHAIN_LATE = "cute.row_chain_late"


@dataclass
class RowChain:
    """A run of elementwise ops and whole-row reductions over one [1, ..., 1, C] tile, or of
    elementwise ops alone over one tile of any shape (walked in row-major order)."""

    length: int
    """the elements of the chain's tile: C for a row"""
    ops: list[Operation] = field(default_factory=list)
    """`cute.elementwise` and `cute.reduce` ops, in order"""
    stored: set[SSAValue] = field(default_factory=set)
    """chain values also written to their shared tile (read outside the chain)"""
    consumed: int = 0
    """how many ops from the chain's first one it replaces (barriers included)"""
    run: int = -1
    """`ROW_CHAIN_RUN` of the marked chain (-1: not decided)"""

    @property
    def values(self) -> list[SSAValue]:
        """The value of each op (a reduction's only result)."""
        return [op.outs[0] if isinstance(op, cute.ReduceOp) else op.out for op in self.ops]  # type: ignore[attr-defined]


@dataclass
class GlobalIO:
    """Tiles of a kernel's row chains that skip shared memory altogether."""

    loads: dict[SSAValue, cute.CopyG2SOp] = field(default_factory=dict)
    """tile -> the copy that fills it: the chain reads the tile's elements from global memory"""
    stores: dict[SSAValue, cute.CopyS2GOp] = field(default_factory=dict)
    """accumulator tile -> the copy that writes it out: the chain stores to global memory"""
    skipped: set[Operation] = field(default_factory=set)
    """ops no longer printed: those copies and the accumulators' zero fills"""
    late: set[SSAValue] = field(default_factory=set)
    """loaded tiles marked `ROW_CHAIN_LATE`: loaded at their first use"""


def broadcast_tile(value: SSAValue) -> bool:
    """A tile read with a size-1 last dim repeated (not a whole row)."""
    typ = value.type
    return isinstance(typ, cute.SmemTensorType) and typ.get_shape()[-1] == 1


def uniform_tile(value: SSAValue) -> bool:
    """A tile of one element (a row sum): one register every thread holds."""
    typ = value.type
    return isinstance(typ, cute.SmemTensorType) and math.prod(typ.get_shape()) == 1


def row_length(shape: Sequence[int]) -> int | None:
    """C for a [1, ..., 1, C] tile, else None."""
    return shape[-1] if shape and all(d == 1 for d in shape[:-1]) else None


def chain_row_length(op: Operation) -> int:
    """The elements of a chain op's tile: its result's (an elementwise op, a row or a whole
    tile) or its input's row (a reduction)."""
    value = op.input if isinstance(op, cute.ReduceOp) else op.out  # type: ignore[attr-defined]
    typ = value.type
    assert isinstance(typ, cute.SmemTensorType)
    c = row_length(typ.get_shape())
    if c is None:
        assert isinstance(op, cute.ElementwiseOp), f"{op.name}: a row chain reduction over a tile that is not a row"
        c = math.prod(typ.get_shape())
    return c


def read_row_chains(kernel: cute.KernelOp) -> tuple[dict[Operation, RowChain], GlobalIO]:
    """The chains of `kernel` (first op -> chain, in the top level block and in loop bodies)
    and their global loads and stores, as `cute-row-chains` marked them.  A kernel without
    `ROW_CHAINS` has none (the caller checks that the pass ran)."""
    chains: dict[Operation, RowChain] = {}
    blocks = [list(kernel.body.block.ops)]
    blocks += [list(op.body.block.ops) for op in kernel.body.block.ops if isinstance(op, cute.ForOp)]
    for ops in blocks:
        current: tuple[int, int] | None = None  # (chain index, position of its first op)
        for pos, op in enumerate(ops):
            attr = op.attributes.get(ROW_CHAIN)
            if attr is None:
                continue
            index = attr.value.data  # type: ignore[attr-defined]
            if current is None or current[0] != index:
                run = op.attributes.get(ROW_CHAIN_RUN)
                chains[op] = RowChain(chain_row_length(op), run=run.value.data if isinstance(run, IntegerAttr) else -1)
                current = (index, pos)
            chain = chains[ops[current[1]]]
            chain.ops.append(op)
            if ROW_CHAIN_STORED in op.attributes:
                chain.stored.add(chain.values[-1])
            end = pos + 1
            if end < len(ops) and isinstance(ops[end], cute.BarrierOp):
                end += 1  # the chain ends with its own barrier
            chain.consumed = end - current[1]
    io = GlobalIO()
    for op in kernel.body.block.ops:
        if ROW_CHAIN_GLOBAL not in op.attributes:
            continue
        io.skipped.add(op)
        if isinstance(op, cute.CopyG2SOp):
            io.loads[op.dst] = op
            if ROW_CHAIN_LATE in op.attributes:
                io.late.add(op.dst)
        elif isinstance(op, cute.CopyS2GOp):
            io.stores[op.src] = op
    return chains, io
