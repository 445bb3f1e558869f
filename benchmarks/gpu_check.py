"""Compile, run, check and time every candidate of every shared muGraph file on one GPU.

    python benchmarks/gpu_check.py results.md                      # everything, one process
    python benchmarks/gpu_check.py results.md --files lora.json gqa_bs1.json --jobs 16

For each candidate graph: the pipeline + `emit_cuda` + nvcc (cubin cache) and the float64
reference executor run in a pool of worker processes (CPU work); then, in this process, the
graph runs on the GPU on the file's fresh seeded random inputs with NaN-poisoned outputs and
is compared with the reference (max|out - ref| / max|ref|), and timed with CUDA events
(warm-up, median of many sweeps over rotated input sets; eager launches and CUDA-graph
replay).  The torch program of the workload (known from the file name) is timed once per file
in the same run.  A short table is printed and written as markdown to the given path.

Split mode, for a device machine without xDSL/z3/OR-tools (it needs only numpy + CuPy):

    python benchmarks/gpu_check.py --prepare-only prep/      # CPU machine: plans, cubins, refs
    python benchmarks/gpu_check.py results.md --from prep/   # device: run + check + time

`prep/` holds `manifest.json`, per candidate `<file>/<graph>.plan.json` + `.cubin`, and per
file the reference outputs (`<file>/ref_<k>.npz`; candidates whose references agree share one).
The GPU phase runs in one child process per file: a generated kernel that faults (illegal
address) breaks the process's CUDA context, so the child reports that candidate and a new
child goes on with the next one (`--in-process` runs everything in this process instead).
Statuses: ok, FAIL (error above --atol-rel), error, crash (the child died), rejected (the
compiler refused the candidate: more shared memory than the GPU has, as Mirage does too).
Exit status: 0 when every candidate passed or was rejected, 1 otherwise.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import shutil
import sys
import tempfile
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def _bootstrap() -> None:
    """Make `import mirage_xdsl` work from a bare checkout (the repo root IS the package)."""
    try:
        import mirage_xdsl  # noqa: F401

        return
    except ImportError:
        pass
    link_dir = Path(tempfile.mkdtemp(prefix="mirage_xdsl_path_"))
    (link_dir / "mirage_xdsl").symlink_to(REPO, target_is_directory=True)
    sys.path.insert(0, str(link_dir))


_bootstrap()

from mirage_xdsl.codegen.launch_plan import LaunchPlan  # noqa: E402
from mirage_xdsl.runtime.executable import (  # noqa: E402
    alloc_elements,
    numpy_values,
    random_inputs,
)
from mirage_xdsl.runtime.library_ops import storage_dtype  # noqa: E402

DEFAULT_SHARED = Path(os.environ.get("MIRAGE_SHARED", REPO.parent / "shared")) / "mugraphs"


@dataclass
class Prepared:
    file: str
    graph: str
    plan_json: str | None = None
    cubin: str | None = None
    kernels: int = 0
    ref_key: int | None = None
    prep_s: float = 0.0
    error: str | None = None


@dataclass
class Result:
    file: str
    graph: str
    status: str = "-"
    error: float | None = None
    ours_us: float | None = None
    ours_graph_us: float | None = None
    ours_dev_us: float | None = None
    kernels: int = 0
    prep_s: float = 0.0
    message: str | None = None


# ---------------------------------------------------------------------------------------
# CPU phase (worker processes)

_MODULES: dict[str, Any] = {}


def parse_variant(text: str) -> dict[str, Any]:
    """`c<rank>s<stages>[x]` -> mirage-transpile options: the kn-fuse plan of that cost rank,
    that cp.async pipeline depth (0 = automatic), `x` = split-K plans enumerated too."""
    import re

    m = re.fullmatch(r"c(\d+)s(\d+)(x?)", text)
    if m is None:
        raise ValueError(f"variant '{text}': expected c<rank>s<stages>[x], e.g. c0s2 or c3s4x")
    return {"candidate": int(m[1]), "stages": int(m[2]), "always_split": bool(m[3])}


def _variant_module(module: Any, graph: str, variant: str) -> Any:
    """A one-function module of `graph` after mirage-transpile with the `variant`'s options."""
    from xdsl.dialects.builtin import ModuleOp

    from mirage_xdsl.passes.pipeline import MirageTranspilePass
    from mirage_xdsl.runtime.executable import make_context
    from mirage_xdsl.tools.mirage_run import functions

    func = next(f for f in functions(module) if f.sym_name.data == graph)
    single = ModuleOp([func.clone()])
    MirageTranspilePass(**parse_variant(variant)).apply(make_context(), single)
    return single


def _prepare_one(
    path: str, index: int, seed: int, arch: str, cache_dir: str | None, variant: str | None = None
) -> tuple[Prepared, list[np.ndarray] | None]:
    """Pipeline + emit_cuda + nvcc + reference for one candidate (runs in a worker); with a
    `variant` (plain kernel graphs), the pipeline runs with that variant's options."""
    from mirage_xdsl.frontends.mugraph import load_mugraph_file
    from mirage_xdsl.runtime.compiler import compile_cuda
    from mirage_xdsl.runtime.executable import prepare
    from mirage_xdsl.runtime.reference import run_reference

    from mirage_xdsl.tools.mirage_run import functions, load_module

    name = Path(path).name
    out = Prepared(name, f"graph_{index}")
    start = time.perf_counter()
    try:
        if path not in _MODULES:
            _MODULES[path] = load_mugraph_file(path) if path.endswith(".json") else load_module(Path(path))
        module = _MODULES[path]
        graph = out.graph = functions(module)[index].sym_name.data
        if variant is not None:
            out.graph = f"{graph}@{variant}"
            prepared = prepare(_variant_module(module, graph, variant), graph, arch)
        else:
            prepared = prepare(module, graph, arch)
        plan = prepared.plan
        out.plan_json = plan.to_json()
        kernels = list(dict.fromkeys(s.kernel for s in plan.steps if s.step == "kernel"))
        out.kernels = len(kernels)
        if kernels:
            out.cubin = str(compile_cuda(prepared.program.source, prepared.arch, cache_dir=cache_dir))
        inputs = random_inputs(plan.inputs, seed)
        refs = run_reference(module, [numpy_values(x, s.dtype) for x, s in zip(inputs, plan.inputs)], func_name=graph)
        out.prep_s = time.perf_counter() - start
        return out, [np.asarray(r, dtype=np.float64) for r in refs]
    except Exception as err:  # noqa: BLE001 - reported in the table
        out.error = _one_line(err)
        out.prep_s = time.perf_counter() - start
        if os.environ.get("MIRAGE_GPU_CHECK_TRACEBACK"):
            traceback.print_exc()
        return out, None


def _one_line(err: BaseException) -> str:
    lines = [ln.strip() for ln in str(err).strip().splitlines() if ln.strip()]
    text = lines[0] if lines else type(err).__name__
    if len(lines) > 1 and "nvcc failed" in text:
        text += " " + lines[1]
    return f"{type(err).__name__}: {text}"[:300]


def _same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x.shape != y.shape:
            return False
        denom = float(np.max(np.abs(y))) or 1.0
        if not float(np.max(np.abs(x - y))) / denom <= 1e-9:
            return False
    return True


def prepare_all(
    files: list[Path],
    jobs: int,
    arch: str,
    cache_dir: str | None,
    seeds: dict[str, int],
    variants: list[str] | None = None,
) -> tuple[list[Prepared], dict[str, list[list[np.ndarray]]]]:
    """Prepare every candidate of `files` in `jobs` worker processes; return the prepared
    candidates (file order) and, per file, the distinct reference output lists.  Plain
    kernel graphs (`.mlir`) give one candidate per function, or one per function and
    `variants` entry (see `parse_variant`)."""
    tasks: list[tuple[str, int, str | None]] = []
    for path in files:
        if path.suffix == ".json":
            tasks += [(str(path), i, None) for i in range(len(json.loads(path.read_text())))]
        else:
            from mirage_xdsl.tools.mirage_run import functions, load_module

            n = len(functions(load_module(path)))
            tasks += [(str(path), i, v) for i in range(n) for v in (variants or [None])]
    results: dict[tuple[str, int, str | None], tuple[Prepared, list[np.ndarray] | None]] = {}
    done = 0
    with ProcessPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {
            pool.submit(_prepare_one, path, i, seeds[Path(path).name], arch, cache_dir, v): (path, i, v)
            for path, i, v in tasks
        }
        for fut in as_completed(futures):
            results[futures[fut]] = fut.result()
            done += 1
            if done % 10 == 0 or done == len(tasks):
                print(f"prepared {done}/{len(tasks)}", flush=True)
    refs: dict[str, list[list[np.ndarray]]] = {}
    prepared = []
    for task in tasks:
        prep, ref = results[task]
        if ref is not None:
            distinct = refs.setdefault(prep.file, [])
            for k, known in enumerate(distinct):
                if _same(ref, known):
                    prep.ref_key = k
                    break
            else:
                prep.ref_key = len(distinct)
                distinct.append(ref)
        prepared.append(prep)
    return prepared, refs


def save_prepared(directory: Path, prepared: list[Prepared], refs: dict[str, list[list[np.ndarray]]], seeds: dict[str, int], arch: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    entries = []
    for prep in prepared:
        sub = directory / Path(prep.file).name.replace(".", "_")
        sub.mkdir(exist_ok=True)
        entry = asdict(prep)
        if prep.plan_json is not None:
            (sub / f"{prep.graph}.plan.json").write_text(prep.plan_json)
            entry["plan_json"] = f"{sub.name}/{prep.graph}.plan.json"
        if prep.cubin is not None:
            shutil.copyfile(prep.cubin, sub / f"{prep.graph}.cubin")
            entry["cubin"] = f"{sub.name}/{prep.graph}.cubin"
        entries.append(entry)
    for file, distinct in refs.items():
        sub = directory / Path(file).name.replace(".", "_")
        for k, outs in enumerate(distinct):
            np.savez(sub / f"ref_{k}.npz", *[o.astype(np.float32) for o in outs])
    manifest = {"arch": arch, "seeds": seeds, "candidates": entries}
    (directory / "manifest.json").write_text(json.dumps(manifest, indent=1))


def load_prepared(directory: Path) -> tuple[list[Prepared], dict[str, list[list[np.ndarray]]], dict[str, int], str]:
    manifest = json.loads((directory / "manifest.json").read_text())
    prepared, refs = [], {}
    for entry in manifest["candidates"]:
        prep = Prepared(**entry)
        if prep.plan_json is not None:
            prep.plan_json = (directory / prep.plan_json).read_text()
        if prep.cubin is not None:
            prep.cubin = str(directory / prep.cubin)
        prepared.append(prep)
        if prep.ref_key is not None:
            distinct = refs.setdefault(prep.file, [])
            sub = directory / Path(prep.file).name.replace(".", "_")
            while len(distinct) <= prep.ref_key:
                with np.load(sub / f"ref_{len(distinct)}.npz") as z:
                    distinct.append([z[f"arr_{j}"].astype(np.float64) for j in range(len(z.files))])
    return prepared, refs, manifest["seeds"], manifest["arch"]


def is_smem_rejection(message: str | None) -> bool:
    """The compiler refused a candidate whose tiles need more shared memory than the GPU has
    (Mirage rejects those too: "shared memory usage exceed limit"); not a failure."""
    text = (message or "").lower()
    return "shared memory" in text and ("more than" in text or "exceed" in text)


# ---------------------------------------------------------------------------------------
# GPU phase (this process)


def _device_sets(cupy: Any, plan: LaunchPlan, n: int) -> list[list[Any]]:
    """`n` input sets for timing, drawn on the GPU (values only need to be realistic)."""
    sets = []
    for _ in range(n):
        xs = []
        for spec in plan.inputs:
            dt = storage_dtype(spec.dtype)
            count = max(alloc_elements(spec.shape, spec.strides), 1)
            if spec.dtype == "bfloat16":
                flat = (cupy.random.uniform(-0.5, 0.5, count, dtype=cupy.float32).view(cupy.uint32) >> 16).astype(cupy.uint16)
            elif dt.kind == "f":
                flat = cupy.random.uniform(-0.5, 0.5, count).astype(dt)
            else:
                flat = cupy.random.randint(0, 8, count).astype(dt)
            xs.append(cupy.lib.stride_tricks.as_strided(flat, spec.shape, tuple(s * dt.itemsize for s in spec.strides)))
        sets.append(xs)
    return sets


def _context_broken(cupy: Any) -> bool:
    """True after a sticky CUDA error (illegal address, launch failure): the process's CUDA
    context cannot run anything more."""
    try:
        cupy.cuda.runtime.deviceSynchronize()
        cupy.empty(1).fill(0)
        cupy.cuda.runtime.deviceSynchronize()
        return False
    except Exception:  # noqa: BLE001
        return True


class StickyCudaError(Exception):
    """The CUDA context is broken; the candidates after this one need a fresh process."""


def run_all(
    prepared: list[Prepared],
    refs: dict[str, list[list[np.ndarray]]],
    seeds: dict[str, int],
    *,
    bench: bool,
    atol_rel: float,
    on_result: Any = None,
) -> tuple[list[Result], dict[str, tuple[float | None, float | None]]]:
    """Run, check and time `prepared` in this process.  `on_result(result)` is called after
    each candidate; after a sticky CUDA error the run stops with `StickyCudaError` (the failed
    candidate's result has been reported)."""
    import cupy  # type: ignore[import-not-found]

    from mirage_xdsl.runtime.executable import CompiledGraph
    from mirage_xdsl.tools.mirage_run import (
        _to_device,
        _workload,
        bench_us,
        device_us,
        relative_error,
        rotation_sets,
        torch_graph_runner,
    )

    results: list[Result] = []
    torch_times: dict[str, tuple[float | None, float | None]] = {}
    inputs_cache: dict[tuple[str, str], list[Any]] = {}
    sets_cache: dict[tuple[str, str], list[list[Any]]] = {}
    stream = cupy.cuda.get_current_stream()
    for prep in prepared:
        res = Result(prep.file, prep.graph, kernels=prep.kernels, prep_s=prep.prep_s)
        results.append(res)
        if prep.error is not None or prep.plan_json is None:
            res.status, res.message = ("rejected" if is_smem_rejection(prep.error) else "error"), prep.error
            if on_result is not None:
                on_result(res)
            continue
        try:
            plan = LaunchPlan.from_json(prep.plan_json)
            specs_key = (prep.file, json.dumps([asdict(s) for s in plan.inputs]))
            if specs_key not in inputs_cache:
                host = random_inputs(plan.inputs, seeds[prep.file])
                inputs_cache[specs_key] = [_to_device(cupy, x) for x in host]
            ins = inputs_cache[specs_key]
            g = CompiledGraph(plan, prep.cubin, poison_outputs=True).load()
            outs = g(*ins)
            stream.synchronize()
            res.status = "ran"
            if prep.ref_key is not None:
                host_outs = [numpy_values(cupy.asnumpy(o), s.dtype) for o, s in zip(outs, plan.outputs)]
                res.error = relative_error(host_outs, refs[prep.file][prep.ref_key])
                res.status = "ok" if res.error <= atol_rel else "FAIL"
            if bench:
                in_bytes = sum(alloc_elements(s.shape, s.strides) * storage_dtype(s.dtype).itemsize for s in plan.inputs)
                n_sets = rotation_sets(in_bytes)
                if specs_key not in sets_cache:
                    sets_cache[specs_key] = _device_sets(cupy, plan, n_sets)
                sets = sets_cache[specs_key]
                eager = CompiledGraph(plan, prep.cubin).load()
                res.ours_us = bench_us(lambda i: eager(*sets[i]), n_sets, stream)
                replay = CompiledGraph(plan, prep.cubin, cuda_graph=True).load()
                res.ours_graph_us = bench_us(lambda i: replay(*sets[i]), n_sets, stream)
                res.ours_dev_us = device_us(eager, sets, stream)
                if prep.file not in torch_times:
                    torch_times[prep.file] = _time_torch(
                        cupy, prep.file, plan.inputs, sets, n_sets, _workload, bench_us, torch_graph_runner
                    )
        except Exception as err:  # noqa: BLE001 - reported in the table
            res.status, res.message = "error", _one_line(err)
            if os.environ.get("MIRAGE_GPU_CHECK_TRACEBACK"):
                traceback.print_exc()
            if _context_broken(cupy):
                res.message = f"{res.message} (the CUDA context broke: later candidates run in a new process)"
                if on_result is not None:
                    on_result(res)
                raise StickyCudaError(res.message) from None
        if on_result is not None:
            on_result(res)
        print(
            f"{prep.file} {prep.graph}: {res.status} err={_f(res.error, '.2e')} ours={_f(res.ours_us, '.1f')}us "
            f"graph={_f(res.ours_graph_us, '.1f')}us dev={_f(res.ours_dev_us, '.1f')}us"
            + (f" ({res.message})" if res.message else ""),
            file=sys.stderr,
            flush=True,
        )
    return results, torch_times


def _time_torch(
    cupy: Any, file: str, specs: Any, sets: list[list[Any]], n_sets: int, workload: Any, bench_us: Any, graph_runner: Any
) -> tuple[float | None, float | None]:
    try:
        import torch  # type: ignore[import-not-found]
    except ImportError:
        return None, None
    from mirage_xdsl.runtime.executable import _to_torch, external_stream

    fn = workload(Path(file).stem)
    if fn is None:
        return None, None
    tsets = [[_to_torch(cupy, x, s.dtype) for x, s in zip(xs, specs)] for xs in sets]
    tstream = external_stream(cupy, torch.cuda.current_stream().cuda_stream)
    with torch.no_grad():
        eager = bench_us(lambda i: fn(*tsets[i]), n_sets, tstream)
        try:
            runner = graph_runner(lambda *xs: [fn(*xs)], tsets)
            graph = bench_us(runner, n_sets, tstream)
        except Exception:  # noqa: BLE001
            graph = None
    return eager, graph


CHILD_TAG = "@@gpu_check "


def _child_main(directory: Path, file: str, start: int, bench: bool, atol_rel: float) -> int:
    """GPU phase for candidates `start..` of `file` (a child process); one JSON line per
    result on stdout, then the torch timings.  Exit 3 after a sticky CUDA error."""
    prepared, refs, seeds, _ = load_prepared(directory)
    mine = [p for p in prepared if p.file == file][start:]

    def emit(res: Result) -> None:
        print(CHILD_TAG + json.dumps({"result": asdict(res)}), flush=True)

    try:
        _, torch_times = run_all(mine, refs, seeds, bench=bench, atol_rel=atol_rel, on_result=emit)
    except StickyCudaError:
        return 3
    for name, (eager, graph) in torch_times.items():
        print(CHILD_TAG + json.dumps({"torch": [name, eager, graph]}), flush=True)
    return 0


def run_isolated(
    directory: Path, prepared: list[Prepared], *, bench: bool, atol_rel: float, timeout_s: float = 600
) -> tuple[list[Result], dict[str, tuple[float | None, float | None]]]:
    """The GPU phase in one child process per file, restarted after the candidate that broke
    the CUDA context (an illegal address in a generated kernel poisons the whole process)."""
    import subprocess

    results: list[Result] = []
    torch_times: dict[str, tuple[float | None, float | None]] = {}
    files = list(dict.fromkeys(p.file for p in prepared))
    for file in files:
        cands = [p for p in prepared if p.file == file]
        start = 0
        while start < len(cands):
            cmd = [sys.executable, str(Path(__file__).resolve()), "--from", str(directory), "--child-file", file,
                   "--child-start", str(start), "--atol-rel", str(atol_rel)] + (["--no-bench"] if not bench else [])
            try:
                proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=None, text=True, timeout=timeout_s)
                out, rc = proc.stdout, proc.returncode
            except subprocess.TimeoutExpired as err:
                out, rc = (err.stdout or b"").decode() if isinstance(err.stdout, bytes) else (err.stdout or ""), -9
            got = 0
            for line in out.splitlines():
                if not line.startswith(CHILD_TAG):
                    continue
                msg = json.loads(line[len(CHILD_TAG):])
                if "result" in msg:
                    results.append(Result(**msg["result"]))
                    got += 1
                elif "torch" in msg:
                    name, eager, graph = msg["torch"]
                    torch_times.setdefault(name, (eager, graph))
            start += got
            if rc == 0 and start >= len(cands):
                break
            if rc == 0:  # the child stopped early without saying why
                rc = -1
            if rc != 3 and start < len(cands):
                prep = cands[start]
                why = "timed out" if rc == -9 else f"exited with status {rc}"
                results.append(Result(prep.file, prep.graph, "crash", kernels=prep.kernels, prep_s=prep.prep_s,
                                      message=f"the GPU process {why} while running this candidate"))
                start += 1
    return results, torch_times


# ---------------------------------------------------------------------------------------
# Report


def _f(value: float | None, spec: str) -> str:
    if value is None:
        return "-"
    if math.isinf(value) or math.isnan(value):
        return "inf"
    return format(value, spec)


def _device_line() -> str:
    parts = []
    try:
        import cupy  # type: ignore[import-not-found]

        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
        name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        parts.append(f"{name} (sm_{cupy.cuda.Device().compute_capability})")
        parts.append(f"CuPy {cupy.__version__}")
        parts.append(f"CUDA runtime {cupy.cuda.runtime.runtimeGetVersion()}")
    except Exception:  # noqa: BLE001
        parts.append("no GPU")
    try:
        import torch  # type: ignore[import-not-found]

        parts.append(f"torch {torch.__version__}")
    except ImportError:
        pass
    return ", ".join(parts)


def write_report(path: Path, results: list[Result], torch_times: dict[str, tuple[float | None, float | None]], seeds: dict[str, int], atol_rel: float) -> str:
    lines = [
        "# GPU check of every shared muGraph candidate",
        "",
        f"Date: {_dt.datetime.now().isoformat(timespec='seconds')}. Device: {_device_line()}.",
        f"Check: NaN-poisoned outputs, fresh random inputs uniform(-0.5, 0.5) per file (seeds {json.dumps(seeds)}), "
        f"error = max|out - ref| / max|ref| against the float64 reference executor, pass at {atol_rel:g}.",
        "Timing: CUDA events, median over sweeps of rotated input sets. 'ours' = a call of the compiled "
        "graph (input checks, allocation, launches); 'ours graph' = a call in CUDA-graph mode; 'ours dev' = "
        "device time alone (one CUDA graph over all input sets, replayed). "
        "Torch: the workload's program in torch (eager and CUDA graph), once per file.",
        "",
        "| file | graph | status | max rel error | ours µs | ours graph µs | ours dev µs | torch µs | torch graph µs | kernels | prep s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        t_eager, t_graph = torch_times.get(r.file, (None, None))
        lines.append(
            f"| {r.file} | {r.graph} | {r.status} | {_f(r.error, '.2e')} | {_f(r.ours_us, '.1f')} | "
            f"{_f(r.ours_graph_us, '.1f')} | {_f(r.ours_dev_us, '.1f')} | {_f(t_eager, '.1f')} | {_f(t_graph, '.1f')} | "
            f"{r.kernels} | {r.prep_s:.1f} |"
        )
    errors = [r for r in results if r.message]
    if errors:
        lines += ["", "Errors:", ""] + [f"- {r.file} {r.graph}: {r.message}" for r in errors]
    passed = sum(r.status == "ok" for r in results)
    rejected = sum(r.status == "rejected" for r in results)
    lines += ["", f"{passed} of {len(results)} candidates passed; {rejected} rejected at compile time (shared memory)."]
    text = "\n".join(lines) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return text


def print_short(results: list[Result], torch_times: dict[str, tuple[float | None, float | None]]) -> None:
    print(f"{'file':<14} {'graph':<9} {'status':<6} {'rel err':>8} {'ours':>7} {'graph':>7} {'dev':>7} {'torch':>7} {'t.graph':>7}")
    for r in results:
        t_eager, t_graph = torch_times.get(r.file, (None, None))
        print(
            f"{Path(r.file).stem:<14} {r.graph:<9} {r.status:<6} {_f(r.error, '.1e'):>8} {_f(r.ours_us, '.1f'):>7} "
            f"{_f(r.ours_graph_us, '.1f'):>7} {_f(r.ours_dev_us, '.1f'):>7} {_f(t_eager, '.1f'):>7} {_f(t_graph, '.1f'):>7}"
        )
    passed = sum(r.status == "ok" for r in results)
    rejected = sum(r.status == "rejected" for r in results)
    print(f"{passed} of {len(results)} candidates passed, {rejected} rejected (shared memory)")


# ---------------------------------------------------------------------------------------
# main


def _detect_arch_elsewhere(default: str | None = "sm_90") -> str | None:
    """The GPU's `sm_XY`, asked in a child process so that this one never creates a CUDA
    context (its worker processes are forked; a crash must not take the report with it)."""
    import subprocess

    code = "import cupy; print(cupy.cuda.runtime.getDeviceCount() and cupy.cuda.Device(0).compute_capability)"
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return default
    return f"sm_{out}" if out.isdigit() and out != "0" else default


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("report", nargs="?", type=Path, help="markdown file to write the table to")
    p.add_argument("--files", nargs="*", help="muGraph file names or paths (default: every shared file)")
    p.add_argument("--shared", type=Path, default=DEFAULT_SHARED, help="directory of the shared muGraph files")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes for the CPU phase")
    p.add_argument("--arch", help="CUDA architecture (default: the GPU's, else sm_90)")
    p.add_argument("--cache-dir", help="cubin cache directory")
    p.add_argument("--prepare-only", type=Path, metavar="DIR", help="CPU phase only: save plans, cubins and references in DIR")
    p.add_argument("--from", dest="from_dir", type=Path, metavar="DIR", help="GPU phase only, from a --prepare-only DIR")
    p.add_argument("--no-bench", action="store_true", help="check only, no timing")
    p.add_argument(
        "--no-examples",
        action="store_true",
        help="leave out examples/*.mlir (the workloads as plain kernel graphs: library calls only)",
    )
    p.add_argument(
        "--variants",
        help="comma-separated tuning variants for the plain graphs, c<rank>s<stages>[x] "
        "(kn-fuse plan rank, cp.async stages, x = split-K too), e.g. c0s2,c1s2,c0s4x",
    )
    p.add_argument("--atol-rel", type=float, default=1e-2)
    p.add_argument("--seed", type=int, help="base seed (default: fresh); file k uses seed + k")
    p.add_argument("--in-process", action="store_true", help="GPU phase in this process (no restart after a crash)")
    p.add_argument("--child-file", help=argparse.SUPPRESS)
    p.add_argument("--child-start", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child_file is not None:
        return _child_main(args.from_dir, args.child_file, args.child_start, not args.no_bench, args.atol_rel)
    if args.prepare_only is None and args.report is None:
        p.error("give the markdown report path (or --prepare-only DIR)")

    prep_dir = args.from_dir
    if args.from_dir is not None:
        prepared, refs, seeds, arch = load_prepared(args.from_dir)
        if args.files:
            wanted = {Path(f).name for f in args.files}
            prepared = [p for p in prepared if p.file in wanted]
    else:
        from mirage_xdsl.runtime.compiler import normalize_arch

        if args.files:
            files = [Path(f) if Path(f).exists() else args.shared / f for f in args.files]
        else:
            files = sorted(args.shared.glob("*.json"))
            if not args.no_examples:
                files += sorted((REPO / "examples").glob("*.mlir"))
        if not files:
            print(f"gpu_check: no muGraph files found in {args.shared}", file=sys.stderr)
            return 1
        arch = normalize_arch(args.arch) if args.arch else _detect_arch_elsewhere()
        base = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little") % (2**31)
        seeds = {f.name: base + k for k, f in enumerate(files)}
        print(f"preparing {len(files)} file(s) for {arch} with {args.jobs} worker(s), seeds {seeds}", flush=True)
        start = time.perf_counter()
        variants = [v.strip() for v in args.variants.split(",") if v.strip()] if args.variants else None
        for v in variants or []:
            parse_variant(v)
        prepared, refs = prepare_all(files, args.jobs, arch, args.cache_dir, seeds, variants)
        print(f"CPU phase: {time.perf_counter() - start:.1f} s", flush=True)
        if args.prepare_only is not None:
            save_prepared(args.prepare_only, prepared, refs, seeds, arch)
            bad = [p for p in prepared if p.error]
            for prep in bad:
                print(f"{prep.file} {prep.graph}: {prep.error}")
            print(f"saved {len(prepared)} candidates to {args.prepare_only} ({len(bad)} failed)")
            return 1 if bad else 0
        prep_dir = Path(tempfile.mkdtemp(prefix="gpu_check_prep_"))
        save_prepared(prep_dir, prepared, refs, seeds, arch)
        prepared, refs, seeds, arch = load_prepared(prep_dir)

    if _detect_arch_elsewhere(None) is None:
        print("gpu_check: no GPU found (CuPy reports no device); nothing was run", file=sys.stderr)
        return 1
    start = time.perf_counter()
    if args.in_process:
        results, torch_times = run_all(prepared, refs, seeds, bench=not args.no_bench, atol_rel=args.atol_rel)
    else:
        results, torch_times = run_isolated(prep_dir, prepared, bench=not args.no_bench, atol_rel=args.atol_rel)
    print(f"GPU phase: {time.perf_counter() - start:.1f} s", flush=True)
    write_report(args.report, results, torch_times, seeds, args.atol_rel)
    print_short(results, torch_times)
    print(f"report written to {args.report}")
    return 0 if all(r.status in ("ok", "rejected") for r in results) else 1



if __name__ == "__main__":
    sys.exit(main())
