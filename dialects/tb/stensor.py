"""The `tb` STensor type (`!tb.stensor`: a shared-memory tile, `after_accum` when an
accumulator produced it), the base of every threadblock op (`TbOp`, directly inside a
`kn.customized` region; the threadblock level's side of the op bases it shares with kn,
`dialects/common/op_bases.py`) and the checks ops share.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import ArrayAttr, IntAttr
from xdsl.ir import Attribute, ParametrizedAttribute, SSAValue, TypeAttribute
from xdsl.irdl import IRDLOperation, irdl_attr_definition, traits_def
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.traits import HasParent, Pure
from xdsl.utils.exceptions import VerifyException

from mirage_xdsl.dialects import tiling
from mirage_xdsl.dialects.common.checks import element_type_of, fail
from mirage_xdsl.dialects.common.op_bases import GraphOp
from mirage_xdsl.dialects.kn.customized import CustomizedOp
from mirage_xdsl.dialects.kn.tensors import element_type_error


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
        """The tile's shape (dims outermost first)."""
        return tuple(d.data for d in self.shape)

    def get_element_type(self) -> Attribute:
        """The tile's element type."""
        return self.element_type

    @property
    def is_after_accum(self) -> bool:
        """Whether the tile lives after the for-loop (the `after_accum` flag)."""
        return bool(self.after_accum.data)

    def with_after_accum(self, after_accum: bool) -> STensorType:
        """This type with the `after_accum` flag set to `after_accum`."""
        return STensorType(self.get_shape(), self.element_type, after_accum)

    def with_shape(self, shape: Sequence[int]) -> STensorType:
        """This type with another shape (element type and flag kept)."""
        return STensorType(shape, self.element_type, self.is_after_accum)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        """Parse `<DxDx...xT[, after_accum]>`.

        Raises:
            ParseError: a dim that is not static and positive, a rank outside 1..MAX_TENSOR_DIMS,
                an element type Mirage does not support, or a flag other than `after_accum`.
        """
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
        """Print `<DxDx...xT[, after_accum]>`."""
        with printer.in_angle_brackets():
            for d in self.get_shape():
                printer.print_string(f"{d}x")
            printer.print_attribute(self.element_type)
            if self.is_after_accum:
                printer.print_string(", after_accum")

    def verify(self) -> None:
        """Check the type.

        Raises:
            VerifyException: a dim <= 0, a rank outside 1..MAX_TENSOR_DIMS, an unsupported element
                type, or a flag other than 0 / 1.
        """
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
    """Whether `value` is a tile typed after_accum (False for any other type)."""
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
    """Check that `values` share one element type.

    Raises:
        KnVerifyError: they do not.
    """
    types = [element_type_of(v) for v in values]
    if any(t != types[0] for t in types):
        raise fail(op, f"operands and results must share one element type, got {', '.join(map(str, types))}")


class TbOp(GraphOp):
    """Base of all threadblock ops: they live directly inside a `kn.customized` region, on
    tiles (`!tb.stensor`) under the threadblock shape rules.  As the threadblock level of the
    shared op bases: a derived tile keeps its operand's after_accum flag, the level adds no
    rule of its own (a family that checks after_accum overrides `check_level_rules`), and an
    element-type mismatch lists the types in operand order (`check_same_element_type`)."""

    traits = traits_def(HasParent(CustomizedOp), Pure())
    THREADBLOCK: ClassVar[bool] = True

    @classmethod
    def derived_type(cls, like: SSAValue, shape: Sequence[int]) -> Attribute:
        """`like`'s tile type with shape `shape` (element type and after_accum kept)."""
        typ = like.type
        assert isinstance(typ, STensorType)
        return typ.with_shape(shape)

    def check_level_rules(self) -> None:
        """No rule by default (the families with after_accum rules override this)."""

    def check_element_types(self, *values: SSAValue) -> None:
        """One element type (`check_same_element_type`).

        Raises:
            KnVerifyError: `values` have several.
        """
        check_same_element_type(self, *values)
