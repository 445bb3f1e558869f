"""Seeded random inputs for checks and benchmarks, and their float values for the reference.

`random_inputs` draws one array per `TensorSpec` (uniform in +-`scale`, rounded to the dtype,
laid out with the spec's strides); `laid_out` gives an array such a layout back;
`numpy_values` reads such an array back as the float64 values the reference executor
computes with.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mirage_xdsl.codegen.launch_plan import TensorSpec
from mirage_xdsl.runtime.validate import alloc_elements


def random_inputs(specs: Sequence[TensorSpec], seed: int, scale: float = 0.5) -> list[np.ndarray]:
    """Seeded random inputs (uniform in [-scale, scale)) with the specs' shapes, dtypes and
    strides, as numpy arrays (bfloat16 as its uint16 bit pattern, see `numpy_values`)."""
    rng = np.random.default_rng(seed)
    out = []
    for spec in specs:
        n = alloc_elements(spec.shape, spec.strides)
        if spec.dtype in ("int8", "uint16"):
            lo, hi = (-8, 8) if spec.dtype == "int8" else (0, 16)
            flat = rng.integers(lo, hi, size=n).astype(spec.dtype)
        else:
            values = rng.uniform(-scale, scale, size=n)
            if spec.dtype == "bfloat16":
                f = values.astype(np.float32)
                flat = (f.view(np.uint32) >> 16).astype(np.uint16)  # truncation keeps |x| <= scale
            else:
                flat = values.astype(spec.dtype)
        item = flat.dtype.itemsize
        out.append(np.lib.stride_tricks.as_strided(flat, spec.shape, tuple(s * item for s in spec.strides)))
    return out


def laid_out(x: np.ndarray, strides: Sequence[int]) -> np.ndarray:
    """`x`'s values in a fresh array of `x`'s shape and dtype with element `strides` (the
    buffer of `alloc_elements`, padding zero): the layout a plan was compiled for, given back
    to an array that lost it (numpy pickles a strided view as a contiguous copy, e.g. between
    the fuzzer's worker and GPU processes)."""
    flat = np.zeros(alloc_elements(x.shape, strides), dtype=x.dtype)
    view = np.lib.stride_tricks.as_strided(flat, x.shape, tuple(s * x.itemsize for s in strides))
    view[...] = x
    return view


def numpy_values(x: np.ndarray, dtype_name: str) -> np.ndarray:
    """float64 values of a numpy array holding a tensor of plan dtype `dtype_name`."""
    if dtype_name == "bfloat16":
        return (x.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return x.astype(np.float64)
