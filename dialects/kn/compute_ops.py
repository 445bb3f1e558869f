"""`kn` ops beyond elementwise: `kn.matmul`, the reductions (`kn.reduction`, the stable
softmax's `kn.reduction_max`), `kn.rms_norm`, `kn.concat`, `kn.chunk` and `kn.all_reduce`.
All but `kn.chunk` subclass the bases shared with tb (`dialects/common/op_bases.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, TensorType, UnitAttr, i64
from xdsl.ir import SSAValue
from xdsl.irdl import irdl_op_definition, operand_def, opt_prop_def, prop_def, var_result_def

from mirage_xdsl.dialects import tiling
from mirage_xdsl.dialects.common.checks import check_shape, fail, shape_of
from mirage_xdsl.dialects.common.op_bases import ConcatOpBase, MatmulOpBase, OneResultReductionOpBase, UnaryOpBase
from mirage_xdsl.dialects.kn.elementwise_ops import KnBinaryOp
from mirage_xdsl.dialects.kn.tensors import KnOp, int_array, ints


@irdl_op_definition
class MatmulOp(MatmulOpBase[TensorType], KnBinaryOp):
    """Batched GEMM over the last two dims; leading (batch) dims must be equal."""

    name = "kn.matmul"


@irdl_op_definition
class ReductionOp(KnOp, OneResultReductionOpBase[TensorType]):
    """Sum over `dim` down to `size` elements; with size > 1 groups are STRIDED:
    `out[..., j, ...] = sum_k in[..., j + k*size, ...]` (mirage-notes 1.7)."""

    name = "kn.reduction"
    size = prop_def(IntegerAttr)
    KEEPS_F32_SUMS: ClassVar[bool] = True

    def __init__(self, input: SSAValue, dim: int, size: int = 1):
        super().__init__(input, dim, size, size=IntegerAttr(size, i64))

    def reduced_size(self) -> int:
        """The property `size`."""
        return self.size.value.data


@irdl_op_definition
class ReductionMaxOp(KnOp, OneResultReductionOpBase[TensorType]):
    """Max over `dim` (size -> 1): `out[..., 0, ...] = max_k in[..., k, ...]`.

    Not one of Mirage's kernel-level ops (its graphs subtract no row max); it is what a
    numerically stable softmax or attention needs (`exp(x - max(x))`) and what Tensor
    Comprehensions' `max=!` lowers to.  kn-fuse places it in threadblock graphs
    (`tb.reduce_max`, and a `max` for-loop accumulator when the loop walks `dim`); outside
    fused kernels it runs as a library call.
    """

    name = "kn.reduction_max"

    def __init__(self, input: SSAValue, dim: int):
        super().__init__(input, dim)


@irdl_op_definition
class RmsNormOp(KnOp, UnaryOpBase[TensorType]):
    """`x / sqrt(mean(x^2))` over the trailing `normalized_shape` dims; no epsilon, no gain."""

    name = "kn.rms_norm"
    normalized_shape = prop_def(DenseArrayBase)

    def __init__(self, input: SSAValue, normalized_shape: Sequence[int]):
        super().__init__(input, normalized_shape=int_array(normalized_shape))

    def verify_(self) -> None:
        """Check the DTensor types and that `normalized_shape` is the input's trailing dims.

        Raises:
            KnVerifyError: a tensor that is not a Mirage DTensor, or an empty, too long or mismatched
                `normalized_shape`.
        """
        super().verify_()
        norm = ints(self.normalized_shape)
        shape = shape_of(self.input)
        if not norm or len(norm) > len(shape) or tuple(shape[len(shape) - len(norm) :]) != norm:
            raise fail(self, f"normalized_shape {norm} must equal the trailing dims of {shape}")


@irdl_op_definition
class ConcatOp(KnOp, ConcatOpBase[TensorType]):
    """Concatenate two tensors along `dim`."""

    name = "kn.concat"


@irdl_op_definition
class ChunkOp(KnOp):
    """Split `dim` into `chunks` equal parts (Mirage `chunk(A, chunk_size, dim)`)."""

    name = "kn.chunk"
    input = operand_def(TensorType)
    outputs = var_result_def(TensorType)
    dim = prop_def(IntegerAttr)
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
            result_types=[[self.derived_type(input, shape)] * chunks],
            properties={"dim": IntegerAttr(dim, i64)},
        )

    def verify_(self) -> None:
        """Check the DTensor types, one element type, and one result per equal chunk of dim `dim`.

        Raises:
            KnVerifyError: a tensor that is not a Mirage DTensor, different element types, a dim
                outside the input, no result, a dim size not divisible by the number of results, or
                a result that is not the input's shape with dim `dim` divided by that number.
        """
        self.check_level_rules()
        self.check_element_types(self.input, *self.outputs)
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
class AllReduceOp(KnOp, UnaryOpBase[TensorType]):
    """Multi-GPU all-reduce (sum); on one GPU the identity."""

    name = "kn.all_reduce"
    inplace = opt_prop_def(UnitAttr)

    def __init__(self, input: SSAValue, inplace: bool = False):
        props = {"inplace": UnitAttr()} if inplace else {}
        super().__init__(input, **props)
