"""`tb.input` and `tb.output`: the tiles a block loads from its kernel's inputs (imap, forloop
dim) and stores to its outputs (omap), mirage-notes 1.4-1.5.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, TensorType, i64
from xdsl.ir import Attribute, BlockArgument, SSAValue
from xdsl.irdl import irdl_op_definition, operand_def, opt_prop_def, prop_def, result_def, traits_def
from xdsl.traits import HasParent, MemoryWriteEffect

from mirage_xdsl.dialects import tiling, views
from mirage_xdsl.dialects.common.checks import check_shape, element_type_of, fail, shape_of
from mirage_xdsl.dialects.kn.customized import CustomizedOp
from mirage_xdsl.dialects.kn.tensors import check_tensor_types, int_array, ints
from mirage_xdsl.dialects.tb.accum_ops import depends_on_grid_sum
from mirage_xdsl.dialects.tb.stensor import STensorType, TbOp, after_accum, checked_graph_of


@irdl_op_definition
class InputOp(TbOp):
    """Load one tile of a kernel input per block (and per iteration if `forloop_dim >= 0`).

    `input_map` (x, y, z): tensor dim partitioned by each grid axis, -1 = replicated.
    The tile shape is derived by `tiling.input_tile_shape` and checked by the verifier.

    Optional view (not Mirage; `dialects/views.py`): `view_offset` and `view_shape` (both or
    neither, one entry per dim, in elements) make the op load from the box of the dtensor
    starting at `view_offset`, with the dtensor's strides, as if that box were the dtensor: the
    tiles partition `view_shape`.  A `kn.chunk` result read by a kernel is such a view.
    """

    name = "tb.input"
    dtensor = operand_def(TensorType)
    result = result_def(STensorType)
    input_map = prop_def(DenseArrayBase)
    forloop_dim = prop_def(IntegerAttr)
    view_offset = opt_prop_def(DenseArrayBase)
    view_shape = opt_prop_def(DenseArrayBase)
    assembly_format = "$dtensor attr-dict `:` type($dtensor) `->` type($result)"

    def __init__(
        self,
        dtensor: SSAValue,
        input_map: Sequence[int],
        forloop_dim: int,
        tile_shape: Sequence[int],
        view: tuple[Sequence[int], Sequence[int]] | None = None,
    ):
        props: dict[str, Attribute] = {"input_map": int_array(input_map), "forloop_dim": IntegerAttr(forloop_dim, i64)}
        if view is not None:
            props["view_offset"] = int_array(view[0])
            props["view_shape"] = int_array(view[1])
        super().__init__(
            operands=[dtensor],
            result_types=[STensorType(tile_shape, element_type_of(dtensor))],
            properties=props,
        )

    @property
    def view_dims(self) -> tuple[int, ...]:
        """The shape the tiles partition: `view_shape`, or the dtensor's shape without a view."""
        return ints(self.view_shape) if self.view_shape is not None else shape_of(self.dtensor)

    @property
    def view_offsets(self) -> tuple[int, ...]:
        """`view_offset` (elements per dim), zeros without a view."""
        if self.view_offset is not None:
            return ints(self.view_offset)
        return (0,) * len(shape_of(self.dtensor))

    @property
    def imap(self) -> tuple[int, ...]:
        """`input_map` (x, y, z): the dtensor dim each grid axis partitions, -1 = replicated."""
        return ints(self.input_map)

    @property
    def fdim(self) -> int:
        """The dtensor dim the for-loop walks (`forloop_dim`), -1 = loaded once before the loop."""
        return self.forloop_dim.value.data

    def verify_(self) -> None:
        """Check the types and, inside a graph, the operand and the tile shape.

        Raises:
            KnVerifyError: a tensor that is not a Mirage DTensor, a tile typed after_accum, tile and
                dtensor of different element types, only one of `view_offset` / `view_shape`, a view
                box outside the dtensor, an operand that is not a block argument of the enclosing
                `kn.customized`, or a tile shape other than `tiling.input_tile_shape`'s (of the view).
        """
        check_tensor_types(self)
        if (self.view_offset is None) != (self.view_shape is None):
            raise fail(self, "a view needs both view_offset and view_shape (elements per dim)")
        if self.view_offset is not None and (
            err := views.box_error(shape_of(self.dtensor), self.view_offsets, self.view_dims)
        ) is not None:
            raise fail(self, err)
        if after_accum(self.result):
            raise fail(self, "a loaded tile is used inside the for-loop: its type must not be after_accum")
        if element_type_of(self.result) != element_type_of(self.dtensor):
            raise fail(
                self,
                f"tile element type {element_type_of(self.result)} differs from the dtensor's "
                f"{element_type_of(self.dtensor)}",
            )
        graph = checked_graph_of(self)
        if graph is None:
            return
        if not isinstance(self.dtensor, BlockArgument) or self.dtensor.owner is not graph.body.block:
            raise fail(self, "the operand must be a block argument of the enclosing kn.customized")
        try:
            expected = tiling.input_tile_shape(
                self.view_dims, graph.grid, self.imap, self.fdim, graph.num_iterations
            )
        except tiling.ShapeError as err:
            raise fail(self, str(err)) from None
        check_shape(self, expected, shape_of(self.result), what="tile")


@irdl_op_definition
class OutputOp(TbOp):
    """Store each block's tile into the kernel output; only after the for-loop.

    `output_map` (x, y, z): the output dim each grid axis concatenates along; every grid
    axis > 1 needs an entry (blocks must write disjoint regions), except the axis of the
    graph's `tb.grid_sum` ops, which must be -1 (one block per group stores).

    Optional (not Mirage; `dialects/views.py`): `result_index` names the `kn.customized` result
    it stores into (default: the i-th `tb.output` stores result i; when one output names its
    result, all must), and `view_offset` (elements per dim) stores the blocks' tiles as the box
    of that result starting there, with the result's strides.  Several outputs may assemble
    one result (a fused `kn.concat`); their boxes must cover it exactly once
    (`kn.customized`'s verifier).
    """

    name = "tb.output"
    # it stores into the kernel's output DTensor: not Pure, or a dead-code elimination (any
    # xDSL rewrite walker, `-p dce`) would erase it and then the whole threadblock graph
    traits = traits_def(HasParent(CustomizedOp), MemoryWriteEffect())
    input = operand_def(STensorType)
    output_map = prop_def(DenseArrayBase)
    result_index = opt_prop_def(IntegerAttr)
    view_offset = opt_prop_def(DenseArrayBase)
    assembly_format = "$input attr-dict `:` type($input)"

    def __init__(
        self, input: SSAValue, output_map: Sequence[int], result_index: int | None = None, view_offset: Sequence[int] | None = None
    ):
        props: dict[str, Attribute] = {"output_map": int_array(output_map)}
        if result_index is not None:
            props["result_index"] = IntegerAttr(result_index, i64)
        if view_offset is not None:
            props["view_offset"] = int_array(view_offset)
        super().__init__(operands=[input], properties=props)

    @property
    def view_offsets(self) -> tuple[int, ...]:
        """`view_offset` (elements per dim of the result), zeros without a view."""
        if self.view_offset is not None:
            return ints(self.view_offset)
        return (0,) * len(shape_of(self.input))

    @property
    def omap(self) -> tuple[int, ...]:
        """`output_map` (x, y, z): the output dim each grid axis concatenates along, -1 = none."""
        return ints(self.output_map)

    def verify_(self) -> None:
        """Check the stored tile and, inside a graph, the grid-sum axis and the output map.

        Raises:
            KnVerifyError: the tile is not after_accum; with `tb.grid_sum` ops, `output_map` is not -1
                on their axis or the tile does not depend on a grid sum; or the map and tile do not give
                an output shape (`tiling.output_dtensor_shape`).
        """
        if not after_accum(self.input):
            raise fail(
                self,
                "outputs are stored after the for-loop: the stored tile must be after_accum "
                "(produce it with tb.forloop_accum)",
            )
        graph = checked_graph_of(self)
        if graph is None:
            return
        axis = graph.grid_sum_axis
        if axis is not None:
            if self.omap[axis] >= 0:
                raise fail(
                    self,
                    f"the graph's tb.grid_sum ops reduce grid axis {'xyz'[axis]}, so one block per group "
                    f"stores: output_map.{'xyz'[axis]} must be -1, got {self.omap[axis]}",
                )
            if not depends_on_grid_sum(self.input):
                raise fail(
                    self,
                    "the stored tile does not depend on a tb.grid_sum: only the last block of each "
                    "split group runs after the grid sums, so store a tile computed from them",
                )
        try:
            tiling.output_dtensor_shape(shape_of(self.input), graph.store_grid, self.omap)
        except tiling.ShapeError as err:
            raise fail(self, str(err)) from None
