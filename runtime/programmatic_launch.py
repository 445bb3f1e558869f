"""Launch a loaded CuPy kernel with programmatic dependent launch (PDL, sm_90+).

CuPy's `RawKernel.__call__` uses `cuLaunchKernel`, which has no launch attributes, so the
launch goes to the driver's `cuLaunchKernelEx` through ctypes with one attribute,
CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION set to 1.  The kernel may then be scheduled
while the previous kernel of the stream still runs; it must execute `griddepcontrol.wait`
before its first global memory access (every generated kernel does: `mx::wait_for_prior_grids`
in `codegen/include/mirage_xdsl/dependent_launch.cuh`).  Stream capture records the launch
as a programmatic dependency edge of the CUDA graph (CUDA C++ Programming Guide,
"Programmatic Dependent Launch and Synchronization"; struct layouts from CUDA 13's cuda.h).
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from functools import cache
from typing import Any

CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6  # cuda.h, enum CUlaunchAttributeID


class _LaunchAttribute(ctypes.Structure):
    # CUlaunchAttribute: a 4-byte id, 4 bytes of padding, a 64-byte value union
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_uint32 * 16)]


class _LaunchConfig(ctypes.Structure):
    # CUlaunchConfig
    _fields_ = [
        ("gridDimX", ctypes.c_uint),
        ("gridDimY", ctypes.c_uint),
        ("gridDimZ", ctypes.c_uint),
        ("blockDimX", ctypes.c_uint),
        ("blockDimY", ctypes.c_uint),
        ("blockDimZ", ctypes.c_uint),
        ("sharedMemBytes", ctypes.c_uint),
        ("hStream", ctypes.c_void_p),
        ("attrs", ctypes.POINTER(_LaunchAttribute)),
        ("numAttrs", ctypes.c_uint),
    ]


class ProgrammaticLaunchError(RuntimeError):
    """cuLaunchKernelEx failed (the driver's error name and message are in the text)."""


@cache
def _driver() -> Any:
    lib = ctypes.CDLL("libcuda.so.1")
    lib.cuLaunchKernelEx.argtypes = [
        ctypes.POINTER(_LaunchConfig),
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_void_p),
        ctypes.POINTER(ctypes.c_void_p),
    ]
    lib.cuLaunchKernelEx.restype = ctypes.c_int
    return lib


def _error_text(lib: Any, code: int) -> str:
    name, text = ctypes.c_char_p(), ctypes.c_char_p()
    lib.cuGetErrorName(code, ctypes.byref(name))
    lib.cuGetErrorString(code, ctypes.byref(text))
    return f"{(name.value or b'?').decode()}: {(text.value or b'').decode()}"


class ProgrammaticLaunch:
    """One kernel launch configuration with PDL enabled, built once and launched many times.

    Calling it launches the kernel (`__call__`).

    Args:
        kernel: a CuPy `RawKernel` of a loaded module (or its `Function`).
        grid: blocks per grid, a 3-tuple.
        block: threads per block, a 3-tuple.
        smem_bytes: dynamic shared memory per block (bytes).
        n_args: the number of kernel parameters -- all 64-bit device pointers (the generated
            kernels take nothing else).

    Raises:
        OSError: the CUDA driver library (`libcuda.so.1`) cannot be loaded.
    """

    def __init__(self, kernel: Any, grid: Sequence[int], block: Sequence[int], smem_bytes: int, n_args: int):
        self._lib = _driver()
        self._function = ctypes.c_void_p(int(getattr(kernel, "kernel", kernel).ptr))  # RawKernel -> Function
        self._attr = _LaunchAttribute()
        self._attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
        self._attr.value[0] = 1  # programmaticStreamSerializationAllowed
        self._config = _LaunchConfig(*grid, *block, smem_bytes, None, ctypes.pointer(self._attr), 1)
        self._values = (ctypes.c_uint64 * n_args)()
        base = ctypes.addressof(self._values)
        self._params = (ctypes.c_void_p * n_args)(*(base + 8 * i for i in range(n_args)))

    def __call__(self, pointer_args: Sequence[int], stream_ptr: int) -> None:
        """Launch the kernel through `cuLaunchKernelEx` with the PDL attribute set.

        The driver copies the parameters at launch, so the parameter buffers are reused.

        Args:
            pointer_args: the kernel's `n_args` parameters, 64-bit device addresses.
            stream_ptr: the CUstream handle to launch on (0: the legacy default stream).

        Raises:
            ProgrammaticLaunchError: the driver refused the launch (its error name and
                message are in the text).
        """
        self._values[:] = pointer_args  # type: ignore[call-overload]  # ctypes takes any sequence of the length; typeshed lists only list
        self._config.hStream = stream_ptr or None
        code = self._lib.cuLaunchKernelEx(ctypes.byref(self._config), self._function, self._params, None)
        if code != 0:
            raise ProgrammaticLaunchError(f"cuLaunchKernelEx: {_error_text(self._lib, code)}")


def one_wave_smem_bytes(
    blocks: int,
    smem_bytes: int,
    *,
    static_bytes: int,
    sm_count: int,
    smem_per_sm: int,
    reserved_per_block: int,
    max_per_block: int,
) -> int:
    """Dynamic shared memory (bytes) for a launch of `blocks` blocks that needs `smem_bytes`,
    raised so that at most ceil(blocks / sm_count) blocks fit on one SM (`KernelLaunch.one_wave`).

    An SM fits k blocks while k * (dynamic + static + reserved) <= smem_per_sm (CUDA C++ Best
    Practices Guide, "Occupancy"; `reserved_per_block` is cudaDevAttrReservedSharedMemoryPerBlock,
    1 KiB on sm_90), so each block is given smem_per_sm // cap of it, rounded down to 128 bytes.
    Never less than `smem_bytes`, never more than `max_per_block` (the opt-in limit) minus the
    static part."""
    cap = -(-blocks // max(sm_count, 1))
    share = (smem_per_sm // cap - reserved_per_block - static_bytes) // 128 * 128
    return max(smem_bytes, min(share, max_per_block - static_bytes))
