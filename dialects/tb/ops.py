"""`tb`: Mirage's threadblock graph (shared-memory tiles), nested in `kn.customized`.

Execution model of one block (mirage-notes 1.4): inputs with `forloop_dim = -1` load once
before the loop; for each of `forloop_range` iterations every iterated input loads its
tile and every op whose operands are not `after_accum` runs; accumulators fold their
input; after the loop the `after_accum` ops run once and `tb.output` stores the tiles.
`after_accum` is part of the STensor type: accumulators produce it, every other op
propagates it, and binary ops/matmul/concat require their operands to agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    FloatAttr,
    IntAttr,
    IntegerAttr,
    StringAttr,
    TensorType,
    f64,
    i64,
)
from xdsl.ir import Attribute, BlockArgument, Dialect, ParametrizedAttribute, SSAValue, TypeAttribute
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    VarConstraint,
    base,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.traits import HasParent, MemoryWriteEffect, Pure
from xdsl.utils.exceptions import VerifyException

from mirage_xdsl.dialects import tiling
from mirage_xdsl.dialects.kn.ops import (
    CustomizedOp,
    check_shape,
    check_tensor_types,
    element_type_error,
    element_type_of,
    fail,
    int_array,
    ints,
    shape_of,
)


@irdl_attr_definition
class STensorType(ParametrizedAttribute, TypeAttribute):
    """`!tb.stensor<2x128xf16>` or `!tb.stensor<2x1xf16, after_accum>`: a shared-memory tile."""

    name = "tb.stensor"

    shape: ArrayAttr[IntAttr]
    element_type: Attribute
    after_accum: IntAttr

    def __init__(self, shape: Sequence[int], element_type: Attribute, after_accum: bool = False):
        super().__init__(ArrayAttr(IntAttr(d) for d in shape), element_type, IntAttr(int(after_accum)))

    def get_shape(self) -> tuple[int, ...]:
        return tuple(d.data for d in self.shape)

    def get_element_type(self) -> Attribute:
        return self.element_type

    @property
    def is_after_accum(self) -> bool:
        return bool(self.after_accum.data)

    def with_after_accum(self, after_accum: bool) -> STensorType:
        return STensorType(self.get_shape(), self.element_type, after_accum)

    def with_shape(self, shape: Sequence[int]) -> STensorType:
        return STensorType(shape, self.element_type, self.is_after_accum)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            start = parser.pos
            dims, element_type = parser.parse_ranked_shape()
            if any(d <= 0 for d in dims):
                parser.raise_error("tb.stensor dims must be static and positive", start, parser.pos)
            if not 1 <= len(dims) <= tiling.MAX_TENSOR_DIMS:
                parser.raise_error(
                    f"tb.stensor must have 1 to {tiling.MAX_TENSOR_DIMS} dims, got {len(dims)}", start, parser.pos
                )
            if (err := element_type_error(element_type)) is not None:
                parser.raise_error(f"tb.stensor {err}", start, parser.pos)
            after_accum = 0
            if parser.parse_optional_punctuation(","):
                flag_start = parser.pos
                if parser.parse_optional_keyword("after_accum") is None:
                    parser.raise_error(
                        "expected 'after_accum' (the only flag of a tb.stensor type)", flag_start, flag_start + 1
                    )
                after_accum = 1
        return (ArrayAttr(IntAttr(d) for d in dims), element_type, IntAttr(after_accum))

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            for d in self.get_shape():
                printer.print_string(f"{d}x")
            printer.print_attribute(self.element_type)
            if self.is_after_accum:
                printer.print_string(", after_accum")

    def verify(self) -> None:
        if any(d.data <= 0 for d in self.shape):
            raise VerifyException(f"tb.stensor dims must be positive, got {self.get_shape()}")
        if not 1 <= len(self.shape) <= tiling.MAX_TENSOR_DIMS:
            raise VerifyException(
                f"tb.stensor must have 1 to {tiling.MAX_TENSOR_DIMS} dims, got {len(self.shape)}"
            )
        if (err := element_type_error(self.element_type)) is not None:
            raise VerifyException(f"tb.stensor {err}")
        if self.after_accum.data not in (0, 1):
            raise VerifyException(f"tb.stensor after_accum flag must be 0 or 1, got {self.after_accum.data}")


def after_accum(value: SSAValue) -> bool:
    typ = value.type
    return isinstance(typ, STensorType) and typ.is_after_accum


def graph_of(op: IRDLOperation) -> CustomizedOp | None:
    """The enclosing `kn.customized` op, or None while the op is detached (being built)."""
    parent = op.parent_op()
    return parent if isinstance(parent, CustomizedOp) else None


def checked_graph_of(op: IRDLOperation) -> CustomizedOp | None:
    """The enclosing `kn.customized` op if its graph attributes are well formed, else None.

    xDSL verifies nested ops before their parent, so a tb verifier must not compute tiles
    from a malformed graph; the `kn.customized` verifier reports the graph's own error.
    """
    graph = graph_of(op)
    return graph if graph is not None and graph.graph_error() is None else None


def check_same_element_type(op: IRDLOperation, *values: SSAValue) -> None:
    types = [element_type_of(v) for v in values]
    if any(t != types[0] for t in types):
        raise fail(op, f"operands and results must share one element type, got {', '.join(map(str, types))}")


class TbOp(IRDLOperation):
    """Base of all threadblock ops: they live directly inside a `kn.customized` region."""

    traits = traits_def(HasParent(CustomizedOp), Pure())
    irdl_options = (ParsePropInAttrDict(),)


# ---------------------------------------------------------------------------------------
# Loads and stores


@irdl_op_definition
class InputOp(TbOp):
    """Load one tile of a kernel input per block (and per iteration if `forloop_dim >= 0`).

    `input_map` (x, y, z): tensor dim partitioned by each grid axis, -1 = replicated.
    The tile shape is derived by `tiling.input_tile_shape` and checked by the verifier.
    """

    name = "tb.input"
    dtensor = operand_def(TensorType)
    result = result_def(STensorType)
    input_map = prop_def(DenseArrayBase)
    forloop_dim = prop_def(IntegerAttr)
    assembly_format = "$dtensor attr-dict `:` type($dtensor) `->` type($result)"

    def __init__(self, dtensor: SSAValue, input_map: Sequence[int], forloop_dim: int, tile_shape: Sequence[int]):
        super().__init__(
            operands=[dtensor],
            result_types=[STensorType(tile_shape, element_type_of(dtensor))],
            properties={"input_map": int_array(input_map), "forloop_dim": IntegerAttr(forloop_dim, i64)},
        )

    @property
    def imap(self) -> tuple[int, ...]:
        return ints(self.input_map)

    @property
    def fdim(self) -> int:
        return self.forloop_dim.value.data

    def verify_(self) -> None:
        check_tensor_types(self)
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
                shape_of(self.dtensor), graph.grid, self.imap, self.fdim, graph.num_iterations
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
    """

    name = "tb.output"
    # it stores into the kernel's output DTensor: not Pure, or a dead-code elimination (any
    # xDSL rewrite walker, `-p dce`) would erase it and then the whole threadblock graph
    traits = traits_def(HasParent(CustomizedOp), MemoryWriteEffect())
    input = operand_def(STensorType)
    output_map = prop_def(DenseArrayBase)
    assembly_format = "$input attr-dict `:` type($input)"

    def __init__(self, input: SSAValue, output_map: Sequence[int]):
        super().__init__(operands=[input], properties={"output_map": int_array(output_map)})

    @property
    def omap(self) -> tuple[int, ...]:
        return ints(self.output_map)

    def verify_(self) -> None:
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


# ---------------------------------------------------------------------------------------
# Elementwise ops


class TbUnaryOp(TbOp):
    T: ClassVar = VarConstraint("T", base(STensorType))
    input = operand_def(T)
    result = result_def(T)
    assembly_format = "$input attr-dict `:` type($input)"

    def __init__(self, input: SSAValue, **props: Attribute):
        super().__init__(operands=[input], result_types=[input.type], properties=props)


@irdl_op_definition
class ExpOp(TbUnaryOp):
    name = "tb.exp"


@irdl_op_definition
class SquareOp(TbUnaryOp):
    name = "tb.square"


@irdl_op_definition
class SqrtOp(TbUnaryOp):
    name = "tb.sqrt"


@irdl_op_definition
class SiluOp(TbUnaryOp):
    name = "tb.silu"


@irdl_op_definition
class SigmoidOp(TbUnaryOp):
    name = "tb.sigmoid"


@irdl_op_definition
class GeluOp(TbUnaryOp):
    name = "tb.gelu"


@irdl_op_definition
class ReluOp(TbUnaryOp):
    name = "tb.relu"


@irdl_op_definition
class LogOp(TbUnaryOp):
    name = "tb.log"


@irdl_op_definition
class ClampOp(TbUnaryOp):
    """`min(max(x, min_value), max_value)`."""

    name = "tb.clamp"
    min_value = prop_def(FloatAttr)
    max_value = prop_def(FloatAttr)

    def __init__(self, input: SSAValue, min_value: float, max_value: float):
        super().__init__(input, min_value=FloatAttr(min_value, f64), max_value=FloatAttr(max_value, f64))

    def verify_(self) -> None:
        lo, hi = self.min_value.value.data, self.max_value.value.data
        if not lo <= hi:
            raise fail(self, f"min_value ({lo}) must not exceed max_value ({hi})")


@irdl_op_definition
class MulScalarOp(TbUnaryOp):
    """`x * scalar`."""

    name = "tb.mul_scalar"
    scalar = prop_def(FloatAttr)

    def __init__(self, input: SSAValue, scalar: float):
        super().__init__(input, scalar=FloatAttr(scalar, f64))


class TbBinaryOp(TbOp):
    """Elementwise binary op with numpy broadcasting; operands agree on after_accum."""

    lhs = operand_def(STensorType)
    rhs = operand_def(STensorType)
    result = result_def(STensorType)
    assembly_format = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"

    @staticmethod
    def infer_shape(lhs: Sequence[int], rhs: Sequence[int]) -> tuple[int, ...]:
        return tiling.broadcast_shape(lhs, rhs)

    def __init__(self, lhs: SSAValue, rhs: SSAValue):
        shape = self.infer_shape(shape_of(lhs), shape_of(rhs))
        super().__init__(
            operands=[lhs, rhs],
            result_types=[STensorType(shape, element_type_of(lhs), after_accum(lhs))],
        )

    def verify_(self) -> None:
        if after_accum(self.lhs) != after_accum(self.rhs):
            raise fail(self, "operands must agree on after_accum (both before or both after the for-loop)")
        if after_accum(self.result) != after_accum(self.lhs):
            raise fail(self, "the result's after_accum must equal the operands'")
        check_same_element_type(self, self.lhs, self.rhs, self.result)
        try:
            expected = self.infer_shape(shape_of(self.lhs), shape_of(self.rhs))
        except tiling.ShapeError as err:
            raise fail(self, str(err)) from None
        check_shape(self, expected, shape_of(self.result))


@irdl_op_definition
class AddOp(TbBinaryOp):
    name = "tb.add"


@irdl_op_definition
class SubOp(TbBinaryOp):
    name = "tb.sub"


@irdl_op_definition
class MulOp(TbBinaryOp):
    name = "tb.mul"


@irdl_op_definition
class DivOp(TbBinaryOp):
    name = "tb.div"


@irdl_op_definition
class PowOp(TbBinaryOp):
    name = "tb.pow"


@irdl_op_definition
class MatmulOp(TbBinaryOp):
    """2-D GEMM of two tiles (all leading dims must be 1)."""

    name = "tb.matmul"

    @staticmethod
    def infer_shape(lhs: Sequence[int], rhs: Sequence[int]) -> tuple[int, ...]:
        return tiling.matmul_shape(lhs, rhs, threadblock=True)


# ---------------------------------------------------------------------------------------
# Reductions


class TbReductionBase(TbOp):
    input = operand_def(STensorType)
    dim = prop_def(IntegerAttr)

    @property
    def reduce_dim(self) -> int:
        return self.dim.value.data

    def reduced_size(self) -> int:
        return 1

    def check_result(self, result: SSAValue) -> None:
        if after_accum(result) != after_accum(self.input):
            raise fail(self, "the result's after_accum must equal the operand's")
        check_same_element_type(self, self.input, result)
        try:
            expected = tiling.reduction_shape(shape_of(self.input), self.reduce_dim, self.reduced_size())
        except tiling.ShapeError as err:
            raise fail(self, str(err)) from None
        check_shape(self, expected, shape_of(result))


class TbReduceToOneBase(TbReductionBase):
    """A reduction of `dim` to size 1 with one result (tb.reduction, tb.reduce_max)."""

    def __init__(self, input: SSAValue, dim: int):
        typ = input.type
        assert isinstance(typ, STensorType)
        shape = tiling.reduction_shape(typ.get_shape(), dim, 1)
        super().__init__(
            operands=[input], result_types=[typ.with_shape(shape)], properties={"dim": IntegerAttr(dim, i64)}
        )

    def verify_(self) -> None:
        self.check_result(self.results[0])


@irdl_op_definition
class ReductionOp(TbReduceToOneBase):
    """Sum over `dim` (size -> 1)."""

    name = "tb.reduction"
    result = result_def(STensorType)
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"


@irdl_op_definition
class ReductionToDimxOp(TbReductionBase):
    """Sum STRIDED groups of `dim` down to the graph's `reduction_dimx`:
    `out[..., j] = sum_k in[..., j + k*dimx]` (mirage-notes 1.7)."""

    name = "tb.reduction_to_dimx"
    result = result_def(STensorType)
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue, dim: int, reduction_dimx: int):
        typ = input.type
        assert isinstance(typ, STensorType)
        shape = tiling.reduction_shape(typ.get_shape(), dim, reduction_dimx)
        super().__init__(
            operands=[input], result_types=[typ.with_shape(shape)], properties={"dim": IntegerAttr(dim, i64)}
        )

    def reduced_size(self) -> int:
        graph = checked_graph_of(self)
        if graph is not None:
            return graph.dimx
        shape = shape_of(self.result)  # detached or malformed graph: trust the result type
        return shape[self.reduce_dim] if 0 <= self.reduce_dim < len(shape) else 1

    def verify_(self) -> None:
        self.check_result(self.result)


@irdl_op_definition
class ReduceMaxOp(TbReduceToOneBase):
    """Max over `dim` of this tile (size -> 1), with no state across calls -- unlike
    Mirage's running `tb.reduction_max`.  kn-fuse's lowering of `kn.reduction_max`: over a
    dim the for-loop walks, it feeds a `max` for-loop accumulator."""

    name = "tb.reduce_max"
    result = result_def(STensorType)
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"


@irdl_op_definition
class ReductionMaxOp(TbReductionBase):
    """Running max over calls along `dim`: `max = max(old, max_i x_i)`, `diff = old - max` (<= 0).
    Used by the online-softmax rewrite (mirage-notes 1.7)."""

    name = "tb.reduction_max"
    LOOP_CARRIED_RESULTS: ClassVar[tuple[int, ...]] = (0,)
    """Results whose value one iteration reads back in the next (the running max): inside
    the for-loop they must keep their storage from before the loop until it ends."""
    max = result_def(STensorType)
    diff = result_def(STensorType)
    assembly_format = "$input attr-dict `:` type($input) `->` type($max) `,` type($diff)"

    def __init__(self, input: SSAValue, dim: int):
        typ = input.type
        assert isinstance(typ, STensorType)
        out = typ.with_shape(tiling.reduction_shape(typ.get_shape(), dim, 1))
        super().__init__(operands=[input], result_types=[out, out], properties={"dim": IntegerAttr(dim, i64)})

    def verify_(self) -> None:
        self.check_result(self.max)
        self.check_result(self.diff)


@irdl_op_definition
class RmsNormOp(TbOp):
    """`x / sqrt(mean(x^2, last dim))`, no epsilon."""

    name = "tb.rms_norm"
    T: ClassVar = VarConstraint("T", base(STensorType))
    input = operand_def(T)
    result = result_def(T)
    assembly_format = "$input attr-dict `:` type($input)"

    def __init__(self, input: SSAValue):
        super().__init__(operands=[input], result_types=[input.type])


@irdl_op_definition
class ConcatOp(TbOp):
    """Concatenate two tiles along `dim`."""

    name = "tb.concat"
    lhs = operand_def(STensorType)
    rhs = operand_def(STensorType)
    result = result_def(STensorType)
    dim = prop_def(IntegerAttr)
    assembly_format = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"

    def __init__(self, lhs: SSAValue, rhs: SSAValue, dim: int):
        typ = lhs.type
        assert isinstance(typ, STensorType)
        shape = tiling.concat_shape(shape_of(lhs), shape_of(rhs), dim)
        super().__init__(
            operands=[lhs, rhs], result_types=[typ.with_shape(shape)], properties={"dim": IntegerAttr(dim, i64)}
        )

    def verify_(self) -> None:
        if after_accum(self.lhs) != after_accum(self.rhs) or after_accum(self.result) != after_accum(self.lhs):
            raise fail(self, "operands and result must agree on after_accum (both before or both after the for-loop)")
        check_same_element_type(self, self.lhs, self.rhs, self.result)
        try:
            expected = tiling.concat_shape(shape_of(self.lhs), shape_of(self.rhs), self.dim.value.data)
        except tiling.ShapeError as err:
            raise fail(self, str(err)) from None
        check_shape(self, expected, shape_of(self.result))


# ---------------------------------------------------------------------------------------
# For-loop accumulators


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

    def __init__(self, input: SSAValue, kind: str, reduction_dimx: int = 64, rescale: SSAValue | None = None):
        typ = input.type
        assert isinstance(typ, STensorType)
        shape = tiling.accumulator_shape(kind, typ.get_shape(), reduction_dimx)
        super().__init__(
            operands=[input, [rescale] if rescale is not None else []],
            result_types=[STensorType(shape, typ.element_type, True)],
            properties={"kind": StringAttr(kind)},
        )

    @property
    def accum_kind(self) -> str:
        return self.kind.data

    def verify_(self) -> None:
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
        try:
            expected = tiling.accumulator_shape(kind, shape_of(self.input), dimx)
        except tiling.ShapeError as err:
            raise fail(self, str(err)) from None
        check_shape(self, expected, shape_of(self.result))

    def print(self, printer: Printer) -> None:
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


# ---------------------------------------------------------------------------------------
# Split-K across blocks (beyond Mirage)


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
        return self.dim.value.data

    def verify_(self) -> None:
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


UNARY_BY_KIND: dict[str, type[TbUnaryOp]] = {
    "exp": ExpOp,
    "square": SquareOp,
    "sqrt": SqrtOp,
    "silu": SiluOp,
    "sigmoid": SigmoidOp,
    "gelu": GeluOp,
    "relu": ReluOp,
    "log": LogOp,
}
"""The parameterless unary tb ops by kind name (the kn op name without `kn.`)."""
BINARY_BY_KIND: dict[str, type[TbBinaryOp]] = {"add": AddOp, "sub": SubOp, "mul": MulOp, "div": DivOp, "pow": PowOp}
"""The elementwise binary tb ops by kind name (tb.matmul is binary too but not elementwise)."""


Threadblock = Dialect(
    "tb",
    [
        InputOp,
        OutputOp,
        ExpOp,
        SquareOp,
        SqrtOp,
        SiluOp,
        SigmoidOp,
        GeluOp,
        ReluOp,
        LogOp,
        ClampOp,
        MulScalarOp,
        AddOp,
        SubOp,
        MulOp,
        DivOp,
        PowOp,
        MatmulOp,
        ReductionOp,
        ReductionToDimxOp,
        ReductionMaxOp,
        ReduceMaxOp,
        RmsNormOp,
        ConcatOp,
        ForloopAccumOp,
        GridSumOp,
    ],
    [STensorType],
)
