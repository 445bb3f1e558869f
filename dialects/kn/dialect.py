"""The `kn` dialect object: its ops, for xDSL's context."""

from __future__ import annotations

from xdsl.ir import Dialect

from mirage_xdsl.dialects.kn.compute_ops import AllReduceOp, ChunkOp, ConcatOp, MatmulOp, ReductionMaxOp, ReductionOp, RmsNormOp
from mirage_xdsl.dialects.kn.customized import CustomizedOp
from mirage_xdsl.dialects.kn.elementwise_ops import (
    AddOp,
    AddScalarOp,
    ClampOp,
    DivOp,
    ExpOp,
    GeluOp,
    LogOp,
    MulOp,
    MulScalarOp,
    PowOp,
    ReluOp,
    SigmoidOp,
    SiluOp,
    SqrtOp,
    SquareOp,
    SubOp,
)
from mirage_xdsl.dialects.kn.mask_ops import CausalMaskOp
from mirage_xdsl.dialects.kn.reshape_op import ReshapeOp

Kernel = Dialect(
    "kn",
    [
        ExpOp,
        SquareOp,
        SqrtOp,
        SiluOp,
        SigmoidOp,
        GeluOp,
        ReluOp,
        LogOp,
        ClampOp,
        MulScalarOp,
        AddScalarOp,
        AddOp,
        SubOp,
        MulOp,
        DivOp,
        PowOp,
        MatmulOp,
        ReductionOp,
        ReductionMaxOp,
        RmsNormOp,
        ConcatOp,
        ChunkOp,
        ReshapeOp,
        AllReduceOp,
        CausalMaskOp,
        CustomizedOp,
    ],
    [],
)
