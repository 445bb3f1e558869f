"""`tb-fusion-chains`: split each threadblock graph into fusion chains (mirage-notes 3.1).

A chain is a leader op followed by ops that consume its value directly from registers (an
"epilogue"), so the intermediate tiles are never stored in shared memory.  An op `o` is fused
with its producer `p` (the owner of `o`'s first operand) iff

* `o` is an elementwise unary op (`exp, square, sqrt, silu, gelu, relu, clamp, mul_scalar`,
  and, beyond Mirage's list, `sigmoid, log`) or a `nored` accumulator -- or, beyond Mirage,
  a `nored_rescale` accumulator (`acc = acc * r + x`, the online softmax's sum of
  `exp(x - max)`) on a chain led by an elementwise op (unary or binary, not a matmul), so
  that `x` is computed in registers and never stored; its scale `r` is a second operand
  read from shared memory, and tb-schedule runs the chain after `r` is made;
* `o`'s first operand has exactly one use;
* `p` is an op of the graph, not a `tb.input` (never fuse onto loads), not an accumulator
  (`nored` / `nored_rescale` / `max` after tb-decompose-accumulators: they run in the loop,
  `o` after it) and not a `tb.reduction_max` (two results).

Chains are the maximal runs of fused ops.  Leaders may be any op.  Unlike Mirage, whose
register write-back after a matmul honours only `exp` ops and the trailing accumulate
(mirage-notes 3.1, "Quirk"), a matmul-led chain keeps every fused unary op: the CuTe lowering
applies the whole epilogue to the MMA fragment.

Writes on every tb op: `tb.chain = i64` (chain id = position of the leader in its block) and
`tb.chain_pos = i64` (0 = leader), passes/README.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.ir import Block, Operation
from xdsl.passes import ModulePass

from mirage_xdsl.dialects import tb
from mirage_xdsl.dialects.kn import CustomizedOp

CHAIN_ATTR = "tb.chain"
CHAIN_POS_ATTR = "tb.chain_pos"

FUSABLE_UNARY: tuple[type[Operation], ...] = (
    tb.ExpOp,
    tb.SquareOp,
    tb.SqrtOp,
    tb.SiluOp,
    tb.GeluOp,
    tb.ReluOp,
    tb.ClampOp,
    tb.MulScalarOp,
    tb.AddScalarOp,
    tb.SigmoidOp,
    tb.LogOp,
)
"""Elementwise unary ops that can run as an epilogue of their producer."""


def is_fusable(op: Operation) -> bool:
    """Whether `op` may be appended to its producer's chain (ignoring the producer; a
    `nored_rescale` accumulator also needs an elementwise chain leader, `compute_chains`)."""
    if isinstance(op, FUSABLE_UNARY):
        return True
    return isinstance(op, tb.ForloopAccumOp) and op.accum_kind in ("nored", "nored_rescale")


def leads_elementwise(leader: Operation) -> bool:
    """Whether `leader` lowers to a `cute.elementwise` (an elementwise unary or binary op, not
    a matmul): the chains a `nored_rescale` accumulator may end, its scale the last input."""
    return isinstance(leader, (tb.TbUnaryOp, tb.TbBinaryOp)) and not isinstance(leader, tb.MatmulOp)


def can_lead_fusion(producer: Operation) -> bool:
    """Whether a fusable consumer may be fused onto `producer`: not a load, not a two-result
    `reduction_max`, and not an accumulator (its value is final only after the loop; on
    decomposed IR only `nored`, `nored_rescale` and `max` remain, Mirage's exclusion list), and
    not a `tb.grid_sum` (the grid sums of a graph are lowered together, as one step)."""
    return not isinstance(producer, (tb.InputOp, tb.ReductionMaxOp, tb.ForloopAccumOp, tb.GridSumOp))


def fused_producer(op: Operation) -> Operation | None:
    """The producer `op` is fused with, or None if `op` leads a chain."""
    if not is_fusable(op) or not op.operands:
        return None
    value = op.operands[0]
    if not value.has_one_use():
        return None
    producer = value.owner
    if not isinstance(producer, Operation) or producer.parent_block() is not op.parent_block():
        return None
    return producer if can_lead_fusion(producer) else None


def compute_chains(block: Block) -> dict[Operation, tuple[int, int]]:
    """Op -> (chain id, position in chain) for every op of a threadblock graph's block.

    The chain id is the index of the leader in `block`; the leader has position 0.
    """
    block_ops = list(block.ops)
    index = {op: i for i, op in enumerate(block_ops)}
    chains: dict[Operation, tuple[int, int]] = {}
    for op in block.ops:  # topological order: producers are assigned first
        producer = fused_producer(op)
        if producer is not None and isinstance(op, tb.ForloopAccumOp) and op.accum_kind == "nored_rescale":
            if not leads_elementwise(block_ops[chains[producer][0]]):
                producer = None
        if producer is None:
            chains[op] = (index[op], 0)
        else:
            leader, pos = chains[producer]
            chains[op] = (leader, pos + 1)
    return chains


def chains_of(block: Block) -> dict[Operation, tuple[int, int]]:
    """The chains recorded by this pass (`tb.chain`/`tb.chain_pos`), or computed afresh when
    any op lacks them (so later passes also work on IR that skipped tb-fusion-chains)."""
    recorded: dict[Operation, tuple[int, int]] = {}
    for op in block.ops:
        chain, pos = op.attributes.get(CHAIN_ATTR), op.attributes.get(CHAIN_POS_ATTR)
        if not isinstance(chain, IntegerAttr) or not isinstance(pos, IntegerAttr):
            return compute_chains(block)
        recorded[op] = (chain.value.data, pos.value.data)
    return recorded


def chain_members(chains: dict[Operation, tuple[int, int]]) -> dict[int, list[Operation]]:
    """Chain id -> its ops in chain order (leader first)."""
    members: dict[int, list[Operation]] = {}
    for op, (chain, _) in chains.items():
        members.setdefault(chain, []).append(op)
    for ops in members.values():
        ops.sort(key=lambda o: chains[o][1])
    return members


@dataclass(frozen=True)
class FusionChainsPass(ModulePass):
    """Annotate every tb op with its fusion chain (`tb.chain`, `tb.chain_pos`)."""

    name = "tb-fusion-chains"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Write `tb.chain` (chain id) and `tb.chain_pos` (position in it) on every member of the chains of every `kn.customized` in `op`.

        Raises:
            Nothing.
        """
        for graph in op.walk():
            if not isinstance(graph, CustomizedOp):
                continue
            for member, (chain, pos) in compute_chains(graph.body.block).items():
                member.attributes[CHAIN_ATTR] = IntegerAttr(chain, i64)
                member.attributes[CHAIN_POS_ATTR] = IntegerAttr(pos, i64)
