"""`kn-widen-sums`: keep the row sums of fp16 / bf16 kernel graphs in fp32.

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

Split-K plans of a widened sum store fp32 partials (each plan node takes its value's type).
kn-fuse runs this pass after composite recognition and before partitioning.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType, f32
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from mirage_xdsl.dialects import kn
from mirage_xdsl.dialects.common.precision import is_half
from mirage_xdsl.dialects.kn.elementwise_ops import KnBinaryOp, KnUnaryOp

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


def widen_function(func: FuncOp) -> int:
    """Widen the eligible sums of one kernel graph (module docstring); the number of sums widened."""
    returned = {v for op in func.body.ops if isinstance(op, ReturnOp) for v in op.arguments}
    count = 0
    for op in list(func.body.walk()):
        if not isinstance(op, kn.ReductionOp) or not is_half(kn.element_type_of(op.input)):
            continue
        if not is_half(kn.element_type_of(op.result)):
            continue  # already f32 (written so, or widened)
        members = widened_set(op.result, returned)
        if members is None:
            continue
        for value in members:
            Rewriter.replace_value_with_new_type(value, TensorType(f32, kn.shape_of(value)))
        count += 1
    return count


@dataclass(frozen=True)
class KnWidenSumsPass(ModulePass):
    """Give the row sums of 16-bit kernel graphs f32 (module docstring)."""

    name = "kn-widen-sums"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Widen the eligible sums of every function of `op`, in place.

        Raises:
            Nothing: a sum that cannot be widened keeps its type.
        """
        for func in op.walk():
            if isinstance(func, FuncOp):
                widen_function(func)
