"""CUDA for `cute.hopper_attention`: the kernel (a call of `mx::hopper::flash_attention`) and its launch.

The op's attributes are printed as they are (kn-partition decided them); the strides are the
operands' recorded ones (`dtensor_strides`), the scale is folded with log2(e) (the kernel's
exponentials are `ex2`):

    #include "mirage_xdsl/hopper_attention.cuh"
    extern "C" __global__ void __launch_bounds__(256, 2)
    prefill_flash_attention_0(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tk,
                              const __grid_constant__ CUtensorMap tv, half* __restrict__ o,
                              const half* __restrict__ q, const half* __restrict__ k, const half* __restrict__ v) {
      mx::hopper::flash_attention<half, 128, 1, 64, 2, false>(mx::hopper::AttnMaps{&tq, &tk, &tv}, o, mx::hopper::AttnShape{...});
    }

The launch: grid (heads, query blocks), 128 x (consumers + 1) threads (the producer
warpgroup), no PDL (the kernel reads its inputs from its first instruction on), and the tensor
maps of Q, K and V the producer's TMA loads read (`attention_maps`); the pointers of Q, K and V
stay parameters so that the launch names every buffer the kernel reads.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from xdsl.ir import Operation, SSAValue

from mirage_xdsl.codegen.cuda_syntax import CudaEmitError
from mirage_xdsl.codegen.hopper_gemm import batch_strides, element_names, tensor_span
from mirage_xdsl.codegen.launch_plan import KernelLaunch, TensorMapSpec, TensorRef
from mirage_xdsl.dialects.cute.decode_attention import DecodeAttentionOp
from mirage_xdsl.dialects.cute.hopper_attention import HopperAttentionOp
from mirage_xdsl.dialects.kn.strides import dtensor_strides

HEADER = "mirage_xdsl/hopper_attention.cuh"
LOG2E = 1.4426950408889634


def threads(op: HopperAttentionOp) -> int:
    """Threads per block: the producer warpgroup and `consumers` consumer warpgroups."""
    return 128 * (op.consumers.value.data + 1)


def blocks_per_sm(op: HopperAttentionOp) -> int:
    """The `__launch_bounds__` minimum of blocks per SM: two with one consumer (the header's
    register split assumes 128 registers per thread at launch), else one."""
    return 2 if op.consumers.value.data == 1 else 1


def row_blocks(op: HopperAttentionOp) -> int:
    """Query blocks per head (the grid's y extent)."""
    _, sq, _, _ = op.dims()
    return -(-sq // (64 * op.consumers.value.data))


def head_row_strides(op: HopperAttentionOp | DecodeAttentionOp, value: SSAValue, which: str) -> tuple[int, int]:
    """(head stride, row stride) of Q, V or the result, or of K's keys; its head-dim stride must be 1.

    Raises:
        CudaEmitError: a head dim with another stride (the layout passes changed it).
    """
    st = dtensor_strides(value)
    unit, row = (st[-2], st[-1]) if which == "K" else (st[-1], st[-2])
    if unit != 1:
        raise CudaEmitError(
            f"{op.name} {op.kernel_name.data}: {which}'s head dim has stride {unit}, the kernel needs 1; "
            "lower the graph with mirage-transpile{arch=sm_80} to use the generated attention kernels"
        )
    head = st[0] if len(st) == 3 else 0
    return head, row


def exp2_scale(op: HopperAttentionOp | DecodeAttentionOp) -> float:
    """The op's softmax scale times log2(e): the kernels' exponentials are `ex2`.

    Raises:
        CudaEmitError: a scale whose product is not finite.
    """
    scale = op.scale.value.data * LOG2E
    if not math.isfinite(scale):
        raise CudaEmitError(f"{op.name} {op.kernel_name.data}: the scale {op.scale.value.data} is not finite")
    return scale


def print_hopper_attention(op: HopperAttentionOp) -> str:
    """The kernel's CUDA source (includes the header; several kernels may share one TU).

    Raises:
        CudaEmitError: a head dim whose stride is not 1, or a scale that is not finite.
        ValueError: an element type other than f16/bf16 (the verifier rejects it earlier).
    """
    ctype, _ = element_names(op)
    _, sq, sk, d = op.dims()
    strides = [head_row_strides(op, v, w) for v, w in ((op.q, "Q"), (op.k, "K"), (op.v, "V"), (op.result, "the result"))]
    flat = ", ".join(f"{h}LL, {r}LL" for h, r in strides)
    scale = exp2_scale(op)
    offset = op.causal_offset.value.data if op.causal_offset is not None else 0
    shape = f"{sq}, {sk}, {row_blocks(op)}, {flat}, {scale!r}f, {offset}"
    template = f"{ctype}, {d}, {op.consumers.value.data}, {op.key_tile.value.data}, {op.stages.value.data}, {str(op.causal).lower()}"
    name = op.kernel_name.data
    return "\n".join(
        [
            f'#include "{HEADER}"',
            f'extern "C" __global__ void __launch_bounds__({threads(op)}, {blocks_per_sm(op)})',
            f"{name}(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tk, "
            f"const __grid_constant__ CUtensorMap tv, {ctype}* __restrict__ o, const {ctype}* __restrict__ q, "
            f"const {ctype}* __restrict__ k, const {ctype}* __restrict__ v) {{",
            f"  mx::hopper::flash_attention<{template}>(mx::hopper::AttnMaps{{&tq, &tk, &tv}}, o, mx::hopper::AttnShape{{{shape}}});",
            "}",
            "",
        ]
    )


def attention_maps(op: HopperAttentionOp, ref: Callable[[SSAValue, Operation], TensorRef]) -> tuple[TensorMapSpec, ...]:
    """The tensor maps of Q, K and V: {head dim, rows, heads, 1} (a tensor without a head dim, head
    stride 0, has one head), byte strides of rows and heads, boxes of 64 head-dim elements (one
    128-byte swizzle row) by the tile's rows (64 x consumers query rows, `key_tile` keys).

    Raises:
        CudaEmitError: a head dim whose stride is not 1 (`head_row_strides`), or from `ref`.
    """
    heads, sq, sk, d = op.dims()
    _, dtype = element_names(op)
    key_rows = op.key_tile.value.data
    maps = []
    for value, which, rows, box_rows in (
        (op.q, "Q", sq, 64 * op.consumers.value.data),
        (op.k, "K", sk, key_rows),
        (op.v, "V", sk, key_rows),
    ):
        head, row = head_row_strides(op, value, which)
        span = tensor_span(value, 2)
        strides = (row * 2, *batch_strides([head], span, 2), span)
        maps.append(TensorMapSpec(ref(value, op), dtype, (d, rows, heads if head else 1, 1), strides, (64, box_rows, 1, 1)))  # type: ignore[arg-type]
    return tuple(maps)


def attention_launch(op: HopperAttentionOp, ref: Callable[[SSAValue, Operation], TensorRef]) -> KernelLaunch:
    """The `KernelLaunch` of `op`: grid (heads, query blocks), block, shared memory, the tensor
    maps of Q, K and V (`attention_maps`) and the pointers of the result, Q, K and V (the
    kernel's parameter order).

    Raises:
        CudaEmitError: from `ref` (a value without a buffer) or `attention_maps`.
    """
    heads, _, _, _ = op.dims()
    return KernelLaunch(
        op.kernel_name.data,
        (heads, row_blocks(op), 1),
        (threads(op), 1, 1),
        op.smem_bytes(),
        (ref(op.result, op), ref(op.q, op), ref(op.k, op), ref(op.v, op)),
        pdl=False,
        tensor_maps=attention_maps(op, ref),
        sm90a=True,
    )
