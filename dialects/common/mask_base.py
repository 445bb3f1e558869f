"""The causal mask shared by the kernel (`kn.causal_mask`) and threadblock (`tb.causal_mask`)
levels: its `offset` property, verifier and the keep rule.

On a tensor [..., q, k] the mask keeps element (i, j) when `j <= i + offset` and sets the
others to -inf.  `offset = k - q` is FlashAttention's bottom-right alignment for q != k
(`flash_attn_func(causal=True)`: "the causal mask is aligned to the bottom right corner of
the attention matrix", flash-attention README, 2.1 change log); q == k gives offset 0, the
plain lower triangle of `torch.nn.functional.scaled_dot_product_attention(is_causal=True)`.
`offset >= 0` is required, so column 0 is kept in every row and no softmax row is empty
(exp(-inf - max) = 0 with a finite row max).  At the threadblock level i and j are the
element's global row and column (`tb.causal_mask` says how to derive them from the block's
grid position and the for-loop iteration).
"""

from __future__ import annotations

from typing import Generic

from xdsl.dialects.builtin import IntegerAttr, i64
from xdsl.ir import SSAValue
from xdsl.irdl import prop_def

from mirage_xdsl.dialects.common.checks import fail, shape_of
from mirage_xdsl.dialects.common.op_bases import TensorT, UnaryOpBase


def keeps(row: int, col: int, offset: int) -> bool:
    """Whether the causal mask keeps element (row, col): `col <= row + offset`."""
    return col <= row + offset


class CausalMaskOpBase(UnaryOpBase[TensorT], Generic[TensorT]):
    """`x` where `col <= row + offset` over the last two dims, -inf elsewhere (module docstring)."""

    offset = prop_def(IntegerAttr)

    def __init__(self, input: SSAValue, offset: int, **props: object):
        super().__init__(input, offset=IntegerAttr(offset, i64), **props)  # type: ignore[arg-type]

    @property
    def offset_value(self) -> int:
        """The property `offset` as an int."""
        return self.offset.value.data

    def verify_(self) -> None:
        """Check the level's rules, a rank of at least 2 and `offset >= 0`.

        Raises:
            KnVerifyError: a rank below 2 (no [q, k] to mask) or a negative offset (row 0
                would have no key left: set offset = k - q with q <= k).
        """
        super().verify_()
        if len(shape_of(self.input)) < 2:
            raise fail(self, f"needs a tensor of rank >= 2 ([..., q, k]), got shape {shape_of(self.input)}")
        if self.offset_value < 0:
            raise fail(
                self,
                f"offset {self.offset_value} < 0 would mask every key of row 0 (an empty softmax row); "
                "use offset = k - q with q <= k",
            )
