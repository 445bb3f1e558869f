"""`cute.causal_mask`: the causal mask on a shared-memory tile, and the mask origin a flash
`cute.mma_chain` applies to its scores in registers.

Both carry the mask as three properties (the tb op's index map made explicit,
dialects/tb/mask_ops.py `index_origin`): `offset` (element (I, J) kept where `J <= I +
offset`), `row_origin` and `col_origin`, each `array<i64: cx, cy, cz, ci>` -- the global row
(column) of the tile's element 0 is `cx * blockIdx.x + cy * blockIdx.y + cz * blockIdx.z +
ci * it` (`it` = the for-loop iteration), and element (i, j) of the tile's last two dims has
global row `row0 + i` and column `col0 + j`.

`cute.causal_mask(%in) [epilogue] MODE %out {offset = .., row_origin = .., col_origin = ..,
order = ..} : IN -> OUT`: `v = epilogue(mask(in))`, then `out (=|+=|max=) v` like
`cute.elementwise` (`order`: the dims from fastest to slowest).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, IntegerAttr, StringAttr, i64
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, prop_def

from mirage_xdsl.dialects.cute.attrs import SmemTensorType, UnaryFnAttr, dense, dense_ints, rule_error
from mirage_xdsl.dialects.cute.kernel import CuteOp, check_epilogue, check_mode, check_order, smem_type

ORIGIN_TERMS = 4
"""Entries of a mask origin: elements per blockIdx.x, .y, .z and per for-loop iteration."""


def mask_props(offset: int, row_origin: Sequence[int], col_origin: Sequence[int]) -> dict[str, Attribute]:
    """The three mask properties (module docstring) as op properties."""
    return {"offset": IntegerAttr(offset, i64), "row_origin": dense(row_origin), "col_origin": dense(col_origin)}


def check_mask(op: IRDLOperation, offset: int, row_origin: Sequence[int], col_origin: Sequence[int]) -> None:
    """Check a mask's properties: `offset >= 0`, origins of `ORIGIN_TERMS` entries >= 0.

    Raises:
        CuteVerifyError: a negative offset or coefficient, or an origin of another length.
    """
    if offset < 0:
        raise rule_error(op, f"mask offset {offset} < 0 would mask every key of row 0")
    for what, origin in (("row_origin", row_origin), ("col_origin", col_origin)):
        if len(origin) != ORIGIN_TERMS or any(c < 0 for c in origin):
            raise rule_error(op, f"{what} {tuple(origin)} must be {ORIGIN_TERMS} coefficients >= 0 (bx, by, bz, it)")


@irdl_op_definition
class CausalMaskOp(CuteOp):
    """The causal mask of a shared tile at its global position, then an epilogue and a store
    mode (module docstring)."""

    name = "cute.causal_mask"
    input = operand_def(SmemTensorType)
    out = operand_def(SmemTensorType)
    offset = prop_def(IntegerAttr)
    row_origin = prop_def(DenseArrayBase)
    col_origin = prop_def(DenseArrayBase)
    epilogue = prop_def(ArrayAttr)
    mode = prop_def(StringAttr)
    order = prop_def(DenseArrayBase)
    assembly_format = "`(` $input `)` $epilogue $mode $out attr-dict `:` type($input) `->` type($out)"

    def __init__(
        self,
        input: SSAValue,
        out: SSAValue,
        offset: int,
        row_origin: Sequence[int],
        col_origin: Sequence[int],
        epilogue: Sequence[UnaryFnAttr],
        mode: str,
        order: Sequence[int],
    ):
        props = mask_props(offset, row_origin, col_origin)
        props.update({"epilogue": ArrayAttr(epilogue), "mode": StringAttr(mode), "order": dense(order)})
        super().__init__(operands=[input, out], properties=props)

    @property
    def origins(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(row_origin, col_origin) as Python ints."""
        return dense_ints(self.row_origin), dense_ints(self.col_origin)

    def verify_(self) -> None:
        """Check the mask, the mode (not `rescale`), the epilogue, equal ranks >= 2 with the
        input broadcasting to the output, and the order.

        Raises:
            CuteVerifyError: a rule is broken.
        """
        check_mask(self, self.offset.value.data, *self.origins)
        check_mode(self, self.mode)
        if self.mode.data == "rescale":
            raise rule_error(self, "mode 'rescale' needs a scale tile; use store, add or max")
        check_epilogue(self, self.epilogue)
        shape, out_shape = smem_type(self.input).get_shape(), smem_type(self.out).get_shape()
        if len(out_shape) < 2 or len(shape) != len(out_shape) or any(a != b and a != 1 for a, b in zip(shape, out_shape)):
            raise rule_error(self, f"input {shape} must have the output's rank (>= 2) and broadcast to {out_shape}")
        check_order(self, self.order, len(out_shape))
