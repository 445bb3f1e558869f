"""`kn-widen-sums`: keep the row sums of fp16 / bf16 kernel graphs (and attention scores) in fp32.

A `kn.reduction` of a 16-bit tensor declares a 16-bit result, so the planner stores the sum in
that type between kernels and in shared memory.  fp16 overflows at 65504: the sum of the
`exp(x - max)` of a softmax over a 128k vocabulary reaches up to 131072 and became inf (the
softmax all zeros), where torch keeps its softmax sums in fp32.  This pass gives such sums f32
(dialects/common/precision.py: sums and elementwise ops may mix a 16-bit type with f32), as
every accumulator already is in registers:

- a candidate is a `kn.reduction` whose input is f16 or bf16 and whose result is not a graph
  output (an output keeps the type the caller reads);
- the unary elementwise ops applied to it (`log`, `sqrt`, `mul_scalar`, ...: a mean, a
  log-sum-exp) are widened with it, transitively;
- the set is widened only if every other reader is an elementwise binary op (`add`, `sub`,
  `mul`, `div`, `pow`), which computes in fp32 and rounds to its 16-bit result, and no member
  is a graph output; otherwise (a matmul, a max, a concat, a reshape, a customized kernel
  reads it) the sum keeps its declared type.

Products divided by a row statistic are widened too: the matmul of a `kn.div` that
kn-recognize-composites marked `rms_norm_matmul` (`(X @ W) / rms(X)`, what kn-simplify makes of
`rms_norm(X) @ W`) or `softmax_matmul` (`(exp(a) @ V) / sum(exp(a))`, attention) gets an f32
result when it has 16-bit operands and the division is its only reader
(`precision.widens_half`).  Such a product is the statistic times the result: X @ W is rms(X)
times larger, and exp(a) @ V sums up to a row of keys of V, so it leaves fp16 range (65504)
first (rows of magnitude ~5e3 into a 512-wide rms norm, or |V| ~ 50 over 4096 keys, gave inf),
and the division rounds it back to its 16-bit type.

Attention scores are widened too: a 16-bit matmul product, scaled (`mul_scalar`) and masked
(`causal_mask`) by ops it alone reads, whose readers are a `kn.reduction_max` and the `kn.sub`
of that maximum (the stable softmax `exp(s - max(s))`), gets f32 with its scale, mask and
maximum, where no member is a graph output and the maximum is read by elementwise binary ops
only.  Rounded to bf16 between the product and `exp`, scores of +-50 are off by up to 0.125 and
their exponentials by 13 % (fp16: 0.016 and 1.6 %); FlashAttention keeps them in fp32 for this
reason (Dao et al., FlashAttention-2, 2023, section 3.1).  The `sub` rounds `s - max(s)` to its
16-bit type, which is exact enough where `exp` is not negligible (near 0).

Split-K plans of a widened sum or product store fp32 partials (each plan node takes its value's
type).  kn-fuse runs this pass after composite recognition and before partitioning.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr, TensorType, f32
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from mirage_xdsl.dialects import kn
from mirage_xdsl.dialects.common.precision import is_half
from mirage_xdsl.dialects.kn.elementwise_ops import KnBinaryOp, KnUnaryOp
from mirage_xdsl.passes.kn.expand_composites import COMPOSITE_ATTR

UNARY_WIDENED = (KnUnaryOp, kn.MulScalarOp, kn.ClampOp)
"""Ops that take their operand's type and are widened with it."""


def widened_set(sum_value: SSAValue, returned: set[SSAValue]) -> list[SSAValue] | None:
    """The values to give f32 with the sum `sum_value` (it, then the unary elementwise ops over
    them in order), or None when one of them is returned or read by an op that cannot take an
    f32 operand with 16-bit others (module docstring)."""
    members = [sum_value]
    for value in members:  # grows while iterating: a breadth-first walk
        if value in returned:
            return None
        for use in value.uses:
            user = use.operation
            if isinstance(user, UNARY_WIDENED):
                if user.results[0] not in members:
                    members.append(user.results[0])
            elif not isinstance(user, KnBinaryOp) or isinstance(user, kn.MatmulOp):
                return None
    return members


def widen_each(func: FuncOp, members_of: Callable[[Operation, set[SSAValue]], list[SSAValue] | None]) -> int:
    """Give f32 to the values `members_of(op, returned values)` names for each op of `func`
    (None: leave the op); the number of ops whose values were widened."""
    returned = {v for op in func.body.ops if isinstance(op, ReturnOp) for v in op.arguments}
    count = 0
    for op in list(func.body.walk()):
        members = members_of(op, returned)
        if members is None:
            continue
        for value in members:
            Rewriter.replace_value_with_new_type(value, TensorType(f32, kn.shape_of(value)))
        count += 1
    return count


def _sum_members(op: Operation, returned: set[SSAValue]) -> list[SSAValue] | None:
    """`widened_set` of a 16-bit sum of a 16-bit input (one already f32 is left)."""
    if not isinstance(op, kn.ReductionOp) or not is_half(kn.element_type_of(op.input)) or not is_half(kn.element_type_of(op.result)):
        return None
    return widened_set(op.result, returned)


def widen_function(func: FuncOp) -> int:
    """Widen the eligible sums of one kernel graph (module docstring); the number of sums widened."""
    return widen_each(func, _sum_members)


WIDENED_PRODUCTS = ("rms_norm_matmul", "softmax_matmul")
"""The `kn.composite` records of divisions whose matmul operand is widened."""


def _product_members(op: Operation, returned: set[SSAValue]) -> list[SSAValue] | None:
    """The 16-bit matmul product that the division `op` (a `WIDENED_PRODUCTS` record) alone
    reads, or None."""
    if not isinstance(op, kn.DivOp) or not is_half(kn.element_type_of(op.result)):
        return None
    record = op.attributes.get(COMPOSITE_ATTR)
    if not isinstance(record, StringAttr) or record.data not in WIDENED_PRODUCTS:
        return None
    mm = op.lhs.owner
    if not isinstance(mm, kn.MatmulOp) or len(list(mm.result.uses)) != 1 or not is_half(kn.element_type_of(mm.result)):
        return None
    return [mm.result]


def widen_products(func: FuncOp) -> int:
    """Give f32 to the 16-bit matmul products divided by a row statistic (module docstring);
    the number widened."""
    return widen_each(func, _product_members)


SCORE_CHAIN = (kn.MulScalarOp, kn.CausalMaskOp)
"""Ops between an attention product and its scores, widened with it."""


def scores_set(product: kn.MatmulOp, returned: set[SSAValue]) -> list[SSAValue] | None:
    """The values to give f32 with the 16-bit attention product `product` (it, its scale and
    mask, the maximum of the scores), or None when it does not feed a stable softmax as the
    module docstring says."""
    members: list[SSAValue] = [product.result]
    while True:
        uses = list(members[-1].uses)
        if len(uses) != 1 or not isinstance(uses[0].operation, SCORE_CHAIN):
            break
        members.append(uses[0].operation.results[0])
    scores = members[-1]
    maxima = [u.operation for u in scores.uses if isinstance(u.operation, kn.ReductionMaxOp)]
    if len(maxima) != 1:
        return None
    peak = maxima[0]
    for use in scores.uses:
        user = use.operation
        if user is not peak and not (isinstance(user, kn.SubOp) and user.lhs is scores and user.rhs is peak.result):
            return None
    if any(not isinstance(u.operation, KnBinaryOp) or isinstance(u.operation, kn.MatmulOp) for u in peak.result.uses):
        return None
    members.append(peak.result)
    return None if returned.intersection(members) else members


def _score_members(op: Operation, returned: set[SSAValue]) -> list[SSAValue] | None:
    """`scores_set` of a 16-bit matmul product."""
    if not isinstance(op, kn.MatmulOp) or not is_half(kn.element_type_of(op.result)):
        return None
    return scores_set(op, returned)


def widen_scores(func: FuncOp) -> int:
    """Give f32 to the 16-bit attention scores of one kernel graph up to `exp` (module
    docstring); the number of products widened."""
    return widen_each(func, _score_members)


@dataclass(frozen=True)
class KnWidenSumsPass(ModulePass):
    """Give the row sums of 16-bit kernel graphs, the products divided by them and attention
    scores up to `exp` f32 (module docstring)."""

    name = "kn-widen-sums"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Widen the eligible sums and products of every function of `op`, in place.

        Raises:
            Nothing: a sum that cannot be widened keeps its type.
        """
        for func in op.walk():
            if isinstance(func, FuncOp):
                widen_function(func)
                widen_products(func)
                widen_scores(func)
