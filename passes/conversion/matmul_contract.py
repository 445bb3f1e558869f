"""A lone `kn.matmul` as a `contraction.contract` for the sm_90a TMA + wgmma GEMM.

`kn-partition` leaves a compute-bound lone matmul to a library GEMM (CuPy's cuBLAS, which a
CUDA graph cannot capture).  With its `hopper-gemm` option such a matmul becomes instead the
seed-004 contraction (`dialects/contraction`) that `convert-contraction-to-hopper` lowers to
`cute.hopper_gemm`, provided it has a GEMM view (`passes/contraction/gemm_view.py`).

    %o = kn.matmul %A, %B : tensor<8x64x32xf16>, tensor<8x32x48xf16> -> tensor<8x64x48xf16>

with B stored N-major through `kn.strides = array<i64: 1536, 1, 32>` becomes

    %o = "contraction.contract"(%A, %B) <{dim_types = ["C", "M", "N", "K"],
        dim_sizes = array<i64: 8, 64, 48, 32>,
        strides = [array<i64: 2048, 32, 0, 1>, array<i64: 1536, 0, 32, 1>, array<i64: 3072, 48, 1, 0>],
        data_type = "FLOAT16", ...}>

Dimensions: the batch dims (C, outermost first), then M, N, K -- the order of
`generate_config` for `...mk,...kn->...mn`; strides are each tensor's element strides as
the IR records them (`dtensor_strides`: func argument / result attributes, the producer's
`kn.strides`), so a transposed operand is read in place.
"""

from __future__ import annotations

from xdsl.dialects.builtin import BFloat16Type, Float16Type
from xdsl.ir import SSAValue

from mirage_xdsl.dialects import kn
from mirage_xdsl.dialects.contraction.config import Config, DataType, DimType, ExecType, FirstType, LastType, PrimType
from mirage_xdsl.dialects.contraction.ops import ContractOp
from mirage_xdsl.dialects.kn.strides import dtensor_strides
from mirage_xdsl.passes.contraction.gemm_view import gemm_view

_DATA_TYPES = {Float16Type: DataType.FLOAT16, BFloat16Type: DataType.BFLOAT16}
MAX_RANK = 4
"""Ranks 2..4: at most two batch dims, the two the sm_90 kernel's tensor maps address."""


def matmul_config(op: kn.MatmulOp) -> Config:
    """The unscheduled contraction config of `op` over its recorded strides.

    Args:
        op: a `kn.matmul` of rank 2..4 (A [..., m, k], B [..., k, n], out [..., m, n]) on
            fp16 or bf16 tensors.

    Returns:
        dims = batch..., m, n, k (types C..., M, N, K); strides [A, B, Out] in elements.

    Raises:
        ValueError: another element type or rank (message names the rule).
    """
    return config_of(op.lhs, op.rhs, op.result)


def config_of(lhs: SSAValue, rhs: SSAValue, result: SSAValue) -> Config:
    """`matmul_config` of the matmul `result = lhs @ rhs` (also of the `contraction.contract`
    made from one: `resync`), with the strides the IR records now.

    Raises:
        ValueError: see `matmul_config`.
    """
    elem = kn.element_type_of(result)
    data_type = next((d for cls, d in _DATA_TYPES.items() if isinstance(elem, cls)), None)
    if data_type is None:
        raise ValueError(f"sm_90 GEMM: element type {elem} is not f16 or bf16")
    a_shape, out_shape = kn.shape_of(lhs), kn.shape_of(result)
    rank = len(out_shape)
    if not 2 <= rank <= MAX_RANK:
        raise ValueError(f"sm_90 GEMM: rank {rank} is not in 2..{MAX_RANK}")
    sa, sb, so = dtensor_strides(lhs), dtensor_strides(rhs), dtensor_strides(result)
    batch = list(range(rank - 2))
    m, n, k = out_shape[-2], out_shape[-1], a_shape[-1]
    return Config(
        data_type=data_type,
        prim_main=PrimType.GEMM,
        prim_last=LastType.NONE,
        prim_first=FirstType.ZERO,
        dim_types=[DimType.C] * len(batch) + [DimType.M, DimType.N, DimType.K],
        exec_types=[ExecType.SEQ] * (rank + 1),
        dim_sizes=[out_shape[i] for i in batch] + [m, n, k],
        strides=[
            [sa[i] for i in batch] + [sa[-2], 0, sa[-1]],
            [sb[i] for i in batch] + [0, sb[-1], sb[-2]],
            [so[i] for i in batch] + [so[-2], so[-1], 0],
        ],
    )


FROM_MATMUL_ATTR = "kn.from_matmul"
"""Unit attribute of a `contraction.contract` made from a `kn.matmul` (`gemm_epilogue.lower_chain`): its tensors are a
matmul's, so `resync` can re-read their strides."""


def resync(contract: ContractOp) -> None:
    """Re-read the strides of a contraction made from a matmul (`FROM_MATMUL_ATTR`) from the
    IR: mirage-transpile's layout passes record the final strides of the kernels' tensors
    (e.g. a producer kernel's padded rows) after kn-partition built the config.  Other
    contractions are left as they are.

    Raises:
        ValueError: see `matmul_config` (not for a contraction made from a matmul).
    """
    if FROM_MATMUL_ATTR in contract.attributes:
        config = config_of(contract.lhs, contract.rhs, contract.result)
        config.prim_last = contract.config().prim_last  # an epilogue chain's ELWISE_MUL stays
        contract.set_config(config, scheduled=contract.is_scheduled)


def has_gemm_view(op: kn.MatmulOp) -> bool:
    """Whether `op` has an sm_90 GEMM view (f16/bf16, rank 2..4, A K-contiguous, B K- or
    N-contiguous, the output N-contiguous, strides TMA can take: `gemm_view`'s rules), so that
    kn-partition may lower it to a `contraction.contract` (passes/conversion/gemm_epilogue.py)."""
    try:
        gemm_view(matmul_config(op))
    except ValueError:
        return False
    return True
