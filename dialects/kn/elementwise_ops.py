"""`kn` elementwise ops: the unary ops (`kn.exp` ... `kn.clamp`, `kn.mul_scalar`) and the
broadcasting binary ops (`kn.add`, `kn.sub`, `kn.mul`, `kn.div`, `kn.pow`); Mirage
`include/mirage/kernel/element_unary.h`, `element_binary.h`.
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import FloatAttr, TensorType, f64
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    VarConstraint,
    base,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure

from mirage_xdsl.dialects import tiling
from mirage_xdsl.dialects.kn.tensors import (
    check_inferred_shape,
    check_same_dtype,
    check_tensor_types,
    element_type_of,
    fail,
    shape_of,
)


class KnUnaryOp(IRDLOperation):
    """Elementwise unary op: result type equals the operand type."""

    T: ClassVar = VarConstraint("T", base(TensorType))
    input = operand_def(T)
    result = result_def(T)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input attr-dict `:` type($input)"

    def __init__(self, input: SSAValue, **props: Attribute):
        super().__init__(operands=[input], result_types=[input.type], properties=props)

    def verify_(self) -> None:
        """Check the DTensor types (operand and result share one type by construction).

        Raises:
            KnVerifyError: a tensor that is not a Mirage DTensor.
        """
        check_tensor_types(self)


@irdl_op_definition
class ExpOp(KnUnaryOp):
    """`kn.exp`: e^x elementwise."""
    name = "kn.exp"


@irdl_op_definition
class SquareOp(KnUnaryOp):
    """`kn.square`: x^2 elementwise."""
    name = "kn.square"


@irdl_op_definition
class SqrtOp(KnUnaryOp):
    """`kn.sqrt`: the square root elementwise."""
    name = "kn.sqrt"


@irdl_op_definition
class SiluOp(KnUnaryOp):
    """`kn.silu`: x * sigmoid(x) elementwise (SiLU, Elfwing et al. 2018)."""
    name = "kn.silu"


@irdl_op_definition
class SigmoidOp(KnUnaryOp):
    """`kn.sigmoid`: 1 / (1 + e^-x) elementwise."""
    name = "kn.sigmoid"


@irdl_op_definition
class GeluOp(KnUnaryOp):
    """`kn.gelu`: 0.5 x (1 + erf(x / sqrt(2))) elementwise (exact GELU, Hendrycks & Gimpel 2016)."""
    name = "kn.gelu"


@irdl_op_definition
class ReluOp(KnUnaryOp):
    """`kn.relu`: max(x, 0) elementwise."""
    name = "kn.relu"


@irdl_op_definition
class LogOp(KnUnaryOp):
    """`kn.log`: the natural logarithm elementwise."""
    name = "kn.log"


@irdl_op_definition
class ClampOp(KnUnaryOp):
    """`min(max(x, min_value), max_value)` with the op's real bounds (Mirage's runtime used [0, 1])."""

    name = "kn.clamp"
    min_value = prop_def(FloatAttr)
    max_value = prop_def(FloatAttr)

    def __init__(self, input: SSAValue, min_value: float, max_value: float):
        super().__init__(input, min_value=FloatAttr(min_value, f64), max_value=FloatAttr(max_value, f64))

    def verify_(self) -> None:
        """Check the DTensor types and the bounds.

        Raises:
            KnVerifyError: a tensor that is not a Mirage DTensor, or min_value > max_value.
        """
        super().verify_()
        lo, hi = self.min_value.value.data, self.max_value.value.data
        if not lo <= hi:
            raise fail(self, f"min_value ({lo}) must not exceed max_value ({hi})")


@irdl_op_definition
class MulScalarOp(KnUnaryOp):
    """`x * scalar`."""

    name = "kn.mul_scalar"
    scalar = prop_def(FloatAttr)

    def __init__(self, input: SSAValue, scalar: float):
        super().__init__(input, scalar=FloatAttr(scalar, f64))


class KnBinaryOp(IRDLOperation):
    """Elementwise binary op with numpy broadcasting over equal-rank operands."""

    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"

    def __init__(self, lhs: SSAValue, rhs: SSAValue):
        shape = tiling.broadcast_shape(shape_of(lhs), shape_of(rhs))
        super().__init__(operands=[lhs, rhs], result_types=[TensorType(element_type_of(lhs), shape)])

    def verify_(self) -> None:
        """Check the DTensor types, one element type, and the broadcast result shape.

        Raises:
            KnVerifyError: a tensor that is not a Mirage DTensor, different element types, operands
                that do not broadcast (`tiling.broadcast_shape`), or another result shape.
        """
        check_tensor_types(self)
        check_same_dtype(self, self.lhs, self.rhs, self.result)
        check_inferred_shape(self, lambda: tiling.broadcast_shape(shape_of(self.lhs), shape_of(self.rhs)), shape_of(self.result))


@irdl_op_definition
class AddOp(KnBinaryOp):
    """`kn.add`: lhs + rhs elementwise, broadcast."""
    name = "kn.add"


@irdl_op_definition
class SubOp(KnBinaryOp):
    """`kn.sub`: lhs - rhs elementwise, broadcast."""
    name = "kn.sub"


@irdl_op_definition
class MulOp(KnBinaryOp):
    """`kn.mul`: lhs * rhs elementwise, broadcast."""
    name = "kn.mul"


@irdl_op_definition
class DivOp(KnBinaryOp):
    """`kn.div`: lhs / rhs elementwise, broadcast."""
    name = "kn.div"


@irdl_op_definition
class PowOp(KnBinaryOp):
    """`kn.pow`: lhs ** rhs elementwise, broadcast."""
    name = "kn.pow"
