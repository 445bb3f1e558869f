"""The launch plan: what the `cuda` target emits beside the CUDA source, and the runtime reads.

A kernel graph (`func.func`) becomes one CUDA translation unit plus a `LaunchPlan` that
lists, in order, the steps that run it: generated-kernel launches and library calls
(cuBLAS matmul, CuPy elementwise/reduction) over graph inputs, graph outputs, slices of
one workspace buffer and, for kernels with grid sums, a persistent buffer of counters.  The plan round-trips
through JSON (`to_json` / `from_json`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Literal

DTypeName = Literal["float16", "bfloat16", "float32", "float64", "int8", "uint16"]


@dataclass(frozen=True)
class TensorSpec:
    """A DTensor: shape and element strides (outermost first) and dtype name (numpy spelling)."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: DTypeName


@dataclass(frozen=True)
class TensorRef:
    """Where a step's argument lives: graph input i, graph output i, or the workspace."""

    kind: Literal["input", "output", "workspace", "counters"]
    index: int = 0
    """input/output position; unused for the workspace and the counters"""
    offset: int = 0
    """byte offset into the workspace or the counters (those two only)"""
    spec: TensorSpec | None = None
    """shape/strides/dtype of a workspace tensor; for an input or output, a view of its buffer
    with another shape (an aliased `kn.reshape` that a library call reads or writes); None: the
    plan's spec of that input or output"""


@dataclass(frozen=True)
class TensorMapSpec:
    """A TMA tensor map (`CUtensorMap`) the runtime encodes per call over tensor `ref` and
    passes by value before the kernel's pointer arguments (runtime/tensor_map.py).

    `dims` are the global sizes innermost first (elements), `strides` the byte strides of
    dims[1:], `box` the box sizes (elements), `swizzle` the swizzle width in bytes."""

    ref: TensorRef
    dtype: DTypeName
    dims: tuple[int, ...]
    strides: tuple[int, ...]
    box: tuple[int, ...]
    swizzle: int = 128


@dataclass(frozen=True)
class KernelLaunch:
    """Launch `kernel` (an `extern "C" __global__` function of the source) on `args` in order."""

    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem_bytes: int
    args: tuple[TensorRef, ...]
    pdl: bool = False
    """launch with programmatic stream serialization (PDL, sm_90+): the kernel waits for the
    grids before it (`mx::wait_for_prior_grids`) before touching global memory, so it may be
    scheduled while they still run"""
    step: Literal["kernel"] = "kernel"
    one_wave: bool = False
    """launch with the dynamic shared memory raised (on the actual device) so that no SM holds
    more than ceil(blocks / SMs) blocks: set for kernels that trigger their dependent grid early
    (codegen/weight_prefetch.py), whose successor's blocks must spread evenly over the SMs"""
    tensor_maps: tuple[TensorMapSpec, ...] = ()
    """TMA tensor maps passed before `args` (sm_90 GEMM kernels, codegen/hopper_gemm.py)"""
    sm90a: bool = False
    """the kernel uses sm_90a-only instructions (wgmma, TMA: `cute.hopper_gemm`,
    `cute.hopper_attention`), which the host emulator does not model"""


@dataclass(frozen=True)
class LibraryCall:
    """A kernel-level op run by a library (CuPy/cuBLAS): `op` is the `kn` op name without
    the prefix (`matmul`, `exp`, `add`, `reduction`, ...), `params` its properties."""

    op: str
    args: tuple[TensorRef, ...]
    results: tuple[TensorRef, ...]
    params: dict[str, float | int | list[int]] = field(default_factory=dict)
    step: Literal["library"] = "library"


@dataclass(frozen=True)
class LaunchPlan:
    """Everything the runtime needs to run one kernel graph."""

    func_name: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    workspace_bytes: int
    steps: tuple[KernelLaunch | LibraryCall, ...]
    arch: str = "sm_90"
    counters: int = 0
    """32-bit arrival counters of the plan's grid sums (tb.grid_sum): a buffer the runtime
    zeroes once and keeps for the life of the compiled graph -- the kernels re-arm what they
    use, so launches of one compiled graph must not run concurrently on several streams."""

    megakernel: dict | None = None
    """For a plan whose one kernel is a persistent megakernel (codegen/megakernel.py): its
    `MegakernelInfo` as a dict (`runtime/megakernel.py` reads it: error words, events, trace)."""

    def to_json(self) -> str:
        """The plan as JSON (`from_json` reads it back); `megakernel` only when set."""
        raw = asdict(self)
        if raw["megakernel"] is None:
            del raw["megakernel"]  # plans of separate kernels keep their JSON as before
        return json.dumps(raw, indent=1)

    @staticmethod
    def from_json(text: str) -> LaunchPlan:
        """The plan of `to_json`'s text."""
        raw = json.loads(text)

        def spec(d: dict | None) -> TensorSpec | None:
            if d is None:
                return None
            return TensorSpec(tuple(d["shape"]), tuple(d["strides"]), d["dtype"])

        def ref(d: dict) -> TensorRef:
            return TensorRef(d["kind"], d["index"], d["offset"], spec(d["spec"]))

        steps: list[KernelLaunch | LibraryCall] = []
        for s in raw["steps"]:
            if s["step"] == "kernel":
                steps.append(
                    KernelLaunch(
                        s["kernel"],
                        tuple(s["grid"]),
                        tuple(s["block"]),
                        s["smem_bytes"],
                        tuple(map(ref, s["args"])),
                        s.get("pdl", False),
                        one_wave=s.get("one_wave", False),
                        tensor_maps=tuple(
                            TensorMapSpec(
                                ref(t["ref"]), t["dtype"], tuple(t["dims"]), tuple(t["strides"]), tuple(t["box"]), t["swizzle"]
                            )
                            for t in s.get("tensor_maps", ())
                        ),
                        sm90a=s.get("sm90a", False),
                    )
                )
            else:
                steps.append(LibraryCall(s["op"], tuple(map(ref, s["args"])), tuple(map(ref, s["results"])), s["params"]))
        return LaunchPlan(
            raw["func_name"],
            tuple(spec(d) for d in raw["inputs"]),  # type: ignore[misc]
            tuple(spec(d) for d in raw["outputs"]),  # type: ignore[misc]
            raw["workspace_bytes"],
            tuple(steps),
            raw.get("arch", "sm_90"),
            raw.get("counters", 0),
            raw.get("megakernel"),
        )
