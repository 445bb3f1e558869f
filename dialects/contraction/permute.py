"""`contraction.permute`: a tensor with its axes reordered (a materialised transpose).

    %t = contraction.permute %a {permutation = array<i64: 0, 2, 1, 3>}
        : tensor<64x32x48x16xf16> -> tensor<64x48x32x16xf16>

Result axis i is operand axis `permutation[i]` (the convention of `torch.permute`), and the
result is a new row-major tensor: result[i_0, ..., i_r-1] = operand[j] with
j[permutation[i]] = i_i.  `contraction-permute-operands` inserts it in front of a
`contraction.contract` whose operand layout has no batched-GEMM view
(passes/contraction/permute_operands.py); `convert-contraction-permute-to-cute` lowers it to
one copy kernel (`cute.permute_copy`).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import DenseArrayBase, TensorType, i64
from xdsl.ir import SSAValue
from xdsl.irdl import IRDLOperation, ParsePropInAttrDict, irdl_op_definition, operand_def, prop_def, result_def
from xdsl.utils.exceptions import VerifyException


def permuted_shape(shape: Sequence[int], permutation: Sequence[int]) -> list[int]:
    """The shape of `permute(x, permutation)` for an `x` of `shape`.

    Raises:
        ValueError: `permutation` is not a permutation of 0..len(shape)-1.
    """
    if sorted(permutation) != list(range(len(shape))):
        raise ValueError(f"permutation {list(permutation)} must name each axis 0..{len(shape) - 1} of a rank-{len(shape)} tensor once")
    return [shape[p] for p in permutation]


@irdl_op_definition
class PermuteOp(IRDLOperation):
    """`result = permute(input, permutation)`, row-major result (see the module docstring)."""

    name = "contraction.permute"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    permutation = prop_def(DenseArrayBase)

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, value: SSAValue, permutation: Sequence[int]):
        tensor = value.type
        assert isinstance(tensor, TensorType)
        shape = permuted_shape(list(tensor.get_shape()), permutation)
        super().__init__(
            operands=[value],
            result_types=[TensorType(tensor.element_type, shape)],
            properties={"permutation": DenseArrayBase.from_list(i64, list(permutation))},
        )

    def perm(self) -> list[int]:
        """The permutation as a list of ints."""
        return [int(v) for v in self.permutation.get_values()]

    def verify_(self) -> None:
        """Check the permutation and the result type.

        Raises:
            VerifyException: the permutation is not one of the operand's axes, or the result's
                element type or shape is not the operand's, permuted.
        """
        src, dst = self.input.type, self.result.type
        assert isinstance(src, TensorType) and isinstance(dst, TensorType)
        try:
            want = permuted_shape(list(src.get_shape()), self.perm())
        except ValueError as err:
            raise VerifyException(f"contraction.permute: {err}") from err
        if src.element_type != dst.element_type or list(dst.get_shape()) != want:
            raise VerifyException(
                f"contraction.permute: the result must be tensor<{'x'.join(map(str, want))}x{src.element_type}> "
                f"(the operand's axes in the order {self.perm()}), got {dst}"
            )
