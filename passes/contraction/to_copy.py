"""`convert-contraction-permute-to-cute`: every `contraction.permute` -> one `cute.permute_copy`.

    mirage-opt einsum.mlir -p 'contraction-permute-operands,convert-contraction-permute-to-cute'

The transposes that contraction-permute-operands inserts become our own copy kernels
(dialects/cute/permute_copy.py), named `<func>_permute_<i>`.  Decisions: a 64 x 64
shared-memory tile when the innermost axis moves (tile = 64), else a straight copy of `vec`
elements per thread, 8 (16 bytes) when the inner extent is a multiple of 8.  The op's
`kn.workspace_offset` and `kn.strides` (kn-plan-workspace's place of the intermediate) move
to the kernel op.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.passes import ModulePass

from mirage_xdsl.dialects.contraction.permute import PermuteOp
from mirage_xdsl.dialects.cute.permute_copy import TRANSPOSE_TILE, PermuteCopyOp

KEPT_ATTRS = ("kn.workspace_offset", "kn.strides")


def copy_kind(shape: list[int], perm: list[int]) -> tuple[int, int]:
    """(tile, vec) of the copy kernel of `permute(tensor<shape>, perm)` (module docstring).

    Raises:
        Nothing.
    """
    if perm[-1] != len(shape) - 1:
        return TRANSPOSE_TILE, 1
    return 0, 8 if shape[-1] % 8 == 0 else 1


@dataclass(frozen=True)
class ConvertPermuteToCutePass(ModulePass):
    """Lower every `contraction.permute` to a `cute.permute_copy` (module docstring)."""

    name = "convert-contraction-permute-to-cute"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Replace each contraction.permute with a `cute.permute_copy` named `<func>_permute_<i>`.

        Raises:
            Nothing (the ops were verified).
        """
        count = 0
        for permute in [o for o in op.walk() if isinstance(o, PermuteOp)]:
            src = permute.input.type
            assert isinstance(src, TensorType)
            perm = permute.perm()
            tile, vec = copy_kind(list(src.get_shape()), perm)
            fn = permute.parent_op()
            fname = fn.sym_name.data if isinstance(fn, func.FuncOp) else "graph"
            new = PermuteCopyOp(
                permute.input, permute.result.type, kernel_name=f"{fname}_permute_{count}", permutation=perm, tile=tile, vec=vec
            )
            for key in KEPT_ATTRS:
                if key in permute.attributes:
                    new.attributes[key] = permute.attributes[key]
            block = permute.parent_block()
            assert block is not None
            block.insert_op_before(new, permute)
            if permute.result.name_hint:
                new.result.name_hint = permute.result.name_hint
            permute.result.replace_all_uses_with(new.result)
            block.erase_op(permute)
            count += 1
