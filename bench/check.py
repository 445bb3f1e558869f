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


