"""A fused attention group as one sm_90a flash-attention kernel (`cute.hopper_attention`).

kn-partition plans an attention group (`softmax(scale Q K) V` written as kn ops) as an
online-softmax block graph that convert-tb-to-cute lowers to the mma.sync flash chain
(`cute.mma_chain ... online`).  With `hopper-gemm` (sm_90, the default) a group that is exactly
that computation, over at least 64 query rows, becomes instead one `cute.hopper_attention`
(wgmma, codegen/include/mirage_xdsl/hopper_attention.cuh) when its estimate
(`flash_attention_us`) is below the group's best plan:

    %s = kn.matmul %Q, %K                   %x = kn.mul_scalar %s {scalar}
    [%x = kn.causal_mask %x {offset}]       %m = kn.reduction_max %x {dim = last}
    %e = kn.exp (kn.sub %x, %m)             %l = kn.reduction %e {dim = last, size = 1}
    %o = kn.div (kn.matmul %e, %V), %l

(the row sum and P V may be f32, as kn-widen-sums makes them); every intermediate is read
inside the group only, Q, K, V and the result are one 16-bit type, the head dim is 64 or 128
with stride 1 (K: its d axis), and the key count a multiple of the key tile.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import BFloat16Type, Float16Type
from xdsl.dialects.func import FuncOp
from xdsl.ir import Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from mirage_xdsl.dialects import kn
from mirage_xdsl.dialects.cute.hopper_attention import HEAD_DIMS, HopperAttentionOp
from mirage_xdsl.dialects.kn.strides import dtensor_strides
from mirage_xdsl.target.cost_model import DeviceModel

MIN_KEY_TILE = 64
"""The smaller key tile: seq_k must be a multiple of it."""


def kernel_shape(group: AttentionGroup, device: DeviceModel) -> tuple[int, int]:
    """(consumer warpgroups per block, keys per tile): two consumers of 64 query rows sharing
    128-key tiles (FlashAttention-3's 128 x 128 tiles) once the group's 128-row blocks give at
    least half the SMs one, with 64-key tiles where seq_k is no multiple of 128; else blocks of
    one consumer and 64-key tiles, two per SM.  H200, 8 heads, d = 128, fp16 (2026-11-27,
    one process): 4096 tokens (256 blocks of 128 rows) 125-131 µs against 153-158 with one
    consumer, causal 70-73 against 81-87 (two consumers, 64-key tiles) and 94-97 (one);
    2048 tokens (128 blocks) 36-37 against 43.8; 1024 tokens (64 blocks) 20.3-21.4 against
    16.8-17.1, causal 20.7 against 16.9."""
    heads, sq, sk, _ = group.dims()
    if 2 * heads * -(-sq // 128) >= device.num_sms:
        return (2, 128) if sk % 128 == 0 else (2, MIN_KEY_TILE)
    return 1, MIN_KEY_TILE


STAGES = 2
"""Tiles per key / value ring: deeper rings were no faster (H200, 4096 tokens: two consumers with
64-key tiles 159.9 / 159.2 µs with 3 / 4 stages against 157.5; with 128-key tiles 126.5 with 3
against 126.1) and leave one block of one consumer per SM."""
MIN_QUERY_ROWS = 64
"""Fewest query rows per head: one consumer warpgroup's wgmma tile (m64)."""


@dataclass(frozen=True)
class AttentionGroup:
    """The parts of a matched attention group (`match_attention`)."""

    q: SSAValue
    k: SSAValue
    v: SSAValue
    out: kn.DivOp
    scale: float
    causal_offset: int | None
    ops: tuple[Operation, ...]
    """every op of the group, producers first"""

    def dims(self) -> tuple[int, int, int, int]:
        """(heads, seq_q, seq_k, head dim); heads = 1 at rank 2."""
        q, k = kn.shape_of(self.q), kn.shape_of(self.k)
        return (q[0] if len(q) == 3 else 1), q[-2], k[-1], q[-1]


def _owner(value: SSAValue, cls: type) -> Operation | None:
    """The op of class `cls` that defines `value`, or None (a block argument or another op)."""
    op = value.owner
    return op if isinstance(op, Operation) and isinstance(op, cls) else None


def match_attention(members: Sequence[Operation]) -> AttentionGroup | None:
    """The attention group `members` computes (module docstring), or None."""
    divs = [op for op in members if isinstance(op, kn.DivOp)]
    if len(divs) != 1:
        return None
    div = divs[0]
    pv, total = _owner(div.lhs, kn.MatmulOp), _owner(div.rhs, kn.ReductionOp)
    if not isinstance(pv, kn.MatmulOp) or not isinstance(total, kn.ReductionOp):
        return None
    e = _owner(pv.lhs, kn.ExpOp)
    if not isinstance(e, kn.ExpOp) or total.input is not e.result:
        return None
    sub = _owner(e.input, kn.SubOp)
    if not isinstance(sub, kn.SubOp):
        return None
    x, rmax = sub.lhs, _owner(sub.rhs, kn.ReductionMaxOp)
    if not isinstance(rmax, kn.ReductionMaxOp) or rmax.input is not x:
        return None
    mask = _owner(x, kn.CausalMaskOp)
    scaled = _owner(mask.input if isinstance(mask, kn.CausalMaskOp) else x, kn.MulScalarOp)
    if not isinstance(scaled, kn.MulScalarOp):
        return None
    s = _owner(scaled.input, kn.MatmulOp)
    if not isinstance(s, kn.MatmulOp):
        return None
    last = len(kn.shape_of(x)) - 1
    if rmax.reduce_dim != last or total.reduce_dim != last or total.reduced_size() != 1:
        return None
    ops = tuple(op for op in (s, scaled, mask, rmax, sub, e, total, pv, div) if op is not None)
    if set(ops) != set(members):
        return None
    inside = set(ops)
    if any(use.operation not in inside for op in ops[:-1] for r in op.results for use in r.uses):
        return None
    offset = mask.offset_value if isinstance(mask, kn.CausalMaskOp) else None
    return AttentionGroup(s.lhs, s.rhs, pv.rhs, div, scaled.scalar.value.data, offset, ops)


def operands_fit(group: AttentionGroup) -> bool:
    """The operand rules of the attention kernels (`cute.hopper_attention`,
    `cute.decode_attention`): rank 2 or 3, one 16-bit element type, one head dim in `HEAD_DIMS`
    for Q, K and V, a positive scale (the kernels scale the row maximum), stride-1 head dims and
    16-byte aligned rows (the TMA maps of `cute.hopper_attention` and the cp.async copies of
    `cute.decode_attention` need 16-byte row strides)."""
    values = (group.q, group.k, group.v, group.out.result)
    if len(kn.shape_of(group.q)) not in (2, 3):
        return False
    elems = {type(kn.element_type_of(v)) for v in values}
    if len(elems) != 1 or elems.pop() not in (Float16Type, BFloat16Type):
        return False
    _, _, _, d = group.dims()
    if d not in HEAD_DIMS or kn.shape_of(group.v)[-1] != d or not group.scale > 0:
        return False
    sq_, sk_, sv_, so_ = (dtensor_strides(v) for v in values)
    unit = (sq_[-1], sk_[-2], sv_[-1], so_[-1])
    rows = (sq_[-2], sk_[-1], sv_[-2], so_[-2], *sq_[:-2], *sk_[:-2], *sv_[:-2], *so_[:-2])
    return unit == (1, 1, 1, 1) and all(r % 8 == 0 for r in rows)


def fits_kernel(group: AttentionGroup) -> bool:
    """Whether `hopper_attention.cuh` computes `group`: the operand rules (`operands_fit`), at
    least `MIN_QUERY_ROWS` query rows and keys a multiple of `MIN_KEY_TILE`."""
    _, sq, sk, _ = group.dims()
    return operands_fit(group) and sq >= MIN_QUERY_ROWS and sk % MIN_KEY_TILE == 0


def kernel_name(group: AttentionGroup, stem: str, op_type: type) -> str:
    """`<function>_<stem>_<n>`: n counts the function's ops of `op_type` so far."""
    func = group.out.parent_op()
    while func is not None and not isinstance(func, FuncOp):
        func = func.parent_op()
    prefix = func.sym_name.data if func is not None else "graph"
    n = sum(1 for op in (func.walk() if func is not None else ()) if isinstance(op, op_type))
    return f"{prefix}_{stem}_{n}"


def replace_group(group: AttentionGroup, op: Operation) -> None:
    """Insert `op` before the group's division, let its result take the division's place and
    erase the group's ops."""
    div = group.out
    Rewriter.insert_op(op, InsertPoint.before(div))
    div.result.replace_all_uses_with(op.results[0])
    for old in reversed(group.ops):
        Rewriter.erase_op(old)


def kept_fraction(sq: int, sk: int, offset: int | None) -> float:
    """Share of the score matrix a causal mask with `offset` keeps (1 without a mask)."""
    if offset is None:
        return 1.0
    kept = sum(min(sk, max(0, i + offset + 1)) for i in range(sq))
    return kept / (sq * sk)


def flash_attention_us(group: AttentionGroup, device: DeviceModel) -> float:
    """Estimated time of the kernel (µs): one launch plus the slower of its MMA flops (both
    products, the kept share of the scores) at `DeviceModel.hopper_attention_flops_per_us` (128-key
    tiles: `hopper_attention_wide_flops_per_us`), scaled by the share of the SMs its blocks
    occupy, and its bytes at HBM bandwidth."""
    heads, sq, sk, d = group.dims()
    flops = 4.0 * heads * sq * sk * d * kept_fraction(sq, sk, group.causal_offset)
    consumers, key_tile = kernel_shape(group, device)
    rate = device.hopper_attention_wide_flops_per_us if key_tile == 128 else device.hopper_attention_flops_per_us
    blocks = heads * -(-sq // (64 * consumers))
    occupancy = min(1.0, blocks / (device.num_sms * (2 if consumers == 1 else 1)))  # blocks an SM holds
    nbytes = 2.0 * sum(math.prod(kn.shape_of(v)) for v in (group.q, group.k, group.v, group.out.result))
    return device.hopper_launch_us + max(flops / (rate * occupancy), nbytes / device.hbm_bytes_per_us)


def lower_attention(group: AttentionGroup, device: DeviceModel, shape: tuple[int, int] | None = None) -> HopperAttentionOp:
    """Replace the group's ops by one `cute.hopper_attention` (named `<func>_flash_attention_<n>`,
    `shape` = (consumers, key_tile) (None: `kernel_shape`), `STAGES`) whose result takes the
    place of the division's."""
    consumers, key_tile = shape if shape is not None else kernel_shape(group, device)
    op = HopperAttentionOp(
        group.q,
        group.k,
        group.v,
        group.out.result.type,
        kernel_name=kernel_name(group, "flash_attention", HopperAttentionOp),
        scale=group.scale,
        causal_offset=group.causal_offset,
        consumers=consumers,
        key_tile=key_tile,
        stages=STAGES,
    )
    replace_group(group, op)
    return op
