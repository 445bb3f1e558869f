"""The verifier error of kernel- and threadblock-graph ops (`KnVerifyError`, message
`<op name>: <rule>`), the shape checks their verifiers share and the accessors of a tensor's
shape and element type (`tensor<...>` at the kernel level, `!tb.stensor<...>` tiles at the
threadblock level)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import IRDLOperation
from xdsl.utils.exceptions import VerifyException

from mirage_xdsl.dialects import tiling

__all__ = ["KnVerifyError", "check_inferred_shape", "check_shape", "element_type_of", "fail", "shape_of"]


def shape_of(value: SSAValue | Attribute) -> tuple[int, ...]:
    """Static shape of a tensor-typed value or type (`tensor<...>` or `!tb.stensor<...>`)."""
    typ = value.type if isinstance(value, SSAValue) else value
    return tuple(typ.get_shape())  # type: ignore[attr-defined]


def element_type_of(value: SSAValue | Attribute) -> Attribute:
    """Element dtype of a tensor-typed value or type."""
    typ = value.type if isinstance(value, SSAValue) else value
    return typ.get_element_type()  # type: ignore[attr-defined]


class KnVerifyError(VerifyException):
    """A kernel-graph op (or a `tb` op of one of its threadblock graphs) breaks one of Mirage's
    rules; the message names the op and the rule."""


def fail(op: IRDLOperation, rule: str) -> KnVerifyError:
    """Build the exception for `op` breaking `rule` (message: `<op name>: <rule>`)."""
    return KnVerifyError(f"{op.name}: {rule}")


def check_shape(op: IRDLOperation, expected: Sequence[int], actual: Sequence[int], what: str = "result") -> None:
    """Check that `actual` equals the inferred `expected` shape.

    Raises:
        KnVerifyError: it does not (`what` names the checked value in the message).
    """
    if tuple(expected) != tuple(actual):
        raise fail(op, f"{what} shape {tuple(actual)} does not match the inferred shape {tuple(expected)}")


def check_inferred_shape(op: IRDLOperation, infer: Callable[[], Sequence[int]], actual: Sequence[int], what: str = "result") -> None:
    """Check `actual` against the shape `infer()` derives (a `tiling` shape rule).

    Raises:
        KnVerifyError: the rule rejects the operands (`tiling.ShapeError`'s message), or `actual`
            differs from the inferred shape (`check_shape`).
    """
    try:
        expected = infer()
    except tiling.ShapeError as err:
        raise fail(op, str(err)) from None
    check_shape(op, expected, actual, what)
