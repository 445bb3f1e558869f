"""The compile driver: a kernel graph through the stages to a loaded `CompiledGraph`.

    module --mirage-transpile--> cute IR --emit_cuda--> CUDA + LaunchPlan --nvcc--> cubin
           --CompiledGraph(plan, cubin).load()--> callable

`prepare` runs the first two stages (no GPU, no nvcc); `compile` all of them, with an
optional autotuning sweep over the planner's cheapest plan ranks. The stages live in their
layers (passes/, codegen/, driver/nvcc.py, runtime/); this module only strings them together.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mirage_xdsl.codegen.launch_plan import KernelLaunch, LaunchPlan
from mirage_xdsl.driver.load import functions, select_function
from mirage_xdsl.driver.tune.genetic import GAConfig
from mirage_xdsl.runtime.executable import CompiledGraph
from mirage_xdsl.runtime.interop import detect_arch, gpu_available, import_cupy
from mirage_xdsl.runtime.measure import device_us
from mirage_xdsl.runtime.random_inputs import random_inputs


@dataclass
class Prepared:
    """A kernel graph through the pipeline and the CUDA printer (no nvcc yet).

    Attributes:
        func_name: the name of the compiled `func.func` (the kernel graph).
        module: the transpiled module holding only this function.
        program: the `CudaProgram` of `emit_cuda` (CUDA source and launch plans).
        plan: the `LaunchPlan` of this function.
        arch: the target architecture, normalized (`sm_90`, `sm_90a`, ...).
        input_names: the SSA name hints of the function's arguments, in order (None where
            the argument has none); used in input-error messages.
    """

    func_name: str
    module: Any
    """the transpiled module holding only this function"""
    program: Any
    """the `CudaProgram` of `emit_cuda`"""
    plan: LaunchPlan
    arch: str
    input_names: list[str | None]


def _pipeline_has_run(module: Any) -> bool:
    for op in module.walk():
        if op.name == "kn.customized":
            return False
    return all("kn.workspace_size" in f.attributes for f in functions(module))


def make_context() -> Any:
    """An xDSL context with builtin/func/arith and our dialects registered."""
    from xdsl.context import Context
    from xdsl.dialects.arith import Arith
    from xdsl.dialects.builtin import Builtin
    from xdsl.dialects.func import Func

    from mirage_xdsl.driver.registry import get_all_dialects

    ctx = Context()
    for dialect in (Builtin, Func, Arith):
        ctx.load_dialect(dialect)
    for name, factory in get_all_dialects().items():
        ctx.register_dialect(name, factory)
    return ctx


def prepare(
    module: Any,
    func_name: str | None = None,
    arch: str | None = None,
    candidate: int = 0,
    *,
    options: Mapping[str, Any] | None = None,
    megakernel: bool | Mapping[str, Any] = False,
) -> Prepared:
    """Run the pipeline and the CUDA printer on one kernel graph of `module` (no GPU, no nvcc).

    Clones the chosen function into its own module, runs `mirage-transpile` on it if it has
    not run (a module without `kn.customized` ops whose functions carry `kn.workspace_size`
    has been transpiled already) and prints CUDA with `emit_cuda`.

    Args:
        module: a `builtin.module` of kernel graphs, or one `func.func`; not modified.
        func_name: the function to compile; None when the module has exactly one.
        arch: the nvcc architecture (`sm_90`, `90`, ...); None: the current GPU's, else sm_90.
            Forwarded as `mirage-transpile{arch=...}` (unless `options` sets it): other than
            sm_90/sm_90a, matmuls stay library calls instead of the sm_90a wgmma GEMM.
        candidate: the kn-fuse plan of this cost rank (0 = cheapest) for plain kernel graphs.
        options: other `MirageTranspilePass` options and tuning-point fields (e.g. a tuned
            genome's `Genome.options()`; `MirageTranspilePass.from_options` splits them);
            they override `candidate`.
        megakernel: run `mirage-megakernel` instead (one persistent kernel, issue #32); a
            mapping gives its options (`trace`, `workers`, `watchdog_ms`, ...).

    Returns:
        The transpiled module, its `CudaProgram` and the function's launch plan.

    Raises:
        ValueError: `func_name` names no function (or is None and the module has several),
            `arch` is not a CUDA architecture name, or the printer produced no launch plan
            for the function.
        DiagnosticException: a pass of the pipeline or the CUDA printer rejects the graph
            (e.g. `SharedMemoryExceeded`, a `PassFailedException`; the message names the op).
    """
    from xdsl.dialects.builtin import ModuleOp

    from mirage_xdsl.driver.nvcc import normalize_arch

    func = select_function(module, func_name)
    name = func.sym_name.data
    input_names = [arg.name_hint for arg in func.body.block.args]
    single = ModuleOp([func.clone()])
    arch = normalize_arch(arch or detect_arch())
    if megakernel:
        from mirage_xdsl.passes.mpk.pipeline import MirageMegakernelPass

        MirageMegakernelPass(**(dict(megakernel) if not isinstance(megakernel, bool) else {})).apply(make_context(), single)
    elif not _pipeline_has_run(single):
        from mirage_xdsl.passes.pipeline import MirageTranspilePass

        pass_options: dict[str, Any] = {"candidate": candidate, "arch": arch, **(options or {})}
        MirageTranspilePass.from_options(pass_options).apply(make_context(), single)
    from mirage_xdsl.codegen.cuda_target import emit_cuda

    program = emit_cuda(single, arch)
    if name not in program.plans:
        raise ValueError(f"emit_cuda produced no launch plan for '{name}' (plans: {sorted(program.plans)})")
    return Prepared(name, single, program, program.plans[name], program.arch, input_names)


def compile(  # noqa: A001 - the public name Mirage uses
    module: Any,
    func_name: str | None = None,
    arch: str | None = None,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    cuda_graph: bool = False,
    poison_outputs: bool = False,
    autotune: int = 0,
    tune: int | GAConfig = 0,
    tune_cache: str | os.PathLike[str] | None = None,
    megakernel: bool | Mapping[str, Any] = False,
) -> CompiledGraph:
    """Compile one kernel graph of `module` for `arch` (None: the current GPU, else sm_90).

    Clones the module (the argument is not modified), runs the default pipeline
    (`mirage-transpile`) if it has not run, prints CUDA with `emit_cuda`, compiles it with
    nvcc to a cubin (disk cache, see `runtime.compiler`) and, when a GPU is present, loads it
    and checks the plan against the device.  Without a GPU the graph is returned unloaded
    (calling it raises `LaunchError`).

    `autotune=k` (plain kernel graphs, a GPU present): compile the default threadblock graphs
    of the k cheapest plan ranks (kn-fuse `candidate` 0..k-1), time each on the GPU (device
    time of CUDA-graph replays over random inputs, `AUTOTUNE_SETS` sets, µs) and keep the
    fastest -- Mirage's superoptimizer profiles its candidates the same way.  On the H200 the
    fastest rank beat rank 0 by up to 1.9x (mqa, 29.6 -> 15.6 µs, 2026-11-22).  Ignored without a GPU
    or for graphs that already hold threadblock graphs.  The sweep runs in this process, one
    candidate after the other: Ctrl-C stops it where it is (a running nvcc is killed by
    `subprocess.run`, a CUDA-graph capture is ended) and leaves only complete cache entries.

    `tune=G` (a GPU present): the genetic tuner (driver/tune/): the best genome (pass
    options) cached for this graph, device, toolchain and compiler in the tuning cache
    (`tune_cache`, default `$MIRAGE_XDSL_CACHE_DIR/tune.json`) is used without tuning again;
    without one, G generations of the search run first (Tensor Comprehensions' defaults:
    population 100; pass a `GAConfig` instead of G for other settings) and their result is
    cached.  Without a GPU, or when no genome passed, the default pipeline is used.

    `megakernel=True` (or a mapping of `mirage-megakernel` options such as `{"trace": True}`):
    compile the graph as ONE persistent kernel whose worker CTAs run the per-op kernels'
    threadblocks as tasks ordered by events (codegen/megakernel.py); `autotune` and `tune`
    are ignored.  `runtime.megakernel.check_megakernel(graph)` reports a watchdog stop.

    Raises:
        ValueError: `func_name` names no function, or is needed and missing; or `arch` is
            not a CUDA architecture name (see `prepare`).
        DiagnosticException: the pipeline or the CUDA printer rejects the graph (e.g.
            `SharedMemoryExceeded`; see `prepare`).
        NvccNotFoundError, CudaCompileError: nvcc is missing or rejects the generated CUDA.
        LaunchError: the plan cannot run on the present GPU.
        DeviceBroken: with `tune`, a candidate broke the CUDA context (driver/tune/evaluate.py).
        KeyboardInterrupt: Ctrl-C, passed on unchanged (no partial entry is left behind).
    """
    if megakernel:
        return _compiled(prepare(module, func_name, arch, megakernel=megakernel), cache_dir, cuda_graph, poison_outputs)
    if tune:  # the evaluator decides whether a GPU is there
        from mirage_xdsl.driver.tune.tuner import cached_or_tuned

        genome = cached_or_tuned(module, func_name, arch, tune, tune_cache)
        if genome is not None:
            prepared = prepare(module, func_name, arch, options=genome.options())
            return _compiled(prepared, cache_dir, cuda_graph, poison_outputs)
    if autotune > 1 and gpu_available():
        return _autotuned(module, func_name, arch, autotune, cache_dir, cuda_graph, poison_outputs)
    return _compiled(prepare(module, func_name, arch), cache_dir, cuda_graph, poison_outputs)


def _compiled(
    prepared: Prepared, cache_dir: str | os.PathLike[str] | None, cuda_graph: bool, poison_outputs: bool
) -> CompiledGraph:
    from mirage_xdsl.driver.nvcc import compile_cuda

    cubin = None
    if any(isinstance(s, KernelLaunch) for s in prepared.plan.steps):
        cubin = compile_cuda(prepared.program.source, prepared.arch, cache_dir=cache_dir)
    graph = CompiledGraph(
        prepared.plan,
        cubin,
        source=prepared.program.source,
        input_names=prepared.input_names,
        cuda_graph=cuda_graph,
        poison_outputs=poison_outputs,
    )
    if gpu_available():
        graph.load()
    return graph


AUTOTUNE_SETS = 4
"""Input sets an autotuning sweep rotates through (each candidate runs once per set)."""
AUTOTUNE_REPS = 10
"""Timed replays per autotuning candidate (the median is kept)."""


def pick_fastest(candidates: Sequence[Any], time_us: Any) -> tuple[int, list[float | None]]:
    """Index of the fastest candidate by `time_us(candidate)`, and every measured time.

    Ties and failures keep the earlier (cheaper-estimated) candidate, and index 0 is
    returned when nothing was timed.  An exception of `time_us` is not caught.

    Args:
        candidates: the candidates, cheapest plan estimate first.
        time_us: the device time of one run of a candidate in µs, or None when it could not
            be timed (e.g. a plan CuPy cannot capture in a CUDA graph).

    Returns:
        (index of the fastest candidate, the time of each candidate in µs or None).
    """
    times = [time_us(c) for c in candidates]
    best = 0
    for i, t in enumerate(times):
        if t is not None and (times[best] is None or t < times[best]):
            best = i
    return best, times


def _autotuned(
    module: Any,
    func_name: str | None,
    arch: str | None,
    ranks: int,
    cache_dir: str | os.PathLike[str] | None,
    cuda_graph: bool,
    poison_outputs: bool,
) -> CompiledGraph:
    """`compile(..., autotune=ranks)`: the fastest of the first `ranks` plan ranks."""
    first = prepare(module, func_name, arch)
    if not _is_plain(module, first.func_name):
        return _compiled(first, cache_dir, cuda_graph, poison_outputs)  # its own threadblock graphs
    variants = [first]
    seen = {first.program.source}
    for rank in range(1, ranks):
        prepared = prepare(module, func_name, arch, candidate=rank)
        if prepared.program.source not in seen:
            seen.add(prepared.program.source)
            variants.append(prepared)
    graphs = [_compiled(p, cache_dir, cuda_graph, poison_outputs) for p in variants]
    cupy = import_cupy()
    sets = [[cupy.asarray(x) for x in random_inputs(first.plan.inputs, seed)] for seed in range(AUTOTUNE_SETS)]
    stream = cupy.cuda.get_current_stream()

    def time_us(graph: CompiledGraph) -> float | None:
        return device_us(graph, sets, stream, reps=AUTOTUNE_REPS)  # the loop mirage-bench times with

    best, _ = pick_fastest(graphs, time_us)
    return graphs[best]


def _is_plain(module: Any, func_name: str) -> bool:
    """Whether function `func_name` of `module` is a plain kernel graph (no kn.customized op,
    not lowered yet), the kind kn-fuse plans and autotuning can choose plans for."""
    from xdsl.dialects.builtin import ModuleOp

    funcs = functions(module) if isinstance(module, ModuleOp) else [module]
    func = next(f for f in funcs if f.sym_name.data == func_name)
    return not any(op.name in ("kn.customized", "cute.kernel") for op in func.walk())
