"""Library ops (runtime/library_ops.py) on numpy against plain numpy, in the host emulator
against the runtime, and (GPU) through CuPy against numpy with strided results."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from mirage_xdsl.codegen.launch_plan import LibraryCall, TensorRef
from mirage_xdsl.runtime.library_ops import LibraryOpError, run_library_call
from mirage_xdsl.runtime.random_inputs import numpy_values


def lib(op: str, args: list[np.ndarray], out: np.ndarray, **params: object) -> np.ndarray:
    run_library_call(LibraryCall(op, (), (), dict(params)), args, [out], np)  # type: ignore[arg-type]
    return out


def rand(*shape: int, dtype: type = np.float32, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, size=shape).astype(dtype)


@pytest.mark.parametrize(
    "op, fn",
    [
        ("exp", np.exp),
        ("square", np.square),
        ("sqrt", lambda x: np.sqrt(np.abs(x))),
        ("silu", lambda x: x / (1 + np.exp(-x))),
        ("sigmoid", lambda x: 1 / (1 + np.exp(-x))),
        ("gelu", lambda x: 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))),
        ("relu", lambda x: np.maximum(x, 0)),
        ("log", lambda x: np.log(np.abs(x))),
    ],
)
def test_unary_library_ops(op: str, fn: object) -> None:
    x = rand(3, 5, dtype=np.float16)
    if op in ("sqrt", "log"):
        x = np.abs(x) + np.float16(0.1)
    out = lib(op, [x], np.empty_like(x))
    want = fn(x.astype(np.float64))  # type: ignore[operator]
    np.testing.assert_allclose(out.astype(np.float64), want, rtol=2e-3, atol=2e-3)


def test_clamp_mul_scalar_binary_broadcast() -> None:
    x = rand(4, 6)
    np.testing.assert_allclose(lib("clamp", [x], np.empty_like(x), min_value=-0.25, max_value=0.5), np.clip(x, -0.25, 0.5))
    np.testing.assert_allclose(lib("mul_scalar", [x], np.empty_like(x), scalar=3.0), 3 * x, rtol=1e-6)
    y = rand(4, 1, seed=1)
    for op, fn in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("div", np.divide)):
        np.testing.assert_allclose(lib(op, [x, y], np.empty_like(x)), fn(x, y), rtol=1e-5)
    p = np.abs(x) + 0.5
    np.testing.assert_allclose(lib("pow", [p, y], np.empty_like(x)), np.power(p, y), rtol=1e-5)
    with pytest.raises(LibraryOpError, match="needs the parameter 'scalar'"):
        lib("mul_scalar", [x], np.empty_like(x))
    with pytest.raises(LibraryOpError, match="unknown library op 'frobnicate'"):
        lib("frobnicate", [x], np.empty_like(x))


def test_matmul_reduction_rms_norm() -> None:
    a, b = rand(2, 3, 8, dtype=np.float16), rand(2, 8, 5, dtype=np.float16, seed=1)
    out = lib("matmul", [a, b], np.empty((2, 3, 5), np.float16))
    np.testing.assert_allclose(out.astype(np.float64), a.astype(np.float64) @ b.astype(np.float64), rtol=1e-2, atol=1e-2)
    x = rand(3, 12)
    # strided groups: out[:, j] = sum_k x[:, j + 4k]
    red = lib("reduction", [x], np.empty((3, 4), np.float32), dim=1, size=4)
    np.testing.assert_allclose(red, x[:, 0:4] + x[:, 4:8] + x[:, 8:12], rtol=1e-5)
    np.testing.assert_allclose(lib("reduction", [x], np.empty((1, 12), np.float32), dim=0, size=1), x.sum(0, keepdims=True), rtol=1e-5)
    rms = lib("rms_norm", [x], np.empty_like(x), normalized_shape=[12])
    np.testing.assert_allclose(rms, x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True)), rtol=1e-5)
    with pytest.raises(LibraryOpError, match="not divisible into groups of 5"):
        lib("reduction", [x], np.empty((3, 5), np.float32), dim=1, size=5)


def test_concat_chunk_identity_and_strided_result() -> None:
    a, b = rand(2, 3), rand(2, 5, seed=1)
    np.testing.assert_array_equal(lib("concat", [a, b], np.empty((2, 8), np.float32), dim=1), np.concatenate([a, b], 1))
    x = rand(6, 4)
    parts = [np.empty((2, 4), np.float32) for _ in range(3)]
    run_library_call(LibraryCall("chunk", (), (), {"dim": 0}), [x], parts, np)
    for i, p in enumerate(parts):
        np.testing.assert_array_equal(p, x[2 * i : 2 * i + 2])
    np.testing.assert_array_equal(lib("all_reduce", [x], np.empty_like(x)), x)
    # a column-major result view receives the values at the right places
    buf = np.full(8, np.nan, np.float32)
    col = np.lib.stride_tricks.as_strided(buf, (2, 4), (4, 8))
    lib("exp", [a[:, :1] * np.ones((2, 4), np.float32)], col)
    np.testing.assert_allclose(buf.reshape(4, 2).T, np.exp(a[:, :1] * np.ones((2, 4))), rtol=1e-6)


def test_bfloat16_storage_round_trip() -> None:
    vals = np.array([1.0, -2.5, 0.1, 3.0e38], np.float32)
    bits = np.empty(4, np.uint16)
    run_library_call(LibraryCall("mul_scalar", (), (), {"scalar": 1.0}), [(vals.view(np.uint32) >> 16).astype(np.uint16)], [bits], np, ["bfloat16"], ["bfloat16"])
    back = numpy_values(bits, "bfloat16")
    np.testing.assert_allclose(back, vals, rtol=1e-2)
    nan_bits = np.empty(1, np.uint16)
    run_library_call(LibraryCall("log", (), (), {}), [np.array([0xBF80], np.uint16)], [nan_bits], np, ["bfloat16"], ["bfloat16"])
    assert np.isnan(numpy_values(nan_bits, "bfloat16")[0])  # log(-1)


LIBRARY_CASES: dict[str, tuple[dict[str, Any], list[tuple[int, ...]], list[tuple[int, ...]]]] = {
    "matmul": ({}, [(4, 8), (8, 3)], [(4, 3)]),
    "reduction": ({"dim": 1, "size": 2}, [(4, 8)], [(4, 2)]),
    "reduction_max": ({"dim": 1}, [(4, 8)], [(4, 1)]),
    "rms_norm": ({"normalized_shape": [8], "eps": 0.0}, [(4, 8)], [(4, 8)]),
    "concat": ({"dim": 0}, [(4, 8), (2, 8)], [(6, 8)]),
    "chunk": ({"dim": 1, "chunks": 2}, [(4, 8)], [(4, 4), (4, 4)]),
    "reshape": ({"shape": [8, 4]}, [(4, 8)], [(8, 4)]),
    "all_reduce": ({}, [(4, 8)], [(4, 8)]),
    "copy": ({}, [(4, 8)], [(4, 8)]),
    "clamp": ({"min": -0.2, "max": 0.3}, [(4, 8)], [(4, 8)]),
    "mul_scalar": ({"scalar": 1.5}, [(4, 8)], [(4, 8)]),
    "add_scalar": ({"scalar": 1e-5}, [(4, 8)], [(4, 8)]),
}


def test_host_emulator_library_steps_match_the_runtime() -> None:
    """Every op the runtime runs as a library call (runtime/library_ops.py `LIBRARY_OPS`) runs
    in the host emulator too, with the same result (a softmax over 50257 columns left its row
    max to the library, which the emulator did not know)."""
    from mirage_xdsl.runtime.host_emulator import _library
    from mirage_xdsl.runtime.library_ops import LIBRARY_OPS

    rng = np.random.default_rng(4)
    for op in LIBRARY_OPS:
        params, in_shapes, out_shapes = LIBRARY_CASES.get(op, ({}, [(4, 8)] * (2 if op in ("add", "sub", "mul", "div", "pow") else 1), [(4, 8)]))
        args = [rng.uniform(0.5, 1.5, size=shape) for shape in in_shapes]
        refs = [np.full(shape, np.nan) for shape in out_shapes]
        call = LibraryCall(op, tuple(TensorRef("input", i) for i in range(len(args))), tuple(TensorRef("output", i) for i in range(len(refs))), params)
        run_library_call(call, args, refs, np)
        got = _library(call, args)
        assert len(got) == len(refs), op
        for g, r in zip(got, refs):
            np.testing.assert_allclose(g, r, rtol=1e-12, err_msg=op)


# ---------------------------------------------------------------------------------------
# GPU tests


GPU_LIB_CASES = [
    (op, {})
    for op in ("exp", "square", "sqrt", "silu", "sigmoid", "gelu", "relu", "log", "add", "mul", "div", "sub", "pow")
] + [("clamp", {"min": 0.3, "max": 0.6}), ("mul_scalar", {"scalar": -1.5}), ("add_scalar", {"scalar": -0.25})]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("op, params", GPU_LIB_CASES)
def test_gpu_library_ops_match_numpy(op: str, params: dict[str, float], dtype: type) -> None:
    import cupy

    x = np.abs(rand(8, 16, dtype=dtype)) + dtype(0.1)
    y = np.abs(rand(8, 1, dtype=dtype, seed=1)) + dtype(0.1)
    args = [x] if op not in ("add", "mul", "div", "sub", "pow") else [x, y]
    call = LibraryCall(op, (), (), dict(params))
    want = np.empty_like(x)
    run_library_call(call, args, [want], np)
    # a column-major result: the CuPy path writes through strides
    buf = cupy.full(8 * 16, cupy.nan, dtype=dtype)
    got = cupy.lib.stride_tricks.as_strided(buf, (8, 16), (buf.itemsize, 8 * buf.itemsize))
    run_library_call(call, [cupy.asarray(a) for a in args], [got], cupy)
    np.testing.assert_allclose(cupy.asnumpy(got).astype(np.float64), want.astype(np.float64), rtol=2e-3, atol=2e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("size", [1, 4])
def test_gpu_reduction_matches_numpy(size: int) -> None:
    import cupy

    x = rand(3, 16, 5, dtype=np.float16)
    call = LibraryCall("reduction", (), (), {"dim": 1, "size": size})
    want = np.empty((3, size, 5), np.float16)
    run_library_call(call, [x], [want], np)
    got = cupy.empty((3, size, 5), cupy.float16)
    run_library_call(call, [cupy.asarray(x)], [got], cupy)
    np.testing.assert_allclose(cupy.asnumpy(got).astype(np.float64), want.astype(np.float64), rtol=2e-3, atol=2e-3)
