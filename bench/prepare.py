"""The CPU phase of `mirage-bench`: every candidate through the pipeline, `emit_cuda` and nvcc,
and the float64 reference outputs, in a pool of worker processes, with an on-disk cache.

Candidates of a workload: every graph of its saved muGraph file (`graph_<i>`, the default
pipeline) and every function of its plain kernel graph under every tuning variant
(`<func>@<variant>`, see `parse_variant`).  Builds (plan + cubin) and references are cached
separately (cache.py): builds do not depend on the seed, references do.  So a rerun with the
same `--seed` finds everything in the cache and finishes its CPU phase in well under 2 s
(no pool, no xDSL import); a rerun with a fresh seed (the default) skips the pipeline and
nvcc but recomputes the references (one per muGraph graph and one per plain function, not
one per variant: about 0.3-0.8 s of CPU each).

The prepared directory (`--prepare-only DIR`, read back by `--from DIR` on the device):

    manifest.json                          arch, seeds, workloads, one entry per candidate
    <workload>/<file>__<graph>.plan.json   launch plan of each candidate
    <workload>/<sha256[:16]>.cubin         cubins (shared by identical candidates)
    <workload>/ref_<k>.npz                 distinct reference outputs of the workload (float32)

Reading it back (`load_prepared`) needs numpy only.
"""

from __future__ import annotations

import json
import os
import re
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from mirage_xdsl.bench import BenchError
from mirage_xdsl.bench.cache import BenchCache
from mirage_xdsl.bench.check import same_outputs
from mirage_xdsl.bench.workloads import BY_NAME, WORKLOADS, Resolved
from mirage_xdsl.driver.tune.space import SEED_VARIANTS, SpaceError, genome_from_label

MANIFEST_VERSION = 2
DEFAULT_VARIANTS = tuple(SEED_VARIANTS)
"""Tuning variants of the plain graphs by default: the seed genomes of the tuner's search space
(driver/tune/space.py `SEED_VARIANTS`; `mirage-bench --tune` searches the whole space
instead): kn-fuse plans of cost rank 0..15 with tb-plan-pipeline's own ring depth (2 stages,
deeper for wide lone-block plans) and split-K plans enumerated, the cheapest plan with 3 and
4 stages, and ranks 0..7 with their partials reduced before the grid sum (`r`), and the
cheapest split-K plan with a 7-stage ring whose groups a late finisher combines (`f1`:
rmsnorm bs8 13.6-13.9 us against 14.9-15.0 for c0xr on an H200, 2026-11-25).
Sixteen ranks, not eight: the grid-sum plans crowd the first ranks, and on the H200 the
fastest rmsnorm/gated_mlp plans were ranks 7-16 (a sweep of 24 ranks, 2026-11-22).
Without `r` a variant passes `reduce_partials=false` (the pipeline's default is true): `r`
helps rmsnorm bs8 by 1.7-4.9 µs and costs bs1 0.1-0.4 µs (H200, 2026-11-24);
a graph without a reduction after its grid sum builds the same kernel, timed once."""


@dataclass
class Prepared:
    """One candidate after the CPU phase."""

    workload: str
    file: str
    """name of the input file (`lora.json`, `lora.mlir`)"""
    graph: str
    """`graph_<i>` (muGraph file) or `<func>@<variant>` (plain graph)"""
    kind: str = "mugraph"
    """`mugraph` (a saved Mirage candidate) or `plain` (our kn-fuse kernels)"""
    plan_json: str | None = None
    cubin: str | None = None
    """path of the cubin (None: a plan of library calls only)"""
    kernels: int = 0
    ref_key: int | None = None
    """index into the workload's distinct reference output lists"""
    prep_s: float = 0.0
    """seconds of pipeline + emit_cuda + nvcc when it was built (cached or not)"""
    error: str | None = None
    rejected: bool = False
    """the compiler refused the candidate (`SharedMemoryExceeded`: more shared memory than
    the GPU has; Mirage rejects such candidates too): reported, not a failure"""
    dup_of: str | None = None
    """an earlier candidate of the workload with the same plan and cubin (timed once)"""
    cached: bool = False
    source: str | None = None
    """the graph's file, relative to the package root when inside it (device_refs.py)"""
    source_sha: str | None = None
    """sha256 of that file when it was prepared"""


def one_line(err: BaseException) -> str:
    """`Type: first line` of an exception (nvcc failures keep their first error line)."""
    lines = [ln.strip() for ln in str(err).strip().splitlines() if ln.strip()]
    text = lines[0] if lines else type(err).__name__
    if len(lines) > 1 and "nvcc failed" in text:
        text += " " + lines[1]
    return f"{type(err).__name__}: {text}"[:300]


def parse_variant(text: str) -> dict[str, Any]:
    """`c<rank>[s<stages>][x][r][f<shift>]` -> mirage-transpile options: the kn-fuse plan of
    that cost rank, that cp.async pipeline depth (absent or 0 = tb-plan-pipeline's choice),
    `x` = split-K plans enumerated too, `r` = partials reduced before their grid sum
    (`reduce_partials`), `f<shift>` = split-K groups combined by a late finisher that takes
    `shift` iterations from each partner (`late_finisher`, passes/cute/late_finisher.py).
    The tuner's labels (`n` = no grid sum, `l<depth>` = lone-block ring depth) read too: a
    variant is a genome of driver/tune/space.py.

    Raises:
        BenchError: the text does not follow the label syntax.
    """
    try:
        return genome_from_label(text).variant_options()
    except SpaceError as err:
        raise BenchError(str(err)) from None


def parse_variants(text: str | None) -> list[str] | None:
    """`--variants`: None -> the defaults, `none` -> no variants (the default pipeline once),
    else a comma-separated list, each checked by `parse_variant`.

    Raises:
        BenchError: a variant does not follow the label syntax.
    """
    if text is None:
        return list(DEFAULT_VARIANTS)
    if text.strip().lower() in ("none", ""):
        return None
    variants = list(dict.fromkeys(v.strip() for v in text.split(",") if v.strip()))
    for v in variants:
        parse_variant(v)
    return variants


def workload_seeds(names: Sequence[str], base: int) -> dict[str, int]:
    """Seed of each workload: `base` + its position in the workload table (unknown
    workloads after), so a workload's inputs do not depend on which others run."""
    order = [w.name for w in WORKLOADS] + [n for n in names if n not in BY_NAME]
    return {n: base + order.index(n) for n in names}


# ---------------------------------------------------------------------------------------
# The worker pool and Ctrl-C

STOP_GRACE_S = 2.0
"""Seconds a worker gets to die of SIGTERM before SIGKILL."""


def _worker_init() -> None:
    """First thing in each worker: lead its own process group, so that a terminal's Ctrl-C
    reaches only the parent (no traceback from every worker) and `stop_pool` can end a
    worker together with the nvcc it runs (`killpg`)."""
    try:
        os.setpgid(0, 0)
    except OSError:  # pragma: no cover - not allowed for a session leader
        pass


def stop_pool(pool: ProcessPoolExecutor | None) -> None:
    """End `pool` now: cancel pending futures, SIGTERM each worker's process group (the
    worker and its nvcc), SIGKILL what is left after `STOP_GRACE_S`.  A second Ctrl-C
    meanwhile is ignored.  Returns within about `STOP_GRACE_S` seconds.

    Raises nothing: workers that are already gone are skipped.
    """
    if pool is None:
        return
    import signal

    workers = list((getattr(pool, "_processes", None) or {}).values())  # no public handle
    previous = _ignore_sigint(signal)
    try:
        pool.shutdown(wait=False, cancel_futures=True)
        for proc in workers:
            _signal_worker(proc, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        for proc in workers:
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                _signal_worker(proc, signal.SIGKILL)
                proc.join(1.0)
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def _ignore_sigint(signal: Any) -> Any:
    """Ignore SIGINT (main thread only); returns the previous handler or None."""
    try:
        return signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread
        return None


def _signal_worker(proc: Any, signum: int) -> None:
    """Send `signum` to the worker's process group, else (not its own group yet) to it alone."""
    if proc.pid is None:
        return
    try:
        os.killpg(proc.pid, signum)
        return
    except (OSError, AttributeError):
        pass
    try:
        os.kill(proc.pid, signum)
    except OSError:
        pass


# ---------------------------------------------------------------------------------------
# Worker side (forked processes; every xDSL import happens here)

_MODULES: dict[str, Any] = {}


def _module(path: str) -> Any:
    if path not in _MODULES:
        from mirage_xdsl.driver.load import load_module
        from mirage_xdsl.frontends.mugraph_import import load_mugraph_file

        _MODULES[path] = load_mugraph_file(path) if path.endswith(".json") else load_module(Path(path))
    return _MODULES[path]


def _function_names(path: str) -> list[str]:
    from mirage_xdsl.driver.load import functions

    return [f.sym_name.data for f in functions(_module(path))]


def _variant_module(module: Any, graph: str, variant: str) -> Any:
    """A one-function module of `graph` after mirage-transpile with the `variant`'s options."""
    from xdsl.dialects.builtin import ModuleOp

    from mirage_xdsl.driver.compile import make_context
    from mirage_xdsl.driver.load import functions
    from mirage_xdsl.passes.pipeline import MirageTranspilePass

    func = next(f for f in functions(module) if f.sym_name.data == graph)
    single = ModuleOp([func.clone()])
    MirageTranspilePass.from_options(parse_variant(variant)).apply(make_context(), single)
    return single


def _cacheable(err: BaseException) -> bool:
    """Whether a build error would come again on any machine (not: no nvcc, a timeout, I/O)."""
    from mirage_xdsl.driver.nvcc import NvccNotFoundError

    return not isinstance(err, (NvccNotFoundError, OSError, MemoryError)) and "timed out" not in str(err)


def _build_one(path: str, index: int, variant: str | None, arch: str, nvcc_cache: str | None) -> tuple[dict[str, Any], bool]:
    """Pipeline + emit_cuda + nvcc of one candidate (in a worker): the build entry and
    whether it may be cached."""
    from mirage_xdsl.driver.compile import prepare
    from mirage_xdsl.driver.nvcc import compile_cuda
    from mirage_xdsl.target.errors import SharedMemoryExceeded

    start = time.perf_counter()
    meta: dict[str, Any] = {"graph": f"graph_{index}", "plan_json": None, "cubin": None, "kernels": 0, "error": None}
    try:
        module = _module(path)
        graph = _function_names(path)[index]
        meta["graph"] = graph if variant is None else f"{graph}@{variant}"
        if variant is not None:
            prepared = prepare(_variant_module(module, graph, variant), graph, arch)
        else:
            prepared = prepare(module, graph, arch)
        plan = prepared.plan
        kernels = list(dict.fromkeys(s.kernel for s in plan.steps if s.step == "kernel"))
        meta["kernels"] = len(kernels)
        if kernels:
            meta["cubin"] = str(compile_cuda(prepared.program.source, prepared.arch, cache_dir=nvcc_cache))
        meta["plan_json"] = plan.to_json()
        cacheable = True
    except Exception as err:  # noqa: BLE001 - reported in the table
        meta["error"] = one_line(err)
        meta["rejected"] = isinstance(err, SharedMemoryExceeded)
        cacheable = _cacheable(err)
        if os.environ.get("MIRAGE_BENCH_TRACEBACK"):
            traceback.print_exc()
    meta["build_s"] = time.perf_counter() - start
    return meta, cacheable


def _reference_one(path: str, index: int, seed: int, specs_json: str) -> tuple[list[np.ndarray] | None, str | None]:
    """float64 reference outputs of graph `index` of `path` on the seeded inputs (in a worker)."""
    from mirage_xdsl.codegen.launch_plan import TensorSpec
    from mirage_xdsl.reference.executor import run_reference
    from mirage_xdsl.runtime.random_inputs import numpy_values, random_inputs

    try:
        specs = [TensorSpec(**s) for s in json.loads(specs_json)]
        graph = _function_names(path)[index]
        inputs = random_inputs(specs, seed)
        refs = run_reference(_module(path), [numpy_values(x, s.dtype) for x, s in zip(inputs, specs)], func_name=graph)
        return [np.asarray(r, dtype=np.float64) for r in refs], None
    except Exception as err:  # noqa: BLE001 - reported in the table
        if os.environ.get("MIRAGE_BENCH_TRACEBACK"):
            traceback.print_exc()
        return None, f"reference: {one_line(err)}"


def _graph_count(path: str) -> int:
    if path.endswith(".json"):
        data = json.loads(Path(path).read_text())
        if not isinstance(data, list):
            raise BenchError(f"{path}: not a muGraph file (expected a JSON array of graphs)")
        return len(data)
    return len(_function_names(path))


# ---------------------------------------------------------------------------------------
# The CPU phase


@dataclass(frozen=True)
class _Task:
    workload: str
    path: str
    index: int
    variant: str | None

    @property
    def kind(self) -> str:
        """`mugraph` for a saved muGraph file (`.json`), else `plain` (`Prepared.kind`)."""
        return "mugraph" if self.path.endswith(".json") else "plain"


def _specs_json(plan_json: str) -> str:
    return json.dumps(json.loads(plan_json)["inputs"], sort_keys=True)


def prepare_all(
    resolved: Sequence[Resolved],
    *,
    arch: str,
    seeds: dict[str, int],
    variants: Sequence[str] | None,
    jobs: int,
    cache: BenchCache,
    nvcc_cache: str | None = None,
    log: Callable[[str], None] = print,
    references: bool = True,
) -> tuple[list[Prepared], dict[str, list[list[np.ndarray]]]]:
    """Prepare every candidate of the `resolved` workloads: builds and references from the
    cache, the misses in `jobs` worker processes.  Returns the candidates (workload, file,
    graph order) and, per workload, the distinct reference output lists (`Prepared.ref_key`
    indexes them).

    A candidate's own failure (pipeline, printer, nvcc, reference) is recorded in its
    `Prepared.error`, never raised.  Sets the hit and miss counts of `cache`.

    Args:
        resolved: the workloads and their input files.
        arch: the nvcc architecture of the builds.
        seeds: workload -> the seed of its check inputs.
        variants: tuning variants of the plain graphs (None: the default pipeline once).
        jobs: worker processes for the misses.
        cache: the build and reference cache (a disabled one computes everything).
        nvcc_cache: the cubin cache folder of nvcc (None: nvcc.py's default).
        log: progress lines.
        references: compute the references (False: the GPU phase computes them,
            bench/device_refs.py; every candidate's `ref_key` stays None).

    Raises:
        BenchError: a `.json` input file is not a muGraph file (a JSON array of graphs).
        ValueError: a `.json` input file is not valid JSON.
        ModuleLoadError, ParseError, VerifyException: a plain graph file cannot be loaded
            while counting its functions (driver/load.py `load_module`).
        OSError: an input file cannot be read or the cache written.
        KeyboardInterrupt: Ctrl-C, passed on after the workers (and their nvcc) were ended.
    """
    tasks: list[_Task] = []
    for res in resolved:
        for path in res.files:
            spath = str(path)
            count = cache.load_count(spath)
            if count is None:
                count = _graph_count(spath)
                cache.store_count(spath, count)
            per_graph = [None] if spath.endswith(".json") or not variants else list(variants)
            tasks += [_Task(res.name, spath, i, v) for i in range(count) for v in per_graph]

    builds: dict[_Task, dict[str, Any]] = {}
    refs: dict[tuple[str, int, str], tuple[list[np.ndarray] | None, str | None]] = {}
    ref_sources: dict[_Task, tuple[str, int, str]] = {}
    pool: ProcessPoolExecutor | None = None
    pending: dict[Future[Any], tuple[str, Any]] = {}
    hits = [0, 0]

    def submit(kind: str, key: Any, fn: Any, *args: Any) -> None:
        nonlocal pool
        if pool is None:
            pool = ProcessPoolExecutor(max_workers=max(1, jobs), initializer=_worker_init)
        pending[pool.submit(fn, *args)] = (kind, key)

    def want_reference(task: _Task, meta: dict[str, Any]) -> None:
        if meta.get("plan_json") is None or not references:
            return
        specs = _specs_json(meta["plan_json"])
        rkey = (cache.ref_key(task.path, task.index), seeds[task.workload], specs)
        ref_sources[task] = rkey
        if rkey in refs:
            return
        got = cache.load_refs(*rkey)
        if got is not None:
            refs[rkey] = (got, None)
            hits[1] += 1
            return
        refs[rkey] = (None, "pending")
        submit("ref", (rkey, task), _reference_one, task.path, task.index, seeds[task.workload], specs)

    try:
        bkeys = {t: cache.build_key(t.path, t.index, t.variant, arch) for t in tasks}
        for task in tasks:
            meta = cache.load_build(bkeys[task])
            if meta is not None:
                hits[0] += 1
                meta["cached"] = True
                builds[task] = meta
                want_reference(task, meta)
            else:
                submit("build", task, _build_one, task.path, task.index, task.variant, arch, nvcc_cache)
        misses = sum(kind == "build" for kind, _ in pending.values())
        log(
            f"CPU phase: {len(tasks)} candidates, {hits[0]} builds cached, {misses} to build"
            + (f" with {jobs} worker(s)" if pool is not None else "")
        )
        done = 0
        from concurrent.futures import FIRST_COMPLETED, wait

        while pending:
            finished, _ = wait(list(pending), return_when=FIRST_COMPLETED)
            for fut in finished:
                kind, key = pending.pop(fut)
                if kind == "build":
                    meta, cacheable = fut.result()
                    meta = cache.store_build(bkeys[key], meta, meta.get("cubin")) if cacheable else meta
                    meta["cached"] = False
                    builds[key] = meta
                    want_reference(key, meta)
                    done += 1
                    if done % 10 == 0 or done == misses:
                        log(f"built {done}/{misses}")
                else:
                    rkey, task = key
                    got, error = fut.result()
                    refs[rkey] = (got, error)
                    if got is not None:
                        ref_path, ref_seed, ref_specs = rkey
                        cache.store_refs(ref_path, ref_seed, ref_specs, got)
    except BaseException:
        # Ctrl-C (or an error): pending work is cancelled and the workers ended at once,
        # nvcc included; a clean `shutdown` would wait for every running build
        stop_pool(pool)
        raise
    if pool is not None:
        pool.shutdown()
    cache.build_hits, cache.build_misses = hits[0], misses
    cache.ref_hits, cache.ref_misses = hits[1], len(refs) - hits[1]

    from mirage_xdsl.bench.cache import file_digest
    from mirage_xdsl.bench.device_refs import source_of

    prepared: list[Prepared] = []
    distinct: dict[str, list[list[np.ndarray]]] = {}
    seen: dict[tuple[str, str, str | None], str] = {}  # (file, plan, cubin) -> first candidate
    for task in tasks:
        meta = builds[task]
        prep = Prepared(
            task.workload,
            Path(task.path).name,
            meta["graph"],
            task.kind,
            plan_json=meta.get("plan_json"),
            cubin=meta.get("cubin"),
            kernels=meta.get("kernels", 0),
            prep_s=float(meta.get("build_s", 0.0)),
            error=meta.get("error"),
            rejected=bool(meta.get("rejected")),
            cached=bool(meta.get("cached")),
            source=source_of(Path(task.path)),
            source_sha=file_digest(task.path),
        )
        if prep.error is None and task in ref_sources:
            got, error = refs[ref_sources[task]]
            if got is None:
                prep.error = error
            else:
                known = distinct.setdefault(task.workload, [])
                prep.ref_key = next((k for k, r in enumerate(known) if same_outputs(got, r, 1e-6)), None)
                if prep.ref_key is None:
                    prep.ref_key = len(known)
                    known.append(got)
        if prep.error is None and prep.plan_json is not None:
            ident = (task.path, prep.plan_json, meta.get("cubin_sha") or prep.cubin)
            if ident in seen:
                prep.dup_of = seen[ident]
            else:
                seen[ident] = prep.graph
        prepared.append(prep)
    return prepared, distinct


# ---------------------------------------------------------------------------------------
# The prepared directory


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_@-]", "_", name)


def save_prepared(
    directory: Path,
    prepared: Sequence[Prepared],
    refs: dict[str, list[list[np.ndarray]]],
    seeds: dict[str, int],
    arch: str,
    extra: dict[str, Any] | None = None,
) -> None:
    """Write the prepared directory (see the module docstring); `extra` goes into the manifest.

    Every file is written atomically and the manifest last (an earlier manifest is removed
    first), so an interrupted save leaves a directory without a manifest, never one whose
    manifest names half-written files.

    Raises:
        OSError: a file cannot be read or written.
    """
    import hashlib
    import io

    from mirage_xdsl.bench.cache import atomic_write

    directory.mkdir(parents=True, exist_ok=True)
    (directory / "manifest.json").unlink(missing_ok=True)
    entries = []
    for prep in prepared:
        sub = directory / _safe(prep.workload)
        entry = asdict(prep)
        if prep.plan_json is not None:
            name = f"{_safe(prep.file)}__{_safe(prep.graph)}.plan.json"
            atomic_write(sub / name, prep.plan_json.encode())
            entry["plan_json"] = f"{sub.name}/{name}"
        if prep.cubin is not None:
            data = Path(prep.cubin).read_bytes()
            name = f"{hashlib.sha256(data).hexdigest()[:16]}.cubin"
            if not (sub / name).is_file() or (sub / name).read_bytes() != data:
                atomic_write(sub / name, data)
            entry["cubin"] = f"{sub.name}/{name}"
        entries.append(entry)
    for workload, distinct in refs.items():
        sub = directory / _safe(workload)
        for k, outs in enumerate(distinct):
            buf = io.BytesIO()
            np.savez(buf, *[np.asarray(o, dtype=np.float32) for o in outs])
            atomic_write(sub / f"ref_{k}.npz", buf.getvalue())
    manifest = {"version": MANIFEST_VERSION, "arch": arch, "seeds": seeds, **(extra or {}), "candidates": entries}
    atomic_write(directory / "manifest.json", json.dumps(manifest, indent=1).encode())


def load_prepared(directory: Path) -> tuple[list[Prepared], dict[str, list[list[np.ndarray]]], dict[str, Any]]:
    """Read a prepared directory: the candidates (plan JSON text, absolute cubin paths), the
    distinct references per workload, and the manifest's other fields (arch, seeds, ...).

    Raises:
        BenchError: no manifest, a manifest that is not JSON, or one of another version.
        OSError: a plan or reference file the manifest names cannot be read.
    """
    path = directory / "manifest.json"
    try:
        manifest = json.loads(path.read_text())
    except OSError:
        raise BenchError(f"{path}: no such file (make DIR with --prepare-only DIR)") from None
    except ValueError as err:
        raise BenchError(f"{path}: not valid JSON ({err})") from None
    if manifest.get("version") != MANIFEST_VERSION:
        raise BenchError(f"{path}: manifest version {manifest.get('version')}, expected {MANIFEST_VERSION} (prepare it again)")
    names = {f.name for f in fields(Prepared)}
    prepared = []
    refs: dict[str, list[list[np.ndarray]]] = {}
    for entry in manifest.pop("candidates"):
        prep = Prepared(**{k: v for k, v in entry.items() if k in names})
        if prep.plan_json is not None:
            prep.plan_json = (directory / prep.plan_json).read_text()
        if prep.cubin is not None:
            prep.cubin = str(directory / prep.cubin)
        prepared.append(prep)
        if prep.ref_key is not None:
            distinct = refs.setdefault(prep.workload, [])
            while len(distinct) <= prep.ref_key:
                with np.load(directory / _safe(prep.workload) / f"ref_{len(distinct)}.npz") as z:
                    distinct.append([z[f"arr_{j}"].astype(np.float64) for j in range(len(z.files))])
    return prepared, refs, manifest
