"""Kernel-graph tensors (DTensors, builtin `tensor<...>` types): the argument / result
attributes (`kn.strides` in elements, `kn.weight`), the DTensor checks, and `KnOp`, the
kernel level's side of the op bases it shares with tb (`dialects/common/op_bases.py`).

The shape / element-type accessors and the error every kn and tb op raises (`KnVerifyError`,
messages `kn.<op>: <rule>`) live in `dialects/common/checks.py`; the `kn` package re-exports
them (`kn.shape_of`, `kn.KnVerifyError`, ...).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import AnyFloat, DenseArrayBase, IntegerType, TensorType, UnitAttr, i64
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue
from xdsl.irdl import IRDLOperation, traits_def
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from mirage_xdsl.dialects import tiling
from mirage_xdsl.dialects.common.checks import element_type_of, fail
from mirage_xdsl.dialects.common.op_bases import GraphOp
from mirage_xdsl.target.device import MAX_TENSOR_ELEMENTS

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


def int_array(values: Sequence[int]) -> DenseArrayBase:
    """`array<i64: ...>` from Python ints."""
    return DenseArrayBase.from_list(i64, list(values))


def ints(attr: DenseArrayBase) -> tuple[int, ...]:
    """Python ints of an `array<i64: ...>` attribute."""
    return tuple(int(v) for v in attr.get_values())  # type: ignore[misc]  # xDSL types get_values for integer arrays only


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
    """Check that `values` share one element type.

    Raises:
        KnVerifyError: they do not.
    """
    dtypes = {element_type_of(v) for v in values}
    if len(dtypes) > 1:
        raise fail(op, f"operands and results must share one element type, got {sorted(map(str, dtypes))}")


class KnOp(GraphOp):
    """The kernel level's side of the shared op bases (`common.op_bases`): pure ops on DTensors
    (builtin `tensor<...>` types), batched shape rules, element types compared as a set."""

    traits = traits_def(Pure())
    THREADBLOCK: ClassVar[bool] = False

    @classmethod
    def derived_type(cls, like: SSAValue, shape: Sequence[int]) -> Attribute:
        """`tensor<shape x E>` with the element type E of `like`."""
        return TensorType(element_type_of(like), shape)

    def check_level_rules(self) -> None:
        """Every tensor of the op is a Mirage DTensor (`check_tensor_types`).

        Raises:
            KnVerifyError: one is not.
        """
        check_tensor_types(self)

    def check_element_types(self, *values: SSAValue) -> None:
        """One element type (`check_same_dtype`).

        Raises:
            KnVerifyError: `values` have several.
        """
        check_same_dtype(self, *values)
