"""`tb` compute ops on tiles: elementwise unary and binary ops, `tb.matmul`, the reductions
(`tb.reduction`, `tb.reduction_to_dimx`, `tb.reduce_max`, the online softmax's running
`tb.reduction_max`), `tb.rms_norm` and `tb.concat`; `UNARY_BY_KIND` / `BINARY_BY_KIND` map
kn op names to them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import FloatAttr, IntegerAttr, f64, i64
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import VarConstraint, base, irdl_op_definition, operand_def, prop_def, result_def

from mirage_xdsl.dialects import tiling
from mirage_xdsl.dialects.kn.tensors import check_inferred_shape, element_type_of, fail, shape_of
from mirage_xdsl.dialects.tb.stensor import STensorType, TbOp, after_accum, check_same_element_type, checked_graph_of


class TbUnaryOp(TbOp):
    """Base of the elementwise unary tb ops: the result tile has the operand's type (shape, element type, after_accum)."""
    T: ClassVar = VarConstraint("T", base(STensorType))
    input = operand_def(T)
    result = result_def(T)
    assembly_format = "$input attr-dict `:` type($input)"

    def __init__(self, input: SSAValue, **props: Attribute):
        super().__init__(operands=[input], result_types=[input.type], properties=props)


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
class ClampOp(TbUnaryOp):
    """`min(max(x, min_value), max_value)`."""

    name = "tb.clamp"
    min_value = prop_def(FloatAttr)
    max_value = prop_def(FloatAttr)

    def __init__(self, input: SSAValue, min_value: float, max_value: float):
        super().__init__(input, min_value=FloatAttr(min_value, f64), max_value=FloatAttr(max_value, f64))

    def verify_(self) -> None:
        """Check the bounds.

        Raises:
            KnVerifyError: min_value > max_value.
        """
        lo, hi = self.min_value.value.data, self.max_value.value.data
        if not lo <= hi:
            raise fail(self, f"min_value ({lo}) must not exceed max_value ({hi})")


@irdl_op_definition
class MulScalarOp(TbUnaryOp):
    """`x * scalar`."""

    name = "tb.mul_scalar"
    scalar = prop_def(FloatAttr)

    def __init__(self, input: SSAValue, scalar: float):
        super().__init__(input, scalar=FloatAttr(scalar, f64))


class TbBinaryOp(TbOp):
    """Elementwise binary op with numpy broadcasting; operands agree on after_accum."""

    lhs = operand_def(STensorType)
    rhs = operand_def(STensorType)
    result = result_def(STensorType)
    assembly_format = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"

    @staticmethod
    def infer_shape(lhs: Sequence[int], rhs: Sequence[int]) -> tuple[int, ...]:
        """The broadcast shape of `lhs` and `rhs` (numpy rules over equal ranks).

        Raises:
            ShapeError: the shapes do not broadcast.
        """
        return tiling.broadcast_shape(lhs, rhs)

    def __init__(self, lhs: SSAValue, rhs: SSAValue):
        shape = self.infer_shape(shape_of(lhs), shape_of(rhs))
        super().__init__(
            operands=[lhs, rhs],
            result_types=[STensorType(shape, element_type_of(lhs), after_accum(lhs))],
        )

    def verify_(self) -> None:
        """Check after_accum agreement, one element type and the inferred result shape.

        Raises:
            KnVerifyError: operands (or result) differ in after_accum, element types differ, the
                operand shapes are incompatible (`infer_shape`), or the result has another shape.
        """
        if after_accum(self.lhs) != after_accum(self.rhs):
            raise fail(self, "operands must agree on after_accum (both before or both after the for-loop)")
        if after_accum(self.result) != after_accum(self.lhs):
            raise fail(self, "the result's after_accum must equal the operands'")
        check_same_element_type(self, self.lhs, self.rhs, self.result)
        check_inferred_shape(self, lambda: self.infer_shape(shape_of(self.lhs), shape_of(self.rhs)), shape_of(self.result))


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
class MatmulOp(TbBinaryOp):
    """2-D GEMM of two tiles (all leading dims must be 1)."""

    name = "tb.matmul"

    @staticmethod
    def infer_shape(lhs: Sequence[int], rhs: Sequence[int]) -> tuple[int, ...]:
        """The product shape [1.., M, N] of [1.., M, K] and [1.., K, N] tiles (`tiling.matmul_shape`, threadblock rules).

        Raises:
            ShapeError: ranks differ or are < 2, K differs, or a leading dim is not 1.
        """
        return tiling.matmul_shape(lhs, rhs, threadblock=True)


class TbReductionBase(TbOp):
    """Base of the tb reductions: reduce dim `dim` of `input` to `reduced_size()` (result checks in `check_result`)."""
    input = operand_def(STensorType)
    dim = prop_def(IntegerAttr)

    @property
    def reduce_dim(self) -> int:
        """The reduced dimension."""
        return self.dim.value.data

    def reduced_size(self) -> int:
        """Size of the reduced dim in the result (1 unless overridden)."""
        return 1

    def check_result(self, result: SSAValue) -> None:
        """Check a result: same after_accum and element type as the input, shape of `tiling.reduction_shape`.

        Raises:
            KnVerifyError: a mismatch, or a bad dim / size.
        """
        if after_accum(result) != after_accum(self.input):
            raise fail(self, "the result's after_accum must equal the operand's")
        check_same_element_type(self, self.input, result)
        check_inferred_shape(
            self, lambda: tiling.reduction_shape(shape_of(self.input), self.reduce_dim, self.reduced_size()), shape_of(result)
        )


class TbReduceToOneBase(TbReductionBase):
    """A reduction of `dim` to size 1 with one result (tb.reduction, tb.reduce_max)."""

    def __init__(self, input: SSAValue, dim: int):
        typ = input.type
        assert isinstance(typ, STensorType)
        shape = tiling.reduction_shape(typ.get_shape(), dim, 1)
        super().__init__(
            operands=[input], result_types=[typ.with_shape(shape)], properties={"dim": IntegerAttr(dim, i64)}
        )

    def verify_(self) -> None:
        """Check the result (`check_result`).

        Raises:
            KnVerifyError: see `check_result`.
        """
        self.check_result(self.results[0])


@irdl_op_definition
class ReductionOp(TbReduceToOneBase):
    """Sum over `dim` (size -> 1)."""

    name = "tb.reduction"
    result = result_def(STensorType)
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"


@irdl_op_definition
class ReductionToDimxOp(TbReductionBase):
    """Sum STRIDED groups of `dim` down to the graph's `reduction_dimx`:
    `out[..., j] = sum_k in[..., j + k*dimx]` (mirage-notes 1.7)."""

    name = "tb.reduction_to_dimx"
    result = result_def(STensorType)
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue, dim: int, reduction_dimx: int):
        typ = input.type
        assert isinstance(typ, STensorType)
        shape = tiling.reduction_shape(typ.get_shape(), dim, reduction_dimx)
        super().__init__(
            operands=[input], result_types=[typ.with_shape(shape)], properties={"dim": IntegerAttr(dim, i64)}
        )

    def reduced_size(self) -> int:
        """The graph's `reduction_dimx` (the result's size along `dim` while the op is detached or the graph malformed)."""
        graph = checked_graph_of(self)
        if graph is not None:
            return graph.dimx
        shape = shape_of(self.result)  # detached or malformed graph: trust the result type
        return shape[self.reduce_dim] if 0 <= self.reduce_dim < len(shape) else 1

    def verify_(self) -> None:
        """Check the result (`check_result`, reduced size = the graph's dimx).

        Raises:
            KnVerifyError: see `check_result`.
        """
        self.check_result(self.result)


@irdl_op_definition
class ReduceMaxOp(TbReduceToOneBase):
    """Max over `dim` of this tile (size -> 1), with no state across calls -- unlike
    Mirage's running `tb.reduction_max`.  kn-fuse's lowering of `kn.reduction_max`: over a
    dim the for-loop walks, it feeds a `max` for-loop accumulator."""

    name = "tb.reduce_max"
    result = result_def(STensorType)
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"


@irdl_op_definition
class ReductionMaxOp(TbReductionBase):
    """Running max over calls along `dim`: `max = max(old, max_i x_i)`, `diff = old - max` (<= 0).
    Used by the online-softmax rewrite (mirage-notes 1.7)."""

    name = "tb.reduction_max"
    LOOP_CARRIED_RESULTS: ClassVar[tuple[int, ...]] = (0,)
    """Results whose value one iteration reads back in the next (the running max): inside
    the for-loop they must keep their storage from before the loop until it ends."""
    max = result_def(STensorType)
    diff = result_def(STensorType)
    assembly_format = "$input attr-dict `:` type($input) `->` type($max) `,` type($diff)"

    def __init__(self, input: SSAValue, dim: int):
        typ = input.type
        assert isinstance(typ, STensorType)
        out = typ.with_shape(tiling.reduction_shape(typ.get_shape(), dim, 1))
        super().__init__(operands=[input], result_types=[out, out], properties={"dim": IntegerAttr(dim, i64)})

    def verify_(self) -> None:
        """Check both results, the running max and the difference (`check_result`).

        Raises:
            KnVerifyError: see `check_result`.
        """
        self.check_result(self.max)
        self.check_result(self.diff)


@irdl_op_definition
class RmsNormOp(TbOp):
    """`x / sqrt(mean(x^2, last dim))`, no epsilon."""

    name = "tb.rms_norm"
    T: ClassVar = VarConstraint("T", base(STensorType))
    input = operand_def(T)
    result = result_def(T)
    assembly_format = "$input attr-dict `:` type($input)"

    def __init__(self, input: SSAValue):
        super().__init__(operands=[input], result_types=[input.type])


@irdl_op_definition
class ConcatOp(TbOp):
    """Concatenate two tiles along `dim`."""

    name = "tb.concat"
    lhs = operand_def(STensorType)
    rhs = operand_def(STensorType)
    result = result_def(STensorType)
    dim = prop_def(IntegerAttr)
    assembly_format = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"

    def __init__(self, lhs: SSAValue, rhs: SSAValue, dim: int):
        typ = lhs.type
        assert isinstance(typ, STensorType)
        shape = tiling.concat_shape(shape_of(lhs), shape_of(rhs), dim)
        super().__init__(
            operands=[lhs, rhs], result_types=[typ.with_shape(shape)], properties={"dim": IntegerAttr(dim, i64)}
        )

    def verify_(self) -> None:
        """Check after_accum agreement, one element type and the concatenated shape.

        Raises:
            KnVerifyError: operands or result differ in after_accum, element types differ, the tiles
                do not concatenate along `dim` (`tiling.concat_shape`), or the result has another shape.
        """
        if after_accum(self.lhs) != after_accum(self.rhs) or after_accum(self.result) != after_accum(self.lhs):
            raise fail(self, "operands and result must agree on after_accum (both before or both after the for-loop)")
        check_same_element_type(self, self.lhs, self.rhs, self.result)
        check_inferred_shape(
            self, lambda: tiling.concat_shape(shape_of(self.lhs), shape_of(self.rhs), self.dim.value.data), shape_of(self.result)
        )


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
