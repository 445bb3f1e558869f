"""Reference semantics of `contraction.contract` (numpy, float64).

Every dimension d of the config is one index; a tensor's element at the indices (i_d) is its
flat (row-major) array at sum_d i_d * stride[t][d] (stride 0: d does not index the tensor),
and out = sum over the K dimensions of A * B (prim_first ZERO: the sum starts at zero); with
prim_last ELWISE_MUL the sum is then multiplied elementwise by the factor D, which has the
output's shape and is read with the output's strides (dialects/contraction/config.py).
"""

from __future__ import annotations

import string

import numpy as np
from numpy.lib.stride_tricks import as_strided

from mirage_xdsl.dialects.contraction.config import Config, LastType


def _view(flat: np.ndarray, config: Config, tensor: int, letters: str) -> tuple[np.ndarray, str]:
    dims = [d for d in range(config.num_dims) if config.strides[tensor][d] != 0]
    shape = [config.dim_sizes[d] for d in dims]
    strides = [config.strides[tensor][d] * flat.itemsize for d in dims]
    return as_strided(flat, shape, strides), "".join(letters[d] for d in dims)


def run_contraction(
    config: Config, a: np.ndarray, b: np.ndarray, out_shape: tuple[int, ...], mul: np.ndarray | None = None
) -> np.ndarray:
    """out = contract(a, b) (times `mul` elementwise for ELWISE_MUL) as `config` describes it, in float64.

    Args:
        config: the op's config (exec types are irrelevant to the result).
        a, b: the operands (any shape; read as row-major flat arrays).
        out_shape: the result tensor's shape.
        mul: the ELWISE_MUL factor D (the output's element count; read as a row-major flat
            array with the output's strides); None for prim_last NONE.

    Raises:
        ValueError: more than 52 dimensions; ELWISE_MUL without `mul` (or NONE with one),
            or a `mul` of another element count than the output.
    """
    wants_mul = config.prim_last is LastType.ELWISE_MUL
    if wants_mul != (mul is not None):
        raise ValueError(
            f"contraction.contract: prim_last {config.prim_last.name} "
            + ("needs the factor D" if wants_mul else "takes no factor D")
        )
    letters = string.ascii_letters
    if config.num_dims > len(letters):
        raise ValueError("contraction.contract: too many dimensions for the reference")
    fa = np.ascontiguousarray(a, dtype=np.float64).reshape(-1)
    fb = np.ascontiguousarray(b, dtype=np.float64).reshape(-1)
    va, ia = _view(fa, config, 0, letters)
    vb, ib = _view(fb, config, 1, letters)
    out = np.zeros(int(np.prod(out_shape)), dtype=np.float64)
    vo, io = _view(out, config, 2, letters)
    vo[...] = np.einsum(f"{ia},{ib}->{io}", va, vb)
    if mul is not None:
        fm = np.ascontiguousarray(mul, dtype=np.float64).reshape(-1)
        if fm.size != out.size:
            raise ValueError(f"contraction.contract: the ELWISE_MUL factor has {fm.size} elements, the output {out.size}")
        vm, _ = _view(fm, config, 2, letters)
        vo[...] *= vm
    return out.reshape(out_shape)
