"""`cute.hopper_attention`: one sm_90a flash-attention kernel (wgmma), as a launch.

    %o = cute.hopper_attention(%q, %k, %v) {kernel_name = "prefill_flash_attention_0",
        scale = 0.088388347648318433 : f64, causal_offset = 0 : i64,   // optional: causal mask
        consumers = 1 : i64, key_tile = 64 : i64, stages = 2 : i64}
        : (tensor<8x4096x128xf16>, tensor<8x128x4096xf16>, tensor<8x4096x128xf16>) -> tensor<8x4096x128xf16>

computes `softmax(scale * Q @ K [masked]) @ V` per head: Q [heads, seq_q, d], K as the matmul
operand [heads, d, seq_k] (stored key-major: its d axis has stride 1), V [heads, seq_k, d], the
result [heads, seq_q, d]; rank 2 is one head.  With `causal_offset` = c, key j is kept for
query row i when j <= i + c (`kn.causal_mask`'s rule).  The operands are the graph's tensors;
the printer reads their strides from the IR (`dtensor_strides`) when it prints the kernel.

`kn-partition` (passes/conversion/flash_attention.py) makes it from a fused attention group
and sets every attribute: `consumers` 64-row consumer warpgroups per block beside its producer
warpgroup (the block's query rows are 64 x consumers), `key_tile` keys per tile and `stages`
tiles in each of the key and value rings.  The CUDA printer
(codegen/hopper_attention.py) prints a call of `mx::hopper::flash_attention`
(codegen/include/mirage_xdsl/hopper_attention.cuh) instantiated with them.
"""

from __future__ import annotations

from xdsl.dialects.builtin import BFloat16Type, Float16Type, FloatAttr, IntegerAttr, StringAttr, TensorType, f64, i64
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import IRDLOperation, ParsePropInAttrDict, irdl_op_definition, operand_def, opt_prop_def, prop_def, result_def
from xdsl.utils.exceptions import VerifyException

from mirage_xdsl.target.device import SM90

HEAD_DIMS = (64, 128)
"""Head dims the header instantiates (one or two 64-element swizzle chunks per row)."""
KEY_TILES = (64, 128)
"""Keys per tile (the wgmma N of S = Q K^T)."""
WIDE_KEY_TILE_CONSUMERS = 2
"""Consumers a block needs for 128-key tiles: such a consumer holds S (64 fp32 registers per
thread), P (32) and O (64 at head dim 128), which only the register share of a block with two
consumers leaves it (hopper_attention.cuh, `FlashConsumerRegs`: 208; one consumer gets 176)."""
CONSUMERS = (1, 2)
"""64-row consumer warpgroups per block."""
MAX_STAGES = 4
"""Deepest key / value ring (the block's shared memory, `smem_bytes`, bounds it further)."""
ALIGN_SLACK = 1024
"""Bytes the header spends aligning the swizzled tiles to 1024 B (`flash_attention_smem_bytes`)."""
BARRIER_BYTES = 8
"""Bytes of one mbarrier."""


class AttentionOpBase(IRDLOperation):
    """The operands, result, name and scale that the attention kernel ops share
    (`cute.hopper_attention`, `cute.decode_attention`), with their syntax
    `OP(%q, %k, %v) {props} : (Q, K, V) -> O`; `verify_attention_operands` holds their rules."""

    q = operand_def(TensorType)
    k = operand_def(TensorType)
    v = operand_def(TensorType)
    result = result_def(TensorType)
    kernel_name = prop_def(StringAttr)
    scale = prop_def(FloatAttr)

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "`(` $q `,` $k `,` $v `)` attr-dict `:` functional-type(operands, results)"


@irdl_op_definition
class HopperAttentionOp(AttentionOpBase):
    """Flash attention over strided operands on sm_90a (see the module docstring)."""

    name = "cute.hopper_attention"
    causal_offset = opt_prop_def(IntegerAttr)
    consumers = prop_def(IntegerAttr)
    key_tile = prop_def(IntegerAttr)
    stages = prop_def(IntegerAttr)

    def __init__(
        self,
        q: SSAValue,
        k: SSAValue,
        v: SSAValue,
        result_type: Attribute,
        *,
        kernel_name: str,
        scale: float,
        causal_offset: int | None,
        consumers: int,
        key_tile: int,
        stages: int,
    ):
        props: dict[str, Attribute] = {
            "kernel_name": StringAttr(kernel_name),
            "scale": FloatAttr(scale, f64),
            "consumers": IntegerAttr(consumers, i64),
            "key_tile": IntegerAttr(key_tile, i64),
            "stages": IntegerAttr(stages, i64),
        }
        if causal_offset is not None:
            props["causal_offset"] = IntegerAttr(causal_offset, i64)
        super().__init__(operands=[q, k, v], result_types=[result_type], properties=props)

    def dims(self) -> tuple[int, int, int, int]:
        """(heads, seq_q, seq_k, head dim) of the operand types (heads = 1 at rank 2)."""
        return attention_dims(self.q, self.k)

    def smem_bytes(self) -> int:
        """Dynamic shared memory of the kernel (bytes): Q's tile of 64 x `consumers` rows, `stages`
        key and value tiles, the mbarriers (Q's, and full / empty per stage of each ring) and the
        alignment slack (hopper_attention.cuh: `flash_attention_smem_bytes`)."""
        _, _, _, d = self.dims()
        rows, keys, stages = 64 * self.consumers.value.data, self.key_tile.value.data, self.stages.value.data
        return (rows * d + 2 * stages * keys * d) * 2 + (1 + 4 * stages) * BARRIER_BYTES + ALIGN_SLACK

    @property
    def causal(self) -> bool:
        """Whether the scores are causally masked (`causal_offset` set)."""
        return self.causal_offset is not None

    def verify_(self) -> None:
        """Check ranks, shapes, element types and the tile options against the header's rules.

        Raises:
            VerifyException: operands of rank other than 2 or 3 or of different ranks; shapes
                that are not Q [h, sq, d], K [h, d, sk], V [h, sk, d], result [h, sq, d]; element
                types other than one of f16 / bf16; a head dim not in `HEAD_DIMS`; `key_tile`
                not in `KEY_TILES` or not dividing seq_k; `consumers` not in `CONSUMERS`;
                128-key tiles with fewer than `WIDE_KEY_TILE_CONSUMERS` consumers; `stages`
                outside 2..`MAX_STAGES`; shared memory (`smem_bytes`) over the block limit of
                `SM90`; a scale that is not positive; a negative causal offset.
        """
        _, _, sk, _ = verify_attention_operands(self.name, self.q, self.k, self.v, self.result, self.scale.value.data)
        tile = self.key_tile.value.data
        if tile not in KEY_TILES or sk % tile:
            raise VerifyException(f"{self.name}: key_tile {tile} must be one of {KEY_TILES} and divide seq_k = {sk}")
        if self.consumers.value.data not in CONSUMERS:
            raise VerifyException(f"{self.name}: consumers must be one of {CONSUMERS}")
        if tile == 128 and self.consumers.value.data < WIDE_KEY_TILE_CONSUMERS:
            raise VerifyException(
                f"{self.name}: key_tile 128 needs consumers = {WIDE_KEY_TILE_CONSUMERS} (a consumer of one-consumer "
                "blocks has too few registers for 128-key tiles); set consumers = 2 or key_tile = 64"
            )
        if not 2 <= self.stages.value.data <= MAX_STAGES:
            raise VerifyException(f"{self.name}: stages must be in 2..{MAX_STAGES}")
        if self.smem_bytes() > SM90.smem_per_block_optin:
            raise VerifyException(
                f"{self.name}: {self.smem_bytes()} bytes of shared memory exceed the block limit of "
                f"{SM90.smem_per_block_optin}; use fewer stages or a smaller key_tile"
            )
        if self.causal_offset is not None and self.causal_offset.value.data < 0:
            raise VerifyException(f"{self.name}: causal_offset must be >= 0 (row 0 would see no key)")


def attention_dims(q: SSAValue, k: SSAValue) -> tuple[int, int, int, int]:
    """(heads, seq_q, seq_k, head dim) of attention operands Q and K (heads = 1 at rank 2)."""
    qs, ks = _shape(q), _shape(k)
    return (qs[0] if len(qs) == 3 else 1), qs[-2], ks[-1], qs[-1]


def verify_attention_operands(
    name: str, q: SSAValue, k: SSAValue, v: SSAValue, result: SSAValue, scale: float
) -> tuple[int, int, int, int]:
    """The operand rules an attention kernel op shares (`cute.hopper_attention`,
    `cute.decode_attention`); returns (heads, seq_q, seq_k, head dim).

    Raises:
        VerifyException: operands of rank other than 2 or 3 or of different ranks; shapes that
            are not Q [h, sq, d], K [h, d, sk], V [h, sk, d], result [h, sq, d]; element types
            other than one of f16 / bf16; a head dim not in `HEAD_DIMS`; a scale that is not
            positive (the kernels scale the row maximum of the raw scores).
    """
    shapes = [_shape(x) for x in (q, k, v, result)]
    ranks = {len(s) for s in shapes}
    if len(ranks) != 1 or ranks.pop() not in (2, 3):
        raise VerifyException(f"{name}: Q, K, V and the result must all have rank 2 or 3, not {shapes}")
    qs, ks, vs, os_ = shapes
    heads, sq, sk, d = attention_dims(q, k)
    lead = qs[:-2]
    if ks != [*lead, d, sk] or vs != [*lead, sk, d] or os_ != qs:
        raise VerifyException(
            f"{name}: shapes Q {qs}, K {ks}, V {vs}, result {os_} are not Q [h, sq, d], K [h, d, sk], V [h, sk, d], result [h, sq, d]"
        )
    elems = {type(_elem(x)) for x in (q, k, v, result)}
    if len(elems) != 1 or elems.pop() not in (Float16Type, BFloat16Type):
        raise VerifyException(f"{name}: Q, K, V and the result must share one element type, f16 or bf16")
    if d not in HEAD_DIMS:
        raise VerifyException(f"{name}: head dim {d} is not one of {HEAD_DIMS} (hopper_attention.cuh)")
    if not scale > 0:
        raise VerifyException(
            f"{name}: scale {scale} must be positive (the kernel scales the row maximum of the raw scores); "
            "lower such a group to the generated attention kernels"
        )
    return heads, sq, sk, d


def _shape(value: SSAValue) -> list[int]:
    t = value.type
    assert isinstance(t, TensorType)
    return list(t.get_shape())


def _elem(value: SSAValue) -> Attribute:
    t = value.type
    assert isinstance(t, TensorType)
    return t.element_type
