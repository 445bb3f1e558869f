"""CUDA for `cute.decode_attention`: the kernel (a call of `mx::hopper::decode_attention`) and its launch.

The op's attributes are printed as they are (kn-partition chose them); the strides are the
operands' recorded ones (`dtensor_strides`), the scale is folded with log2(e) (the kernel's
exponentials are `ex2`):

    #include "mirage_xdsl/decode_attention.cuh"
    extern "C" __global__ void __launch_bounds__(128)
    decode_decode_attention_0(half* __restrict__ o, const half* __restrict__ q, const half* __restrict__ k,
                              const half* __restrict__ v, float* __restrict__ ws, unsigned* __restrict__ counters) {
      mx::hopper::decode_attention<half, 128, 1, 4, 4>(q, k, v, o, ws, counters, mx::hopper::DecodeShape{...});
    }

The launch: grid (heads, splits), 32 x warps threads, the result, Q, K, V, then the splits'
partials in the workspace at `scratch_offset` and the plan's arrival counters (with one split
the kernel touches neither: both are the workspace base); no PDL.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.ir import Operation, SSAValue

from mirage_xdsl.codegen.cuda_syntax import CudaEmitError
from mirage_xdsl.codegen.hopper_attention import exp2_scale, head_row_strides
from mirage_xdsl.codegen.hopper_gemm import element_names
from mirage_xdsl.codegen.launch_plan import KernelLaunch, TensorRef
from mirage_xdsl.dialects.cute.decode_attention import DecodeAttentionOp

HEADER = "mirage_xdsl/decode_attention.cuh"


def print_decode_attention(op: DecodeAttentionOp) -> str:
    """The kernel's CUDA source (includes the header; several kernels may share one TU).

    Raises:
        CudaEmitError: a head dim whose stride is not 1, or a scale that is not finite.
        ValueError: an element type other than f16/bf16 (the verifier rejects it earlier).
    """
    ctype, _ = element_names(op)
    _, g, sk, d = op.dims()
    strides = [head_row_strides(op, v, w) for v, w in ((op.q, "Q"), (op.k, "K"), (op.v, "V"), (op.result, "the result"))]
    flat = ", ".join(f"{h}LL, {r}LL" for h, r in strides)
    scale = exp2_scale(op)
    splits, warps, stages = op.splits.value.data, op.warps.value.data, op.stages.value.data
    shape = f"{sk}, {sk // splits}, {flat}, {scale!r}f"
    name = op.kernel_name.data
    return "\n".join(
        [
            f'#include "{HEADER}"',
            f'extern "C" __global__ void __launch_bounds__({32 * warps})',
            f"{name}({ctype}* __restrict__ o, const {ctype}* __restrict__ q, const {ctype}* __restrict__ k, "
            f"const {ctype}* __restrict__ v, float* __restrict__ ws, unsigned* __restrict__ counters) {{",
            f"  mx::hopper::decode_attention<{ctype}, {d}, {g}, {warps}, {stages}>(q, k, v, o, ws, counters, "
            f"mx::hopper::DecodeShape{{{shape}}});",
            "}",
            "",
        ]
    )


def decode_launch(op: DecodeAttentionOp, ref: Callable[[SSAValue, Operation], TensorRef], counters: int) -> KernelLaunch:
    """The `KernelLaunch` of `op`: grid (heads, splits), block, shared memory, and the pointers
    of the result, Q, K, V, the partials' workspace and the first of its `counter_words`
    arrival counters (`counters`: that word's index in the plan's counter buffer).

    Raises:
        CudaEmitError: a split kernel without `scratch_offset` (kn-plan-workspace did not run),
            or from `ref` (a value without a buffer).
    """
    heads, _, _, _ = op.dims()
    splits = op.splits.value.data
    if splits > 1 and op.scratch_offset is None:
        raise CudaEmitError(f"{op.name} {op.kernel_name.data}: {splits} splits need a scratch_offset; run kn-plan-workspace first")
    scratch = op.scratch_offset.value.data if op.scratch_offset is not None else 0
    return KernelLaunch(
        op.kernel_name.data,
        (heads, splits, 1),
        (32 * op.warps.value.data, 1, 1),
        op.smem_bytes(),
        (
            ref(op.result, op),
            ref(op.q, op),
            ref(op.k, op),
            ref(op.v, op),
            TensorRef("workspace", 0, scratch),
            TensorRef("counters", 0, 4 * counters) if splits > 1 else TensorRef("workspace", 0, 0),
        ),
        pdl=False,
        sm90a=True,
    )
