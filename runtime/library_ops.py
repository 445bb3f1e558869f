"""Library implementations of kernel-level ops outside customized ops (`LibraryCall` steps).

`run_library_call(call, args, results, xp)` computes `call.op` (a `kn` op name without the
prefix) on `args` and stores into `results`.  Both are arrays of the array module `xp`
(CuPy on the GPU; numpy works too, which is how these are unit-tested without a GPU), already
viewed with the plan's shapes and element strides (outermost first).  bfloat16 tensors are
stored as `uint16` arrays (CuPy has no bfloat16 dtype) and converted here.

Semantics (the same as the reference executor, mirage-notes 1.3/1.7):

* unary `exp square sqrt silu sigmoid gelu relu log`, `clamp` with its real `min_value` /
  `max_value`, `mul_scalar` / `add_scalar` with `scalar`; binary `add sub mul div pow` with equal-rank numpy
  broadcasting; elementwise math is done in fp32 (fp64 for fp64 tensors) and rounded once
  when stored.
* `matmul`: batched GEMM over the last two dims (cuBLAS through `xp.matmul` on the GPU, with
  fp32 accumulation for fp16); `reduction` over `dim` down to `size` elements with STRIDED
  groups (`out[..., j, ...] = sum_k in[..., j + k*size, ...]`) summed in fp32;
  `reduction_max` the max over `dim` down to 1;
  `rms_norm` `x / sqrt(mean(x^2))` over the trailing `normalized_shape` dims (no epsilon);
  `concat` along `dim`; `chunk` along `dim` into `len(results)` parts; `reshape` (the
  elements in row-major order into the result's shape and layout); `all_reduce` (one
  GPU) and `copy` the identity.

Every result is computed into a fresh array before it is stored, so a result may share
workspace memory with an argument.  Errors: `LibraryOpError` (a `ValueError`) for an unknown
op or missing parameter.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from mirage_xdsl.codegen.launch_plan import LibraryCall

__all__ = ["LIBRARY_OPS", "LibraryOpError", "run_library_call", "storage_dtype"]

UNARY_OPS = ("exp", "square", "sqrt", "silu", "sigmoid", "gelu", "relu", "log", "clamp", "mul_scalar", "add_scalar")
BINARY_OPS = ("add", "sub", "mul", "div", "pow")


class LibraryOpError(ValueError):
    """A library call cannot be run: unknown op, missing parameter, bad arity."""


def storage_dtype(name: str) -> np.dtype:
    """numpy/CuPy dtype a tensor of plan dtype `name` is stored as (bfloat16 -> uint16)."""
    return np.dtype(np.uint16) if name == "bfloat16" else np.dtype(name)


# ---------------------------------------------------------------------------------------
# Loading and storing (bfloat16 bit conversions)


def _compute_dtype(dtype_name: str) -> Any:
    return np.float64 if dtype_name == "float64" else np.float32


def load(x: Any, dtype_name: str, xp: Any) -> Any:
    """The values of a stored tensor as fp32 (fp64 for fp64 tensors)."""
    if dtype_name == "bfloat16":
        bits = x.astype(xp.uint32) << xp.uint32(16)
        return bits.view(xp.float32)
    return x.astype(_compute_dtype(dtype_name), copy=False)


def store(out: Any, value: Any, dtype_name: str, xp: Any) -> None:
    """Round `value` to the tensor's dtype and write it into `out` (which may be strided)."""
    if dtype_name == "bfloat16":
        f = xp.ascontiguousarray(value, dtype=xp.float32)
        bits = f.view(xp.uint32)
        # round to nearest even; NaNs stay NaN (quiet bit set)
        rounded = (bits + xp.uint32(0x7FFF) + ((bits >> xp.uint32(16)) & xp.uint32(1))) >> xp.uint32(16)
        nan = xp.isnan(f)
        result = xp.where(nan, xp.uint32(0x7FC0), rounded).astype(xp.uint16)
        out[...] = result
        return
    out[...] = value.astype(out.dtype, copy=False) if hasattr(value, "astype") else value


# ---------------------------------------------------------------------------------------
# Math


def _erf(x: Any, xp: Any) -> Any:
    if xp is np:
        try:  # scipy is optional
            from scipy.special import erf  # type: ignore[import-not-found]

            return erf(x)
        except ImportError:
            return np.vectorize(math.erf, otypes=[x.dtype])(x)
    from cupyx.scipy.special import erf  # type: ignore[import-not-found]

    return erf(x)


def _param(call: LibraryCall, *names: str) -> Any:
    for name in names:
        if name in call.params:
            return call.params[name]
    raise LibraryOpError(f"library op '{call.op}' needs the parameter '{names[0]}' (params: {sorted(call.params)})")


def int_param(value: float | int | list[int]) -> int:
    """A scalar `LibraryCall` parameter (a dim, size or count) as an int.

    Raises:
        TypeError: a list parameter (`normalized_shape`), which has no scalar value.
    """
    if isinstance(value, list):
        raise TypeError(f"expected a scalar parameter, got the list {value}")
    return int(value)


def _unary(call: LibraryCall, v: Any, xp: Any) -> Any:
    op = call.op
    one = v.dtype.type(1)
    if op == "exp":
        return xp.exp(v)
    if op == "square":
        return v * v
    if op == "sqrt":
        return xp.sqrt(v)
    if op == "silu":
        return v / (one + xp.exp(-v))
    if op == "sigmoid":
        return one / (one + xp.exp(-v))
    if op == "gelu":
        return v.dtype.type(0.5) * v * (one + _erf(v * v.dtype.type(1.0 / math.sqrt(2.0)), xp))
    if op == "relu":
        return xp.maximum(v, v.dtype.type(0))
    if op == "log":
        return xp.log(v)
    if op == "clamp":
        lo = v.dtype.type(_param(call, "min_value", "min"))
        hi = v.dtype.type(_param(call, "max_value", "max"))
        return xp.minimum(xp.maximum(v, lo), hi)
    if op == "mul_scalar":
        return v * v.dtype.type(_param(call, "scalar"))
    if op == "add_scalar":
        return v + v.dtype.type(_param(call, "scalar"))
    raise LibraryOpError(f"unknown unary library op '{op}'")


def _binary(op: str, a: Any, b: Any, xp: Any) -> Any:
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    if op == "div":
        return a / b
    if op == "pow":
        return xp.power(a, b)
    raise LibraryOpError(f"unknown binary library op '{op}'")


def _matmul(a: Any, b: Any, dtype_name: str, xp: Any) -> Any:
    if xp is not np and dtype_name in ("float16", "float32", "float64"):
        # cuBLAS in the storage dtype (fp16 inputs accumulate in fp32); result rounded once
        return xp.matmul(a, b)
    ca = load(a, dtype_name, xp)
    cb = load(b, dtype_name, xp)
    return xp.matmul(ca, cb)


def strided_sum(v: Any, dim: int, size: int) -> Any:
    """Sum `dim` down to `size` with strided groups: `out[.., j, ..] = sum_k v[.., j + k*size, ..]`.

    The strided-group rule of Mirage's reductions to `size` elements (mirage-notes 1.7).

    Raises:
        LibraryOpError: `size` < 1 or the dim's extent is not a multiple of `size`.
    """
    n = v.shape[dim]
    if size < 1 or n % size:
        raise LibraryOpError(f"reduction: dim {dim} of size {n} is not divisible into groups of {size}")
    shape = v.shape[:dim] + (n // size, size) + v.shape[dim + 1 :]
    return v.reshape(shape).sum(axis=dim)


def _arity(call: LibraryCall, args: Sequence[Any], results: Sequence[Any], nargs: int, nres: int | None = 1) -> None:
    if len(args) != nargs or (nres is not None and len(results) != nres):
        raise LibraryOpError(
            f"library op '{call.op}' takes {nargs} argument(s) and {nres if nres is not None else 'n'} "
            f"result(s), got {len(args)} and {len(results)}"
        )


def run_library_call(
    call: LibraryCall,
    args: Sequence[Any],
    results: Sequence[Any],
    xp: Any,
    arg_dtypes: Sequence[str] | None = None,
    result_dtypes: Sequence[str] | None = None,
) -> None:
    """Run `call` on `args`, storing into `results` (arrays of module `xp`, see module docs).

    `arg_dtypes` / `result_dtypes` give the plan dtype name of each tensor (needed to tell
    bfloat16-stored-as-uint16 from real uint16); by default they are the arrays' dtypes.

    Raises:
        LibraryOpError: an unknown op, a missing parameter, the wrong number of arguments or
            results, or a `reduction` / `chunk` whose dim does not divide.
        TypeError: a list where a scalar parameter is expected (`int_param`).
    """
    impl = LIBRARY_OPS.get(call.op)
    if impl is None:
        raise LibraryOpError(f"unknown library op '{call.op}' (known: {', '.join(sorted(LIBRARY_OPS))})")
    adt = list(arg_dtypes) if arg_dtypes is not None else [str(np.dtype(a.dtype)) for a in args]
    rdt = list(result_dtypes) if result_dtypes is not None else [str(np.dtype(r.dtype)) for r in results]
    if xp is not np and _fast_path(call, args, results, xp, adt, rdt):
        return
    if xp is np:
        with np.errstate(all="ignore"):  # IEEE inf/nan as on a GPU, without warnings
            impl(call, args, results, xp, adt, rdt[0] if rdt else "float32")
        return
    impl(call, args, results, xp, adt, rdt[0] if rdt else "float32")


_FAST_BINARY = {"add": "add", "sub": "subtract", "mul": "multiply", "div": "true_divide"}
_FLOATS = ("float16", "float32", "float64")

_UNARY_EXPR = {
    "exp": "exp(v)",
    "square": "v * v",
    "sqrt": "sqrt(v)",
    "silu": "v / (one + exp(-v))",
    "sigmoid": "one / (one + exp(-v))",
    "gelu": "half * v * erfc(-v * rsqrt2)",  # erfc: no cancellation in the negative tail
    "relu": "fmax(v, zero)",
    "log": "log(v)",
    "clamp": "fmin(fmax(v, lo), hi)",
    "mul_scalar": "v * s",
    "add_scalar": "v + s",
}
_UNARY_KERNELS: dict[str, Any] = {}


def _unary_kernel(xp: Any, op: str, double: bool) -> Any:
    """A CuPy ElementwiseKernel computing unary `op` in float (fp16/fp32 tensors) or double
    (fp64) and rounding once to the tensor type T: one launch, any result strides."""
    key = f"{op}_{'f64' if double else 'f32'}"
    kernel = _UNARY_KERNELS.get(key)
    if kernel is None:
        ctype, ptype = ("double", "float64") if double else ("float", "float32")
        body = (
            f"typedef {ctype} F; const F v = (F)x; const F one = (F)1; const F zero = (F)0; "
            "const F half = (F)0.5; const F rsqrt2 = (F)0.70710678118654752440; "
            f"y = (T)({_UNARY_EXPR[op]});"
        )
        kernel = xp.ElementwiseKernel(f"T x, {ptype} lo, {ptype} hi, {ptype} s", "T y", body, f"mirage_lib_{key}")
        _UNARY_KERNELS[key] = kernel
    return kernel


def _fast_path(call: LibraryCall, args: Sequence[Any], results: Sequence[Any], xp: Any, adt: list[str], rdt: list[str]) -> bool:
    """One CuPy launch writing straight into the (possibly strided) result, for elementwise
    ops and reductions whose tensors share one float dtype (half math is done in fp32 and
    rounded once).  Returns False where the general path must run."""
    if len(results) != 1 or not rdt or rdt[0] not in _FLOATS or any(d != rdt[0] for d in adt):
        return False
    if call.op in _FAST_BINARY and len(args) == 2:
        getattr(xp, _FAST_BINARY[call.op])(args[0], args[1], out=results[0])
        return True
    if call.op in _UNARY_EXPR and len(args) == 1:
        f = np.float64 if rdt[0] == "float64" else np.float32
        lo = hi = s = 0.0
        if call.op == "clamp":
            lo, hi = _param(call, "min_value", "min"), _param(call, "max_value", "max")
        elif call.op in ("mul_scalar", "add_scalar"):
            s = _param(call, "scalar")
        _unary_kernel(xp, call.op, f is np.float64)(args[0], f(lo), f(hi), f(s), results[0])
        return True
    if call.op == "reduction" and len(args) == 1:
        dim = int(_param(call, "dim"))
        size = int_param(call.params.get("size", 1))
        x = args[0]
        n = x.shape[dim]
        if size < 1 or n % size:
            return False
        grouped = x.reshape(x.shape[:dim] + (n // size, size) + x.shape[dim + 1 :])
        acc = np.float64 if rdt[0] == "float64" else np.float32
        results[0][...] = xp.sum(grouped, axis=dim, dtype=acc)
        return True
    return False


def _op_unary(call: LibraryCall, args: Sequence[Any], results: Sequence[Any], xp: Any, adt: list[str], rdt: str) -> None:
    _arity(call, args, results, 1)
    store(results[0], _unary(call, load(args[0], adt[0], xp), xp), rdt, xp)


def _op_binary(call: LibraryCall, args: Sequence[Any], results: Sequence[Any], xp: Any, adt: list[str], rdt: str) -> None:
    _arity(call, args, results, 2)
    a, b = load(args[0], adt[0], xp), load(args[1], adt[1], xp)
    store(results[0], _binary(call.op, a, b, xp), rdt, xp)


def _op_matmul(call: LibraryCall, args: Sequence[Any], results: Sequence[Any], xp: Any, adt: list[str], rdt: str) -> None:
    _arity(call, args, results, 2)
    store(results[0], _matmul(args[0], args[1], adt[0], xp), rdt, xp)


def _op_reduction(call: LibraryCall, args: Sequence[Any], results: Sequence[Any], xp: Any, adt: list[str], rdt: str) -> None:
    _arity(call, args, results, 1)
    dim = int(_param(call, "dim"))
    size = int_param(call.params.get("size", 1))
    v = load(args[0], adt[0], xp)
    store(results[0], strided_sum(v, dim, size), rdt, xp)


def _op_reduction_max(call: LibraryCall, args: Sequence[Any], results: Sequence[Any], xp: Any, adt: list[str], rdt: str) -> None:
    _arity(call, args, results, 1)
    v = load(args[0], adt[0], xp)
    store(results[0], v.max(axis=int(_param(call, "dim")), keepdims=True), rdt, xp)


def _op_rms_norm(call: LibraryCall, args: Sequence[Any], results: Sequence[Any], xp: Any, adt: list[str], rdt: str) -> None:
    _arity(call, args, results, 1)
    norm = _param(call, "normalized_shape")
    ndims = len(norm) if isinstance(norm, (list, tuple)) else 1
    v = load(args[0], adt[0], xp)
    axes = tuple(range(v.ndim - ndims, v.ndim))
    ms = xp.mean(v * v, axis=axes, keepdims=True)
    store(results[0], v / xp.sqrt(ms), rdt, xp)


def _op_concat(call: LibraryCall, args: Sequence[Any], results: Sequence[Any], xp: Any, adt: list[str], rdt: str) -> None:
    _arity(call, args, results, 2)
    dim = int(_param(call, "dim"))
    # pure data movement: no conversion needed (bfloat16 bits are copied as they are)
    value = xp.concatenate([xp.ascontiguousarray(a) for a in args], axis=dim)
    results[0][...] = value


def _op_chunk(call: LibraryCall, args: Sequence[Any], results: Sequence[Any], xp: Any, adt: list[str], rdt: str) -> None:
    _arity(call, args, results, 1, None)
    dim = int(_param(call, "dim"))
    x = args[0]
    n = len(results)
    if n < 1 or x.shape[dim] % n:
        raise LibraryOpError(f"chunk: dim {dim} of size {x.shape[dim]} is not divisible into {n} chunks")
    step = x.shape[dim] // n
    parts = [xp.ascontiguousarray(x[(slice(None),) * dim + (slice(i * step, (i + 1) * step),)]) for i in range(n)]
    for out, part in zip(results, parts):
        out[...] = part


def _op_reshape(call: LibraryCall, args: Sequence[Any], results: Sequence[Any], xp: Any, adt: list[str], rdt: str) -> None:
    _arity(call, args, results, 1)
    # row-major order (numpy reshape semantics) from a strided input into the result's layout
    results[0][...] = xp.ascontiguousarray(args[0]).reshape(results[0].shape)


def _op_identity(call: LibraryCall, args: Sequence[Any], results: Sequence[Any], xp: Any, adt: list[str], rdt: str) -> None:
    _arity(call, args, results, 1)
    results[0][...] = xp.array(args[0], copy=True)


Impl = Callable[[LibraryCall, Sequence[Any], Sequence[Any], Any, list[str], str], None]

LIBRARY_OPS: dict[str, Impl] = {
    **{name: _op_unary for name in UNARY_OPS},
    **{name: _op_binary for name in BINARY_OPS},
    "matmul": _op_matmul,
    "reduction": _op_reduction,
    "reduction_max": _op_reduction_max,
    "rms_norm": _op_rms_norm,
    "concat": _op_concat,
    "chunk": _op_chunk,
    "reshape": _op_reshape,
    "all_reduce": _op_identity,
    "copy": _op_identity,
}
