"""`CompiledGraph`: runs a `LaunchPlan` (generated kernels + library calls) through CuPy.

    g = mirage_xdsl.compile(module, "graph_0")   # pipeline, emit_cuda, nvcc (cached), load
    (out,) = g(X, W)                              # CuPy arrays or torch CUDA tensors

A call checks the inputs against the plan (number, shape, dtype and element STRIDES, as
Mirage does), allocates the outputs with the plan's shapes and strides (`as_strided` over a
flat buffer) and one workspace buffer, then runs the steps in order on the caller's stream:
CuPy's current stream, torch's current stream for torch inputs, or `stream=` (a CuPy
stream, a torch stream or a raw `cudaStream_t` int).  Outputs come back in the framework of
the inputs (zero-copy through DLPack).  Calls are asynchronous, like CuPy and torch ops.

Options: `poison_outputs=True` fills every output buffer with NaN before the steps run (so a
check sees unwritten elements); `cuda_graph=True` runs the plan once eagerly for each new set
of input pointers, captures it into a CUDA graph and replays that graph on later calls with
the same pointers (CuPy refuses cuBLAS calls during capture, so library matmuls run eagerly
between captured segments).  In CUDA-graph mode the outputs of one pointer set are the SAME
buffers on every call (copy them to keep a result across calls).  `capture_sweep(sets)`
records one CUDA graph running the plan on several input sets, for timing device work alone;
`run_host(*numpy_arrays)` runs a plan made only of library calls on the CPU.

Generated kernels receive raw device pointers (input, output, workspace base + offset) in
the plan's argument order; dynamic shared memory above 48 KB is enabled per kernel at load.
Kernels of sm_90+ plans are launched with programmatic dependent launch (`KernelLaunch.pdl`,
runtime/programmatic_launch.py): their blocks may be scheduled while the previous kernel of
the stream runs and wait for it on the device (`programmatic_launch=False` turns it off).
Kernels with grid sums (split-K combined in the kernel, `tb.grid_sum`) also get a pointer into
the graph's arrival counters: zeroed at load, kept for the life of the `CompiledGraph`, and
left zero by every complete launch -- so one `CompiledGraph` must not run on several streams
at once (compile it once per stream for that).

Validation is separate from launching: `describe`, `check_inputs`, `check_plan` and
`alloc_elements` are pure functions usable without a GPU.  Errors: `InputError` (a
`ValueError`) for bad inputs; `LaunchError` (a `RuntimeError`) for a plan the device cannot
run (too much shared memory, too many threads) or a missing GPU/kernel.

Alignment and aliasing: a device input whose data pointer is not 16-byte aligned (a view at an
odd offset into its buffer, e.g. `x.ravel()[1:]`) is refused with an `InputError` naming the
input, the offset and the fix (pass a copy): the kernels load with 16-byte `cp.async`.  There
is no `out=` parameter: every call allocates its outputs and workspace while the inputs are
alive (in CUDA-graph mode, once per input-pointer set), so an output never overlaps an input
and no aliasing check is needed.

This module imports neither xDSL nor CuPy at import time: CuPy is imported on first load,
xDSL only by `compile` (so a device machine can run saved plans + cubins without xDSL).

Its helpers, one module each: `validate.py` (input and plan checks, `InputError`,
`LaunchError`), `interop.py` (CuPy/torch, streams), `random_inputs.py` (seeded inputs).
"""

from __future__ import annotations

import math
import os
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mirage_xdsl.codegen.launch_plan import KernelLaunch, LaunchPlan, LibraryCall, TensorRef, TensorSpec
from mirage_xdsl.runtime.interop import as_stream, from_torch, gpu_available, import_cupy, poison_value, strided_view, to_torch
from mirage_xdsl.runtime.library_ops import run_library_call, storage_dtype
from mirage_xdsl.runtime.programmatic_launch import ProgrammaticLaunch, one_wave_smem_bytes
from mirage_xdsl.runtime.tensor_map import launch_with_tensor_maps
from mirage_xdsl.runtime.validate import (
    DEFAULT_SMEM_LIMIT,
    HOPPER_SMEM_OPTIN,
    VECTOR_BYTES,
    InputError,
    LaunchError,
    TensorInfo,
    alloc_elements,
    check_inputs,
    check_plan,
    contiguous_strides,
    describe,
    ref_spec,
)

__all__ = ["CAPTURE_UNSAFE_OPS", "MAX_GRAPH_ENTRIES", "CompiledGraph", "graph_segments"]


MAX_GRAPH_ENTRIES = 16
"""CUDA graphs kept per CompiledGraph (one per input-pointer set), least recently used dropped."""


CAPTURE_UNSAFE_OPS = frozenset({"matmul"})
"""Library ops CuPy cannot record into a CUDA graph (cuBLAS refuses stream capture in CuPy);
in CUDA-graph mode they run eagerly between captured segments."""


def graph_segments(steps: Sequence[KernelLaunch | LibraryCall]) -> list[tuple[str, list[KernelLaunch | LibraryCall]]]:
    """Split a plan's steps into maximal capturable runs ("graph") and single steps that must
    run eagerly ("eager": library calls in `CAPTURE_UNSAFE_OPS`), in order."""
    segments: list[tuple[str, list[KernelLaunch | LibraryCall]]] = []
    for step in steps:
        kind = "eager" if isinstance(step, LibraryCall) and step.op in CAPTURE_UNSAFE_OPS else "graph"
        if kind == "graph" and segments and segments[-1][0] == "graph":
            segments[-1][1].append(step)
        else:
            segments.append((kind, [step]))
    return segments


@dataclass
class _GraphEntry:
    segments: list[tuple[str, list[Any], Any]]
    """(kind, steps, CUDA graph or None for eager steps)"""
    outputs: list[Any]
    outputs_cp: list[Any]
    flats: list[Any]
    workspace: Any
    pool: Any


class CompiledGraph:
    """A kernel graph compiled for one GPU architecture; call it on device tensors.

    See the module docstring for calls, streams and the CUDA-graph mode.

    Args:
        plan: the launch plan (kernel launches and library calls, in order).
        cubin_path: the cubin holding the plan's kernels (None: a plan of library calls only).
        source: the CUDA source the cubin was compiled from (kept for inspection).
        input_names: a name per input, used in `InputError` messages.
        cuda_graph: replay the plan as a CUDA graph per set of input pointers.
        poison_outputs: fill every output with NaN (integers: their maximum) before the steps.
        programmatic_launch: launch kernels whose step allows it with programmatic
            dependent launch.
    """

    def __init__(
        self,
        plan: LaunchPlan,
        cubin_path: str | os.PathLike[str] | None,
        *,
        source: str = "",
        input_names: Sequence[str | None] | None = None,
        cuda_graph: bool = False,
        poison_outputs: bool = False,
        programmatic_launch: bool = True,
    ):
        self.plan = plan
        self.cubin_path = Path(cubin_path) if cubin_path is not None else None
        self.source = source
        self.input_names = list(input_names) if input_names is not None else [None] * len(plan.inputs)
        self.cuda_graph = cuda_graph
        self.poison_outputs = poison_outputs
        self.programmatic_launch = programmatic_launch
        """launch the kernels whose plan step allows it (`KernelLaunch.pdl`) with programmatic
        dependent launch (runtime/programmatic_launch.py); False: every kernel through CuPy"""
        self._module: Any = None
        self._kernels: dict[str, Any] = {}
        self._launchers: dict[int, ProgrammaticLaunch] = {}  # by id() of the plan's KernelLaunch
        self._smem: dict[int, int] = {}  # dynamic shared memory of each KernelLaunch on the loaded device, by id()
        self._counters: Any = None  # grid-sum arrival counters (CuPy uint32), see the module docstring
        self._device: int | None = None
        self._graphs: OrderedDict[tuple[Any, ...], _GraphEntry] = OrderedDict()
        self._capture_stream: Any = None
        self._expected: list[tuple[tuple[int, ...], Any, tuple[int, ...]]] | None = None

    # -- introspection ------------------------------------------------------------------

    @property
    def func_name(self) -> str:
        """The name of the compiled kernel graph (the plan's function)."""
        return self.plan.func_name

    @property
    def arch(self) -> str:
        """The architecture the plan was compiled for (`sm_90`)."""
        return self.plan.arch

    @property
    def kernel_names(self) -> list[str]:
        """Names of the generated kernels the plan launches (each once, in first-use order)."""
        return list(dict.fromkeys(s.kernel for s in self.plan.steps if isinstance(s, KernelLaunch)))

    @property
    def loaded(self) -> bool:
        """Whether `load` has run (the cubin is loaded on a device)."""
        return self._module is not None

    def __repr__(self) -> str:
        return (
            f"CompiledGraph({self.func_name}, {len(self.plan.inputs)} inputs -> {len(self.plan.outputs)} outputs, "
            f"{len(self.plan.steps)} steps, {self.arch}, cubin={self.cubin_path})"
        )

    # -- loading ------------------------------------------------------------------------

    def load(self) -> CompiledGraph:
        """Load the cubin on the current CUDA device and fetch the kernels; check the plan
        against the device (shared memory, threads per block).  Idempotent.

        Returns:
            self.

        Raises:
            LaunchError: no CuPy or no GPU; the plan does not fit the device (`check_plan`);
                the plan launches kernels but there is no cubin, the cubin does not load on
                this GPU (e.g. compiled for another architecture), or a kernel is missing
                from it.
        """
        if self._module is not None:
            return self
        cupy = import_cupy()
        if not gpu_available():
            raise LaunchError("no CUDA GPU found: the graph is compiled but cannot run here")
        device = cupy.cuda.Device()
        optin = int(device.attributes.get("MaxSharedMemoryPerBlockOptin", HOPPER_SMEM_OPTIN))
        check_plan(self.plan, max_smem_optin=optin)
        names = self.kernel_names
        module = None
        kernels: dict[str, Any] = {}
        if names:
            if self.cubin_path is None or not self.cubin_path.is_file():
                raise LaunchError(f"{self.func_name}: the plan launches kernels but there is no cubin ({self.cubin_path})")
            try:
                module = cupy.RawModule(path=str(self.cubin_path))
            except Exception as err:  # noqa: BLE001 - CUDADriverError, e.g. a cubin for another arch
                raise LaunchError(
                    f"{self.func_name}: cannot load {self.cubin_path.name} (compiled for {self.arch}) on this "
                    f"GPU (sm_{device.compute_capability}): {err}; compile with arch=None to target it"
                ) from None
            for name in names:
                try:
                    kernels[name] = module.get_function(name)
                except Exception as err:  # noqa: BLE001 - CUDADriverError: CUDA_ERROR_NOT_FOUND
                    raise LaunchError(f"{self.func_name}: kernel '{name}' is not in {self.cubin_path.name}: {err}") from None
        static = {n: int(getattr(k, "shared_size_bytes", 0)) for n, k in kernels.items()}
        max_threads = {n: int(getattr(k, "max_threads_per_block", 1024)) for n, k in kernels.items()}
        check_plan(self.plan, max_smem_optin=optin, kernel_static_smem=static, kernel_max_threads=max_threads)
        self._smem = {
            id(step): self._launch_smem(step, device, static.get(step.kernel, 0), optin)
            for step in self.plan.steps
            if isinstance(step, KernelLaunch)
        }
        need: dict[str, int] = {}
        for step in self.plan.steps:
            if isinstance(step, KernelLaunch):
                need[step.kernel] = max(need.get(step.kernel, 0), self._smem[id(step)])
        for name, smem in need.items():
            if smem > DEFAULT_SMEM_LIMIT:
                kernels[name].max_dynamic_shared_size_bytes = smem
        if self.plan.megakernel:
            from mirage_xdsl.runtime.megakernel import check_residency

            step = next(s for s in self.plan.steps if isinstance(s, KernelLaunch))
            check_residency(self, kernels[step.kernel], math.prod(step.block), self._smem[id(step)], device)
        # grid-sum arrival counters: zero once; every launch leaves them zero again
        self._counters = cupy.zeros(max(self.plan.counters, 1), dtype=cupy.uint32)
        self._module = module if module is not None else True
        self._kernels = kernels
        self._device = int(device.id)
        return self

    @staticmethod
    def _launch_smem(step: KernelLaunch, device: Any, static: int, optin: int) -> int:
        """Dynamic shared memory of `step` on `device`: the plan's, or for a `one_wave` step
        enough to keep each SM at ceil(blocks / SMs) blocks (programmatic_launch.py)."""
        if not step.one_wave:
            return step.smem_bytes
        attrs = device.attributes
        return one_wave_smem_bytes(
            math.prod(step.grid),
            step.smem_bytes,
            static_bytes=static,
            sm_count=int(attrs.get("MultiProcessorCount", 132)),
            smem_per_sm=int(attrs.get("MaxSharedMemoryPerMultiprocessor", 233472)),
            reserved_per_block=int(attrs.get("ReservedSharedMemoryPerBlock", 1024)),
            max_per_block=optin,
        )

    # -- calling ------------------------------------------------------------------------

    def check(self, *inputs: Any) -> list[TensorInfo]:
        """Validate `inputs` (see `check_inputs`); return their descriptions.

        Raises:
            InputError: an input is not a CuPy array or torch CUDA tensor, does not match
                the plan, is misaligned, or lies on another device than the loaded graph.
        """
        infos = [describe(x) for x in inputs]
        check_inputs(self.plan, infos, self.input_names, require_gpu=True)
        if self._device is not None:
            for i, info in enumerate(infos):
                if info.device is not None and info.device != self._device:
                    raise InputError(
                        f"input {i}: on device {info.device} but the graph was loaded on device {self._device}"
                    )
        return infos

    def __call__(self, *inputs: Any, stream: Any = None) -> list[Any]:
        """Run the graph; return the outputs (CuPy arrays or torch tensors, like the inputs).

        Loads the graph on first use.  The call is asynchronous on the chosen stream.

        Args:
            inputs: one CuPy array or torch CUDA tensor per plan input, with the compiled
                shapes, dtypes and element strides (bfloat16 as a uint16 CuPy array).
            stream: a CuPy stream, a torch CUDA stream or a `cudaStream_t` int (None: the
                current stream of the inputs' framework).

        Raises:
            InputError: the inputs do not match the plan (see `check`), or `stream` is of
                an unknown type.
            LaunchError: the graph cannot be loaded (see `load`).
            ProgrammaticLaunchError: the driver refused a programmatic dependent launch.
            LibraryOpError: a library step cannot run (runtime/library_ops.py).
        """
        if self._module is None:
            self.load()
        cupy = import_cupy()
        ins = self._fast_inputs(cupy, inputs)
        if ins is not None and stream is None and cupy.cuda.runtime.getDevice() == self._device:
            # the common case (CuPy arrays laid out as compiled, current device and stream)
            return self._run(cupy, cupy.cuda.get_current_stream(), ins, "cupy")
        infos = self.check(*inputs)
        framework = infos[0].framework if infos else "cupy"
        with cupy.cuda.Device(self._device):
            cstream = as_stream(cupy, stream, framework)
            with cstream:
                ins = [
                    from_torch(cupy, x, spec.dtype) if info.framework == "torch" else self._cupy_input(cupy, x, spec)
                    for x, info, spec in zip(inputs, infos, self.plan.inputs)
                ]
                return self._run(cupy, cstream, ins, framework)

    def _fast_inputs(self, cupy: Any, inputs: Sequence[Any]) -> list[Any] | None:
        """`inputs` if they are CuPy arrays exactly as compiled (shape, dtype, byte strides,
        device); None sends the call through the full check (which may still accept them)."""
        expected = self._expected
        if expected is None:
            expected = self._expected = [
                (tuple(s.shape), np.dtype(storage_dtype(s.dtype)) if s.dtype != "bfloat16" else None,
                 tuple(st * storage_dtype(s.dtype).itemsize for st in s.strides))
                for s in self.plan.inputs
            ]
        if len(inputs) != len(expected):
            return None
        ndarray = cupy.ndarray
        for x, (shape, dtype, strides) in zip(inputs, expected):
            if type(x) is not ndarray or dtype is None or x.dtype != dtype or x.shape != shape or x.strides != strides:
                return None
            if x.device.id != self._device or x.data.ptr % VECTOR_BYTES:
                return None  # a misaligned view: the full check names it
        return list(inputs)

    def _run(self, cupy: Any, cstream: Any, ins: list[Any], framework: str) -> list[Any]:
        if self.cuda_graph:
            return self._call_graph(cupy, cstream, ins, framework)
        outs_cp, flats = self._alloc_outputs(cupy)
        ws = self._alloc_workspace(cupy)
        if self.poison_outputs:
            self._poison(flats)
        self._run_steps(cupy, ins, outs_cp, ws)
        return self._export(cupy, outs_cp, framework)

    def run_host(self, *inputs: np.ndarray) -> list[np.ndarray]:
        """Run a plan made only of library calls on numpy arrays (a CPU path used to test the
        plan machinery without a GPU: workspace views, references, output strides, poison).

        Raises:
            LaunchError: the plan launches generated kernels.
            InputError: the inputs do not match the plan (`check_inputs`).
            LibraryOpError: a library step cannot run.
        """
        if self.kernel_names:
            raise LaunchError(f"{self.func_name}: the plan launches generated kernels; it needs a GPU")
        infos = [describe(x) for x in inputs]
        check_inputs(self.plan, infos, self.input_names)
        ins = [x.view(np.uint16) if spec.dtype == "bfloat16" else x for x, spec in zip(inputs, self.plan.inputs)]
        outs, flats = self._alloc_outputs(np)
        ws = self._alloc_workspace(np)
        if self.poison_outputs:
            self._poison(flats)
        self._run_steps(np, ins, outs, ws)
        return outs

    @staticmethod
    def _cupy_input(cupy: Any, x: Any, spec: TensorSpec) -> Any:
        return x.view(cupy.uint16) if spec.dtype == "bfloat16" else x

    def _alloc_outputs(self, cupy: Any) -> tuple[list[Any], list[Any]]:
        outs, flats = [], []
        for spec in self.plan.outputs:
            dt = storage_dtype(spec.dtype)
            if tuple(spec.strides) == contiguous_strides(spec.shape):
                out = cupy.empty(tuple(spec.shape), dtype=dt)
                outs.append(out)
                flats.append(out)
                continue
            flat = cupy.empty(alloc_elements(spec.shape, spec.strides), dtype=dt)
            flats.append(flat)
            outs.append(strided_view(cupy, flat, spec))
        return outs, flats

    def _alloc_workspace(self, cupy: Any) -> Any:
        return cupy.empty(max(self.plan.workspace_bytes, 1), dtype=cupy.uint8)

    def _poison(self, flats: Sequence[Any]) -> None:
        for flat, spec in zip(flats, self.plan.outputs):
            flat.fill(poison_value(spec.dtype))

    def _export(self, cupy: Any, outs: list[Any], framework: str) -> list[Any]:
        if framework == "torch":
            return [to_torch(cupy, o, spec.dtype) for o, spec in zip(outs, self.plan.outputs)]
        return outs

    def _resolve(self, cupy: Any, ref: TensorRef, ins: Sequence[Any], outs: Sequence[Any], ws: Any) -> Any:
        if ref.kind in ("input", "output"):
            base = (ins if ref.kind == "input" else outs)[ref.index]
            return base if ref.spec is None else strided_view(cupy, base, ref.spec)  # an aliased reshape's view
        spec = ref.spec
        if spec is None:
            return ws[ref.offset :]
        dt = storage_dtype(spec.dtype)
        n = alloc_elements(spec.shape, spec.strides)
        flat = ws[ref.offset : ref.offset + n * dt.itemsize].view(dt)
        return strided_view(cupy, flat, spec)

    def _run_steps(
        self, cupy: Any, ins: Sequence[Any], outs: Sequence[Any], ws: Any, steps: Sequence[Any] | None = None
    ) -> None:
        plan = self.plan
        ptrs: dict[str, list[int]] | None = None
        for step in plan.steps if steps is None else steps:
            if isinstance(step, KernelLaunch):
                if ptrs is None:
                    ptrs = {
                        "input": [x.data.ptr for x in ins],
                        "output": [x.data.ptr for x in outs],
                        "workspace": [ws.data.ptr],
                        "counters": [self._counters.data.ptr],
                    }
                # kernels take raw device pointers (CuPy passes a Python int as 8 bytes)
                kargs = tuple(ptrs[r.kind][r.index if r.kind in ("input", "output") else 0] + r.offset for r in step.args)
                if step.tensor_maps:
                    launch_with_tensor_maps(self._kernels[step.kernel], step, ptrs, kargs, self._smem[id(step)], cupy)
                elif step.pdl and self.programmatic_launch:
                    self._programmatic(step)(kargs, cupy.cuda.get_current_stream().ptr)
                else:
                    self._kernels[step.kernel](step.grid, step.block, kargs, shared_mem=self._smem[id(step)])
            else:
                args = [self._resolve(cupy, r, ins, outs, ws) for r in step.args]
                results = [self._resolve(cupy, r, ins, outs, ws) for r in step.results]
                run_library_call(
                    step,
                    args,
                    results,
                    cupy,
                    [ref_spec(plan, r).dtype for r in step.args],  # type: ignore[union-attr]
                    [ref_spec(plan, r).dtype for r in step.results],  # type: ignore[union-attr]
                )

    def _programmatic(self, step: KernelLaunch) -> ProgrammaticLaunch:
        """The PDL launcher of `step`, built on first use (steps live as long as the plan)."""
        launcher = self._launchers.get(id(step))
        if launcher is None:
            kernel = self._kernels[step.kernel]
            launcher = ProgrammaticLaunch(kernel, step.grid, step.block, self._smem[id(step)], len(step.args))
            self._launchers[id(step)] = launcher
        return launcher

    def _call_graph(self, cupy: Any, cstream: Any, ins: Sequence[Any], framework: str) -> list[Any]:
        key = tuple(int(x.data.ptr) for x in ins) + (framework,)
        entry = self._graphs.get(key)
        if entry is not None:
            self._graphs.move_to_end(key)
            self._replay(cupy, cstream, entry, ins)
            return entry.outputs
        # first call with these pointers: run eagerly (warms cuBLAS and CuPy's kernels), then
        # capture each capturable segment of the plan on a side stream
        outs_cp, flats = self._alloc_outputs(cupy)
        ws = self._alloc_workspace(cupy)
        if self.poison_outputs:
            self._poison(flats)
        self._run_steps(cupy, ins, outs_cp, ws)
        if self._capture_stream is None:
            self._capture_stream = cupy.cuda.Stream(non_blocking=True)
        side = self._capture_stream
        # temporaries of captured library calls come from a private pool that lives as long
        # as the graphs, so no other allocation can reuse memory the replays write to
        pool = cupy.cuda.MemoryPool()
        segments: list[tuple[str, list[Any], Any]] = []
        with cupy.cuda.using_allocator(pool.malloc), side:
            for index, (kind, steps) in enumerate(graph_segments(self.plan.steps)):
                if kind == "eager":
                    segments.append((kind, steps, None))
                    continue
                side.begin_capture()
                try:
                    if index == 0 and self.poison_outputs:
                        self._poison(flats)
                    self._run_steps(cupy, ins, outs_cp, ws, steps)
                finally:
                    graph = side.end_capture()
                segments.append((kind, steps, graph))
        outputs = self._export(cupy, outs_cp, framework)
        self._graphs[key] = _GraphEntry(segments, outputs, outs_cp, flats, ws, pool)
        while len(self._graphs) > MAX_GRAPH_ENTRIES:
            self._graphs.popitem(last=False)
        return outputs

    def capture_sweep(self, input_sets: Sequence[Sequence[Any]]) -> Any:
        """One CUDA graph that runs the plan once on every input set (CuPy arrays laid out as
        compiled; outputs and workspaces private to the graph).  Returns `launch(stream=None)`
        replaying it: the device time of the plan without per-call host work, for timing.
        `launch.outputs[i]` are the output arrays of set i, which every replay rewrites (the
        launches run back to back, so tests check overlapping kernels with them).

        Raises:
            LaunchError: the graph cannot be loaded (see `load`), or a step cannot be
                captured (a library matmul: CuPy cannot record cuBLAS into a graph).
            InputError: an input set does not match the plan (see `check`).
        """
        self.load()
        cupy = import_cupy()
        if any(kind == "eager" for kind, _ in graph_segments(self.plan.steps)):
            raise LaunchError(f"{self.func_name}: the plan has library matmuls, which CuPy cannot capture")
        bound = []
        for xs in input_sets:
            self.check(*xs)
            ins = [self._cupy_input(cupy, x, spec) for x, spec in zip(xs, self.plan.inputs)]
            outs, flats = self._alloc_outputs(cupy)
            ws = self._alloc_workspace(cupy)
            self._run_steps(cupy, ins, outs, ws)  # warm-up, outside the capture
            bound.append((ins, outs, ws))
        side = cupy.cuda.Stream(non_blocking=True)
        cupy.cuda.get_current_stream().synchronize()
        pool = cupy.cuda.MemoryPool()
        with cupy.cuda.using_allocator(pool.malloc), side:
            side.begin_capture()
            try:
                for ins, outs, ws in bound:
                    self._run_steps(cupy, ins, outs, ws)
            finally:
                graph = side.end_capture()

        def launch(stream: Any = None) -> None:
            keep = (bound, pool, side)  # noqa: F841 - the buffers live as long as the graph
            graph.launch(stream=stream)

        launch.outputs = [outs for _, outs, _ in bound]  # type: ignore[attr-defined]
        return launch

    def _replay(self, cupy: Any, cstream: Any, entry: _GraphEntry, ins: Sequence[Any]) -> None:
        for index, (_, steps, graph) in enumerate(entry.segments):
            if graph is not None:
                graph.launch(stream=cstream)
                continue
            if index == 0 and self.poison_outputs:
                self._poison(entry.flats)
            self._run_steps(cupy, ins, entry.outputs_cp, entry.workspace, steps)
