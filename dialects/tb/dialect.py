"""The `tb` dialect object: its ops and types, for xDSL's context."""

from __future__ import annotations

from xdsl.ir import Dialect

from mirage_xdsl.dialects.tb.accum_ops import ForloopAccumOp, GridSumOp
from mirage_xdsl.dialects.tb.compute_ops import (
    AddOp,
    AddScalarOp,
    ClampOp,
    ConcatOp,
    DivOp,
    ExpOp,
    GeluOp,
    LogOp,
    MatmulOp,
    MulOp,
    MulScalarOp,
    PowOp,
    ReduceMaxOp,
    ReductionMaxOp,
    ReductionOp,
    ReductionToDimxOp,
    ReluOp,
    RmsNormOp,
    SigmoidOp,
    SiluOp,
    SqrtOp,
    SquareOp,
    SubOp,
)
from mirage_xdsl.dialects.tb.io_ops import InputOp, OutputOp
from mirage_xdsl.dialects.tb.mask_ops import CausalMaskOp
from mirage_xdsl.dialects.tb.stensor import STensorType

Threadblock = Dialect(
    "tb",
    [
        InputOp,
        OutputOp,
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
        ReductionToDimxOp,
        ReductionMaxOp,
        ReduceMaxOp,
        RmsNormOp,
        ConcatOp,
        CausalMaskOp,
        ForloopAccumOp,
        GridSumOp,
    ],
    [STensorType],
)
