"""Mixed precision: which ops may combine a 16-bit float type with fp32.

Some kernel- and threadblock-graph ops may hold one 16-bit float type (f16 or bf16) and f32
among their operands and result, as torch's reductions do internally: an elementwise binary
op computes in fp32 and rounds to its result's type (so an fp32 operand may meet a 16-bit one),
a sum (`kn.reduction`, `tb.reduction`, `tb.reduction_to_dimx`) and a for-loop accumulator may
keep their 16-bit input's sum in fp32.  `kn-widen-sums` (passes/kn/widen_sums.py) gives row
sums that type, so the sum of 131072 values of at most 1 (a softmax over a 128k vocabulary:
up to 131072 > 65504, the largest fp16) is stored without overflowing.  A matmul of two
16-bit operands may have an f32 result (`widens_half`: tensor cores accumulate in fp32), which
kn-widen-sums gives a product divided by its row statistic (`(X @ W) / rms(X)`, what kn-simplify
makes of `rms_norm(X) @ W`, and attention's `(exp(a) @ V) / sum(exp(a))`): such a product is the
statistic times the result and leaves fp16 range first.
Maxima, concatenations and unary ops keep one element type: the squares of an rms statistic,
`x^2 / n` before their sum, are 16-bit values in the kernel graph; where the square's pass and
its sum share a kernel, cute-fuse-square-sum squares in fp32 inside the sum instead.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import BFloat16Type, Float16Type, Float32Type
from xdsl.ir import Attribute, SSAValue

from mirage_xdsl.dialects.common.checks import element_type_of

HALF_TYPES = (Float16Type, BFloat16Type)


def is_half(dtype: Attribute) -> bool:
    """Whether `dtype` is a 16-bit float type (f16 or bf16)."""
    return isinstance(dtype, HALF_TYPES)


def mixes_half_and_f32(values: Sequence[SSAValue]) -> bool:
    """Whether the element types of `values` are exactly one 16-bit float type and f32 (the
    mixed precision this module's ops accept; one type alone is the ordinary case)."""
    types = {element_type_of(v) for v in values}
    return len(types) == 2 and sum(isinstance(t, Float32Type) for t in types) == 1 and any(is_half(t) for t in types)


def widens_half(operands: Sequence[SSAValue], result: SSAValue) -> bool:
    """Whether `operands` share one 16-bit float type and `result` is f32 (a widening matmul)."""
    types = {element_type_of(v) for v in operands}
    return len(types) == 1 and is_half(next(iter(types))) and isinstance(element_type_of(result), Float32Type)
