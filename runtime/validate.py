"""Checks of a launch plan and its inputs before anything runs (no GPU needed).

`describe` reads the shape, dtype, element strides and data pointer of a CuPy array, torch
tensor or numpy array; `check_inputs` compares the inputs of a call against the plan (number,
shape, dtype and element STRIDES, as Mirage does, and 16-byte alignment of device data
pointers: the kernels load with 16-byte `cp.async`); `check_plan` checks a plan against the
device (shared memory, threads); `alloc_elements` is the flat buffer size of a strided
tensor.  Errors: `InputError` (a `ValueError`) for bad inputs, `LaunchError` (a
`RuntimeError`) for a plan the device cannot run or a missing GPU/kernel.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mirage_xdsl.codegen.launch_plan import KernelLaunch, LaunchPlan, LibraryCall, TensorRef, TensorSpec
from mirage_xdsl.runtime.library_ops import storage_dtype
from mirage_xdsl.target import DEFAULT_SMEM_PER_BLOCK, SM90

DEFAULT_SMEM_LIMIT = DEFAULT_SMEM_PER_BLOCK


HOPPER_SMEM_OPTIN = SM90.smem_per_block_optin


VECTOR_BYTES = 16
"""Alignment (bytes) of every device input's data pointer: the kernels load tiles with 16-byte
`cp.async` copies, which fault or read wrong data from an address that is not a multiple
(PTX ISA, `cp.async`: the addresses must be aligned to the copy size)."""


class InputError(ValueError):
    """The inputs of a call do not match the compiled graph (number, shape, dtype, strides, device)."""


class LaunchError(RuntimeError):
    """The plan cannot run on this device (shared memory, threads, missing kernel or GPU)."""


@dataclass(frozen=True)
class TensorInfo:
    """What a call needs to know of an input: shape, element strides, dtype name, framework."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: str
    framework: str  # "cupy" | "torch" | "numpy" | other module name
    device: int | None = None
    misalignment: int = 0
    """bytes the data pointer lies past a `VECTOR_BYTES` boundary (0: aligned or unknown)"""


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Row-major element strides of `shape`."""
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= max(int(d), 1)
    return tuple(reversed(strides))


def alloc_elements(shape: Sequence[int], strides: Sequence[int]) -> int:
    """Elements a buffer needs to hold a tensor of `shape` with element `strides`."""
    if any(d == 0 for d in shape):
        return 0
    return 1 + sum((d - 1) * s for d, s in zip(shape, strides))


def _torch_dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def _data_pointer(x: Any, module: str) -> int | None:
    """Address of the first element of a torch tensor, CuPy or numpy array (None: unknown)."""
    try:
        if module == "torch":
            return int(x.data_ptr())
        if module == "cupy":
            return int(x.data.ptr)
        return int(x.__array_interface__["data"][0])
    except (AttributeError, TypeError, KeyError, ValueError):
        return None


def describe(x: Any) -> TensorInfo:
    """Shape, element strides, dtype, framework, device and pointer alignment (`misalignment`,
    bytes past a `VECTOR_BYTES` boundary) of a CuPy/numpy array or torch tensor.

    Raises:
        InputError: `x` is none of those.
    """
    module = type(x).__module__.split(".")[0]
    pointer = _data_pointer(x, module)
    misalignment = pointer % VECTOR_BYTES if pointer is not None else 0
    if module == "torch":
        device = x.device.index if x.is_cuda else None
        framework = "torch" if x.is_cuda else "torch-cpu"
        return TensorInfo(tuple(x.shape), tuple(x.stride()), _torch_dtype_name(x.dtype), framework, device, misalignment)
    if hasattr(x, "strides") and hasattr(x, "dtype") and hasattr(x, "shape"):
        dtype = np.dtype(x.dtype)
        item = dtype.itemsize
        strides = tuple(int(s) // item if int(s) % item == 0 else -1 for s in x.strides)
        device = None
        if module == "cupy":
            device = int(x.device.id)
        return TensorInfo(tuple(int(d) for d in x.shape), strides, dtype.name, module, device, misalignment)
    raise InputError(f"unsupported input type {type(x).__module__}.{type(x).__name__}; pass CuPy arrays or torch CUDA tensors")


def _strides_match(shape: Sequence[int], got: Sequence[int], want: Sequence[int]) -> bool:
    if any(d == 0 for d in shape):
        return True
    return all(d == 1 or g == w for d, g, w in zip(shape, got, want))


def _dtype_matches(info: TensorInfo, dtype: str) -> bool:
    """numpy and CuPy have no bfloat16: their bf16 tensors are uint16 arrays of the bits
    (the convention of runtime/library_ops.py); torch tensors must carry the dtype itself."""
    if info.dtype == dtype:
        return True
    return dtype == "bfloat16" and info.dtype == "uint16" and info.framework in ("numpy", "cupy")


def check_inputs(
    plan: LaunchPlan,
    infos: Sequence[TensorInfo],
    names: Sequence[str | None] | None = None,
    *,
    require_gpu: bool = False,
) -> None:
    """Check `infos` against the plan's inputs: number, shape, dtype, element strides
    (strides of size-1 dims are ignored: they never address memory) and, for device tensors
    (CuPy, torch CUDA), a data pointer aligned to `VECTOR_BYTES` (16 bytes).  Strides need no
    check of their own: they must equal the compiled ones, whose rows the plan aligned.

    Raises:
        InputError: a mismatch, naming the input and the fix (for a misaligned view: its
            pointer offset in bytes, and to pass a copy in a fresh buffer).
    """
    names = list(names or [])

    def label(i: int) -> str:
        name = names[i] if i < len(names) else None
        return f"input {i} ({name})" if name else f"input {i}"

    if len(infos) != len(plan.inputs):
        raise InputError(f"{plan.func_name} takes {len(plan.inputs)} inputs, got {len(infos)}")
    for i, (info, spec) in enumerate(zip(infos, plan.inputs)):
        if require_gpu and info.framework not in ("cupy", "torch"):
            hint = " (a CPU tensor: move it with .cuda())" if info.framework == "torch-cpu" else ""
            raise InputError(f"{label(i)}: a {info.framework} array{hint}; pass a CuPy array or a torch CUDA tensor")
        if tuple(info.shape) != tuple(spec.shape):
            raise InputError(f"{label(i)}: shape {tuple(info.shape)} but the graph was compiled for {tuple(spec.shape)}")
        if not _dtype_matches(info, spec.dtype):
            raise InputError(f"{label(i)}: dtype {info.dtype} but the graph was compiled for {spec.dtype}")
        if not _strides_match(spec.shape, info.strides, spec.strides):
            if tuple(spec.strides) == contiguous_strides(spec.shape):
                fix = "pass a contiguous tensor"
            else:
                fix = f"pass a tensor with strides {tuple(spec.strides)} (e.g. through as_strided)"
            raise InputError(
                f"{label(i)}: strides {tuple(info.strides)} but the graph was compiled for {tuple(spec.strides)}; {fix}"
            )
        if info.misalignment and info.framework in ("cupy", "torch") and all(d > 0 for d in spec.shape):
            raise InputError(_misaligned_message(label(i), info))
    devices = {info.device for info in infos if info.device is not None}
    if len(devices) > 1:
        raise InputError(f"inputs are on several devices {sorted(devices)}; put them on one GPU")


def _misaligned_message(label: str, info: TensorInfo) -> str:
    """Why a misaligned view is refused, and how to pass it (`.contiguous()` and
    `cupy.ascontiguousarray` keep a view that is already contiguous where it is)."""
    copy = "x.clone()" if info.framework == "torch" else "x.copy()"
    return (
        f"{label}: data pointer is {info.misalignment} bytes past a {VECTOR_BYTES}-byte boundary "
        f"(a view at an offset into its buffer); the kernels load inputs with {VECTOR_BYTES}-byte cp.async, "
        f"so pass a copy in a fresh buffer ({copy}; .contiguous() / cupy.ascontiguousarray keep a contiguous view where it is)"
    )


def ref_spec(plan: LaunchPlan, ref: TensorRef) -> TensorSpec | None:
    """The spec of the tensor `ref` names: its own (a workspace tensor, or a view of an input's or
    output's buffer), else the plan input's or output's."""
    if ref.spec is not None:
        return ref.spec
    if ref.kind == "input":
        return plan.inputs[ref.index]
    if ref.kind == "output":
        return plan.outputs[ref.index]
    return ref.spec


def check_plan(
    plan: LaunchPlan,
    *,
    max_smem_optin: int = HOPPER_SMEM_OPTIN,
    kernel_static_smem: dict[str, int] | None = None,
    kernel_max_threads: dict[str, int] | None = None,
) -> None:
    """Check that the plan can run on a device: references, threads, grid and shared memory.

    The grid limits (x < 2^31, y and z <= 65535) and the default of 1024 threads per block
    are CUDA's for every compute capability since 3.0 (CUDA C++ Programming Guide, "Compute
    Capabilities", table "Technical Specifications per Compute Capability").

    Args:
        plan: the launch plan.
        max_smem_optin: dynamic + static shared memory one block may use (bytes; the
            device's opt-in maximum, sm_90: 227 KiB).
        kernel_static_smem: kernel name -> static shared memory (bytes), where known.
        kernel_max_threads: kernel name -> the most threads per block the loaded kernel
            allows (its registers may allow fewer than 1024).

    Raises:
        LaunchError: a reference out of range or outside the workspace or the counters, a
            library call whose workspace tensors have no spec, too many threads per block,
            a grid outside CUDA's limits, or a launch over `max_smem_optin`.
    """
    static = kernel_static_smem or {}
    max_threads = kernel_max_threads or {}
    for si, step in enumerate(plan.steps):
        refs = step.args + (step.results if isinstance(step, LibraryCall) else ())
        where = f"{plan.func_name}: step {si} ({step.kernel if isinstance(step, KernelLaunch) else step.op})"
        for ref in refs:
            if ref.kind == "input" and not 0 <= ref.index < len(plan.inputs):
                raise LaunchError(f"{where}: input {ref.index} does not exist ({len(plan.inputs)} inputs)")
            if ref.kind == "output" and not 0 <= ref.index < len(plan.outputs):
                raise LaunchError(f"{where}: output {ref.index} does not exist ({len(plan.outputs)} outputs)")
            if ref.kind in ("input", "output") and ref.spec is not None:
                base = (plan.inputs if ref.kind == "input" else plan.outputs)[ref.index]
                if ref.spec.dtype != base.dtype or alloc_elements(ref.spec.shape, ref.spec.strides) > alloc_elements(
                    base.shape, base.strides
                ):
                    raise LaunchError(
                        f"{where}: a view {list(ref.spec.shape)} of {ref.kind} {ref.index} ({list(base.shape)}, {base.dtype}) "
                        "must have its dtype and lie inside its buffer"
                    )
            if ref.kind == "workspace":
                size = 0
                if ref.spec is not None:
                    size = alloc_elements(ref.spec.shape, ref.spec.strides) * storage_dtype(ref.spec.dtype).itemsize
                if ref.offset < 0 or ref.offset + size > plan.workspace_bytes:
                    raise LaunchError(
                        f"{where}: workspace slice [{ref.offset}, {ref.offset + size}) lies outside the "
                        f"{plan.workspace_bytes}-byte workspace"
                    )
            if ref.kind == "counters" and not (0 <= ref.offset and ref.offset + 4 <= 4 * plan.counters):
                raise LaunchError(f"{where}: counter at byte {ref.offset} lies outside the plan's {plan.counters} counters")
            if ref.kind == "counters" and not isinstance(step, KernelLaunch):
                raise LaunchError(f"{where}: only generated kernels take the grid-sum counters")
            if ref.kind not in ("input", "output", "workspace", "counters"):
                raise LaunchError(f"{where}: unknown tensor reference kind '{ref.kind}'")
        if isinstance(step, LibraryCall) and any(
            r.kind == "workspace" and r.spec is None for r in step.args + step.results
        ):
            raise LaunchError(f"{where}: a library call needs the spec (shape/strides/dtype) of its workspace tensors")
        if isinstance(step, KernelLaunch):
            threads = math.prod(step.block)
            limit = max_threads.get(step.kernel, 1024)
            if threads > limit or threads < 1:
                raise LaunchError(
                    f"{where}: block {tuple(step.block)} has {threads} threads; the kernel allows at most {limit} per block"
                )
            gx, gy, gz = step.grid
            if not (1 <= gx < 2**31 and 1 <= gy <= 65535 and 1 <= gz <= 65535):
                raise LaunchError(f"{where}: grid {tuple(step.grid)} is outside CUDA's limits (x < 2^31, y, z <= 65535)")
            need = step.smem_bytes + static.get(step.kernel, 0)
            if need > max_smem_optin:
                extra = f" (+ {static[step.kernel]} static)" if static.get(step.kernel) else ""
                raise LaunchError(
                    f"{where}: needs {step.smem_bytes} bytes of dynamic shared memory{extra} per block but the "
                    f"device allows {max_smem_optin}; choose a smaller tile (grid/forloop) for this graph"
                )
