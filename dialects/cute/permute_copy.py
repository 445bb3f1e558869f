"""`cute.permute_copy`: one generated kernel that writes a tensor with its axes reordered.

    %t = cute.permute_copy(%a) {kernel_name = "einsum_permute_0", permutation = array<i64: 0, 2, 1, 3>,
                                tile = 64 : i64, vec = 1 : i64}
        : (tensor<64x32x48x16xf16>) -> tensor<64x48x32x16xf16>

Result axis i is operand axis `permutation[i]`; both tensors are row-major.  The lowering
(`convert-contraction-permute-to-cute`, passes/contraction/to_copy.py) decides the kernel and
the CUDA printer (codegen/permute_copy.py) only prints it:

- `tile = 64`: the innermost axis changes; each block moves a 64 x 64 tile through shared
  memory, reading along the operand's innermost axis and writing along the result's, so both
  global accesses are coalesced (the classic tiled transpose);
- `tile = 0`: the innermost axis stays; each thread copies `vec` consecutive elements
  (8: one 16-byte access, when the inner extent is a multiple of 8; else 1).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, StringAttr, TensorType, i64
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import IRDLOperation, ParsePropInAttrDict, irdl_op_definition, operand_def, prop_def, result_def
from xdsl.utils.exceptions import VerifyException

TRANSPOSE_TILE = 64
"""Edge of the shared-memory tile of the transposing copy (elements)."""


@irdl_op_definition
class PermuteCopyOp(IRDLOperation):
    """A materialised `permute` as one kernel launch (see the module docstring)."""

    name = "cute.permute_copy"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    kernel_name = prop_def(StringAttr)
    permutation = prop_def(DenseArrayBase)
    tile = prop_def(IntegerAttr)
    vec = prop_def(IntegerAttr)

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "`(` $input `)` attr-dict `:` functional-type(operands, results)"

    def __init__(self, value: SSAValue, result_type: Attribute, *, kernel_name: str, permutation: Sequence[int], tile: int, vec: int):
        super().__init__(
            operands=[value],
            result_types=[result_type],
            properties={
                "kernel_name": StringAttr(kernel_name),
                "permutation": DenseArrayBase.from_list(i64, list(permutation)),
                "tile": IntegerAttr(tile, i64),
                "vec": IntegerAttr(vec, i64),
            },
        )

    def perm(self) -> list[int]:
        """The permutation as a list of ints."""
        return [int(v) for v in self.permutation.get_values()]

    def verify_(self) -> None:
        """Check the permutation, the result type and the kernel choice.

        Raises:
            VerifyException: the permutation is not one of the operand's axes, the result is
                not the operand permuted (shape, element type), `tile` is not 0 or
                `TRANSPOSE_TILE`, tile 0 with the innermost axis moved (or 64 with it kept),
                or `vec` is not 1 or 8 (8 needs an inner extent that is a multiple of 8).
        """
        src, dst = self.input.type, self.result.type
        assert isinstance(src, TensorType) and isinstance(dst, TensorType)
        shape, perm = list(src.get_shape()), self.perm()
        if sorted(perm) != list(range(len(shape))):
            raise VerifyException(f"cute.permute_copy: permutation {perm} is not a permutation of the {len(shape)} axes")
        if src.element_type != dst.element_type or list(dst.get_shape()) != [shape[p] for p in perm]:
            raise VerifyException(f"cute.permute_copy: the result {dst} is not the operand {src} permuted by {perm}")
        tile, vec = self.tile.value.data, self.vec.value.data
        inner_kept = perm[-1] == len(shape) - 1
        if tile not in (0, TRANSPOSE_TILE) or (tile == 0) != inner_kept:
            raise VerifyException(
                f"cute.permute_copy: tile must be {TRANSPOSE_TILE} when the innermost axis moves and 0 when it stays, got {tile}"
            )
        if vec not in (1, 8) or (vec == 8 and (tile or shape[-1] % 8)):
            raise VerifyException("cute.permute_copy: vec must be 1, or 8 for a kept innermost axis of a multiple of 8 elements")
