"""Evaluators of genomes: `GpuEvaluator` (the real one) and `SyntheticEvaluator` (tests, CI).

`GpuEvaluator` in two phases (the `Evaluator` protocol of genetic.py):

1. build, on the CPU, in a `ProcessPoolExecutor` of `jobs` workers: clone the kn function,
   run `mirage-transpile` with the genome's options, print CUDA (`emit_cuda`), compile it with
   nvcc (the cubin cache of driver/nvcc.py); the build's program digest is sha256 of the CUDA
   source and the launch plan, so options that print the same kernel are timed once.  The
   workers ignore SIGINT and run in their own process group (a Ctrl-C in the terminal reaches
   neither them nor their nvcc): what runs finishes, the search decides what starts.
2. measure, on the GPU, in this process, one build at a time: load the cubin, run once on
   seeded random inputs with NaN-poisoned outputs, compare with the float64 reference executor
   (max|out - ref| / max|ref| above `atol_rel` rejects the genome), then time it with CUDA
   events: the median of `runs` replays of one CUDA graph that runs the program on rotated
   input sets (runtime/measure.py `device_us`, the loop mirage-bench uses), in µs.

Phase 2 runs in a separate GPU process (`isolate=True`, the default): a candidate that
breaks the CUDA context (an illegal address), kills its process or runs past
`MEASURE_TIMEOUT_S` is one failed genome (`crashed the GPU process: ...`); the process is
replaced and the search goes on.  With `isolate=False` (measuring in this process) such a
failure stops the search with `DeviceBroken` (the cache keeps what was measured).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mirage_xdsl.driver.isolated import IsolatedWorker, WorkerLost
from mirage_xdsl.driver.tune.genetic import Build, Evaluation, synthetic_time_us
from mirage_xdsl.driver.tune.space import Genome

DEFAULT_RUNS = 20
"""Timed replays per genome (the median is its time)."""

MEASURE_TIMEOUT_S = 120.0
"""Seconds one isolated measurement (load, check, timing) may take before its GPU process
is killed and the genome counts as crashed."""


class NoGpuError(RuntimeError):
    """No CUDA device (or no CuPy) where one is needed."""


class DeviceBroken(RuntimeError):
    """The CUDA context failed after a candidate ran; nothing more can be measured here."""


def one_line(err: BaseException) -> str:
    """`Type: first line` of an exception, at most 300 characters."""
    lines = [ln.strip() for ln in str(err).strip().splitlines() if ln.strip()]
    return f"{type(err).__name__}: {lines[0] if lines else ''}"[:300]


def gpu_identity() -> dict[str, str]:
    """`device` (name) and `arch` (`sm_XY`) of the current GPU.

    Raises:
        NoGpuError: no CuPy or no CUDA device.
    """
    from mirage_xdsl.runtime.interop import gpu_available

    if not gpu_available():
        raise NoGpuError("no CUDA device found (CuPy missing, no driver or no GPU)")
    import cupy  # type: ignore[import-not-found]

    dev = cupy.cuda.Device()
    name = cupy.cuda.runtime.getDeviceProperties(dev.id)["name"]
    name = name.decode() if isinstance(name, bytes) else str(name)
    return {"device": name, "arch": f"sm_{dev.compute_capability}"}


def toolchain_identity() -> str:
    """nvcc's release line and the CuTe headers in use (their path names the wheel version).

    Raises:
        NvccNotFoundError: an nvcc was found but cannot be run (`nvcc_version`).
    """
    from mirage_xdsl.driver.nvcc import cutlass_include_dir, find_nvcc, nvcc_version

    nvcc = find_nvcc()
    return f"{nvcc_version(nvcc) if nvcc else 'no nvcc'} | cutlass {cutlass_include_dir()}"


# ---------------------------------------------------------------------------------------
# Worker side (every xDSL import happens in the workers, or in this process's reference)

_PARSED: dict[str, Any] = {}


def _worker_init() -> None:
    """Pool worker setup: ignore SIGINT and leave the terminal's process group, so a Ctrl-C
    lets the running build (and its nvcc) finish; the main process decides what stops."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        os.setpgrp()
    except OSError:
        pass


def _parse(text: str) -> Any:
    key = hashlib.sha256(text.encode()).hexdigest()
    if key not in _PARSED:
        from xdsl.parser import Parser

        from mirage_xdsl.driver.compile import make_context

        _PARSED[key] = Parser(make_context(), text).parse_module()
    return _PARSED[key]


def build_program(module_text: str, func_name: str, options: dict[str, Any], arch: str, nvcc_cache: str | None) -> dict[str, Any]:
    """Pipeline + CUDA printer + nvcc of one genome's options (in a worker): a dict with
    `program` (digest), `plan_json`, `cubin` (path or None) or `error` and `transient`."""
    from mirage_xdsl.driver.compile import prepare
    from mirage_xdsl.driver.nvcc import NvccNotFoundError, compile_cuda

    try:
        prepared = prepare(_parse(module_text), func_name, arch, options=options)
        plan_json = prepared.plan.to_json()
        digest = hashlib.sha256((prepared.program.source + "\x1e" + plan_json).encode()).hexdigest()
        has_kernels = any(s.step == "kernel" for s in prepared.plan.steps)
        cubin = compile_cuda(prepared.program.source, prepared.arch, cache_dir=nvcc_cache) if has_kernels else None
        return {"program": digest, "plan_json": plan_json, "cubin": str(cubin) if cubin else None}
    except Exception as err:  # noqa: BLE001 - a failed genome, reported by the search
        transient = isinstance(err, (NvccNotFoundError, OSError, MemoryError)) or "timed out" in str(err)
        return {"error": one_line(err), "transient": transient}


# ---------------------------------------------------------------------------------------
# The GPU evaluator


@dataclass
class _Measured:
    plan_key: str
    inputs: list[Any]
    refs: list[Any]
    sets: list[list[Any]]


class GpuEvaluator:
    """Build in a process pool, check and time on this process's GPU (module docstring).

    Args:
        module: a module holding the kn function to tune (printed once for the workers).
        func_name: that function's name.
        arch: the nvcc architecture of the builds (`sm_90`).
        jobs: worker processes of the build pool (at least 1).
        runs: timed CUDA-graph replays per genome (the median is its time).
        seed: seed of the check inputs (`random_inputs`).
        atol_rel: the largest relative error max|out - ref| / max|ref| that passes.
        nvcc_cache: the cubin cache folder of the builds (None: nvcc.py's default).
    """

    def __init__(
        self,
        module: Any,
        func_name: str,
        arch: str,
        *,
        jobs: int = 8,
        runs: int = DEFAULT_RUNS,
        seed: int = 0,
        atol_rel: float = 1e-2,
        nvcc_cache: str | None = None,
        isolate: bool = True,
    ):
        self.isolate = isolate
        self._gpu: IsolatedWorker | None = None
        self.module = module
        self.func_name = func_name
        self.module_text = str(module)
        self.arch = arch
        self.jobs = max(1, jobs)
        self.runs = runs
        self.seed = seed
        self.atol_rel = atol_rel
        self.nvcc_cache = nvcc_cache
        self._pool: ProcessPoolExecutor | None = None
        self._data: _Measured | None = None

    def identity(self) -> dict[str, str]:
        """Device, architecture and toolchain of the cache key.

        Raises:
            NoGpuError: no GPU.
            NvccNotFoundError: an nvcc was found but cannot be run.
        """
        return {**gpu_identity(), "toolchain": toolchain_identity()}

    def close(self) -> None:
        """Shut the pools down (running builds finish, queued ones are dropped; the GPU
        process ends)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        self._end_gpu_process()

    def build(self, genomes: Sequence[Genome], stop: Callable[[], bool]) -> Iterator[Build]:
        """Build `genomes` in the pool; yield each `Build` as it finishes.  Once `stop()` is
        true, queued builds are cancelled and only the running ones are waited for."""
        if self._pool is None:
            import multiprocessing

            # spawn: the workers must not inherit this process's CUDA context (fork would)
            ctx = multiprocessing.get_context("spawn")
            self._pool = ProcessPoolExecutor(self.jobs, mp_context=ctx, initializer=_worker_init)
        pending: dict[Future[dict[str, Any]], Genome] = {
            self._pool.submit(build_program, self.module_text, self.func_name, g.options(), self.arch, self.nvcc_cache): g
            for g in genomes
        }
        while pending:
            if stop():
                for fut in pending:
                    fut.cancel()  # only queued ones cancel; running ones finish
                pending = {f: g for f, g in pending.items() if not f.cancelled()}
            done, _ = wait(pending, timeout=0.25, return_when=FIRST_COMPLETED)
            for fut in done:
                genome = pending.pop(fut)
                yield _as_build(genome, fut)

    def measure(self, build: Build) -> Evaluation:
        """Check `build` against the reference, then time it (µs) -- in the GPU process when
        `isolate`, where a crash or hang is this genome's failure.

        Raises:
            DeviceBroken: not isolated, and the CUDA context failed (no later candidate could run).
        """
        if not self.isolate:
            return self.measure_here(build)
        import multiprocessing

        if self._gpu is None:
            self._gpu = IsolatedWorker(multiprocessing.get_context("spawn"), initializer=_worker_init)
        config = (self.module_text, self.func_name, self.arch, self.runs, self.seed, self.atol_rel)
        try:
            result: Evaluation = self._gpu.call(_measure_isolated, config, build, timeout=MEASURE_TIMEOUT_S)
        except WorkerLost as err:
            return Evaluation(build.genome, None, f"{CRASHED}: {err}")
        if result.error and result.error.startswith(CRASHED):
            self._end_gpu_process()  # its CUDA context is broken: the next genome gets a fresh one
        return result

    def _end_gpu_process(self) -> None:
        if self._gpu is not None:
            self._gpu.close()

    def measure_here(self, build: Build) -> Evaluation:
        """`measure` in this process.

        Raises:
            DeviceBroken: the CUDA context failed (no later candidate could run).
        """
        import cupy  # type: ignore[import-not-found]

        from mirage_xdsl.codegen.launch_plan import LaunchPlan
        from mirage_xdsl.runtime.executable import CompiledGraph
        from mirage_xdsl.runtime.measure import device_us, relative_error
        from mirage_xdsl.runtime.random_inputs import numpy_values

        payload = build.payload or {}
        try:
            plan = LaunchPlan.from_json(payload["plan_json"])
            data = self._inputs(plan)
            graph = CompiledGraph(plan, payload.get("cubin"), poison_outputs=True).load()
            outs = graph(*data.inputs)
            cupy.cuda.get_current_stream().synchronize()
            host = [numpy_values(cupy.asnumpy(o), s.dtype) for o, s in zip(outs, plan.outputs)]
            err = relative_error(host, data.refs)
            if not err <= self.atol_rel:
                return Evaluation(build.genome, None, f"wrong result: relative error {err:.3g} > {self.atol_rel:g}")
            stream = cupy.cuda.get_current_stream()
            timed = CompiledGraph(plan, payload.get("cubin")).load()
            t = device_us(timed, data.sets, stream, reps=self.runs)
            if t is None:  # a plan with library matmuls: CuPy cannot capture it
                return Evaluation(build.genome, None, "not timed: the plan cannot be captured in a CUDA graph")
            return Evaluation(build.genome, t)
        except Exception as err:  # noqa: BLE001 - a failed genome, unless the device broke
            if not _context_alive(cupy):
                raise DeviceBroken(f"{build.genome.label}: {one_line(err)}") from err
            return Evaluation(build.genome, None, one_line(err))

    def _inputs(self, plan: Any) -> _Measured:
        """The check inputs, their reference and the timing sets (made once: every genome of
        a graph has the same inputs)."""
        import cupy  # type: ignore[import-not-found]

        from mirage_xdsl.reference.executor import run_reference
        from mirage_xdsl.runtime.measure import device_sets, plan_bytes, rotation_sets, to_device
        from mirage_xdsl.runtime.random_inputs import numpy_values, random_inputs

        key = json.dumps([[s.shape, s.strides, s.dtype] for s in plan.inputs])
        if self._data is None or self._data.plan_key != key:
            host = random_inputs(plan.inputs, self.seed)
            values = [numpy_values(x, s.dtype) for x, s in zip(host, plan.inputs)]
            refs = run_reference(self.module, values, func_name=self.func_name)
            sets = device_sets(cupy, plan.inputs, rotation_sets(plan_bytes(plan.inputs)))
            self._data = _Measured(key, [to_device(cupy, x) for x in host], refs, sets)
        return self._data


CRASHED = "crashed the GPU process"

_GPU_EVALUATOR: dict[tuple[Any, ...], GpuEvaluator] = {}


def _measure_isolated(config: tuple[str, str, str, int, int, float], build: Build) -> Evaluation:
    """In the GPU process: `measure_here` with an evaluator of `config` (made once: its
    inputs and reference are reused by every genome)."""
    ev = _GPU_EVALUATOR.get(config)
    if ev is None:
        _GPU_EVALUATOR.clear()
        module_text, func_name, arch, runs, seed, atol_rel = config
        ev = GpuEvaluator(_parse(module_text), func_name, arch, runs=runs, seed=seed, atol_rel=atol_rel, isolate=False)
        _GPU_EVALUATOR[config] = ev
    try:
        return ev.measure_here(build)
    except DeviceBroken as err:
        return Evaluation(build.genome, None, f"{CRASHED}: {err}")


def _as_build(genome: Genome, fut: Future[dict[str, Any]]) -> Build:
    try:
        got = fut.result()
    except Exception as err:  # noqa: BLE001 - a worker that died (BrokenProcessPool): retry later
        return Build(genome, error=one_line(err), transient=True)
    if "error" in got:
        return Build(genome, error=got["error"], transient=bool(got.get("transient")))
    return Build(genome, program=got["program"], payload=got)


def _context_alive(cupy: Any) -> bool:
    try:
        cupy.cuda.runtime.deviceSynchronize()
        return True
    except Exception:  # noqa: BLE001 - a sticky CUDA error
        return False


# ---------------------------------------------------------------------------------------
# The synthetic evaluator


class SyntheticEvaluator:
    """A CPU stand-in for tests and `mirage-tune --fake-evaluator`: the time of a genome is
    `synthetic_time_us(genome)`; measuring sleeps `sleep_s`; genomes for which `fails(genome)`
    is true fail to build.  The program digest ignores `lone_block_max_stages` and
    `online_softmax` (as for graphs without wide lone blocks or maxima), so such genomes share
    one measurement.  Every measured label is
    appended to `log` (one per line) when given, so tests can see what was timed."""

    def __init__(self, sleep_s: float = 0.0, fails: Callable[[Genome], bool] | None = None, log: str | os.PathLike[str] | None = None):
        self.sleep_s = sleep_s
        self.fails = fails or (lambda g: False)
        self.log = Path(log) if log else None
        self.measured: list[Genome] = []

    def identity(self) -> dict[str, str]:
        """A fixed device (`synthetic`, `sm_00`, no toolchain) for the cache key."""
        return {"device": "synthetic", "arch": "sm_00", "toolchain": "none"}

    def close(self) -> None:
        """Nothing to release."""

    def build(self, genomes: Sequence[Genome], stop: Callable[[], bool]) -> Iterator[Build]:
        """Yield a `Build` per genome in order (a failed one where `fails`), until `stop()`;
        the program digest is that of the options other than `lone_block_max_stages`."""
        for g in genomes:
            if stop():
                return
            if self.fails(g):
                yield Build(g, error="SyntheticError: this genome fails to build")
                continue
            # genes that change nothing in a graph without wide lone blocks or a max read in its loop
            shape = {k: v for k, v in g.options().items() if k not in ("lone_block_max_stages", "online_softmax")}
            yield Build(g, program=hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest())

    def measure(self, build: Build) -> Evaluation:
        """Sleep `sleep_s`, record the genome (and log its label), return its synthetic time.

        Raises:
            OSError: the log file cannot be appended to.
        """
        time.sleep(self.sleep_s)
        self.measured.append(build.genome)
        if self.log is not None:
            with self.log.open("a") as f:
                f.write(build.genome.label + "\n")
        return Evaluation(build.genome, synthetic_time_us(build.genome))
