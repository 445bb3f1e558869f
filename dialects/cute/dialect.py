"""The `cute` dialect object: its ops and attributes, for xDSL's context."""

from __future__ import annotations

from xdsl.ir import Dialect

from mirage_xdsl.dialects.cute.attrs import FragmentType, LayoutAttr, SmemTensorType, SwizzleAttr, TiledMmaAttr, UnaryFnAttr
from mirage_xdsl.dialects.cute.compute_ops import ConcatOp, ElementwiseOp, FillOp, GridSumOp, ReduceOp
from mirage_xdsl.dialects.cute.decode_attention import DecodeAttentionOp
from mirage_xdsl.dialects.cute.hopper_attention import HopperAttentionOp
from mirage_xdsl.dialects.cute.hopper_gemm import HopperGemmOp
from mirage_xdsl.dialects.cute.kernel import ForOp, KernelOp, YieldOp
from mirage_xdsl.dialects.cute.mask_ops import CausalMaskOp
from mirage_xdsl.dialects.cute.memory_ops import BarrierOp, CopyG2SOp, CopyS2GOp, CpAsyncCommitOp, CpAsyncWaitOp, SmemAllocOp
from mirage_xdsl.dialects.cute.mma_ops import FragStoreOp, MmaChainOp, MmaInitOp, MmaOp
from mirage_xdsl.dialects.cute.permute_copy import PermuteCopyOp

Cute = Dialect(
    "cute",
    [
        KernelOp,
        SmemAllocOp,
        CopyG2SOp,
        CopyS2GOp,
        CpAsyncCommitOp,
        CpAsyncWaitOp,
        BarrierOp,
        FillOp,
        ElementwiseOp,
        ReduceOp,
        GridSumOp,
        ConcatOp,
        CausalMaskOp,
        MmaInitOp,
        MmaOp,
        MmaChainOp,
        FragStoreOp,
        ForOp,
        YieldOp,
        HopperGemmOp,
        HopperAttentionOp,
        DecodeAttentionOp,
        PermuteCopyOp,
    ],
    [LayoutAttr, SwizzleAttr, SmemTensorType, TiledMmaAttr, FragmentType, UnaryFnAttr],
)
