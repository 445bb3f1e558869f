"""`kn.customized`: a fused kernel whose region is a threadblock graph (`tb` ops), with its
grid, block, for-loop range and reduction dimx (mirage-notes 1.4-1.7).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, TensorType, i64
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_op_definition,
    prop_def,
    region_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import IsolatedFromAbove, NoTerminator

from mirage_xdsl.dialects import tiling, views
from mirage_xdsl.dialects.common.checks import check_shape, element_type_of, fail, shape_of
from mirage_xdsl.dialects.kn.tensors import TB_OUTPUT_OP, check_tensor_types, int_array, ints
from mirage_xdsl.target.device import MAX_FORLOOP_RANGE

SAVED_PLAN_ATTR = "kn.saved_plan"
"""Unit attribute on a `kn.customized` read from a saved muGraph (a plan found by Mirage's
search): `mirage-transpile` raises such kernels to kn ops and re-plans them by default
(`kn-lift-customized`), while threadblock graphs written by hand or by our planner are kept."""


@irdl_op_definition
class CustomizedOp(IRDLOperation):
    """A graph-defined kernel: its region is a threadblock graph (`tb` ops).

    The region's block arguments are the kernel's view of `inputs` (positionally); the
    i-th `tb.output` op in the region produces result i, unless the outputs name their
    results (`result_index`, with `view_offset` boxes: `output_slots`).  Graph attributes: `grid_dim` and
    `block_dim` (x, y, z), `forloop_range` (iterations, >= 1), `reduction_dimx` (target
    size of `*_to_dimx` reductions, Mirage default 64).
    """

    name = "kn.customized"
    inputs = var_operand_def(TensorType)
    outputs = var_result_def(TensorType)
    grid_dim = prop_def(DenseArrayBase)
    block_dim = prop_def(DenseArrayBase)
    forloop_range = prop_def(IntegerAttr)
    reduction_dimx = prop_def(IntegerAttr)
    body = region_def("single_block")
    traits = traits_def(IsolatedFromAbove(), NoTerminator())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "`(` $inputs `)` attr-dict-with-keyword `:` functional-type($inputs, $outputs) $body"

    def __init__(
        self,
        inputs: Sequence[SSAValue],
        output_types: Sequence[Attribute],
        body: Region | Block,
        *,
        grid_dim: Sequence[int],
        block_dim: Sequence[int] = (128, 1, 1),
        forloop_range: int = 1,
        reduction_dimx: int = 64,
    ):
        if isinstance(body, Block):
            body = Region(body)
        super().__init__(
            operands=[list(inputs)],
            result_types=[list(output_types)],
            regions=[body],
            properties={
                "grid_dim": int_array(grid_dim),
                "block_dim": int_array(block_dim),
                "forloop_range": IntegerAttr(forloop_range, i64),
                "reduction_dimx": IntegerAttr(reduction_dimx, i64),
            },
        )

    @property
    def grid(self) -> tuple[int, int, int]:
        """The launch grid (x, y, z) in blocks."""
        return ints(self.grid_dim)  # type: ignore[return-value]

    @property
    def block(self) -> tuple[int, int, int]:
        """The block shape (x, y, z) in threads."""
        return ints(self.block_dim)  # type: ignore[return-value]

    @property
    def grid_sum_axis(self) -> int | None:
        """The grid axis that the graph's `tb.grid_sum` ops reduce (None without them)."""
        if len(self.body.blocks) != 1:
            return None
        for op in self.body.block.ops:
            if op.name == "tb.grid_sum":
                return op.properties["dim"].value.data  # type: ignore[union-attr]
        return None

    @property
    def store_grid(self) -> tuple[int, int, int]:
        """The grid as `tb.output` sees it: the `tb.grid_sum` axis counts 1 block (one block
        of each split group stores), the other axes as in `grid_dim`."""
        grid = list(self.grid)
        axis = self.grid_sum_axis
        if axis is not None:
            grid[axis] = 1
        return tuple(grid)  # type: ignore[return-value]

    @property
    def num_iterations(self) -> int:
        """Iterations of the block's for-loop (`forloop_range`)."""
        return self.forloop_range.value.data

    @property
    def dimx(self) -> int:
        """Target size of the graph's `*_to_dimx` reductions (`reduction_dimx`, Mirage default 64)."""
        return self.reduction_dimx.value.data

    def output_slots(self) -> list[tuple[Operation, int, tuple[int, ...]]]:
        """(the `tb.output` op, the result it stores into, the element offset of its box per dim)
        for every `tb.output` in region order: result i for the i-th output at offset 0, unless
        the outputs carry `result_index` / `view_offset` (tb.output's docstring)."""
        slots = []
        outputs = [op for op in self.body.block.ops if op.name == TB_OUTPUT_OP] if self.body.blocks else []
        for i, op in enumerate(outputs):
            index = op.properties.get("result_index")
            offset = op.properties.get("view_offset")
            rank = len(shape_of(op.operands[0]))
            slots.append(
                (
                    op,
                    index.value.data if isinstance(index, IntegerAttr) else i,
                    ints(offset) if isinstance(offset, DenseArrayBase) else (0,) * rank,
                )
            )
        return slots

    def graph_error(self) -> str | None:
        """Why the graph attributes (grid_dim, block_dim, forloop_range, reduction_dimx) or the
        region's shape are unusable, or None when they are well formed.

        The `tb` verifiers consult this first: xDSL verifies the nested ops before their
        parent, so they must not compute tiles from a malformed graph.
        """
        props = self.properties
        for key in ("grid_dim", "block_dim"):
            if not isinstance(props.get(key), DenseArrayBase):
                return f"{key} must be an array of 3 sizes (x, y, z), e.g. array<i64: 1, 1, 1>"
        for key in ("forloop_range", "reduction_dimx"):
            if not isinstance(props.get(key), IntegerAttr):
                return f"{key} must be an integer attribute, e.g. 1 : i64"
        if (err := tiling.launch_geometry_error(ints(self.grid_dim), ints(self.block_dim))) is not None:
            return err
        if self.num_iterations < 1:
            return f"forloop_range must be >= 1, got {self.num_iterations}"
        if self.num_iterations > MAX_FORLOOP_RANGE:
            return (
                f"forloop_range = {self.num_iterations} exceeds {MAX_FORLOOP_RANGE} (the most iterations "
                "the reference executor checks in seconds, target/device.py); take longer tiles per iteration "
                "or split the reduction across the grid"
            )
        if self.dimx < 1:
            return f"reduction_dimx must be >= 1, got {self.dimx}"
        if len(self.body.blocks) != 1:
            return f"the region must hold exactly one block, got {len(self.body.blocks)}"
        return None

    def verify_(self) -> None:
        """Check the graph attributes, the region and every result against its `tb.output`.

        Raises:
            KnVerifyError: `graph_error`'s reason (launch geometry, forloop_range, region shape), a
                tensor that is not a Mirage DTensor, block arguments that do not match the inputs, a
                kn op inside the region, not one `tb.output` per result (without `result_index`),
                `result_index` on some outputs only or naming no result, `tb.grid_sum` ops over
                different grid axes, a result whose shape (`tiling.output_dtensor_shape`) or element
                type differs from its `tb.output` tile's, or view boxes that do not cover their
                result exactly once (`views.check_cover`).
        """
        if (err := self.graph_error()) is not None:
            raise fail(self, err)
        check_tensor_types(self)
        args = self.body.block.args
        if len(args) != len(self.inputs) or any(a.type != v.type for a, v in zip(args, self.inputs)):
            raise fail(
                self,
                f"the region's block arguments ({', '.join(str(a.type) for a in args) or 'none'}) must match "
                f"the inputs ({', '.join(str(v.type) for v in self.inputs) or 'none'}) in number and type",
            )
        for op in self.body.block.ops:
            if op.dialect_name() == "kn":
                raise fail(self, f"kernel op {op.name} cannot appear inside a threadblock graph; use the tb op")
        axes = {op.properties["dim"] for op in self.body.block.ops if op.name == "tb.grid_sum"}
        if len(axes) > 1:
            raise fail(self, "all tb.grid_sum ops of a graph must reduce the same grid axis (one synchronisation)")
        self._verify_outputs()

    def _verify_outputs(self) -> None:
        # by name: the tb dialect builds on this one, so this one does not import it
        slots = self.output_slots()
        named = [op.properties.get("result_index") is not None for op, _, _ in slots]
        if any(named) and not all(named):
            raise fail(self, "either every tb.output names its result (result_index) or none does")
        if not any(named) and len(slots) != len(self.outputs):
            raise fail(
                self, f"{len(slots)} tb.output ops for {len(self.outputs)} results; each result needs one tb.output"
            )
        store_grid = self.store_grid
        boxes: dict[int, list[tuple[tuple[int, ...], tuple[int, ...]]]] = {}
        for i, (out_op, r, offset) in enumerate(slots):
            if not 0 <= r < len(self.outputs):
                raise fail(self, f"tb.output #{i}: result_index {r} is not a result (the op has {len(self.outputs)})")
            res = self.outputs[r]
            try:
                box = tiling.output_dtensor_shape(shape_of(out_op.operands[0]), store_grid, ints(out_op.properties["output_map"]))  # type: ignore[arg-type]
            except tiling.ShapeError as err:
                raise fail(self, f"tb.output #{i}: {err}") from None
            if out_op.properties.get("view_offset") is None and out_op.properties.get("result_index") is None:
                check_shape(self, box, shape_of(res), what=f"result #{r}")
            boxes.setdefault(r, []).append((offset, box))
            if element_type_of(res) != element_type_of(out_op.operands[0]):
                raise fail(
                    self,
                    f"result #{r} element type {element_type_of(res)} differs from its tb.output tile's "
                    f"{element_type_of(out_op.operands[0])}",
                )
        for r, res in enumerate(self.outputs):
            if r not in boxes:
                raise fail(self, f"result #{r} has no tb.output; each result needs at least one")
            try:
                views.check_cover(shape_of(res), boxes[r])
            except tiling.ShapeError as err:
                raise fail(self, f"result #{r}: the boxes of its tb.output ops must cover it exactly once: {err}") from None
