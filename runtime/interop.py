"""CuPy and torch interop for the runtime: importing CuPy on first use, the GPU's presence and
architecture, zero-copy conversion between CuPy arrays and torch tensors (DLPack), strided
views over flat buffers, NaN poison values, and the stream a call runs on (CuPy's or torch's
current stream, a CuPy or torch stream, or a raw `cudaStream_t` int).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mirage_xdsl.codegen.launch_plan import TensorSpec
from mirage_xdsl.runtime.validate import InputError, LaunchError


def import_cupy() -> Any:
    """The `cupy` module, imported on first use.

    Raises:
        LaunchError: CuPy is not installed.
    """
    try:
        import cupy  # type: ignore[import-not-found]
    except ImportError as err:
        raise LaunchError(f"CuPy is needed to run compiled graphs ({err}); install cupy-cuda13x") from None
    return cupy


def gpu_available() -> bool:
    """True when CuPy is importable and reports at least one CUDA device."""
    try:
        import cupy  # type: ignore[import-not-found]

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - no CuPy, no driver, no device
        return False


def detect_arch(default: str = "sm_90") -> str:
    """`sm_XY` of the current CUDA device, or `default` without a GPU."""
    if not gpu_available():
        return default
    cupy = import_cupy()
    cc = str(cupy.cuda.Device().compute_capability)
    return f"sm_{cc}"


def poison_value(dtype_name: str) -> Any:
    """The fill value that marks unwritten output elements: NaN for floats (bf16 as its uint16
    storage pattern 0x7FC0), the largest value for integers."""
    if dtype_name == "bfloat16":
        return 0x7FC0  # bf16 quiet NaN bit pattern in the uint16 storage
    if dtype_name in ("float16", "float32", "float64"):
        return float("nan")
    return np.iinfo(np.dtype(dtype_name)).max


def strided_view(xp: Any, flat: Any, spec: TensorSpec) -> Any:
    """A view with `spec`'s shape and element strides of the buffer that starts at the first
    element of `flat` (a CuPy array with `xp` = cupy, a numpy one with numpy; its own shape
    does not matter, e.g. a graph input viewed through an aliased reshape's spec)."""
    item = flat.dtype.itemsize
    return xp.lib.stride_tricks.as_strided(flat, tuple(spec.shape), tuple(s * item for s in spec.strides))


def to_torch(cupy: Any, arr: Any, dtype_name: str) -> Any:
    """The torch tensor sharing `arr`'s memory (DLPack); bf16 / uint16 arrays, stored as
    uint16 in CuPy, come back as torch.bfloat16 / torch.uint16."""
    import torch  # type: ignore[import-not-found]

    if dtype_name == "bfloat16":
        return torch.from_dlpack(arr.view(cupy.int16)).view(torch.bfloat16)
    if dtype_name == "uint16":
        return torch.from_dlpack(arr.view(cupy.int16)).view(torch.uint16)
    return torch.from_dlpack(arr)


def from_torch(cupy: Any, t: Any, dtype_name: str) -> Any:
    """The CuPy array sharing torch tensor `t`'s memory (DLPack); bf16 / uint16 become uint16
    storage."""
    import torch  # type: ignore[import-not-found]

    t = t.detach()
    if dtype_name in ("bfloat16", "uint16"):
        return cupy.from_dlpack(t.view(torch.int16)).view(cupy.uint16)
    return cupy.from_dlpack(t)


def as_stream(cupy: Any, stream: Any, framework: str) -> Any:
    """The CuPy stream object for `stream` (None: the caller's current stream)."""
    if stream is None:
        if framework == "torch":
            import torch  # type: ignore[import-not-found]

            return external_stream(cupy, torch.cuda.current_stream().cuda_stream)
        return cupy.cuda.get_current_stream()
    if isinstance(stream, (cupy.cuda.Stream, cupy.cuda.ExternalStream)):
        return stream
    if hasattr(stream, "cuda_stream"):  # torch.cuda.Stream
        return external_stream(cupy, stream.cuda_stream)
    if isinstance(stream, int):
        return external_stream(cupy, stream)
    raise InputError(f"stream must be a CuPy stream, a torch CUDA stream or a cudaStream_t int, got {type(stream).__name__}")


def external_stream(cupy: Any, ptr: int) -> Any:
    """`cupy.cuda.ExternalStream(ptr)` without CuPy 14's deprecation warning (cached per
    pointer and device)."""
    key = (int(ptr), cupy.cuda.runtime.getDevice())
    cached = _EXTERNAL_STREAMS.get(key)
    if cached is None:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            cached = cupy.cuda.ExternalStream(int(ptr), key[1])
        _EXTERNAL_STREAMS[key] = cached
    return cached


_EXTERNAL_STREAMS: dict[tuple[int, int], Any] = {}
