"""`kn`: Mirage's kernel graph (device tensors, one op per kernel-level operator).

A kernel graph is a `func.func` whose arguments are the graph inputs (DTensors, builtin
`tensor<...>` types) and whose results are the graph outputs.  Input strides are the
argument attribute `kn.strides` (elements, outermost first); an output's chosen strides
are the result attribute `kn.strides` (absent: the compiler chooses).  The unit argument
attribute `kn.weight` promises that nothing queued on the stream before a launch of the graph
writes that input (model weights), so the generated kernels may load it before the previous
kernel has finished (`weight_inputs`).  Op set and shape
rules: Mirage `include/mirage/kernel/*.h`, `src/kernel/*.cc` (mirage-notes 1.3).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    AnyFloat,
    DenseArrayBase,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    TensorType,
    UnitAttr,
    f64,
    i64,
)
from xdsl.ir import Attribute, Block, BlockArgument, Dialect, Operation, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    VarConstraint,
    base,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import IsolatedFromAbove, NoTerminator, Pure
from xdsl.utils.exceptions import VerifyException

from mirage_xdsl.dialects import tiling
from mirage_xdsl.target.device import MAX_FORLOOP_RANGE, MAX_TENSOR_ELEMENTS

TB_OUTPUT_OP = "tb.output"
"""The threadblock graph's output op, which a `kn.customized` region must hold."""
GRID_SUM_SCRATCH_ATTR = "kn.grid_sum_scratch_offset"
"""Byte offset, in the workspace, of the fp32 partials of a kernel's `tb.grid_sum` ops
(written by kn-plan-workspace)."""
STRIDES_ATTR = "kn.strides"
"""Argument/result attribute of a kernel-graph `func.func`: element strides, outermost first."""


WEIGHT_ATTR = "kn.weight"
"""Unit argument attribute of a kernel-graph `func.func`: the input is not written by any work
queued on the stream before the graph's launch, so the kernels may start reading it while the
previous kernel still runs (programmatic dependent launch; codegen/weight_prefetch.py)."""


def weight_inputs(fn: Operation | None) -> frozenset[int]:
    """Indices of the arguments of the kernel-graph `func.func` `fn` marked `kn.weight`
    (none for anything that is not a function).

    Raises:
        VerifyException: the attribute carries a value (it is a unit attribute: write
            `{kn.weight}`)."""
    attrs = getattr(fn, "arg_attrs", None)
    if attrs is None:
        return frozenset()
    marked = set()
    for index, entry in enumerate(attrs.data):
        value = getattr(entry, "data", {}).get(WEIGHT_ATTR)
        if value is None:
            continue
        if not isinstance(value, UnitAttr):
            raise VerifyException(
                f"argument {index} of @{getattr(getattr(fn, 'sym_name', None), 'data', '?')}: {WEIGHT_ATTR} is a unit attribute; write "
                f"{{{WEIGHT_ATTR}}} without a value"
            )
        marked.add(index)
    return frozenset(marked)


def is_weight(value: object) -> bool:
    """Whether `value` is an argument of the kernel-graph `func.func` marked `kn.weight`
    (anything else, e.g. an op result or a non-SSA placeholder, is not)."""
    if not isinstance(value, BlockArgument):
        return False
    fn, region = value.block.parent_op(), value.block.parent_region()
    entry = fn is not None and region is fn.regions[0] and region.blocks[0] is value.block
    return entry and value.index in weight_inputs(fn)


def shape_of(value: SSAValue | Attribute) -> tuple[int, ...]:
    """Static shape of a tensor-typed value or type (`tensor<...>` or `!tb.stensor<...>`)."""
    typ = value.type if isinstance(value, SSAValue) else value
    return tuple(typ.get_shape())  # type: ignore[attr-defined]


def element_type_of(value: SSAValue | Attribute) -> Attribute:
    """Element dtype of a tensor-typed value or type."""
    typ = value.type if isinstance(value, SSAValue) else value
    return typ.get_element_type()  # type: ignore[attr-defined]


def int_array(values: Sequence[int]) -> DenseArrayBase:
    """`array<i64: ...>` from Python ints."""
    return DenseArrayBase.from_list(i64, list(values))


def ints(attr: DenseArrayBase) -> tuple[int, ...]:
    """Python ints of an `array<i64: ...>` attribute."""
    return tuple(int(v) for v in attr.get_values())  # type: ignore[misc]  # xDSL types get_values for integer arrays only


class KnVerifyError(VerifyException):
    """A kernel-graph op breaks one of Mirage's rules; the message names the op and the rule."""


def fail(op: IRDLOperation, rule: str) -> KnVerifyError:
    """Build the exception for `op` breaking `rule` (message: `<op name>: <rule>`)."""
    return KnVerifyError(f"{op.name}: {rule}")


def check_shape(op: IRDLOperation, expected: Sequence[int], actual: Sequence[int], what: str = "result") -> None:
    if tuple(expected) != tuple(actual):
        raise fail(op, f"{what} shape {tuple(actual)} does not match the inferred shape {tuple(expected)}")


def element_type_error(element_type: Attribute) -> str | None:
    """Why `element_type` cannot be a Mirage tensor dtype (float or integer types only), or None."""
    if isinstance(element_type, IntegerType) and not 1 <= element_type.width.data <= 64:
        return f"element type {element_type} has {element_type.width.data} bits; device tensors hold integers of 1 to 64 bits"
    if isinstance(element_type, AnyFloat | IntegerType):
        return None
    return f"element type {element_type} is not a float or integer type"


def tensor_type_error(typ: TensorType) -> str | None:
    """Why the builtin tensor type `typ` cannot be a Mirage DTensor on the target, or None:
    it needs a static shape of 1 to MAX_TENSOR_DIMS positive dims holding fewer than 2^31
    elements (`target.device.MAX_TENSOR_ELEMENTS`: the kernels index with 32-bit ints) and a
    float or integer element type."""
    shape = tuple(typ.get_shape())
    if not 1 <= len(shape) <= tiling.MAX_TENSOR_DIMS or any(d <= 0 for d in shape):
        return f"has type {typ}; device tensors need a static shape of 1 to {tiling.MAX_TENSOR_DIMS} positive dims"
    if math.prod(shape) > MAX_TENSOR_ELEMENTS:
        return (
            f"has type {typ} with {math.prod(shape)} elements, more than the {MAX_TENSOR_ELEMENTS} that "
            "32-bit indexing in the generated kernels reaches; split the tensor into smaller ones"
        )
    if (err := element_type_error(typ.get_element_type())) is not None:
        return err
    return None


def check_tensor_types(op: IRDLOperation) -> None:
    """Every builtin `tensor` operand/result of `op` is a Mirage DTensor (`tensor_type_error`).

    Raises:
        KnVerifyError: naming the op, the operand or result and the rule.
    """
    for kind, values in (("operand", op.operands), ("result", op.results)):
        for i, value in enumerate(values):
            typ = value.type
            if isinstance(typ, TensorType) and (err := tensor_type_error(typ)) is not None:
                raise fail(op, f"{kind} #{i} {err}" if err.startswith("has type") else f"{kind} #{i}: {err}")


def check_same_dtype(op: IRDLOperation, *values: SSAValue) -> None:
    dtypes = {element_type_of(v) for v in values}
    if len(dtypes) > 1:
        raise fail(op, f"operands and results must share one element type, got {sorted(map(str, dtypes))}")


# ---------------------------------------------------------------------------------------
# Elementwise ops


class KnUnaryOp(IRDLOperation):
    """Elementwise unary op: result type equals the operand type."""

    T: ClassVar = VarConstraint("T", base(TensorType))
    input = operand_def(T)
    result = result_def(T)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input attr-dict `:` type($input)"

    def __init__(self, input: SSAValue, **props: Attribute):
        super().__init__(operands=[input], result_types=[input.type], properties=props)

    def verify_(self) -> None:
        check_tensor_types(self)


@irdl_op_definition
class ExpOp(KnUnaryOp):
    name = "kn.exp"


@irdl_op_definition
class SquareOp(KnUnaryOp):
    name = "kn.square"


@irdl_op_definition
class SqrtOp(KnUnaryOp):
    name = "kn.sqrt"


@irdl_op_definition
class SiluOp(KnUnaryOp):
    name = "kn.silu"


@irdl_op_definition
class SigmoidOp(KnUnaryOp):
    name = "kn.sigmoid"


@irdl_op_definition
class GeluOp(KnUnaryOp):
    name = "kn.gelu"


@irdl_op_definition
class ReluOp(KnUnaryOp):
    name = "kn.relu"


@irdl_op_definition
class LogOp(KnUnaryOp):
    name = "kn.log"


@irdl_op_definition
class ClampOp(KnUnaryOp):
    """`min(max(x, min_value), max_value)` with the op's real bounds (Mirage's runtime used [0, 1])."""

    name = "kn.clamp"
    min_value = prop_def(FloatAttr)
    max_value = prop_def(FloatAttr)

    def __init__(self, input: SSAValue, min_value: float, max_value: float):
        super().__init__(input, min_value=FloatAttr(min_value, f64), max_value=FloatAttr(max_value, f64))

    def verify_(self) -> None:
        super().verify_()
        lo, hi = self.min_value.value.data, self.max_value.value.data
        if not lo <= hi:
            raise fail(self, f"min_value ({lo}) must not exceed max_value ({hi})")


@irdl_op_definition
class MulScalarOp(KnUnaryOp):
    """`x * scalar`."""

    name = "kn.mul_scalar"
    scalar = prop_def(FloatAttr)

    def __init__(self, input: SSAValue, scalar: float):
        super().__init__(input, scalar=FloatAttr(scalar, f64))


class KnBinaryOp(IRDLOperation):
    """Elementwise binary op with numpy broadcasting over equal-rank operands."""

    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"

    def __init__(self, lhs: SSAValue, rhs: SSAValue):
        shape = tiling.broadcast_shape(shape_of(lhs), shape_of(rhs))
        super().__init__(operands=[lhs, rhs], result_types=[TensorType(element_type_of(lhs), shape)])

    def verify_(self) -> None:
        check_tensor_types(self)
        check_same_dtype(self, self.lhs, self.rhs, self.result)
        try:
            expected = tiling.broadcast_shape(shape_of(self.lhs), shape_of(self.rhs))
        except tiling.ShapeError as err:
            raise fail(self, str(err)) from None
        check_shape(self, expected, shape_of(self.result))


@irdl_op_definition
class AddOp(KnBinaryOp):
    name = "kn.add"


@irdl_op_definition
class SubOp(KnBinaryOp):
    name = "kn.sub"


@irdl_op_definition
class MulOp(KnBinaryOp):
    name = "kn.mul"


@irdl_op_definition
class DivOp(KnBinaryOp):
    name = "kn.div"


@irdl_op_definition
class PowOp(KnBinaryOp):
    name = "kn.pow"


# ---------------------------------------------------------------------------------------
# Structured ops


@irdl_op_definition
class MatmulOp(KnBinaryOp):
    """Batched GEMM over the last two dims; leading (batch) dims must be equal."""

    name = "kn.matmul"

    def __init__(self, lhs: SSAValue, rhs: SSAValue):
        shape = tiling.matmul_shape(shape_of(lhs), shape_of(rhs), threadblock=False)
        IRDLOperation.__init__(self, operands=[lhs, rhs], result_types=[TensorType(element_type_of(lhs), shape)])

    def verify_(self) -> None:
        check_tensor_types(self)
        check_same_dtype(self, self.lhs, self.rhs, self.result)
        try:
            expected = tiling.matmul_shape(shape_of(self.lhs), shape_of(self.rhs), threadblock=False)
        except tiling.ShapeError as err:
            raise fail(self, str(err)) from None
        check_shape(self, expected, shape_of(self.result))


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
        check_tensor_types(self)
        check_same_dtype(self, self.input, self.result)
        try:
            expected = tiling.reduction_shape(shape_of(self.input), self.dim.value.data, self.size.value.data)
        except tiling.ShapeError as err:
            raise fail(self, str(err)) from None
        check_shape(self, expected, shape_of(self.result))


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
        check_tensor_types(self)
        check_same_dtype(self, self.input, self.result)
        try:
            expected = tiling.reduction_shape(shape_of(self.input), self.dim.value.data, 1)
        except tiling.ShapeError as err:
            raise fail(self, str(err)) from None
        check_shape(self, expected, shape_of(self.result))


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
        check_tensor_types(self)
        check_same_dtype(self, self.lhs, self.rhs, self.result)
        try:
            expected = tiling.concat_shape(shape_of(self.lhs), shape_of(self.rhs), self.dim.value.data)
        except tiling.ShapeError as err:
            raise fail(self, str(err)) from None
        check_shape(self, expected, shape_of(self.result))


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
        check_tensor_types(self)


@irdl_op_definition
class CustomizedOp(IRDLOperation):
    """A graph-defined kernel: its region is a threadblock graph (`tb` ops).

    The region's block arguments are the kernel's view of `inputs` (positionally); the
    i-th `tb.output` op in the region produces result i.  Graph attributes: `grid_dim` and
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
        return ints(self.grid_dim)  # type: ignore[return-value]

    @property
    def block(self) -> tuple[int, int, int]:
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
        return self.forloop_range.value.data

    @property
    def dimx(self) -> int:
        return self.reduction_dimx.value.data

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
        # by name: the tb dialect builds on this one, so this one does not import it
        outputs = [op for op in self.body.block.ops if op.name == TB_OUTPUT_OP]
        if len(outputs) != len(self.outputs):
            raise fail(
                self, f"{len(outputs)} tb.output ops for {len(self.outputs)} results; each result needs one tb.output"
            )
        axes = {op.properties["dim"] for op in self.body.block.ops if op.name == "tb.grid_sum"}
        if len(axes) > 1:
            raise fail(self, "all tb.grid_sum ops of a graph must reduce the same grid axis (one synchronisation)")
        store_grid = self.store_grid
        for i, (out_op, res) in enumerate(zip(outputs, self.outputs)):
            try:
                expected = tiling.output_dtensor_shape(shape_of(out_op.input), store_grid, ints(out_op.output_map))
            except tiling.ShapeError as err:
                raise fail(self, f"tb.output #{i}: {err}") from None
            check_shape(self, expected, shape_of(res), what=f"result #{i}")
            if element_type_of(res) != element_type_of(out_op.input):
                raise fail(
                    self,
                    f"result #{i} element type {element_type_of(res)} differs from its tb.output tile's "
                    f"{element_type_of(out_op.input)}",
                )


Kernel = Dialect(
    "kn",
    [
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
        ReductionMaxOp,
        RmsNormOp,
        ConcatOp,
        ChunkOp,
        AllReduceOp,
        CustomizedOp,
    ],
    [],
)
