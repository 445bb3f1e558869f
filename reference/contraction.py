"""Reference semantics of `contraction.contract` (numpy, float64).

Every dimension d of the config is one index; a tensor's element at the indices (i_d) is its
flat (row-major) array at sum_d i_d * stride[t][d] (stride 0: d does not index the tensor),
and out = sum over the K dimensions of A * B, times nothing else (prim_first ZERO); with
prim_last ELWISE_MUL there is no third operand in the op, so it is rejected here.
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


def run_contraction(config: Config, a: np.ndarray, b: np.ndarray, out_shape: tuple[int, ...]) -> np.ndarray:
    """out = contract(a, b) as `config` describes it, in float64.

    Args:
        config: the op's config (exec types are irrelevant to the result).
        a, b: the operands (any shape; read as row-major flat arrays).
        out_shape: the result tensor's shape.

    Raises:
        ValueError: more than 52 dimensions, or prim_last is not NONE.
    """
    if config.prim_last is not LastType.NONE:
        raise ValueError(f"contraction.contract: prim_last {config.prim_last.name} has no reference semantics yet")
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
    return out.reshape(out_shape)
