"""Matmuls with an elementwise epilogue, lowered to the sm_90 GEMM as one contraction each.

A compute-bound `kn.matmul` whose result flows only through unary elementwise ops and then,
optionally, one `kn.mul` by a tensor of the result's type is an *epilogue chain*:

    %h = kn.matmul %x, %w1          // [128, 4096] x [4096, 12288]
    %a = kn.silu %h
    %o = kn.mul %a, %g              // %g: another matmul's result, or any tensor of %o's type

becomes one `contraction.contract(%x, %w1, %g)` with `activation = [#cute.fn<silu>]` and
`prim_last = ELWISE_MUL`, which convert-contraction-to-hopper lowers to a `cute.hopper_gemm`
whose epilogue computes `silu(acc) * g` on the fp32 accumulators before the store.

kn-partition asks `split_into_chains` whether every op of a planned group belongs to such a
chain (an MLP's `gelu(X @ W1)`, SwiGLU's `silu(X @ W1) * (X @ W3)`: the second matmul a chain
of its own whose result is the first's factor) and lowers the group this way when the sum of
the chains' GEMM estimates beats the group's fused plan: a fused plan walks its matmuls with
mma.sync tiles, which stay far from the wgmma rate once M reaches ~128 rows.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from xdsl.dialects.builtin import TensorType, UnitAttr
from xdsl.ir import Operation, SSAValue

from mirage_xdsl.dialects import kn
from mirage_xdsl.dialects.common.op_bases import ClampOpBase, ScalarOpBase
from mirage_xdsl.dialects.contraction.config import LastType
from mirage_xdsl.dialects.contraction.ops import ContractOp
from mirage_xdsl.dialects.cute.attrs import UNARY_FNS, UnaryFnAttr
from mirage_xdsl.passes.conversion.matmul_contract import FROM_MATMUL_ATTR, has_gemm_view, matmul_config
from mirage_xdsl.passes.conversion.plan_group import elem_bytes


@dataclass
class EpilogueChain:
    """One matmul, the unary ops applied to its result in order, and an optional final `kn.mul`
    by `factor` (a value of the result's type and recorded strides -- the GEMM reads it with the
    output's strides -- that does not depend on the chain)."""

    matmul: kn.MatmulOp
    unary: list[Operation] = field(default_factory=list)
    mul: kn.MulOp | None = None
    factor: SSAValue | None = None

    @property
    def ops(self) -> list[Operation]:
        """The chain's ops in program order."""
        return [self.matmul, *self.unary, *([self.mul] if self.mul is not None else [])]

    @property
    def result(self) -> SSAValue:
        """The value the chain computes (the last op's result)."""
        return self.ops[-1].results[0]


def unary_fn(op: Operation) -> UnaryFnAttr | None:
    """The `#cute.fn` of a unary elementwise kn op (`kn.gelu` -> `#cute.fn<gelu>`, `kn.clamp` with
    its bounds, `kn.mul_scalar` / `kn.add_scalar` with its scalar), or None for any other op."""
    kind = op.name.removeprefix("kn.")
    if op.dialect_name() != "kn" or kind not in UNARY_FNS:
        return None
    if isinstance(op, ClampOpBase):
        return UnaryFnAttr(kind, (op.min_value.value.data, op.max_value.value.data))
    if isinstance(op, ScalarOpBase):
        return UnaryFnAttr(kind, (op.scalar.value.data,))
    return UnaryFnAttr(kind)


def _depends_on(value: SSAValue, ops: set[Operation]) -> bool:
    """Whether `value` is computed (transitively) from a result of one of `ops`."""
    stack, seen = [value], set()
    while stack:
        owner = stack.pop().owner
        if not isinstance(owner, Operation) or owner in seen:
            continue
        if owner in ops:
            return True
        seen.add(owner)
        stack.extend(owner.operands)
    return False


def _grow(mm: kn.MatmulOp, members: set[Operation], claimed: set[Operation]) -> EpilogueChain:
    """The longest chain from `mm` through ops of `members` that no other chain claimed."""
    chain = EpilogueChain(mm)
    value = mm.result
    while (uses := list(value.uses)) and len(uses) == 1:
        user = uses[0].operation
        if user not in members or user in claimed:
            break
        if unary_fn(user) is not None:
            chain.unary.append(user)
            value = user.results[0]
            continue
        if isinstance(user, kn.MulOp) and user.lhs is not user.rhs:
            factor = user.rhs if user.lhs is value else user.lhs
            same_layout = kn.dtensor_strides(factor) == kn.dtensor_strides(user.result)  # D is read with C's strides
            if factor.type == user.result.type == mm.result.type and same_layout and not _depends_on(factor, set(chain.ops)):
                chain.mul, chain.factor = user, factor
        break
    return chain


def split_into_chains(members: Sequence[Operation], compute_bound: Callable[[kn.MatmulOp], bool]) -> list[EpilogueChain] | None:
    """The group `members` as epilogue chains, one per matmul in program order, each starting
    at a `compute_bound` matmul; None when an op belongs to no chain, a matmul is not compute
    bound, or a chain has no sm_90 GEMM view (`gemm_view`'s rules on the matmul's strides)."""
    group = set(members)
    claimed: set[Operation] = set()
    chains = []
    for op in members:
        if not isinstance(op, kn.MatmulOp):
            continue
        if not compute_bound(op):
            return None
        if not has_gemm_view(op):
            return None
        chain = _grow(op, group, claimed)
        claimed.update(chain.ops)
        chains.append(chain)
    if not chains or claimed != group:
        return None
    return chains


def factor_bytes(chain: EpilogueChain) -> int:
    """Bytes of the ELWISE_MUL factor the chain's epilogue reads (0 without one)."""
    if chain.factor is None:
        return 0
    tensor = chain.factor.type
    assert isinstance(tensor, TensorType)
    return math.prod(tensor.get_shape()) * elem_bytes(tensor.element_type)


def lower_chain(chain: EpilogueChain) -> ContractOp:
    """Replace the chain's ops by one unscheduled `contraction.contract` (inserted before the
    chain's last op, which comes after the factor's producer) and return it.

    The contraction reads the matmul's operands, multiplies by the factor (`ELWISE_MUL`) and
    applies the unary ops as its `activation`; it takes the chain result's name hint and
    recorded strides.
    """
    last = chain.ops[-1]
    result = chain.result
    config = matmul_config(chain.matmul)
    if chain.factor is not None:
        config.prim_last = LastType.ELWISE_MUL
    fns = [unary_fn(op) for op in chain.unary]
    result_type = result.type
    assert isinstance(result_type, TensorType)
    contract = ContractOp(
        chain.matmul.lhs,
        chain.matmul.rhs,
        result_type,
        config,
        scheduled=False,
        mul=chain.factor,
        activation=[f for f in fns if f is not None],
    )
    contract.attributes[FROM_MATMUL_ATTR] = UnitAttr()
    if kn.STRIDES_ATTR in last.attributes:
        contract.attributes[kn.STRIDES_ATTR] = last.attributes[kn.STRIDES_ATTR]
    block = last.parent_block()
    assert block is not None
    block.insert_op_before(contract, last)
    if result.name_hint:
        contract.result.name_hint = result.name_hint
    result.replace_all_uses_with(contract.result)
    for op in reversed(chain.ops):
        block.erase_op(op)
    return contract
