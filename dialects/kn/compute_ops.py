"""`kn` ops beyond elementwise: `kn.matmul`, the reductions (`kn.reduction`, the stable
softmax's `kn.reduction_max`), `kn.rms_norm`, `kn.concat`, `kn.chunk` and `kn.all_reduce`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, TensorType, UnitAttr, i64
from xdsl.ir import SSAValue
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    VarConstraint,
    base,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_result_def,
)
from xdsl.traits import Pure

from mirage_xdsl.dialects import tiling
from mirage_xdsl.dialects.kn.elementwise_ops import KnBinaryOp
from mirage_xdsl.dialects.kn.tensors import (
    check_inferred_shape,
    check_same_dtype,
    check_shape,
    check_tensor_types,
    element_type_of,
    fail,
    int_array,
    ints,
    shape_of,
)


@irdl_op_definition
class MatmulOp(KnBinaryOp):
    """Batched GEMM over the last two dims; leading (batch) dims must be equal."""

    name = "kn.matmul"

    def __init__(self, lhs: SSAValue, rhs: SSAValue):
        shape = tiling.matmul_shape(shape_of(lhs), shape_of(rhs), threadblock=False)
        IRDLOperation.__init__(self, operands=[lhs, rhs], result_types=[TensorType(element_type_of(lhs), shape)])

    def verify_(self) -> None:
        """Check the DTensor types, one element type, and the [B..., M, K] @ [B..., K, N] -> [B..., M, N] shape.

        Raises:
            KnVerifyError: a tensor that is not a Mirage DTensor, operands and result of different
                element types, operands that do not multiply (`tiling.matmul_shape`), or another
                result shape.
        """
        check_tensor_types(self)
        check_same_dtype(self, self.lhs, self.rhs, self.result)
        check_inferred_shape(
            self, lambda: tiling.matmul_shape(shape_of(self.lhs), shape_of(self.rhs), threadblock=False), shape_of(self.result)
        )


@irdl_op_definition
class ReductionOp(IRDLOperation):
    """Sum over `dim` down to `size` elements; with size > 1 groups are STRIDED:
    `out[..., j, ...] = sum_k in[..., j + k*size, ...]` (mirage-notes 1.7)."""

    name = "kn.reduction"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    dim = prop_def(IntegerAttr)
    size = prop_def(IntegerAttr)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue, dim: int, size: int = 1):
        shape = tiling.reduction_shape(shape_of(input), dim, size)
        super().__init__(
            operands=[input],
            result_types=[TensorType(element_type_of(input), shape)],
            properties={"dim": IntegerAttr(dim, i64), "size": IntegerAttr(size, i64)},
        )

    def verify_(self) -> None:
        """Check the DTensor types, one element type, and the reduced shape (dim `dim` becomes `size`).

        Raises:
            KnVerifyError: a tensor that is not a Mirage DTensor, input and result of different element
                types, a bad dim or size (`tiling.reduction_shape`), or another result shape.
        """
        check_tensor_types(self)
        check_same_dtype(self, self.input, self.result)
        check_inferred_shape(
            self, lambda: tiling.reduction_shape(shape_of(self.input), self.dim.value.data, self.size.value.data), shape_of(self.result)
        )


@irdl_op_definition
class ReductionMaxOp(IRDLOperation):
    """Max over `dim` (size -> 1): `out[..., 0, ...] = max_k in[..., k, ...]`.

    Not one of Mirage's kernel-level ops (its graphs subtract no row max); it is what a
    numerically stable softmax or attention needs (`exp(x - max(x))`) and what Tensor
    Comprehensions' `max=!` lowers to.  kn-fuse places it in threadblock graphs
    (`tb.reduce_max`, and a `max` for-loop accumulator when the loop walks `dim`); outside
    fused kernels it runs as a library call.
    """

    name = "kn.reduction_max"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    dim = prop_def(IntegerAttr)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue, dim: int):
        shape = tiling.reduction_shape(shape_of(input), dim, 1)
        super().__init__(
            operands=[input],
            result_types=[TensorType(element_type_of(input), shape)],
            properties={"dim": IntegerAttr(dim, i64)},
        )

    def verify_(self) -> None:
        """Check the DTensor types, one element type, and the result shape (dim `dim` reduced to 1).

        Raises:
            KnVerifyError: a tensor that is not a Mirage DTensor, input and result of different element
                types, a bad dim (`tiling.reduction_shape`), or another result shape.
        """
        check_tensor_types(self)
        check_same_dtype(self, self.input, self.result)
        check_inferred_shape(self, lambda: tiling.reduction_shape(shape_of(self.input), self.dim.value.data, 1), shape_of(self.result))


@irdl_op_definition
class RmsNormOp(IRDLOperation):
    """`x / sqrt(mean(x^2))` over the trailing `normalized_shape` dims; no epsilon, no gain."""

    name = "kn.rms_norm"
    T: ClassVar = VarConstraint("T", base(TensorType))
    input = operand_def(T)
    result = result_def(T)
    normalized_shape = prop_def(DenseArrayBase)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input attr-dict `:` type($input)"

    def __init__(self, input: SSAValue, normalized_shape: Sequence[int]):
        super().__init__(
            operands=[input], result_types=[input.type], properties={"normalized_shape": int_array(normalized_shape)}
        )

    def verify_(self) -> None:
        """Check the DTensor types and that `normalized_shape` is the input's trailing dims.

        Raises:
            KnVerifyError: a tensor that is not a Mirage DTensor, or an empty, too long or mismatched
                `normalized_shape`.
        """
        check_tensor_types(self)
        norm = ints(self.normalized_shape)
        shape = shape_of(self.input)
        if not norm or len(norm) > len(shape) or tuple(shape[len(shape) - len(norm) :]) != norm:
            raise fail(self, f"normalized_shape {norm} must equal the trailing dims of {shape}")


@irdl_op_definition
class ConcatOp(IRDLOperation):
    """Concatenate two tensors along `dim`."""

    name = "kn.concat"
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    dim = prop_def(IntegerAttr)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"

    def __init__(self, lhs: SSAValue, rhs: SSAValue, dim: int):
        shape = tiling.concat_shape(shape_of(lhs), shape_of(rhs), dim)
        super().__init__(
            operands=[lhs, rhs],
            result_types=[TensorType(element_type_of(lhs), shape)],
            properties={"dim": IntegerAttr(dim, i64)},
        )

    def verify_(self) -> None:
        """Check the DTensor types, one element type, and the concatenated shape along `dim`.

        Raises:
            KnVerifyError: a tensor that is not a Mirage DTensor, different element types, operands
                that do not concatenate (`tiling.concat_shape`), or another result shape.
        """
        check_tensor_types(self)
        check_same_dtype(self, self.lhs, self.rhs, self.result)
        check_inferred_shape(
            self, lambda: tiling.concat_shape(shape_of(self.lhs), shape_of(self.rhs), self.dim.value.data), shape_of(self.result)
        )


@irdl_op_definition
class ChunkOp(IRDLOperation):
    """Split `dim` into `chunks` equal parts (Mirage `chunk(A, chunk_size, dim)`)."""

    name = "kn.chunk"
    input = operand_def(TensorType)
    outputs = var_result_def(TensorType)
    dim = prop_def(IntegerAttr)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input attr-dict `:` type($input) `->` type($outputs)"

    def __init__(self, input: SSAValue, chunks: int, dim: int):
        shape = list(shape_of(input))
        if not 0 <= dim < len(shape):
            raise tiling.ShapeError(f"chunk dim {dim} is not a dimension of a rank-{len(shape)} tensor")
        if chunks < 1 or shape[dim] % chunks:
            raise tiling.ShapeError(f"dim {dim} (size {shape[dim]}) is not divisible into {chunks} chunks")
        shape[dim] //= chunks
        super().__init__(
            operands=[input],
            result_types=[[TensorType(element_type_of(input), shape)] * chunks],
            properties={"dim": IntegerAttr(dim, i64)},
        )

    def verify_(self) -> None:
        """Check the DTensor types, one element type, and one result per equal chunk of dim `dim`.

        Raises:
            KnVerifyError: a tensor that is not a Mirage DTensor, different element types, a dim
                outside the input, no result, a dim size not divisible by the number of results, or
                a result that is not the input's shape with dim `dim` divided by that number.
        """
        check_tensor_types(self)
        check_same_dtype(self, self.input, *self.outputs)
        shape = shape_of(self.input)
        dim = self.dim.value.data
        if not 0 <= dim < len(shape):
            raise fail(self, f"chunk dim {dim} is not a dimension of a rank-{len(shape)} tensor")
        chunks = len(self.outputs)
        if chunks < 1:
            raise fail(self, "needs at least one result (one per chunk)")
        if shape[dim] % chunks:
            raise fail(self, f"dim {dim} (size {shape[dim]}) is not divisible into {chunks} chunks (one per result)")
        expected = list(shape)
        expected[dim] //= chunks
        for res in self.outputs:
            check_shape(self, expected, shape_of(res))


@irdl_op_definition
class AllReduceOp(IRDLOperation):
    """Multi-GPU all-reduce (sum); on one GPU the identity."""

    name = "kn.all_reduce"
    T: ClassVar = VarConstraint("T", base(TensorType))
    input = operand_def(T)
    result = result_def(T)
    inplace = opt_prop_def(UnitAttr)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input attr-dict `:` type($input)"

    def __init__(self, input: SSAValue, inplace: bool = False):
        props = {"inplace": UnitAttr()} if inplace else {}
        super().__init__(operands=[input], result_types=[input.type], properties=props)

    def verify_(self) -> None:
        """Check the DTensor types.

        Raises:
            KnVerifyError: a tensor that is not a Mirage DTensor.
        """
        check_tensor_types(self)
