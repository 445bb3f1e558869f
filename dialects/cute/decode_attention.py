"""`cute.decode_attention`: split-key decode attention (flash decoding) as one launch.

    %o = cute.decode_attention(%q, %k, %v) {kernel_name = "decode_attention_0",
        scale = 0.088388347648318433 : f64, splits = 8 : i64, warps = 4 : i64, stages = 4 : i64,
        scratch_offset = 0 : i64}                                 // set by kn-plan-workspace
        : (tensor<32x1x128xf16>, tensor<32x128x32768xf16>, tensor<32x32768x128xf16>) -> tensor<32x1x128xf16>

computes `softmax(scale * Q @ K) @ V` per head for a few query rows (Q [heads, g, d] with
g <= 16, K as the matmul operand [heads, d, seq_k] stored key-major, V [heads, seq_k, d]), the
operand rules of `cute.hopper_attention` (`verify_attention_operands`).  The kernel
(codegen/include/mirage_xdsl/decode_attention.cuh) runs `splits` blocks per head of `warps`
warps, each warp streaming its keys through a ring of `stages` 16-key tiles; with more than one
split the blocks' partial (max, sum, O) rows go to `scratch_bytes` of the graph's workspace at
`scratch_offset` and the head's last block combines them, counting arrivals in `counter_words`
words of the launch plan's counters.

`kn-partition` (passes/conversion/decode_attention.py) makes it from a fused attention group
and chooses the options; kn-plan-workspace sets `scratch_offset`; the CUDA printer
(codegen/decode_attention.py) prints a call of `mx::hopper::decode_attention`.
"""

from __future__ import annotations

from xdsl.dialects.builtin import FloatAttr, IntegerAttr, StringAttr, f64, i64
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import irdl_op_definition, opt_prop_def, prop_def
from xdsl.utils.exceptions import VerifyException

from mirage_xdsl.dialects.cute.hopper_attention import AttentionOpBase, attention_dims, verify_attention_operands
from mirage_xdsl.target.device import SM90

MAX_QUERY_ROWS = 16
"""Query rows per head: one m16n8k16 tile of mma.sync (rows past g are zero)."""
STEP_KEYS = 16
"""Keys a warp takes per step (decode_attention.cuh: `kDecodeKeys`)."""
WARPS = (1, 2, 4, 8)
"""Warps per block."""
MAX_STAGES = 4
"""Deepest per-warp ring of (K, V) tiles."""
ALIGN_SLACK = 128
"""Bytes the header spends aligning the rings (`decode_attention_smem_bytes`)."""


@irdl_op_definition
class DecodeAttentionOp(AttentionOpBase):
    """Split-key decode attention over strided operands (see the module docstring)."""

    name = "cute.decode_attention"
    splits = prop_def(IntegerAttr)
    warps = prop_def(IntegerAttr)
    stages = prop_def(IntegerAttr)
    scratch_offset = opt_prop_def(IntegerAttr)

    def __init__(
        self,
        q: SSAValue,
        k: SSAValue,
        v: SSAValue,
        result_type: Attribute,
        *,
        kernel_name: str,
        scale: float,
        splits: int,
        warps: int,
        stages: int,
    ):
        props: dict[str, Attribute] = {
            "kernel_name": StringAttr(kernel_name),
            "scale": FloatAttr(scale, f64),
            "splits": IntegerAttr(splits, i64),
            "warps": IntegerAttr(warps, i64),
            "stages": IntegerAttr(stages, i64),
        }
        super().__init__(operands=[q, k, v], result_types=[result_type], properties=props)

    def dims(self) -> tuple[int, int, int, int]:
        """(heads, query rows per head, seq_k, head dim) of the operand types (heads = 1 at rank 2)."""
        return attention_dims(self.q, self.k)

    def smem_bytes(self) -> int:
        """Dynamic shared memory of the kernel (bytes): every warp's ring of `stages` K and V
        tiles of `STEP_KEYS` keys, or the block's combine rows if larger, plus the alignment
        slack (decode_attention.cuh: `decode_attention_smem_bytes`)."""
        _, _, _, d = self.dims()
        warps, stages = self.warps.value.data, self.stages.value.data
        ring = warps * stages * 2 * STEP_KEYS * d * 2
        combine = warps * MAX_QUERY_ROWS * (d + 2) * 4
        return max(ring, combine) + ALIGN_SLACK

    def scratch_bytes(self) -> int:
        """Workspace bytes of the splits' partial rows (fp32 max, sum and O per head, split and
        query row); 0 with one split."""
        heads, g, _, d = self.dims()
        splits = self.splits.value.data
        return heads * splits * g * (d + 2) * 4 if splits > 1 else 0

    def counter_words(self) -> int:
        """32-bit arrival counters the kernel takes from the launch plan's counters: one per
        head with more than one split, else none."""
        heads, _, _, _ = self.dims()
        return heads if self.splits.value.data > 1 else 0

    def verify_(self) -> None:
        """Check the operands (`verify_attention_operands`) and the kernel options.

        Raises:
            VerifyException: the operand rules; more than `MAX_QUERY_ROWS` query rows; `warps`
                not in `WARPS`; `stages` outside 2..`MAX_STAGES`; `splits` < 1 or seq_k not a
                multiple of `STEP_KEYS` x warps x splits; shared memory over the block limit.
        """
        _, g, sk, _ = verify_attention_operands(self.name, self.q, self.k, self.v, self.result, self.scale.value.data)
        if g > MAX_QUERY_ROWS:
            raise VerifyException(f"{self.name}: {g} query rows per head, at most {MAX_QUERY_ROWS} (one m16 MMA tile)")
        warps, stages, splits = self.warps.value.data, self.stages.value.data, self.splits.value.data
        if warps not in WARPS:
            raise VerifyException(f"{self.name}: warps must be one of {WARPS}")
        if not 2 <= stages <= MAX_STAGES:
            raise VerifyException(f"{self.name}: stages must be in 2..{MAX_STAGES}")
        if splits < 1 or sk % (STEP_KEYS * warps * splits):
            raise VerifyException(
                f"{self.name}: seq_k = {sk} must be a multiple of {STEP_KEYS} keys x {warps} warps x {splits} splits; "
                "choose fewer splits"
            )
        if self.smem_bytes() > SM90.smem_per_block_optin:
            raise VerifyException(
                f"{self.name}: {self.smem_bytes()} bytes of shared memory exceed the block limit of "
                f"{SM90.smem_per_block_optin}; use fewer stages or warps"
            )
