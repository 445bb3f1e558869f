"""The GPU phase of `mirage-bench`: run, check and time every prepared candidate and the torch
peers of each workload, one child process per workload.

Per candidate (`run_workload`): the cubin is loaded, the graph runs once on the workload's
seeded random inputs with NaN-poisoned outputs and is compared with the float64 reference
(error = max|out - ref| / max|ref|, pass at `atol_rel`, 5x that for bf16 outputs:
check.py `tolerance`); then it is timed on rotated input
sets drawn on the GPU (enough sets that one sweep reads about 3x the L2, see
timing.rotation_sets), three ways, each the median of 60 sweeps after 20 warm-up runs:

- `ours_us`: a call of the compiled graph (input checks, output allocation, launches), CUDA
  events around the sweep;
- `ours_graph_us`: a call in CUDA-graph mode (the graph's launches replayed per call);
- `ours_dev_us`: device time alone: one CUDA graph running the plan on the input sets in
  turn, at least `timing.SWEEP_LAUNCHES` times, replayed, divided by the number of runs (None
  for plans with a cuBLAS call, which CuPy cannot capture; such candidates are ranked by
  `ours_graph_us`).

Then the torch peers of the workload on the same input sets (peers.py).  Candidates whose
plan and cubin equal an earlier one's (`dup_of`) are not run again: they get its numbers.

Crash isolation: a generated kernel that faults (illegal address) breaks the process's CUDA
context, so each workload runs in a child process (`run_isolated`); after a sticky error the
child exits with status 3 and a new child goes on with the next candidate; a child that dies
marks its current candidate `crash`.  Statuses: ok, FAIL (error above atol_rel), error,
crash, rejected (the compiler refused the candidate: more shared memory than the GPU has).

Needs numpy and CuPy (torch for the peers); xDSL only for a directory prepared with
`--refs-on-device`, whose references each workload's child computes (device_refs.py).
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from mirage_xdsl.bench import BenchError
from mirage_xdsl.bench.peers import COMPILE_MODE, PEERS, PeerTimes
from mirage_xdsl.bench.prepare import Prepared, one_line

CHILD_TAG = "@@mirage-bench "


@dataclass
class Result:
    """One candidate on the GPU.  Times in µs; `bytes` = allocated input + output bytes."""

    workload: str
    file: str
    graph: str
    kind: str = "mugraph"
    status: str = "-"
    error: float | None = None
    ours_us: float | None = None
    ours_graph_us: float | None = None
    ours_dev_us: float | None = None
    kernels: int = 0
    prep_s: float = 0.0
    bytes: int | None = None
    message: str | None = None
    dup_of: str | None = None

    @property
    def time_us(self) -> float | None:
        """The time candidates are ranked by: device time, else the CUDA-graph-mode call."""
        return self.ours_dev_us if self.ours_dev_us is not None else self.ours_graph_us


@dataclass
class EnvInfo:
    """The device and the software of the GPU phase; `copy_gbs` in GB/s (1e9 bytes/s)."""

    device: str | None = None
    arch: str | None = None
    cupy: str | None = None
    cuda_runtime: str | None = None
    torch: str | None = None
    triton: str | None = None
    copy_gbs: float | None = None
    note: str | None = None


class StickyCudaError(Exception):
    """The CUDA context is broken; the candidates after this one need a fresh process."""


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _f(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


# ---------------------------------------------------------------------------------------
# In this process


def probe_env(copy_bandwidth: bool = True) -> EnvInfo:
    """Device name, versions and (with `copy_bandwidth`) the measured copy bandwidth."""
    info = EnvInfo()
    try:
        import cupy  # type: ignore[import-not-found]

        if cupy.cuda.runtime.getDeviceCount() == 0:
            info.note = "CuPy reports no CUDA device"
            return info
        dev = cupy.cuda.Device()
        props = cupy.cuda.runtime.getDeviceProperties(dev.id)
        name = props["name"]
        info.device = name.decode() if isinstance(name, bytes) else str(name)
        info.arch = f"sm_{dev.compute_capability}"
        info.cupy = cupy.__version__
        rt = cupy.cuda.runtime.runtimeGetVersion()
        info.cuda_runtime = f"{rt // 1000}.{rt % 1000 // 10}"
    except Exception as err:  # noqa: BLE001 - no CuPy, no driver, no device
        info.note = f"no GPU: {one_line(err)}"
        return info
    for module in ("torch", "triton"):
        try:
            setattr(info, module, __import__(module).__version__)
        except Exception:  # noqa: BLE001 - a missing peer package is reported as '-'
            pass
    if copy_bandwidth:
        try:
            from mirage_xdsl.bench.timing import copy_bandwidth_gbs

            info.copy_gbs = copy_bandwidth_gbs()
        except Exception as err:  # noqa: BLE001
            info.note = f"copy bandwidth not measured: {one_line(err)}"
    return info


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


def _on_set(graph: Callable[..., Any], sets: Sequence[Sequence[Any]]) -> Callable[[int], Any]:
    """`run(i)` for `bench_us`: one call of `graph` (a loaded CompiledGraph) on input set `i`."""
    return lambda i: graph(*sets[i])


def run_workload(
    workload: str,
    cands: Sequence[Prepared],
    refs: Sequence[list[np.ndarray]],
    seed: int,
    *,
    bench: bool,
    atol_rel: float,
    peers: bool = True,
    compile_mode: str | None = COMPILE_MODE,
    peer_source: Prepared | None = None,
    on_result: Callable[[Result], None] | None = None,
) -> tuple[list[Result], PeerTimes | None]:
    """Run, check and time `cands` (candidates of `workload`) in this process, then (with
    `bench` and `peers`) time the torch peers on the inputs of the first candidate that
    passed (else those of `peer_source`, a candidate that passed in an earlier process).
    `on_result(result)` is called after each candidate.  A candidate's failure is recorded
    in its `Result` (status `error` / `FAIL`), not raised.

    Returns:
        The candidates' results, in order, and the peers' times (None without `bench` and
        `peers`).

    Raises:
        StickyCudaError: a candidate broke the CUDA context; the run stops after reporting
            its result (the remaining candidates need a fresh process).
    """
    import cupy  # type: ignore[import-not-found]

    from mirage_xdsl.bench.check import device_sets, plan_bytes, relative_error, to_device, tolerance
    from mirage_xdsl.bench.timing import bench_us, device_us, rotation_sets
    from mirage_xdsl.codegen.launch_plan import LaunchPlan
    from mirage_xdsl.runtime.executable import CompiledGraph
    from mirage_xdsl.runtime.random_inputs import numpy_values, random_inputs

    results: list[Result] = []
    by_graph: dict[tuple[str, str], Result] = {}
    inputs_cache: dict[str, list[Any]] = {}
    sets_cache: dict[str, list[list[Any]]] = {}
    first_ok: tuple[Any, str, int | None] | None = None  # (plan, specs key, ref key)
    stream = cupy.cuda.get_current_stream()

    def report(res: Result) -> None:
        by_graph[(res.file, res.graph)] = res
        if on_result is not None:
            on_result(res)
        _log(
            f"  {res.file} {res.graph}: {res.status} err={_f(res.error, '.2e')} ours={_f(res.ours_us, '.1f')}us "
            f"graph={_f(res.ours_graph_us, '.1f')}us dev={_f(res.ours_dev_us, '.1f')}us"
            + (f" ({res.message})" if res.message else "")
        )

    for prep in cands:
        res = Result(workload, prep.file, prep.graph, prep.kind, kernels=prep.kernels, prep_s=prep.prep_s, dup_of=prep.dup_of)
        results.append(res)
        if prep.error is not None or prep.plan_json is None:
            res.status = "rejected" if prep.rejected else "error"
            res.message = prep.error
            report(res)
            continue
        original = by_graph.get((prep.file, prep.dup_of)) if prep.dup_of else None
        if original is not None:
            for name in ("status", "error", "ours_us", "ours_graph_us", "ours_dev_us", "bytes"):
                setattr(res, name, getattr(original, name))
            res.message = f"same plan and cubin as {prep.dup_of}: not run again"
            report(res)
            continue
        try:
            plan = LaunchPlan.from_json(prep.plan_json)
            specs_key = json.dumps([asdict(s) for s in plan.inputs])
            res.bytes = plan_bytes(plan.inputs) + plan_bytes(plan.outputs)
            if specs_key not in inputs_cache:
                inputs_cache[specs_key] = [to_device(cupy, x) for x in random_inputs(plan.inputs, seed)]
            ins = inputs_cache[specs_key]
            g = CompiledGraph(plan, prep.cubin, poison_outputs=True).load()
            outs = g(*ins)
            stream.synchronize()
            res.status = "ran"
            if prep.ref_key is not None:
                host_outs = [numpy_values(cupy.asnumpy(o), s.dtype) for o, s in zip(outs, plan.outputs)]
                res.error = relative_error(host_outs, refs[prep.ref_key])
                res.status = "ok" if res.error <= tolerance(atol_rel, [o.dtype for o in plan.outputs]) else "FAIL"
            if res.status == "ok" and first_ok is None:
                first_ok = (plan, specs_key, prep.ref_key)
            if bench:
                n_sets = rotation_sets(plan_bytes(plan.inputs))
                if specs_key not in sets_cache:
                    sets_cache[specs_key] = device_sets(cupy, plan.inputs, n_sets)
                sets = sets_cache[specs_key]
                eager = CompiledGraph(plan, prep.cubin).load()
                res.ours_us = bench_us(_on_set(eager, sets), n_sets, stream)
                replay = CompiledGraph(plan, prep.cubin, cuda_graph=True).load()
                res.ours_graph_us = bench_us(_on_set(replay, sets), n_sets, stream)
                res.ours_dev_us = device_us(eager, sets, stream)
                del eager, replay
        except Exception as err:  # noqa: BLE001 - reported in the table
            res.status, res.message = "error", one_line(err)
            if os.environ.get("MIRAGE_BENCH_TRACEBACK"):
                traceback.print_exc()
            if _context_broken(cupy):
                res.message = f"{res.message} (the CUDA context broke: later candidates run in a new process)"
                report(res)
                raise StickyCudaError(res.message) from None
        report(res)

    if not (bench and peers):
        return results, None
    if first_ok is None and peer_source is not None and peer_source.plan_json is not None:
        plan = LaunchPlan.from_json(peer_source.plan_json)
        specs_key = json.dumps([asdict(s) for s in plan.inputs])
        if specs_key not in inputs_cache:
            inputs_cache[specs_key] = [to_device(cupy, x) for x in random_inputs(plan.inputs, seed)]
        first_ok = (plan, specs_key, peer_source.ref_key)
    if first_ok is None:
        why = "no candidate of the workload passed the check (the peers need its inputs and reference)"
        return results, PeerTimes(notes={p: why for p in PEERS})
    from mirage_xdsl.bench.peers import time_peers

    plan, specs_key, ref_key = first_ok
    n_sets = rotation_sets(plan_bytes(plan.inputs))
    if specs_key not in sets_cache:
        sets_cache[specs_key] = device_sets(cupy, plan.inputs, n_sets)
    start = time.perf_counter()
    times = time_peers(
        cupy,
        workload,
        plan.inputs,
        sets_cache[specs_key],
        inputs_cache[specs_key],
        refs[ref_key] if ref_key is not None else None,
        atol_rel=tolerance(atol_rel, [o.dtype for o in plan.outputs]),
        compile_mode=compile_mode,
        log=lambda text: _log(f"  {text}"),
    )
    parts = [f"{name} {_f(t, '.1f')}us" for name, t in times.times().items()]
    _log(f"  peers ({time.perf_counter() - start:.0f} s): " + ", ".join(parts))
    return results, times


# ---------------------------------------------------------------------------------------
# Child processes


def child_main(
    directory: Any,
    indices: Sequence[int],
    peers_of: str | None,
    *,
    bench: bool,
    atol_rel: float,
    compile_mode: str | None,
    peer_source: int | None = None,
) -> int:
    """The GPU phase for the candidates at manifest positions `indices` (one workload), then
    the peers of `peers_of` (a child process): one tagged JSON line per result, then the
    peers.  Exit status 3 after a sticky CUDA error.

    Raises:
        BenchError: `directory` holds no readable prepared manifest (`load_prepared`).
    """
    from mirage_xdsl.bench.prepare import load_prepared

    prepared, refs, manifest = load_prepared(directory)
    mine = [prepared[i] for i in indices]
    workload = peers_of or (mine[0].workload if mine else "")
    if manifest.get("refs_on_device"):
        from mirage_xdsl.bench.device_refs import fill_references

        extra = [prepared[peer_source]] if peer_source is not None else []
        fill_references([*mine, *extra], refs, manifest["seeds"])

    def emit(res: Result) -> None:
        print(CHILD_TAG + json.dumps({"result": asdict(res)}), flush=True)

    try:
        _, times = run_workload(
            workload,
            mine,
            refs.get(workload, []),
            manifest["seeds"][workload],
            bench=bench,
            atol_rel=atol_rel,
            peers=peers_of is not None,
            compile_mode=compile_mode,
            peer_source=prepared[peer_source] if peer_source is not None else None,
            on_result=emit,
        )
    except StickyCudaError:
        return 3
    if times is not None:
        print(CHILD_TAG + json.dumps({"peers": asdict(times)}), flush=True)
    print(CHILD_TAG + json.dumps({"done": True}), flush=True)
    return 0


def env_child_main(copy_bandwidth: bool) -> int:
    """`probe_env` in a child process: one tagged JSON line."""
    print(CHILD_TAG + json.dumps({"env": asdict(probe_env(copy_bandwidth))}), flush=True)
    return 0


def _run_child(cmd: list[str], timeout_s: float, device: str | None = None) -> tuple[list[dict[str, Any]], int]:
    """Run one GPU-phase child (on GPU `device` alone: CUDA_VISIBLE_DEVICES) and collect its
    tagged JSON messages; status -9 when it ran past `timeout_s`."""
    env = None if device is None else {**os.environ, "CUDA_VISIBLE_DEVICES": device}
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=None, text=True, timeout=timeout_s, env=env)
        out, rc = proc.stdout, proc.returncode
    except subprocess.TimeoutExpired as err:
        raw = err.stdout or ""
        out, rc = (raw.decode() if isinstance(raw, bytes) else raw), -9
    msgs = [json.loads(ln[len(CHILD_TAG) :]) for ln in out.splitlines() if ln.startswith(CHILD_TAG)]
    return msgs, rc


def env_isolated(command: Sequence[str], copy_bandwidth: bool, timeout_s: float = 300) -> EnvInfo:
    """`probe_env` in a child process (this one never creates a CUDA context)."""
    msgs, rc = _run_child([*command, "--child-env"] + ([] if copy_bandwidth else ["--no-bench"]), timeout_s)
    for msg in msgs:
        if "env" in msg:
            return EnvInfo(**msg["env"])
    return EnvInfo(note=f"the device probe exited with status {rc}")


def child_devices(gpus: int, visible: str | None) -> list[str]:
    """The CUDA_VISIBLE_DEVICES value of each of `gpus` child processes: the first `gpus`
    entries of this process's own CUDA_VISIBLE_DEVICES (`visible`; indices or UUIDs), so that
    `CUDA_VISIBLE_DEVICES=2,3 mirage-bench --gpus 2` runs on GPUs 2 and 3; "0" .. "gpus-1"
    when it is unset.

    Raises:
        BenchError: `visible` lists fewer than `gpus` devices.
    """
    if visible is None or not visible.strip():
        return [str(g) for g in range(gpus)]
    listed = [d.strip() for d in visible.split(",") if d.strip()]
    if len(listed) < gpus:
        raise BenchError(
            f"--gpus {gpus}: CUDA_VISIBLE_DEVICES={visible!r} lists {len(listed)} GPU(s); "
            "ask for at most that many or widen CUDA_VISIBLE_DEVICES"
        )
    return listed[:gpus]


def run_isolated(
    command: Sequence[str],
    directory: Any,
    prepared: Sequence[Prepared],
    *,
    bench: bool,
    atol_rel: float,
    compile_mode: str | None,
    timeout_s: float = 900,
    positions: Sequence[int] | None = None,
    gpus: int = 1,
) -> tuple[list[Result], dict[str, PeerTimes]]:
    """The GPU phase, one child process (`command` + child flags) per workload, restarted
    after the candidate that broke the CUDA context.  `positions[k]` is the place of
    `prepared[k]` in the manifest of `directory` (default: k, the whole manifest).

    With `gpus` > 1 the workloads run `gpus` at a time, each child on one GPU of its own
    (`child_devices`: CUDA_VISIBLE_DEVICES one of the first `gpus` GPUs this process may use;
    a workload's candidates and its torch peers share one GPU, so their ratios stand as on
    one GPU); results come back in workload order and each workload's peers record the GPU
    (`PeerTimes.gpu`, the device's CUDA index).

    Raises:
        BenchError: fewer than `gpus` GPUs are listed in CUDA_VISIBLE_DEVICES."""
    where = list(positions) if positions is not None else list(range(len(prepared)))
    positions_of = {id(p): i for p, i in zip(prepared, where)}
    workloads = list(dict.fromkeys(p.workload for p in prepared))
    start_all = time.perf_counter()
    job = _WorkloadJob(command, prepared, positions_of, bench, atol_rel, compile_mode, timeout_s)
    if gpus <= 1:
        done = []
        for number, workload in enumerate(workloads, 1):
            _log(f"[{number}/{len(workloads)}] {workload} ({time.perf_counter() - start_all:.0f} s so far)")
            done.append(job.run(workload, None))
    else:
        free: queue.Queue[str] = queue.Queue()
        for device in child_devices(gpus, os.environ.get("CUDA_VISIBLE_DEVICES")):
            free.put(device)

        def on_free_gpu(workload: str) -> tuple[list[Result], PeerTimes | None]:
            device = free.get()
            try:
                _log(f"{workload} on GPU {device} ({time.perf_counter() - start_all:.0f} s so far)")
                results, peers = job.run(workload, device)
                gpu = int(device) if device.isdigit() else None  # a UUID names no index
                return results, (replace(peers, gpu=gpu) if peers is not None else None)
            finally:
                free.put(device)

        with ThreadPoolExecutor(max_workers=gpus) as pool:
            done = list(pool.map(on_free_gpu, workloads))
    results: list[Result] = []
    peer_times: dict[str, PeerTimes] = {}
    for workload, (res, peers) in zip(workloads, done):
        results += res
        if peers is not None:
            peer_times[workload] = peers
    return results, peer_times


@dataclass(frozen=True)
class _WorkloadJob:
    """What every workload's child processes share (`run_isolated`'s arguments)."""

    command: Sequence[str]
    prepared: Sequence[Prepared]
    positions_of: dict[int, int]
    bench: bool
    atol_rel: float
    compile_mode: str | None
    timeout_s: float

    def run(self, workload: str, device: str | None) -> tuple[list[Result], PeerTimes | None]:
        """Results and peers of one workload: its candidates in child processes (on `device`),
        a new child after a candidate that broke the CUDA context or killed the process."""
        cands = [p for p in self.prepared if p.workload == workload]
        results: list[Result] = []
        peers: PeerTimes | None = None
        start = 0
        while True:
            todo = [self.positions_of[id(p)] for p in cands[start:]]
            cmd = [*self.command, "--child-candidates", ",".join(map(str, todo)) or "-", "--child-peers", workload,
                   "--atol-rel", repr(self.atol_rel)]
            mode = self.compile_mode
            cmd += ([] if self.bench else ["--no-bench"]) + (["--compile-mode", mode] if mode else ["--no-compile-peer"])
            passed = [r for r in results if r.status == "ok" and r.dup_of is None]
            source = next((p for p in cands if passed and (p.file, p.graph) == (passed[0].file, passed[0].graph)), None)
            if source is not None:
                cmd += ["--child-peer-source", str(self.positions_of[id(source)])]
            msgs, rc = _run_child(cmd, self.timeout_s, device)
            before = start
            for msg in msgs:
                if "result" in msg:
                    results.append(Result(**msg["result"]))
                    start += 1
                elif "peers" in msg:
                    peers = PeerTimes(**msg["peers"])
            if rc == 0 and start >= len(cands):
                break
            why = "timed out" if rc == -9 else f"exited with status {rc}"
            if start >= len(cands):
                if rc == 3 and before < len(cands):  # the last candidate broke the context: peers in a fresh process
                    continue
                if self.bench and peers is None:  # the peers took the process down
                    peers = PeerTimes(notes={p: f"the GPU process {why} while timing the peers" for p in PEERS})
                break
            if rc != 3 or start == before:  # it died (or stopped without progress) on cands[start]
                prep = cands[start]
                results.append(Result(workload, prep.file, prep.graph, prep.kind, "crash", kernels=prep.kernels,
                                      prep_s=prep.prep_s, message=f"the GPU process {why} while running this candidate"))
                start += 1
        return results, peers


def run_in_process(
    prepared: Sequence[Prepared],
    refs: dict[str, list[list[np.ndarray]]],
    seeds: dict[str, int],
    *,
    bench: bool,
    atol_rel: float,
    compile_mode: str | None,
) -> tuple[list[Result], dict[str, PeerTimes]]:
    """The GPU phase in this process (no restart: after a sticky CUDA error the remaining
    candidates are marked `crash`)."""
    results: list[Result] = []
    peer_times: dict[str, PeerTimes] = {}
    workloads = list(dict.fromkeys(p.workload for p in prepared))
    broken = False
    for number, workload in enumerate(workloads, 1):
        cands = [p for p in prepared if p.workload == workload]
        if broken:
            results += [Result(workload, p.file, p.graph, p.kind, "crash", kernels=p.kernels, prep_s=p.prep_s,
                               message="not run: the CUDA context broke earlier (--in-process)") for p in cands]
            continue
        _log(f"[{number}/{len(workloads)}] {workload}: {len(cands)} candidate(s)")
        mine: list[Result] = []
        try:
            _, times = run_workload(workload, cands, refs.get(workload, []), seeds[workload], bench=bench,
                                    atol_rel=atol_rel, compile_mode=compile_mode, on_result=mine.append)
        except StickyCudaError:
            broken, times = True, None
            results += mine
            results += [Result(workload, p.file, p.graph, p.kind, "crash", kernels=p.kernels, prep_s=p.prep_s,
                               message="not run: the CUDA context broke earlier (--in-process)") for p in cands[len(mine):]]
            continue
        results += mine
        if times is not None:
            peer_times[workload] = times
    return results, peer_times

