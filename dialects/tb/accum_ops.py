"""`tb` accumulation across iterations and blocks: `tb.forloop_accum` (fold a per-iteration
tile across the for-loop, mirage-notes 1.7) and `tb.grid_sum` (split-K partials summed by
the last block of each split group; beyond Mirage).
"""

from __future__ import annotations

from xdsl.dialects.builtin import IntegerAttr, StringAttr, i64
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, opt_operand_def, prop_def, result_def
from xdsl.parser import Parser
from xdsl.printer import Printer

from mirage_xdsl.dialects import tiling
from mirage_xdsl.dialects.common.checks import check_inferred_shape, fail, shape_of
from mirage_xdsl.dialects.common.precision import mixes_half_and_f32
from mirage_xdsl.dialects.tb.compute_ops import MulScalarOp, ReductionOp, ReductionToDimxOp
from mirage_xdsl.dialects.tb.stensor import STensorType, TbOp, after_accum, check_same_element_type, checked_graph_of


@irdl_op_definition
class ForloopAccumOp(TbOp):
    """Fold a per-iteration tile across the for-loop (mirage-notes 1.7).

    Kinds: `nored` (sum), `red_ld_sum` (sum, last dim -> 1), `red_ld_mean` (mean, last dim ->
    1), `red_ld_rms` (sqrt of mean of squares, last dim -> 1), `redtox_ld_sum` (strided sum of
    the last dim down to `reduction_dimx`), `nored_rescale` (`acc = acc * rescale + x`),
    `red_ld_sum_rescale` (same, then last-dim sum), `max` (elementwise running max).
    Syntax: `tb.forloop_accum KIND %x[, %rescale] : T[, Ts] -> R`.
    """

    name = "tb.forloop_accum"
    input = operand_def(STensorType)
    rescale = opt_operand_def(STensorType)
    result = result_def(STensorType)
    kind = prop_def(StringAttr)

    def __init__(
        self,
        input: SSAValue,
        kind: str,
        reduction_dimx: int = 64,
        rescale: SSAValue | None = None,
        element_type: Attribute | None = None,
    ):
        """`element_type`: the result's (default: the input's; f32 keeps the sum of a 16-bit
        input in fp32, dialects/common/precision.py)."""
        typ = input.type
        assert isinstance(typ, STensorType)
        shape = tiling.accumulator_shape(kind, typ.get_shape(), reduction_dimx)
        super().__init__(
            operands=[input, [rescale] if rescale is not None else []],
            result_types=[STensorType(shape, element_type or typ.element_type, True)],
            properties={"kind": StringAttr(kind)},
        )

    @property
    def accum_kind(self) -> str:
        """The accumulator kind (one of `tiling.ACCUMULATOR_KINDS`, listed in the class docstring)."""
        return self.kind.data

    def verify_(self) -> None:
        """Check the kind, the rescale operand, the loop placement, the element type and the result shape.

        Raises:
            KnVerifyError: an unknown kind; a rescale operand missing for a rescale kind or given to
                another; an input or rescale tile typed after_accum or a result that is not; operands
                and result of different element types; a rescale that does not broadcast to the
                input; or a result shape other than `tiling.accumulator_shape`'s (graph's dimx).
        """
        kind = self.accum_kind
        if kind not in tiling.ACCUMULATOR_KINDS:
            raise fail(self, f"unknown kind '{kind}' (expected one of {', '.join(tiling.ACCUMULATOR_KINDS)})")
        if self.rescale is None and kind in tiling.RESCALE_ACCUMULATORS:
            raise fail(self, f"kind '{kind}' needs a rescale operand: tb.forloop_accum {kind} %x, %rescale")
        if self.rescale is not None and kind not in tiling.RESCALE_ACCUMULATORS:
            raise fail(
                self,
                f"kind '{kind}' takes no rescale operand (only {' and '.join(tiling.RESCALE_ACCUMULATORS)} do)",
            )
        if after_accum(self.input):
            raise fail(self, "the accumulated tile must be computed inside the for-loop (not after_accum)")
        if self.rescale is not None and after_accum(self.rescale):
            raise fail(self, "the rescale tile must be computed inside the for-loop (not after_accum)")
        if not after_accum(self.result):
            raise fail(self, "an accumulator's result lives after the for-loop: its type must be after_accum")
        if not mixes_half_and_f32((*self.operands, self.result)):
            check_same_element_type(self, *self.operands, self.result)
        if self.rescale is not None:
            in_shape, scale_shape = shape_of(self.input), shape_of(self.rescale)
            try:
                ok = tiling.broadcast_shape(in_shape, scale_shape) == in_shape
            except tiling.ShapeError:
                ok = False
            if not ok:
                raise fail(
                    self,
                    f"rescale shape {scale_shape} must broadcast to the accumulated tile's shape {in_shape} "
                    "(equal rank, each dim equal or 1)",
                )
        graph = checked_graph_of(self)
        # detached op or malformed graph (reported by kn.customized): trust the result's last dim
        dimx = graph.dimx if graph is not None else shape_of(self.result)[-1]
        check_inferred_shape(self, lambda: tiling.accumulator_shape(kind, shape_of(self.input), dimx), shape_of(self.result))

    def print(self, printer: Printer) -> None:
        """Print ` KIND %x[, %rescale] {attrs} : T[, Ts] -> R`."""
        printer.print_string(f" {self.accum_kind} ")
        printer.print_operand(self.input)
        if self.rescale is not None:
            printer.print_string(", ")
            printer.print_operand(self.rescale)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.input.type)
        if self.rescale is not None:
            printer.print_string(", ")
            printer.print_attribute(self.rescale.type)
        printer.print_string(" -> ")
        printer.print_attribute(self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> ForloopAccumOp:
        """Parse `KIND %x[, %rescale] {attrs} : T[, Ts] -> R`.

        Raises:
            ParseError: an unknown kind, malformed text, or not one type per operand.
        """
        start = parser.pos
        kind = parser.parse_identifier()
        if kind not in tiling.ACCUMULATOR_KINDS:
            parser.raise_error(
                f"unknown accumulator kind '{kind}' (expected one of {', '.join(tiling.ACCUMULATOR_KINDS)})",
                start,
                parser.pos,
            )
        operands = [parser.parse_unresolved_operand()]
        if parser.parse_optional_punctuation(","):
            operands.append(parser.parse_unresolved_operand())
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        types = [parser.parse_type()]
        while parser.parse_optional_punctuation(","):
            types.append(parser.parse_type())
        parser.parse_punctuation("->")
        result_type = parser.parse_type()
        if len(types) != len(operands):
            parser.raise_error(f"expected {len(operands)} operand types, got {len(types)}")
        resolved = parser.resolve_operands(operands, types, parser.pos)
        op = cls.create(
            operands=resolved,
            result_types=[result_type],
            properties={"kind": StringAttr(kind)},
            attributes=attrs,
        )
        return op


GRID_SUMMABLE_ACCUMULATORS = ("nored", "red_ld_sum", "redtox_ld_sum")
"""Accumulators whose split-block partials add up to the unsplit result (sums; not a mean,
rms, max or rescaled sum)."""


PARTIAL_LINEAR_OPS = (ReductionOp, ReductionToDimxOp, MulScalarOp)
"""Ops that may stand between an accumulator and its grid sum: linear, so the sum of their
results over the split blocks is their result on the summed accumulator."""


@irdl_op_definition
class GridSumOp(TbOp):
    """Sum an accumulator's tile (or a reduction or scaling of it) over the blocks of one
    split group.

    The blocks that differ only in grid axis `dim` (0 = x, 1 = y, 2 = z) form a group; each
    holds a partial tile (it accumulated one slice of a split for-loop axis) and the result is
    the group's sum.  Only ONE block per group -- the last to arrive -- runs the ops after the
    grid sums and stores the outputs; the others stop at the grid sums.  Hence every
    `tb.output` needs `output_map[dim] = -1` and must store a tile computed from a grid sum.
    All `tb.grid_sum` ops of a graph reduce the same axis and synchronise once.  Beyond
    Mirage, whose split-K needs a second kernel (a `kn.reduction` over the partials); the CUDA
    lowering follows the "last block" reduction of the CUDA samples' threadFenceReduction:
    partials to a global scratch, `__threadfence`, a per-group arrival counter, and the last
    block sums the partials in block order (deterministic).
    Syntax: `tb.grid_sum %acc {dim = 1 : i64} : T -> T`.
    """

    name = "tb.grid_sum"
    input = operand_def(STensorType)
    result = result_def(STensorType)
    dim = prop_def(IntegerAttr)
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue, dim: int):
        super().__init__(operands=[input], result_types=[input.type], properties={"dim": IntegerAttr(dim, i64)})

    @property
    def grid_axis(self) -> int:
        """The grid axis (0 = x, 1 = y, 2 = z) whose split blocks are summed."""
        return self.dim.value.data

    def verify_(self) -> None:
        """Check the operand, the axis and the enclosing graph's grid.

        Raises:
            KnVerifyError: result and operand types differ; the operand is not a grid-summable
                accumulator (possibly through reductions / mul_scalar of one); the axis is not 0..2;
                or the graph has fewer than 2 blocks along it.
        """
        if self.result.type != self.input.type:
            raise fail(self, f"the result type {self.result.type} must equal the operand type {self.input.type}")
        owner = self.input.owner
        while isinstance(owner, PARTIAL_LINEAR_OPS):  # a partial reduced or scaled before its sum
            owner = owner.operands[0].owner
        if not isinstance(owner, ForloopAccumOp) or owner.accum_kind not in GRID_SUMMABLE_ACCUMULATORS:
            raise fail(
                self,
                "the operand must be a tb.forloop_accum result of kind "
                f"{', '.join(GRID_SUMMABLE_ACCUMULATORS)}, or a tb.reduction, tb.reduction_to_dimx or "
                "tb.mul_scalar of one: a grid sum adds up the split blocks' partial sums",
            )
        if not 0 <= self.grid_axis < 3:
            raise fail(self, f"dim must be a grid axis 0, 1 or 2 (x, y, z), got {self.grid_axis}")
        graph = checked_graph_of(self)
        if graph is None:
            return
        if graph.grid[self.grid_axis] < 2:
            raise fail(
                self,
                f"grid_dim.{'xyz'[self.grid_axis]} = {graph.grid[self.grid_axis]}: a grid sum needs at least "
                "2 blocks along its axis",
            )


def depends_on_grid_sum(value: SSAValue) -> bool:
    """Whether `value` is computed (transitively, inside its block) from a `tb.grid_sum`."""
    seen: set[SSAValue] = set()
    stack = [value]
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        owner = v.owner
        if isinstance(owner, GridSumOp):
            return True
        if isinstance(owner, IRDLOperation):
            stack.extend(owner.operands)
    return False
