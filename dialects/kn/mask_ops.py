"""`kn.causal_mask`: the attention causal mask on a kernel-level tensor.

`kn.causal_mask %s {offset = N : i64} : tensor<..., q x k x T>` keeps element (i, j) of the
last two dims where `j <= i + N` and sets the rest to -inf (`dialects/common/mask_base.py`;
`N = k - q` is FlashAttention's bottom-right alignment, the builder's default).  Not one of
Mirage's kernel-level ops.  kn-fuse places it in threadblock graphs as `tb.causal_mask`.
"""

from __future__ import annotations

from xdsl.dialects.builtin import TensorType
from xdsl.irdl import irdl_op_definition

from mirage_xdsl.dialects.common.mask_base import CausalMaskOpBase
from mirage_xdsl.dialects.kn.tensors import KnOp


@irdl_op_definition
class CausalMaskOp(KnOp, CausalMaskOpBase[TensorType]):
    """`x` where `col <= row + offset` over the last two dims, -inf elsewhere."""

    name = "kn.causal_mask"
