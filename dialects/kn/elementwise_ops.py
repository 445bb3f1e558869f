"""`kn` elementwise ops: the unary ops (`kn.exp` ... `kn.clamp`, `kn.mul_scalar`) and the
broadcasting binary ops (`kn.add`, `kn.sub`, `kn.mul`, `kn.div`, `kn.pow`); Mirage
`include/mirage/kernel/element_unary.h`, `element_binary.h`.  Operands, syntax and verifiers
come from the bases shared with tb (`dialects/common/op_bases.py`).
"""

from __future__ import annotations

from xdsl.dialects.builtin import TensorType
from xdsl.irdl import irdl_op_definition

from mirage_xdsl.dialects.common.op_bases import AddScalarOpBase, BinaryOpBase, ClampOpBase, MulScalarOpBase, UnaryOpBase
from mirage_xdsl.dialects.kn.tensors import KnOp


class KnUnaryOp(KnOp, UnaryOpBase[TensorType]):
    """Elementwise unary op: result type equals the operand type."""


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
class ClampOp(ClampOpBase[TensorType], KnUnaryOp):
    """`min(max(x, min_value), max_value)` with the op's real bounds (Mirage's runtime used [0, 1])."""

    name = "kn.clamp"


@irdl_op_definition
class MulScalarOp(MulScalarOpBase[TensorType], KnUnaryOp):
    """`x * scalar`."""

    name = "kn.mul_scalar"


@irdl_op_definition
class AddScalarOp(AddScalarOpBase[TensorType], KnUnaryOp):
    """`x + scalar` (not a Mirage op: a normalisation's epsilon, Tensor Comprehensions' `x + c`)."""

    name = "kn.add_scalar"


class KnBinaryOp(KnOp, BinaryOpBase[TensorType]):
    """Elementwise binary op with numpy broadcasting over equal-rank operands."""


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
