"""TMA tensor maps (`CUtensorMap`) for the sm_90 GEMM kernels, and launches that pass them.

A TMA load (`cp.async.bulk.tensor`) reads a box of a global tensor described by a 128-byte
`CUtensorMap` that the host encodes with the driver's `cuTensorMapEncodeTiled` (CUDA Driver
API, "Tensor Map Object Management"); the kernel takes it by value as a
`const __grid_constant__ CUtensorMap` parameter.  The map holds the tensor's base address, so
a launch needs the map of each call's buffers; `launch_with_tensor_maps` keeps the encoded maps
of recent (address, layout) pairs (`encoded_map`), since a program's buffers mostly come back at
the same addresses and a ctypes encode costs several microseconds of host time per map.  `launch` calls
`cuLaunchKernel` through ctypes with parameters of any size (tensor maps, pointers, ints),
which CuPy's `RawKernel.__call__` cannot pass.

Enum values and the rules checked here (rank 1..5, global strides multiples of 16 bytes,
box sizes 1..256, a 128-byte-swizzled box's inner extent at most 128 bytes) are those of
CUDA 13's `cuda.h` and the driver API reference of `cuTensorMapEncodeTiled`.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from functools import cache, lru_cache
from typing import Any

TENSOR_MAP_BYTES = 128
"""sizeof(CUtensorMap) (cuda.h: 16 x 64-bit words, 64-byte aligned)."""

DATA_TYPES = {"float16": 6, "float32": 7, "bfloat16": 9}
"""numpy dtype name -> CUtensorMapDataType (cuda.h)."""

ELEMENT_BYTES = {"float16": 2, "float32": 4, "bfloat16": 2}

SWIZZLES = {0: 0, 32: 1, 64: 2, 128: 3}
"""swizzle width in bytes -> CUtensorMapSwizzle (cuda.h; 0 = none)."""

L2_PROMOTION_256B = 3
"""CU_TENSOR_MAP_L2_PROMOTION_L2_256B: fetch whole 256-byte L2 lines (CUTLASS's default)."""


class TensorMapError(ValueError):
    """A tensor map the driver cannot encode (bad rank, stride, box) or that it rejected."""


@cache
def _driver() -> Any:
    lib = ctypes.CDLL("libcuda.so.1")
    u64p, u32p = ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint32)
    lib.cuTensorMapEncodeTiled.argtypes = [
        ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p, u64p, u64p, u32p, u32p,
        ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
    ]  # fmt: skip
    lib.cuTensorMapEncodeTiled.restype = ctypes.c_int
    lib.cuLaunchKernel.argtypes = [
        ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,
        ctypes.c_uint, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p,
    ]  # fmt: skip
    lib.cuLaunchKernel.restype = ctypes.c_int
    return lib


def _error_text(lib: Any, code: int) -> str:
    name, text = ctypes.c_char_p(), ctypes.c_char_p()
    lib.cuGetErrorName(code, ctypes.byref(name))
    lib.cuGetErrorString(code, ctypes.byref(text))
    return f"{(name.value or b'?').decode()}: {(text.value or b'').decode()}"


def check_tiled(dtype: str, dims: Sequence[int], strides: Sequence[int], box: Sequence[int], swizzle: int) -> None:
    """Check a tiled tensor map against the driver's documented limits (no GPU needed).

    Args:
        dtype: element type name (`float16`, `bfloat16`, `float32`).
        dims: global sizes, innermost (contiguous) dimension first, in elements.
        strides: byte strides of dims[1:] (the innermost dimension is contiguous).
        box: box sizes per dimension, in elements.
        swizzle: 0, 32, 64 or 128 (bytes).

    Raises:
        TensorMapError: naming the rule and the offending value.
    """
    if dtype not in DATA_TYPES:
        raise TensorMapError(f"tensor map: dtype {dtype!r} is not one of {sorted(DATA_TYPES)}")
    if not 1 <= len(dims) <= 5 or len(strides) != len(dims) - 1 or len(box) != len(dims):
        raise TensorMapError(f"tensor map: rank {len(dims)} needs 1..5 dims, rank-1 strides and rank box sizes")
    for s in strides:
        if s % 16 or not 0 < s < 1 << 40:
            raise TensorMapError(f"tensor map: global stride {s} B must be a positive multiple of 16 below 2^40")
    for b, d in zip(box, dims, strict=True):
        if not 1 <= b <= 256 or d < 1:
            raise TensorMapError(f"tensor map: box size {b} must be in 1..256 (dim {d})")
    if swizzle not in SWIZZLES:
        raise TensorMapError(f"tensor map: swizzle {swizzle} is not one of {sorted(SWIZZLES)}")
    inner = box[0] * ELEMENT_BYTES[dtype]
    if inner % 16 or (swizzle and inner > swizzle):
        raise TensorMapError(f"tensor map: the inner box extent {inner} B must be a multiple of 16 and <= the swizzle")


def encode_tiled(address: int, dtype: str, dims: Sequence[int], strides: Sequence[int], box: Sequence[int], swizzle: int = 128) -> bytes:
    """Encode a tiled `CUtensorMap` (no interleave, zero fill out of bounds, 256-B L2 promotion).

    Args:
        address: the tensor's device address (16-byte aligned).
        dtype, dims, strides, box, swizzle: as in `check_tiled`.

    Returns:
        The 128 bytes of the map, to pass by value as a kernel parameter.

    Raises:
        TensorMapError: `check_tiled` fails, the address is misaligned, or the driver
            rejects the map (its error name in the message).
    """
    check_tiled(dtype, dims, strides, box, swizzle)
    if address % 16:
        raise TensorMapError(f"tensor map: address {address:#x} is not 16-byte aligned; pass a contiguous copy")
    rank = len(dims)
    out = (ctypes.c_uint8 * TENSOR_MAP_BYTES)()
    lib = _driver()
    code = lib.cuTensorMapEncodeTiled(
        ctypes.addressof(out), DATA_TYPES[dtype], rank, ctypes.c_void_p(address),
        (ctypes.c_uint64 * rank)(*dims), (ctypes.c_uint64 * max(rank - 1, 1))(*strides),
        (ctypes.c_uint32 * rank)(*box), (ctypes.c_uint32 * rank)(*([1] * rank)),
        0, SWIZZLES[swizzle], L2_PROMOTION_256B, 0,
    )  # fmt: skip
    if code:
        raise TensorMapError(f"cuTensorMapEncodeTiled: {_error_text(lib, code)} (dims {list(dims)}, box {list(box)})")
    return bytes(out)


@lru_cache(maxsize=4096)
def encoded_map(address: int, dtype: str, dims: tuple[int, ...], strides: tuple[int, ...], box: tuple[int, ...], swizzle: int) -> bytes:
    """`encode_tiled`, memoised: the map is a pure function of its arguments (errors are not cached).

    Raises:
        TensorMapError: see `encode_tiled`.
    """
    return encode_tiled(address, dtype, dims, strides, box, swizzle)


class LaunchFailed(RuntimeError):
    """cuLaunchKernel failed (the driver's error name and message are in the text)."""


def pack_param(value: bytes | int | float, ctype: str) -> Any:
    """One kernel parameter as a ctypes object whose address `launch` passes to the driver.

    Args:
        value: bytes (a tensor map) or a number.
        ctype: `map` (128 bytes), `ptr` / `i64` (8 bytes), `i32` (4 bytes).

    Raises:
        ValueError: unknown `ctype`.
    """
    if ctype == "map":
        buf = (ctypes.c_uint8 * TENSOR_MAP_BYTES).from_buffer_copy(bytes(value))  # type: ignore[arg-type]
        return buf
    if ctype in ("ptr", "i64"):
        return ctypes.c_int64(int(value))
    if ctype == "i32":
        return ctypes.c_int32(int(value))
    raise ValueError(f"pack_param: unknown parameter kind {ctype!r} (map, ptr, i64, i32)")


def launch(function: int, grid: Sequence[int], block: Sequence[int], smem_bytes: int, stream: int, params: Sequence[Any]) -> None:
    """`cuLaunchKernel` with parameters built by `pack_param` (kept alive by the caller).

    Args:
        function: the `CUfunction` handle (CuPy: `RawModule.get_function(name).ptr`).
        grid, block: 3-tuples.
        smem_bytes: dynamic shared memory in bytes (the function's limit must allow it).
        stream: a `CUstream` handle (0 = the legacy default stream).
        params: the packed parameters in the kernel's order.

    Raises:
        LaunchFailed: the driver refused the launch.
    """
    lib = _driver()
    ptrs = (ctypes.c_void_p * len(params))(*(ctypes.addressof(p) for p in params))
    code = lib.cuLaunchKernel(ctypes.c_void_p(function), *grid, *block, smem_bytes, ctypes.c_void_p(stream), ptrs, None)
    if code:
        raise LaunchFailed(f"cuLaunchKernel: {_error_text(lib, code)}")


def launch_with_tensor_maps(kernel: Any, step: Any, ptrs: dict[str, list[int]], pointer_args: Sequence[int], smem: int, cupy: Any) -> None:
    """Launch a plan step whose kernel takes tensor maps first (`KernelLaunch.tensor_maps`),
    then its pointer arguments, on CuPy's current stream.

    Args:
        kernel: the loaded CuPy `RawKernel` (or `Function`).
        step: the `KernelLaunch` (codegen/launch_plan.py).
        ptrs: device addresses by reference kind (`input`, `output`, `workspace`, `counters`).
        pointer_args: the resolved addresses of `step.args`.
        smem: dynamic shared memory in bytes.
        cupy: the CuPy module.

    Raises:
        TensorMapError: a map cannot be encoded; LaunchFailed: the driver refused the launch.
    """
    params = []
    for spec in step.tensor_maps:
        r = spec.ref
        address = ptrs[r.kind][r.index if r.kind in ("input", "output") else 0] + r.offset
        encoded = encoded_map(address, spec.dtype, tuple(spec.dims), tuple(spec.strides), tuple(spec.box), spec.swizzle)
        params.append(pack_param(encoded, "map"))
    params += [pack_param(p, "ptr") for p in pointer_args]
    function = int(getattr(kernel, "kernel", kernel).ptr)
    launch(function, step.grid, step.block, smem, int(cupy.cuda.get_current_stream().ptr), params)
