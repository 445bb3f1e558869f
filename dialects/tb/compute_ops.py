"""`tb` compute ops on tiles: elementwise unary and binary ops, `tb.matmul`, the reductions
(`tb.reduction`, `tb.reduction_to_dimx`, `tb.reduce_max`, the online softmax's running
`tb.reduction_max`), `tb.rms_norm` and `tb.concat`; `UNARY_BY_KIND` / `BINARY_BY_KIND` map
kn op names to them.  Operands, syntax and verifiers come from the bases shared with kn
(`dialects/common/op_bases.py`); the tb classes add the after_accum rules.
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import Float32Type, IntegerAttr, i64
from xdsl.ir import SSAValue
from xdsl.irdl import irdl_op_definition, result_def

from mirage_xdsl.dialects import tiling
from mirage_xdsl.dialects.common.checks import fail, shape_of
from mirage_xdsl.dialects.common.op_bases import (
    AddScalarOpBase,
    BinaryOpBase,
    ClampOpBase,
    ConcatOpBase,
    MatmulOpBase,
    MulScalarOpBase,
    OneResultReductionOpBase,
    ReductionOpBase,
    UnaryOpBase,
)
from mirage_xdsl.dialects.common.precision import is_half
from mirage_xdsl.dialects.tb.stensor import STensorType, TbOp, after_accum, checked_graph_of


class TbUnaryOp(TbOp, UnaryOpBase[STensorType]):
    """Base of the elementwise unary tb ops: the result tile has the operand's type (shape,
    element type, after_accum), or rounds an f32 operand to a 16-bit result (`is_rounding`)."""

    ROUNDS_TO_HALF: ClassVar[bool] = True

    def is_rounding(self) -> bool:
        """Whether the op rounds an f32 tile to an f16 / bf16 tile of the same shape and after_accum."""
        src, dst = self.input.type, self.result.type
        return (
            isinstance(src, STensorType)
            and isinstance(dst, STensorType)
            and isinstance(src.element_type, Float32Type)
            and is_half(dst.element_type)
            and src.get_shape() == dst.get_shape()
            and src.is_after_accum == dst.is_after_accum
        )


@irdl_op_definition
class ExpOp(TbUnaryOp):
    """`tb.exp`: e^x elementwise."""
    name = "tb.exp"


@irdl_op_definition
class SquareOp(TbUnaryOp):
    """`tb.square`: x^2 elementwise."""
    name = "tb.square"


@irdl_op_definition
class SqrtOp(TbUnaryOp):
    """`tb.sqrt`: the square root elementwise."""
    name = "tb.sqrt"


@irdl_op_definition
class SiluOp(TbUnaryOp):
    """`tb.silu`: x * sigmoid(x) elementwise (SiLU, Elfwing et al. 2018)."""
    name = "tb.silu"


@irdl_op_definition
class SigmoidOp(TbUnaryOp):
    """`tb.sigmoid`: 1 / (1 + e^-x) elementwise."""
    name = "tb.sigmoid"


@irdl_op_definition
class GeluOp(TbUnaryOp):
    """`tb.gelu`: 0.5 x (1 + erf(x / sqrt(2))) elementwise (exact GELU, Hendrycks & Gimpel 2016)."""
    name = "tb.gelu"


@irdl_op_definition
class ReluOp(TbUnaryOp):
    """`tb.relu`: max(x, 0) elementwise."""
    name = "tb.relu"


@irdl_op_definition
class LogOp(TbUnaryOp):
    """`tb.log`: the natural logarithm elementwise."""
    name = "tb.log"


@irdl_op_definition
class ClampOp(ClampOpBase[STensorType], TbUnaryOp):
    """`min(max(x, min_value), max_value)`."""

    name = "tb.clamp"


@irdl_op_definition
class MulScalarOp(MulScalarOpBase[STensorType], TbUnaryOp):
    """`x * scalar`."""

    name = "tb.mul_scalar"


@irdl_op_definition
class AddScalarOp(AddScalarOpBase[STensorType], TbUnaryOp):
    """`x + scalar`."""

    name = "tb.add_scalar"


class TbBinaryOp(TbOp, BinaryOpBase[STensorType]):
    """Elementwise binary op with numpy broadcasting; operands agree on after_accum."""

    def check_level_rules(self) -> None:
        """The operands agree on after_accum, and the result with them.

        Raises:
            KnVerifyError: operands (or result) differ in after_accum.
        """
        if after_accum(self.lhs) != after_accum(self.rhs):
            raise fail(self, "operands must agree on after_accum (both before or both after the for-loop)")
        if after_accum(self.result) != after_accum(self.lhs):
            raise fail(self, "the result's after_accum must equal the operands'")


@irdl_op_definition
class AddOp(TbBinaryOp):
    """`tb.add`: lhs + rhs elementwise, broadcast."""
    name = "tb.add"


@irdl_op_definition
class SubOp(TbBinaryOp):
    """`tb.sub`: lhs - rhs elementwise, broadcast."""
    name = "tb.sub"


@irdl_op_definition
class MulOp(TbBinaryOp):
    """`tb.mul`: lhs * rhs elementwise, broadcast."""
    name = "tb.mul"


@irdl_op_definition
class DivOp(TbBinaryOp):
    """`tb.div`: lhs / rhs elementwise, broadcast."""
    name = "tb.div"


@irdl_op_definition
class PowOp(TbBinaryOp):
    """`tb.pow`: lhs ** rhs elementwise, broadcast."""
    name = "tb.pow"


@irdl_op_definition
class MatmulOp(MatmulOpBase[STensorType], TbBinaryOp):
    """2-D GEMM of two tiles (all leading dims must be 1)."""

    name = "tb.matmul"


class TbReductionBase(TbOp, ReductionOpBase[STensorType]):
    """Base of the tb reductions: reduce dim `dim` of `input` to `reduced_size()` (result checks in `check_result`)."""

    def check_result(self, result: SSAValue) -> None:
        """Check a result: same after_accum and element type as the input, shape of `tiling.reduction_shape`.

        Raises:
            KnVerifyError: a mismatch, or a bad dim / size.
        """
        if after_accum(result) != after_accum(self.input):
            raise fail(self, "the result's after_accum must equal the operand's")
        super().check_result(result)


class TbReduceToOneBase(TbReductionBase, OneResultReductionOpBase[STensorType]):
    """A reduction of `dim` to size 1 with one result (tb.reduction, tb.reduce_max)."""

    def __init__(self, input: SSAValue, dim: int):
        super().__init__(input, dim)


@irdl_op_definition
class ReductionOp(TbReduceToOneBase):
    """Sum over `dim` (size -> 1)."""

    name = "tb.reduction"
    KEEPS_F32_SUMS: ClassVar[bool] = True


@irdl_op_definition
class ReductionToDimxOp(TbReductionBase, OneResultReductionOpBase[STensorType]):
    """Sum STRIDED groups of `dim` down to the graph's `reduction_dimx`:
    `out[..., j] = sum_k in[..., j + k*dimx]` (mirage-notes 1.7)."""

    name = "tb.reduction_to_dimx"
    KEEPS_F32_SUMS: ClassVar[bool] = True

    def __init__(self, input: SSAValue, dim: int, reduction_dimx: int):
        super().__init__(input, dim, reduction_dimx)

    def reduced_size(self) -> int:
        """The graph's `reduction_dimx` (the result's size along `dim` while the op is detached or the graph malformed)."""
        graph = checked_graph_of(self)
        if graph is not None:
            return graph.dimx
        shape = shape_of(self.result)  # detached or malformed graph: trust the result type
        return shape[self.reduce_dim] if 0 <= self.reduce_dim < len(shape) else 1


@irdl_op_definition
class ReduceMaxOp(TbReduceToOneBase):
    """Max over `dim` of this tile (size -> 1), with no state across calls -- unlike
    Mirage's running `tb.reduction_max`.  kn-fuse's lowering of `kn.reduction_max`: over a
    dim the for-loop walks, it feeds a `max` for-loop accumulator."""

    name = "tb.reduce_max"


@irdl_op_definition
class ReductionMaxOp(TbReductionBase):
    """Running max over calls along `dim`: `max = max(old, max_i x_i)`, `diff = old - max` (<= 0).
    Used by the online-softmax rewrite (mirage-notes 1.7); both results are checked in order
    (`check_result`)."""

    name = "tb.reduction_max"
    LOOP_CARRIED_RESULTS: ClassVar[tuple[int, ...]] = (0,)
    """Results whose value one iteration reads back in the next (the running max): inside
    the for-loop they must keep their storage from before the loop until it ends."""
    max = result_def(STensorType)
    diff = result_def(STensorType)
    assembly_format = "$input attr-dict `:` type($input) `->` type($max) `,` type($diff)"

    def __init__(self, input: SSAValue, dim: int):
        out = self.derived_type(input, tiling.reduction_shape(shape_of(input), dim, 1))
        super().__init__(operands=[input], result_types=[out, out], properties={"dim": IntegerAttr(dim, i64)})


@irdl_op_definition
class RmsNormOp(TbOp, UnaryOpBase[STensorType]):
    """`x / sqrt(mean(x^2, last dim))`, no epsilon."""

    name = "tb.rms_norm"

    def __init__(self, input: SSAValue):
        super().__init__(input)


@irdl_op_definition
class ConcatOp(TbOp, ConcatOpBase[STensorType]):
    """Concatenate two tiles along `dim`."""

    name = "tb.concat"

    def check_level_rules(self) -> None:
        """The operands and the result agree on after_accum.

        Raises:
            KnVerifyError: they do not.
        """
        if after_accum(self.lhs) != after_accum(self.rhs) or after_accum(self.result) != after_accum(self.lhs):
            raise fail(self, "operands and result must agree on after_accum (both before or both after the for-loop)")


UNARY_BY_KIND: dict[str, type[TbUnaryOp]] = {
    "exp": ExpOp,
    "square": SquareOp,
    "sqrt": SqrtOp,
    "silu": SiluOp,
    "sigmoid": SigmoidOp,
    "gelu": GeluOp,
    "relu": ReluOp,
    "log": LogOp,
}
"""The parameterless unary tb ops by kind name (the kn op name without `kn.`)."""


BINARY_BY_KIND: dict[str, type[TbBinaryOp]] = {"add": AddOp, "sub": SubOp, "mul": MulOp, "div": DivOp, "pow": PowOp}
"""The elementwise binary tb ops by kind name (tb.matmul is binary too but not elementwise)."""
