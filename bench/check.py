"""Correctness helpers: the relative error against the reference, host -> device copies that
keep the compiled strides, and GPU-drawn input sets for timing.

Needs numpy only at import time (CuPy is passed in by the callers that run on the GPU).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# The check and the device copies live in runtime/measure.py (driver/tune uses them too).
from mirage_xdsl.runtime.measure import device_sets, plan_bytes, relative_error, to_device  # noqa: F401 - re-exported


def same_outputs(a: Sequence[np.ndarray], b: Sequence[np.ndarray], tol: float = 1e-9) -> bool:
    """Whether two reference output lists agree (relative error <= `tol`), so that the
    candidates they belong to can share one saved reference."""
    if len(a) != len(b) or any(x.shape != y.shape for x, y in zip(a, b)):
        return False
    return relative_error(a, b) <= tol


BF16_FACTOR = 5.0
"""How much looser the check of a bfloat16 output is than `--atol-rel`: the ratio of the
fuzzer's bf16 and fp16 tolerances (bench/fuzz_graphs.py `TOLERANCE`, 5e-2 / 1e-2), for bf16 keeps 8
mantissa bits against fp16's 11.  A bf16 graph stores its intermediates in bf16 as it declares
them: the suite's bf16 normalisations land at 0.7-1.0e-2 on the host emulator at full size
(test/e2e/test_suite.py), right at an fp16 threshold."""


def tolerance(atol_rel: float, output_dtypes: Sequence[str]) -> float:
    """The pass threshold (max|out - ref| / max|ref|) of a graph with outputs of these dtype
    names: `atol_rel`, times `BF16_FACTOR` when an output is bfloat16."""
    return atol_rel * BF16_FACTOR if "bfloat16" in output_dtypes else atol_rel

