"""Abstract op bases that the kernel-level (`kn`) and threadblock-level (`tb`) dialects share.

In xDSL's own style (the generic binary-operation bases of `xdsl/dialects/arith.py`, the
`Generic` register bases of `xdsl/dialects/riscv`): each family base carries the operand,
result and property definitions, the custom syntax (`assembly_format`, properties written in
the attribute dictionary) and the verifier, with the tensor type left as the type variable
`TensorT`.  A level binds it (builtin `tensor<...>` DTensors for `kn`, `!tb.stensor<...>` tiles
for `tb`) and adds its conventions through one subclass of `GraphOp` that implements the hooks
below (`kn.tensors.KnOp`, `tb.stensor.TbOp`): traits, how a derived result type is built, the
level's own type rules and how it words an element-type mismatch.  A concrete op is then a thin
subclass that gives its `name` and what differs, e.g. `class AddOp(KnBinaryOp): name = "kn.add"`
with `KnBinaryOp = KnOp + BinaryOpBase[TensorType]`.

Every family verifies in one order, so each level reports its errors as it always did: the
level's rules (`check_level_rules`: kn, every tensor is a DTensor; tb, the after_accum placement
as the family states it), one element type (`check_element_types`), then the shape a `tiling`
rule infers (`checks.check_inferred_shape`).  Shape rules: Mirage `src/kernel/*.cc` and
`src/threadblock/*.cc` (mirage-notes 1.3-1.7), implemented in `dialects/tiling.py`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar, Generic

from typing_extensions import Self, TypeVar
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, f64, i64
from xdsl.ir import Attribute, SSAValue, TypeAttribute
from xdsl.irdl import (
    AttrConstraint,
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_to_attr_constraint,
    operand_def,
    prop_def,
    result_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer

from mirage_xdsl.dialects import tiling
from mirage_xdsl.dialects.common.checks import check_inferred_shape, fail, shape_of
from mirage_xdsl.dialects.common.precision import mixes_half_and_f32, widens_half

TensorT = TypeVar("TensorT", bound=TypeAttribute)
"""The tensor type of one IR level: builtin `TensorType` (kn) or `tb.STensorType` (tb)."""

LEVEL_TENSOR: AttrConstraint = irdl_to_attr_constraint(TensorT, allow_type_var=True)  # type: ignore[misc, arg-type]
"""`TensorT` as an IRDL constraint, for the operand and result definitions below; xDSL maps it to
the type a subclass binds (`Base[TensorType]`) when `irdl_op_definition` builds the op.  (mypy
reads a type variable as a type only, hence the ignore.)"""


class GraphOp(IRDLOperation, ABC):
    """Base of the ops of Mirage's kernel and threadblock graphs; a level's subclass implements
    the hooks, a family base (below) uses them.

    Properties are written in the attribute dictionary (`{dim = 1 : i64}`, `ParsePropInAttrDict`).
    """

    irdl_options = (ParsePropInAttrDict(),)

    THREADBLOCK: ClassVar[bool]
    """Whether the level's shapes follow `tiling`'s threadblock rules (tiles: the leading dims of
    a matmul operand are 1) rather than its kernel rules (DTensors: leading dims are a batch)."""

    @classmethod
    @abstractmethod
    def derived_type(cls, like: SSAValue, shape: Sequence[int]) -> Attribute:
        """The type of a result of shape `shape` computed from the operand `like` (its element
        type and, at the tb level, its after_accum flag)."""

    @abstractmethod
    def check_level_rules(self) -> None:
        """Check the level's own rules on the op's tensors (first in every family's verifier).

        Raises:
            KnVerifyError: a rule is broken.
        """

    @abstractmethod
    def check_element_types(self, *values: SSAValue) -> None:
        """Check that `values` share one element type.

        Raises:
            KnVerifyError: they do not.
        """


class UnaryOpBase(GraphOp, Generic[TensorT]):
    """One operand, one result of the operand's shape (and, for tiles, after_accum); syntax
    `OP %x {props} : T`, or `OP %x {props} : T -> R` where the result's element type differs.
    Elementwise unary ops, rms_norm, all_reduce and the causal mask.

    The result has the operand's type, except that a level may let an elementwise op round
    (`ROUNDS_TO_HALF`): an f32 operand and a 16-bit (f16 / bf16) result, computed in fp32 and
    rounded once when stored, as an elementwise binary op does with mixed operands
    (`precision.mixes_half_and_f32`).  tb-decompose-accumulators ends a 16-bit rms statistic
    accumulated in fp32 with such a `tb.sqrt`, so that the squares never round to 16 bits."""

    ROUNDS_TO_HALF: ClassVar[bool] = False
    """Whether an f32 operand may give a 16-bit result (tb's elementwise unary ops)."""

    input = operand_def(LEVEL_TENSOR)
    result = result_def(LEVEL_TENSOR)

    def __init__(self, input: SSAValue, result_type: Attribute | None = None, **props: Attribute):
        super().__init__(operands=[input], result_types=[result_type or input.type], properties=props)

    def verify_(self) -> None:
        """Check the level's rules and that the result has the operand's type (or, where the op
        rounds, the operand's type with a 16-bit element type for an f32 one).

        Raises:
            KnVerifyError: see `check_level_rules`, or the result's type differs otherwise.
        """
        self.check_level_rules()
        if self.result.type == self.input.type:
            return
        if self.ROUNDS_TO_HALF and self.is_rounding():
            return
        rounding = ", or the same with an f16 / bf16 element type for an f32 operand" if self.ROUNDS_TO_HALF else ""
        raise fail(self, f"the result type {self.result.type} must equal the operand's type {self.input.type}{rounding}")

    def is_rounding(self) -> bool:
        """Whether the result is the operand's type with an f32 element type rounded to f16 /
        bf16 (levels that allow it, `ROUNDS_TO_HALF`, say how their types compare)."""
        return False

    def print(self, printer: Printer) -> None:
        """Print ` %x {attrs and props} : T[ -> R]` (the result type only where it differs)."""
        printer.print_string(" ")
        printer.print_operand(self.input)
        printer.print_op_attributes(self.attributes | dict(self.properties))
        printer.print_string(" : ")
        printer.print_attribute(self.input.type)
        if self.result.type != self.input.type:
            printer.print_string(" -> ")
            printer.print_attribute(self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        """Parse `%x {attrs and props} : T[ -> R]`.

        Raises:
            ParseError: malformed text.
        """
        operand = parser.parse_unresolved_operand()
        attrs = parser.parse_optional_attr_dict()
        prop_names = cls.get_irdl_definition().properties.keys()
        props = {k: attrs.pop(k) for k in list(attrs) if k in prop_names}
        parser.parse_punctuation(":")
        input_type = parser.parse_type()
        result_type = parser.parse_type() if parser.parse_optional_punctuation("->") else input_type
        (resolved,) = parser.resolve_operands([operand], [input_type], parser.pos)
        return cls.create(operands=[resolved], result_types=[result_type], properties=props, attributes=attrs)


class ClampOpBase(UnaryOpBase[TensorT], Generic[TensorT]):
    """`min(max(x, min_value), max_value)` elementwise; the bounds are f64 properties."""

    min_value = prop_def(FloatAttr)
    max_value = prop_def(FloatAttr)

    def __init__(self, input: SSAValue, min_value: float, max_value: float):
        super().__init__(input, min_value=FloatAttr(min_value, f64), max_value=FloatAttr(max_value, f64))

    def verify_(self) -> None:
        """Check the level's rules and the bounds.

        Raises:
            KnVerifyError: see `check_level_rules`, or min_value > max_value.
        """
        super().verify_()
        lo, hi = self.min_value.value.data, self.max_value.value.data
        if not lo <= hi:
            raise fail(self, f"min_value ({lo}) must not exceed max_value ({hi})")


class ScalarOpBase(UnaryOpBase[TensorT], Generic[TensorT]):
    """An elementwise op with one f64 `scalar` property."""

    scalar = prop_def(FloatAttr)

    def __init__(self, input: SSAValue, scalar: float):
        super().__init__(input, scalar=FloatAttr(scalar, f64))


class MulScalarOpBase(ScalarOpBase[TensorT], Generic[TensorT]):
    """`x * scalar` elementwise; the scalar is an f64 property."""


class AddScalarOpBase(ScalarOpBase[TensorT], Generic[TensorT]):
    """`x + scalar` elementwise (e.g. a normalisation's epsilon); the scalar is an f64 property."""


class BinaryOpBase(GraphOp, Generic[TensorT]):
    """Two operands and one result whose shape `infer_shape` derives from theirs (default: numpy
    broadcasting over equal ranks); syntax `OP %a, %b : A, B -> R`.  Elementwise ops may mix one
    16-bit float type with f32 (`precision.mixes_half_and_f32`; matmuls may not)."""

    lhs = operand_def(LEVEL_TENSOR)
    rhs = operand_def(LEVEL_TENSOR)
    result = result_def(LEVEL_TENSOR)
    assembly_format = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"

    @classmethod
    def infer_shape(cls, lhs: Sequence[int], rhs: Sequence[int]) -> tuple[int, ...]:
        """The broadcast shape of `lhs` and `rhs` (numpy rules over equal ranks, `tiling.broadcast_shape`).

        Raises:
            ShapeError: the shapes do not broadcast.
        """
        return tiling.broadcast_shape(lhs, rhs)

    def __init__(self, lhs: SSAValue, rhs: SSAValue):
        shape = self.infer_shape(shape_of(lhs), shape_of(rhs))
        super().__init__(operands=[lhs, rhs], result_types=[self.derived_type(lhs, shape)])

    def mixes_precision(self) -> bool:
        """Whether the operands and result may hold different element types: one 16-bit float
        type and f32 (`precision.mixes_half_and_f32`); matmuls override it."""
        return mixes_half_and_f32((self.lhs, self.rhs, self.result))

    def verify_(self) -> None:
        """Check the level's rules, one element type and the inferred result shape.

        Raises:
            KnVerifyError: see `check_level_rules`, different element types, operand shapes that
                `infer_shape` rejects, or another result shape.
        """
        self.check_level_rules()
        if not self.mixes_precision():
            self.check_element_types(self.lhs, self.rhs, self.result)
        check_inferred_shape(self, lambda: self.infer_shape(shape_of(self.lhs), shape_of(self.rhs)), shape_of(self.result))


class MatmulOpBase(BinaryOpBase[TensorT], Generic[TensorT]):
    """GEMM over the last two dims: [..., M, K] @ [..., K, N] -> [..., M, N]; the leading dims
    are a batch (equal) at the kernel level and 1 for tiles (`GraphOp.THREADBLOCK`).  The
    operands share one element type; the result has it too, or f32 for 16-bit operands (a
    widening product, as tensor cores accumulate: `precision.widens_half`)."""

    def mixes_precision(self) -> bool:
        """Whether the result widens the operands' one 16-bit type to f32 (`precision.widens_half`)."""
        return widens_half((self.lhs, self.rhs), self.result)

    @classmethod
    def infer_shape(cls, lhs: Sequence[int], rhs: Sequence[int]) -> tuple[int, ...]:
        """The product shape of `lhs` and `rhs` (`tiling.matmul_shape` under the level's rules).

        Raises:
            ShapeError: ranks differ or are < 2, K differs, or the leading dims break the level's rule.
        """
        return tiling.matmul_shape(lhs, rhs, threadblock=cls.THREADBLOCK)


class ConcatOpBase(GraphOp, Generic[TensorT]):
    """Concatenate two tensors along the property `dim`; syntax `OP %a, %b {dim = D : i64} : A, B -> R`."""

    lhs = operand_def(LEVEL_TENSOR)
    rhs = operand_def(LEVEL_TENSOR)
    result = result_def(LEVEL_TENSOR)
    dim = prop_def(IntegerAttr)
    assembly_format = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"

    def __init__(self, lhs: SSAValue, rhs: SSAValue, dim: int):
        shape = tiling.concat_shape(shape_of(lhs), shape_of(rhs), dim)
        super().__init__(operands=[lhs, rhs], result_types=[self.derived_type(lhs, shape)], properties={"dim": IntegerAttr(dim, i64)})

    def verify_(self) -> None:
        """Check the level's rules, one element type and the concatenated shape along `dim`.

        Raises:
            KnVerifyError: see `check_level_rules`, different element types, operands that do not
                concatenate (`tiling.concat_shape`), or another result shape.
        """
        self.check_level_rules()
        self.check_element_types(self.lhs, self.rhs, self.result)
        check_inferred_shape(
            self, lambda: tiling.concat_shape(shape_of(self.lhs), shape_of(self.rhs), self.dim.value.data), shape_of(self.result)
        )


class ReductionOpBase(GraphOp, Generic[TensorT]):
    """Reduce dim `dim` of `input` to `reduced_size()` elements; every result has that shape
    (`tiling.reduction_shape`) and the input's element type, or f32 for a 16-bit input where
    the subclass sums (`KEEPS_F32_SUMS`, `precision`).  Subclasses give the results."""

    KEEPS_F32_SUMS: ClassVar[bool] = False

    input = operand_def(LEVEL_TENSOR)
    dim = prop_def(IntegerAttr)

    @property
    def reduce_dim(self) -> int:
        """The reduced dimension."""
        return self.dim.value.data

    def reduced_size(self) -> int:
        """Size of the reduced dim in the result (1 unless overridden)."""
        return 1

    def check_result(self, result: SSAValue) -> None:
        """Check one result: the input's element type and the reduced shape.

        Raises:
            KnVerifyError: another element type, a bad dim or size (`tiling.reduction_shape`), or
                another shape.
        """
        if not (self.KEEPS_F32_SUMS and mixes_half_and_f32((self.input, result))):
            self.check_element_types(self.input, result)
        check_inferred_shape(
            self, lambda: tiling.reduction_shape(shape_of(self.input), self.reduce_dim, self.reduced_size()), shape_of(result)
        )

    def verify_(self) -> None:
        """Check the level's rules, then each result in order (`check_result`).

        Raises:
            KnVerifyError: see `check_level_rules` and `check_result`.
        """
        self.check_level_rules()
        for result in self.results:
            self.check_result(result)


class OneResultReductionOpBase(ReductionOpBase[TensorT], Generic[TensorT]):
    """A reduction with one result; syntax `OP %x {dim = D : i64[, ...]} : T -> R`."""

    result = result_def(LEVEL_TENSOR)
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue, dim: int, out_size: int = 1, **props: Attribute):
        """Reduce dim `dim` of `input` to `out_size` elements; `props` are further properties.

        Raises:
            ShapeError: `dim` is not a dim of `input` or `out_size` does not divide it.
        """
        shape = tiling.reduction_shape(shape_of(input), dim, out_size)
        super().__init__(
            operands=[input], result_types=[self.derived_type(input, shape)], properties={"dim": IntegerAttr(dim, i64), **props}
        )
