"""The numpy semantics the reference executor gives kn and tb ops alike: the elementwise unary
and binary functions (`UNARY`, `BINARY`; clamp with its real bounds, exact-erf gelu), sums
over STRIDED groups (`strided_sum`), rms normalisation without epsilon, the rounding of a
value to its storage type (`round_to_storage`), and the executor's error.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

NUM_BLOCK_AXES = 3


class ReferenceExecutionError(ValueError):
    """The reference executor cannot run the given IR/inputs; the message says why."""


_erfc = np.vectorize(math.erfc, otypes=[np.float64])


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _gelu(x: np.ndarray) -> np.ndarray:
    """x/2 (1 + erf(x/sqrt2)) written as x/2 erfc(-x/sqrt2): in float64 1 + erf cancels in the
    negative tail (x = -7.8: 1 + erf = 2.6e-15, with a 4 % error; x = -9: exactly 0), where
    erfc keeps full precision (the generated code's `f_gelu` does the same in fp32)."""
    return 0.5 * x * _erfc(-x / math.sqrt(2.0))


UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "exp": np.exp,
    "square": np.square,
    "sqrt": np.sqrt,
    "silu": lambda x: x * _sigmoid(x),
    "sigmoid": _sigmoid,
    "gelu": _gelu,
    "relu": lambda x: np.maximum(x, 0.0),
    "log": np.log,
}


BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "pow": np.power,
}


def float_prop(op: Any, name: str) -> float:
    """Property `name` of `op` (an integer or float attribute) as a Python float."""
    return float(getattr(op, name).value.data)


def int_prop(op: Any, name: str) -> int:
    """Property `name` of `op` (an `IntegerAttr`) as a Python int."""
    return int(getattr(op, name).value.data)


def apply_unary(op: Any, kind: str, x: np.ndarray) -> np.ndarray:
    """`x` through the elementwise op `kind`: `clamp` to the op's [min_value, max_value], `mul_scalar` times its
    `scalar`, `add_scalar` plus its `scalar`, else `UNARY[kind]`.

    Raises:
        KeyError: `kind` is none of clamp, mul_scalar, add_scalar and the `UNARY` names.
    """
    if kind == "clamp":
        return np.clip(x, float_prop(op, "min_value"), float_prop(op, "max_value"))
    if kind == "mul_scalar":
        return x * float_prop(op, "scalar")
    if kind == "add_scalar":
        return x + float_prop(op, "scalar")
    return UNARY[kind](x)


def causal_mask(x: np.ndarray, offset: int) -> np.ndarray:
    """`x` where column j <= row i + `offset` over its last two dims, -inf elsewhere
    (`kn.causal_mask`, dialects/common/mask_base.py)."""
    i = np.arange(x.shape[-2])[:, None]
    j = np.arange(x.shape[-1])[None, :]
    return np.where(j <= i + offset, x, -np.inf)


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, causal_offset: int | None) -> np.ndarray:
    """`softmax(scale * q @ k [causally masked]) @ v` over the last two dims, the row max
    subtracted first (`cute.hopper_attention`, dialects/cute/hopper_attention.py): q [..., sq, d],
    k [..., d, sk], v [..., sk, d] -> [..., sq, d]."""
    s = np.matmul(q, k) * scale
    if causal_offset is not None:
        s = causal_mask(s, causal_offset)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return np.matmul(p, v) / p.sum(axis=-1, keepdims=True)


def strided_sum(x: np.ndarray, axis: int, size: int) -> np.ndarray:
    """Sum `axis` down to `size` elements over STRIDED groups:
    `out[..., j, ...] = sum_k x[..., j + k*size, ...]` (mirage-notes 1.7)."""
    n = x.shape[axis]
    if size < 1 or n % size:
        raise ReferenceExecutionError(f"cannot reduce an axis of size {n} to {size} (not divisible)")
    if size == 1:
        return x.sum(axis=axis, keepdims=True)
    return x.reshape(x.shape[:axis] + (n // size, size) + x.shape[axis + 1 :]).sum(axis=axis)


def rms_normalize(x: np.ndarray, axes: Sequence[int]) -> np.ndarray:
    """`x / sqrt(mean(x^2 over axes))`, no epsilon, no gain."""
    axes = tuple(axes)
    return x / np.sqrt(np.mean(np.square(x), axis=axes, keepdims=True))


def value_shape(value: Any) -> tuple[int, ...]:
    """The static shape (elements per dim) of the IR value `value`'s shaped type, as Python ints."""
    return tuple(int(d) for d in value.type.get_shape())


def check_shape(op: Any, what: str, got: Sequence[int], expected: Sequence[int]) -> None:
    """Check that the computed shape `got` equals the IR type's `expected` (`what` names it in the message).

    Raises:
        ReferenceExecutionError: the shapes differ.
    """
    if tuple(got) != tuple(expected):
        raise ReferenceExecutionError(
            f"{op.name}: computed {what} shape {tuple(got)} differs from the IR type's {tuple(expected)}"
        )


def round_to_storage(arr: np.ndarray, value: Any) -> np.ndarray:
    """`arr` (float64) rounded to the element type of the IR value `value` (`f16`, `bf16`
    with round-to-nearest-even on the bit pattern, `f32`), still as float64; other element
    types unchanged."""
    elem = value.type.get_element_type()
    name = elem.name if hasattr(elem, "name") else type(elem).__name__
    if name == "f16":
        return arr.astype(np.float16).astype(np.float64)
    if name == "f32":
        return arr.astype(np.float32).astype(np.float64)
    if name == "bf16":
        bits = arr.astype(np.float32).view(np.uint32)
        finite = np.isfinite(arr)
        rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
        out = np.where(finite, rounded, bits & np.uint32(0xFFFF0000)).astype(np.uint32)
        return out.view(np.float32).astype(np.float64)
    return arr
