"""Estimates for the matmuls that may leave kn-partition's generated kernels: to our sm_90a
GEMM (with an epilogue, passes/conversion/gemm_epilogue.py) or to a library call.  kn-partition
compares them with a group's best plan (its module docstring, step 3)."""

from __future__ import annotations

import math

from xdsl.dialects.builtin import AnyFloat, BFloat16Type

from mirage_xdsl.dialects import kn
from mirage_xdsl.target.cost_model import DeviceModel

LIBRARY_MIN_FLOPS = 2**30
"""Fewest flops of a lone matmul that may leave the generated kernels (a library or sm_90a GEMM):
below it a matmul is launch- and bandwidth-bound, where a generated kernel is never slower, and
the planner's absolute estimates for tiny grids are too coarse to compare with another cost."""

LIBRARY_MIN_ROWS = 128
"""Fewest rows and columns (M and N) of such a matmul: the sm_90a GEMM computes 128-row tiles
(two 64-row consumer warp groups, codegen/include/mirage_xdsl/hopper_gemm.cuh) and cuBLAS
similar ones, so decode-shaped matmuls of a few rows stay with the weight-streaming kernels."""


def compute_bound(op: kn.MatmulOp) -> bool:
    """Whether `op` is large enough in flops and in both M and N for a library or sm_90a GEMM
    (`LIBRARY_MIN_FLOPS`, `LIBRARY_MIN_ROWS`)."""
    out = kn.shape_of(op.result)
    flops = 2 * math.prod(out) * kn.shape_of(op.lhs)[-1]
    return flops >= LIBRARY_MIN_FLOPS and min(out[-2], out[-1]) >= LIBRARY_MIN_ROWS


def hopper_gemm_us(op: kn.MatmulOp, device: DeviceModel) -> float:
    """Estimated time of `op` as our sm_90a GEMM (µs): one captured launch plus the slower of its
    flops at `DeviceModel.hopper_gemm_flops_per_us` and its bytes at HBM bandwidth."""
    a, b = kn.shape_of(op.lhs), kn.shape_of(op.rhs)
    out = kn.shape_of(op.result)
    flops = 2.0 * math.prod(out) * a[-1]
    nbytes = 2.0 * (math.prod(a) + math.prod(b) + math.prod(out))
    return device.hopper_launch_us + max(flops / device.hopper_gemm_flops_per_us, nbytes / device.hbm_bytes_per_us)


def library_gemm_us(op: kn.MatmulOp, device: DeviceModel) -> float:
    """Estimated time of `op` as a library GEMM (µs): one library call plus the slower of its
    flops at cuBLAS's rate and its bytes (both operands and the result, each once; bf16 through
    fp32 copies) at HBM bandwidth (`DeviceModel.library_gemm_flops_per_us`, `library_call_us`,
    `library_bf16_traffic`)."""
    a, b = kn.shape_of(op.lhs), kn.shape_of(op.rhs)
    out = kn.shape_of(op.result)
    batch = math.prod(out[:-2])
    flops = 2.0 * batch * out[-2] * out[-1] * a[-1]
    elem = kn.element_type_of(op.result)
    itemsize = elem.bitwidth // 8 if isinstance(elem, AnyFloat) else 2
    nbytes = float(itemsize * (math.prod(a) + math.prod(b) + math.prod(out)))
    if isinstance(elem, BFloat16Type):
        nbytes *= device.library_bf16_traffic
    return device.library_call_us + max(flops / device.library_gemm_flops_per_us, nbytes / device.hbm_bytes_per_us)
