"""Correctness helpers: the relative error against the reference, host -> device copies that
keep the compiled strides, and GPU-drawn input sets for timing.

Needs numpy only at import time (CuPy is passed in by the callers that run on the GPU).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np


def relative_error(outs: Sequence[np.ndarray], refs: Sequence[np.ndarray]) -> float:
    """max over outputs of max|out - ref| / max|ref| (dimensionless); inf for NaN/inf in
    `outs`, a shape mismatch or a different number of outputs."""
    if len(outs) != len(refs):
        return math.inf
    worst = 0.0
    for out, ref in zip(outs, refs):
        out = np.asarray(out, dtype=np.float64)
        ref = np.asarray(ref, dtype=np.float64)
        if out.shape != ref.shape or not np.all(np.isfinite(out)):
            return math.inf
        denom = float(np.max(np.abs(ref))) if ref.size else 0.0
        diff = float(np.max(np.abs(out - ref))) if ref.size else 0.0
        worst = max(worst, diff / denom if denom > 0 else diff)
    return worst


def same_outputs(a: Sequence[np.ndarray], b: Sequence[np.ndarray], tol: float = 1e-9) -> bool:
    """Whether two reference output lists agree (relative error <= `tol`), so that the
    candidates they belong to can share one saved reference."""
    if len(a) != len(b) or any(x.shape != y.shape for x, y in zip(a, b)):
        return False
    return relative_error(a, b) <= tol


def to_device(cupy: Any, x: np.ndarray) -> Any:
    """Copy a numpy array to the GPU with the same element strides (padding left zero)."""
    from mirage_xdsl.runtime.executable import alloc_elements

    item = x.itemsize
    strides = tuple(s // item for s in x.strides)
    flat = cupy.zeros(max(alloc_elements(x.shape, strides), 1), dtype=x.dtype)
    view = cupy.lib.stride_tricks.as_strided(flat, x.shape, x.strides)
    view[...] = cupy.asarray(np.ascontiguousarray(x))
    return view


def plan_bytes(specs: Sequence[Any]) -> int:
    """Bytes of the allocations of `specs` (plan TensorSpecs, strides included)."""
    from mirage_xdsl.runtime.executable import alloc_elements
    from mirage_xdsl.runtime.library_ops import storage_dtype

    return sum(alloc_elements(s.shape, s.strides) * storage_dtype(s.dtype).itemsize for s in specs)


def device_sets(cupy: Any, specs: Sequence[Any], n: int) -> list[list[Any]]:
    """`n` input sets for timing, drawn on the GPU (uniform(-0.5, 0.5) floats, small ints),
    laid out with the specs' strides: the values only need to be realistic."""
    from mirage_xdsl.runtime.executable import alloc_elements
    from mirage_xdsl.runtime.library_ops import storage_dtype

    sets = []
    for _ in range(n):
        xs = []
        for spec in specs:
            dt = storage_dtype(spec.dtype)
            count = max(alloc_elements(spec.shape, spec.strides), 1)
            if spec.dtype == "bfloat16":
                bits = cupy.random.uniform(-0.5, 0.5, count, dtype=cupy.float32).view(cupy.uint32) >> 16
                flat = bits.astype(cupy.uint16)
            elif dt.kind == "f":
                flat = cupy.random.uniform(-0.5, 0.5, count).astype(dt)
            else:
                flat = cupy.random.randint(0, 8, count).astype(dt)
            xs.append(cupy.lib.stride_tricks.as_strided(flat, spec.shape, tuple(s * dt.itemsize for s in spec.strides)))
        sets.append(xs)
    return sets
