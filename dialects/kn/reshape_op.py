"""`kn.reshape`: a row-major reshape of a DTensor (numpy `reshape` semantics, no copy implied).

    %r = kn.reshape %x : tensor<1x4096xf16> -> tensor<8x4x128xf16>

The result holds the input's elements in row-major (C) order with another shape; the element
count and element type are unchanged.  Not a Mirage kernel-level op (Mirage graphs have no
reshape); a decode layer needs it to view a QKV projection [batch, heads * head_dim] as heads
[kv_heads, group, head_dim] and back.  How it runs: `kn-alias-reshape`
(passes/kn/alias_reshape.py) makes it a view of its input's buffer where the input's strides
allow (`dialects/views.reshape_strides`), else it is a library copy (runtime/library_ops.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.dialects.builtin import TensorType
from xdsl.ir import SSAValue
from xdsl.irdl import irdl_op_definition, operand_def, result_def

from mirage_xdsl.dialects.common.checks import fail, shape_of
from mirage_xdsl.dialects.kn.tensors import KnOp

ALIAS_ATTR = "kn.alias"
"""Unit attribute `kn-alias-reshape` puts on a reshape whose result is a view of its input's
buffer (its `kn.strides` are the view's strides; it gets no workspace and no launch step)."""
OUTPUT_VIEW_ATTR = "kn.output_view"
"""Unit attribute, beside `kn.alias`, on a reshape whose result is a graph output and whose
input (a kernel's result read by nothing else) is written straight into that output's buffer,
viewed with the input's shape: the input gets no workspace of its own."""


@irdl_op_definition
class ReshapeOp(KnOp):
    """Row-major reshape: `result = input.reshape(shape)` (numpy semantics); same element count
    and element type."""

    name = "kn.reshape"
    input = operand_def(TensorType)
    output = result_def(TensorType)
    assembly_format = "$input attr-dict `:` type($input) `->` type($output)"

    def __init__(self, input: SSAValue, shape: Sequence[int]):
        super().__init__(operands=[input], result_types=[self.derived_type(input, list(shape))])

    def verify_(self) -> None:
        """Check the DTensor types, one element type and an unchanged element count.

        Raises:
            KnVerifyError: a tensor that is not a Mirage DTensor, different element types, or
                a result with another number of elements than the input.
        """
        self.check_level_rules()
        self.check_element_types(self.input, self.output)
        src, dst = shape_of(self.input), shape_of(self.output)
        if math.prod(src) != math.prod(dst):
            raise fail(
                self,
                f"cannot reshape {list(src)} ({math.prod(src)} elements) into {list(dst)} ({math.prod(dst)} elements); "
                "a reshape keeps the element count",
            )


def output_view_of(value: SSAValue) -> ReshapeOp | None:
    """The returned reshape (`OUTPUT_VIEW_ATTR`) that `value` is written through, if any: then
    `value` lives in that graph output's buffer, viewed with `value`'s shape."""
    uses = list(value.uses)
    user = uses[0].operation if len(uses) == 1 else None
    return user if isinstance(user, ReshapeOp) and OUTPUT_VIEW_ATTR in user.attributes else None
