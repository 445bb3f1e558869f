"""The saved-muGraph JSON schema that import and export share: its eras, data-type codes,
guid bases, operator names and the defaults of fields Mirage does not save.

Schema eras (mirage-notes 1.1, 2.2) differ in the `data_type` codes and accumulator names:

======  ==========================================================  ====================
era     data_type codes                                             accumulator names
======  ==========================================================  ====================
A       fp16 921, bf16 920, f32 930, f64 940, i8 900, ui16 910       ``tb_accum_*``
B       fp16 941, bf16 940, f32 950, f64 960, i8 935, ui16 945       ``tb_forloop_accum_*``
C       fp16 940, bf16 941, f32 950, f64 960, i8 935, ui16 946       ``tb_forloop_accum_*``
======  ==========================================================  ====================

Without an explicit era the importer detects era A (any `data_type` 921 or any
`tb_accum_*` operator name); otherwise it ASSUMES ERA C: eras B and C use the same codes
with fp16/bf16 swapped and cannot be told apart from the file, so era-B files (Mirage
2025-02-24 .. 2025-06-04) must be imported with `era="B"` (`--mugraph-era=B`).  Both
accumulator spellings are accepted in every era (early era-B files still used
`tb_accum_*`).

Lost in Mirage's JSON: `mul_scalar`'s scalar and `clamp`'s bounds.  The importer reads the
fields `scalar` (or `scalar_value`) and `min_val`/`max_val` (or `min_value`/`max_value`,
`min`/`max`) when present (our exporter writes `scalar`, `min_val`, `max_val`), else uses
Mirage's loader defaults: scalar 0.0, clamp bounds [0.0, 1.0].  Likewise `kn_rms_norm_op`
reads `normalized_shape` when present, else normalizes the last dim; `kn_reduction_<d>_op`
reads `reduce_size` when present, else reduces to size 1; `kn_chunk_<d>_op` reads
`chunk_size` (the number of chunks) when present, else uses the number of output tensors.
"""

from __future__ import annotations

import re

from xdsl.dialects.builtin import IntegerType, Signedness, bf16, f16, f32, f64, i8
from xdsl.ir import Attribute

from mirage_xdsl.dialects import kn, tb


class MugraphImportError(ValueError):
    """A saved-muGraph file is malformed or breaks one of Mirage's rules (one-line message)."""


class MugraphExportError(ValueError):
    """The module cannot be written as a saved-muGraph file (one-line message)."""


ERAS = ("A", "B", "C")


ui16 = IntegerType(16, Signedness.UNSIGNED)


DTYPE_CODES: dict[str, dict[int, Attribute]] = {
    "A": {921: f16, 920: bf16, 930: f32, 940: f64, 900: i8, 910: ui16},
    "B": {941: f16, 940: bf16, 950: f32, 960: f64, 935: i8, 945: ui16},
    "C": {940: f16, 941: bf16, 950: f32, 960: f64, 935: i8, 946: ui16},
}


DTYPE_OF_TYPE: dict[str, dict[Attribute, int]] = {
    era: {typ: code for code, typ in table.items()} for era, table in DTYPE_CODES.items()
}


DTENSOR_GUID_BASE = 10000000


STENSOR_GUID_BASE = 20000000


MAX_INT = 2**62  # bound on dims, strides and grid sizes (i64 attributes)


# op-name tables shared by import and export (JSON name fragment <-> op class)
KN_UNARY: dict[str, type[kn.KnUnaryOp]] = {
    "exp": kn.ExpOp,
    "square": kn.SquareOp,
    "sqrt": kn.SqrtOp,
    "silu": kn.SiluOp,
    "sigmoid": kn.SigmoidOp,
    "gelu": kn.GeluOp,
    "relu": kn.ReluOp,
    "log": kn.LogOp,
}


KN_BINARY: dict[str, type[kn.KnBinaryOp]] = {
    "add": kn.AddOp,
    "sub": kn.SubOp,
    "mul": kn.MulOp,
    "div": kn.DivOp,
    "pow": kn.PowOp,
    "matmul": kn.MatmulOp,
}


TB_UNARY: dict[str, type[tb.TbUnaryOp | tb.RmsNormOp]] = {**tb.UNARY_BY_KIND, "rms_norm": tb.RmsNormOp}


TB_BINARY: dict[str, type[tb.TbBinaryOp | tb.MatmulOp]] = {**tb.BINARY_BY_KIND, "matmul": tb.MatmulOp}


SCALAR_KEYS = ("scalar", "scalar_value")


CLAMP_KEYS = (("min_val", "max_val"), ("min_value", "max_value"), ("min", "max"))


DEFAULT_SCALAR = 0.0


DEFAULT_CLAMP = (0.0, 1.0)


_ERA_A_EVIDENCE = re.compile(r'"data_type"\s*:\s*921(?![0-9.eE])|"tb_accum_')


def detect_era(text: str) -> str:
    """Era A if the text holds `data_type` 921 or a `tb_accum_*` name, else C (B cannot be told
    apart from C)."""
    return "A" if _ERA_A_EVIDENCE.search(text) else "C"
