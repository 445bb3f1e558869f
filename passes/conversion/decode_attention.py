"""A fused attention group over a few query rows as one split-key decode kernel
(`cute.decode_attention`, flash decoding).

kn-partition plans decode attention (one to a few query rows per KV head over a long KV cache)
as flash decoding in generated kernels: an online-softmax kernel over key chunks and a combine
(passes/conversion/split_combine.py).  Those kernels share each key tile among the block's
warps (block barriers per tile) and stream the cache at ~3.1-3.5 TB/s on an H200.  With
`hopper-gemm` (sm_90, the default) a group `flash_attention.match_attention` recognises, over at
most `MAX_QUERY_ROWS` query rows per head and without a causal mask, becomes instead one
`cute.decode_attention` when `decode_attention_us` is below the group's best plan: every warp
streams its own keys through its own ring (no block barrier in the loop) and the splits are
combined by the head's last block, in one launch.
"""

from __future__ import annotations

import math

from mirage_xdsl.dialects import kn
from mirage_xdsl.dialects.cute.decode_attention import MAX_QUERY_ROWS, STEP_KEYS, DecodeAttentionOp
from mirage_xdsl.passes.conversion.flash_attention import AttentionGroup, kernel_name, operands_fit, replace_group
from mirage_xdsl.target.cost_model import DeviceModel

MIN_WARP_STEPS = 4
"""Fewest 16-key steps per warp: a warp's ring fills and drains once per block."""
BLOCKS_PER_SM = 2
"""Blocks per SM the split count aims for (heads x splits <= BLOCKS_PER_SM x SMs)."""
MANY_ROWS_EFFICIENCY = 0.7
"""Share of `DeviceModel.hbm_bytes_per_us` the eight-warp form (more than two query rows per
head) streams: 2.9 TB/s for 8 heads x 8 rows x 32768 keys on an H200 (2026-11-27), where one
row per head over 32 heads streamed 4.1 TB/s."""


def decode_options(group: AttentionGroup, device: DeviceModel) -> tuple[int, int, int] | None:
    """(splits, warps, stages) of the kernel, or None if seq_k is not a multiple of one step of
    every warp.  Four warps with 4-stage rings for one or two query rows per head, eight warps
    with 3-stage rings for more (each key then carries more MMA work); splits double while
    heads x splits stays within `BLOCKS_PER_SM` x SMs and every warp keeps `MIN_WARP_STEPS`
    steps.  H200, 32 heads x 32768 keys, one query row, d = 128, fp16 (2026-11-27,
    experiments/decode_probe.py): 4 warps / 4 stages / 8 splits 129.6 µs (4.14 TB/s of K and V;
    torch's SDPA 129.4), 8 / 3 / 4 132.6, 4 / 3 / 16 137.7; 8 heads x 8 rows x 32768 keys:
    8 / 3 / 16 45.6 µs against 4 / 3 / 32 65.6."""
    heads, g, sk, _ = group.dims()
    warps, stages = (4, 4) if g <= 2 else (8, 3)
    step = STEP_KEYS * warps
    if sk % step:
        return None
    splits = 1
    while (
        2 * splits * heads <= BLOCKS_PER_SM * device.num_sms
        and sk % (2 * splits * step) == 0
        and sk // (2 * splits) >= MIN_WARP_STEPS * step
    ):
        splits *= 2
    return splits, warps, stages


def fits_decode(group: AttentionGroup, device: DeviceModel) -> bool:
    """Whether `decode_attention.cuh` computes `group`: the operand rules (`operands_fit`), at
    most `MAX_QUERY_ROWS` query rows per head, no causal mask, and keys a multiple of one step
    of every warp (`decode_options`)."""
    _, g, _, _ = group.dims()
    return (
        operands_fit(group) and g <= MAX_QUERY_ROWS and group.causal_offset is None and decode_options(group, device) is not None
    )


def decode_attention_us(group: AttentionGroup, device: DeviceModel) -> float:
    """Estimated time of the kernel (µs): one launch, its operand bytes at HBM bandwidth (times
    `MANY_ROWS_EFFICIENCY` for the eight-warp form) scaled by the share of the SMs its blocks
    occupy, and with several splits one more launch's worth for the last block's combine."""
    opts = decode_options(group, device)
    assert opts is not None
    splits, warps, _ = opts
    heads, _, _, _ = group.dims()
    nbytes = 2.0 * sum(math.prod(kn.shape_of(v)) for v in (group.q, group.k, group.v, group.out.result))
    occupancy = min(1.0, heads * splits / device.num_sms)
    rate = device.hbm_bytes_per_us * (MANY_ROWS_EFFICIENCY if warps == 8 else 1.0)
    combine = device.hopper_launch_us if splits > 1 else 0.0
    return device.hopper_launch_us + combine + nbytes / (rate * occupancy)


def lower_decode(group: AttentionGroup, device: DeviceModel, options: tuple[int, int, int] | None = None) -> DecodeAttentionOp:
    """Replace the group's ops by one `cute.decode_attention` (named `<func>_decode_attention_<n>`,
    `options` = (splits, warps, stages), None: `decode_options`) whose result takes the place of
    the division's."""
    opts = options if options is not None else decode_options(group, device)
    assert opts is not None
    splits, warps, stages = opts
    op = DecodeAttentionOp(
        group.q,
        group.k,
        group.v,
        group.out.result.type,
        kernel_name=kernel_name(group, "decode_attention", DecodeAttentionOp),
        scale=group.scale,
        splits=splits,
        warps=warps,
        stages=stages,
    )
    replace_group(group, op)
    return op
