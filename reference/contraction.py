"""Reference semantics of `contraction.contract` (numpy, float64).

Every dimension d of the config is one index; a tensor's element at the indices (i_d) is its
flat (row-major) array at sum_d i_d * stride[t][d] (stride 0: d does not index the tensor),
and out = sum over the K dimensions of A * B (prim_first ZERO: the sum starts at zero); with
prim_last ELWISE_MUL the sum is then multiplied elementwise by the factor D, which has the
output's shape and is read with the output's strides (dialects/contraction/config.py); an
`activation` applies its unary functions to the sum before that.
"""

from __future__ import annotations

import string
from collections.abc import Sequence

import numpy as np
from numpy.lib.stride_tricks import as_strided

from mirage_xdsl.dialects.contraction.config import Config, LastType
from mirage_xdsl.reference.numpy_ops import UNARY


def apply_fn(name: str, params: Sequence[float], x: np.ndarray) -> np.ndarray:
    """One epilogue function (`#cute.fn<name(params)>`) on `x`: clamp to [p0, p1], times p0
    for mul_scalar, plus p0 for add_scalar, else the unary op of that name.

    Raises:
        KeyError: an unknown function (the op verifier rejects those first).
    """
    if name == "clamp":
        return np.clip(x, params[0], params[1])
    if name == "mul_scalar":
        return x * params[0]
    if name == "add_scalar":
        return x + params[0]
    return UNARY[name](x)


def _view(flat: np.ndarray, config: Config, tensor: int, letters: str) -> tuple[np.ndarray, str]:
    dims = [d for d in range(config.num_dims) if config.strides[tensor][d] != 0]
    shape = [config.dim_sizes[d] for d in dims]
    strides = [config.strides[tensor][d] * flat.itemsize for d in dims]
    return as_strided(flat, shape, strides), "".join(letters[d] for d in dims)


def run_contraction(
    config: Config,
    a: np.ndarray,
    b: np.ndarray,
    out_shape: tuple[int, ...],
    mul: np.ndarray | None = None,
    activation: Sequence[tuple[str, tuple[float, ...]]] = (),
) -> np.ndarray:
    """out = act(contract(a, b)) (times `mul` elementwise for ELWISE_MUL) as `config` describes it, in float64.

    Args:
        config: the op's config (exec types are irrelevant to the result).
        a, b: the operands (any shape; read as row-major flat arrays).
        out_shape: the result tensor's shape.
        mul: the ELWISE_MUL factor D (the output's element count; read as a row-major flat
            array with the output's strides); None for prim_last NONE.
        activation: the op's unary functions (name, parameters), applied in order to the
            accumulated result before the factor (`contraction.contract`'s `activation`).

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
    for name, params in activation:
        vo[...] = apply_fn(name, params, vo)
    if mul is not None:
        fm = np.ascontiguousarray(mul, dtype=np.float64).reshape(-1)
        if fm.size != out.size:
            raise ValueError(f"contraction.contract: the ELWISE_MUL factor has {fm.size} elements, the output {out.size}")
        vm, _ = _view(fm, config, 2, letters)
        vo[...] *= vm
    return out.reshape(out_shape)
