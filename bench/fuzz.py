"""Differential fuzzing of random kernel and threadblock graphs (issue #29, item 2).

`random_graph(rng)` builds one VALID random graph through the Python builder
(`frontends/builder.py`) from a `random.Random`: either a plain kernel graph (kn ops that
the default pipeline fuses with kn-fuse) or a hand-written threadblock graph (one
`kn.customized` op with grid, for-loop, input/output maps, tb ops and every forloop
accumulator kind, the rescale ones driven by `exp(diff)` of a `tb.reduction_max`).  Shapes are
drawn so that every map divides; values are tracked (magnitude, sign) so that no op leaves
its numerically safe domain (`log`/`sqrt`/`pow`/`div` only see operands bounded away from 0,
`exp` only small ones), hence the float64 reference is finite and the generated code is held
to a tight relative error.

The same generator drives both users:

* the hypothesis strategy `graphs()` (`st.randoms` feeding `random_graph`, so hypothesis
  records and shrinks the draws): the CPU differential test `test/e2e/test_fuzz_differential.py`
  runs a fixed number of derandomized examples through the host emulator;
* the command `python -m mirage_xdsl.bench.fuzz --count N --seed S`: graph `i` of seed `S` is
  `random_graph(random.Random(f"{S}:{i}"))`, compiled in a process pool (pipeline,
  `emit_cuda`, nvcc; `--batch B` graphs per translation unit), run on the GPU through
  `CompiledGraph` with NaN-poisoned outputs (or on the CPU with `--emulate`), compared with
  `run_reference`; failing graphs are written as `.mlir` files (reproduce one with
  `mirage-run FILE --check`, or `--seed S --only I`).  Exit status 1 on any mismatch or crash.
  What a seed's graphs may contain grows with the seed (`fuzz_graphs.Draws.of_seed`: forks,
  then row ops, then view ops), so an old seed still draws the graphs its record describes.

Outcome of one graph (`Outcome.status`):

* `ok`: outputs within `TOLERANCE[dtype]` (max |out - ref| / max |ref|) of the reference,
  plus the rounding noise (`compare`);
* `rejected`: the compiler refused the graph with a user-facing error
  (`SharedMemoryExceeded`, or another located `DiagnosticException` of a pass or the
  printer, e.g. `PassFailedException`) -- counted by reason, not a failure;
* `mismatch`: wrong numbers, or NaN where the reference has none (unwritten output);
* `crash`: any other exception (a compiler bug), a host/nvcc build failure of generated
  code, or a batch that timed out / killed its worker.

`--family gemm` draws instead the GEMM family (`fuzz_gemms.py`, GPU only): kn graphs of large
matmuls with epilogues for the default pipeline's sm_90a GEMM, and `mx.einsum` contractions
lowered with random schedule options (graph i is `fuzz_gemm_S_i`); `--family attention`
attention graphs (`fuzz_attention.py`) for the flash-attention and split-key decode kernels;
`--family tc` Tensor Comprehensions definitions (`fuzz_tc.py`) lowered by the TC frontend.

hypothesis is a dev dependency: it is imported only by `graphs()` (the command line does not
need it).

On a GPU machine (`pip install -e '.[dev,cuda]'`):

    python -m mirage_xdsl.bench.fuzz --count 1000 --seed 1 --batch 8 --report fuzz.json

The workers (CPUs - 1) lower, print, nvcc and run the reference (about 0.5 s of CPU a graph
in batches of 8); the main process loads and runs each cubin.  Without a GPU add `--emulate`
(about 0.7 s a graph on 2 cores, the host C++ build dominating).

What the generator avoids because the comparison could not judge it (not compiler bugs):
cancellation (`a - f(a)` with f near the identity, e.g. `x - silu(x)` for large x, leaves
outputs far below the operands' rounding error), products beyond fp16's range (the float64
reference does not overflow), and clamps far inside the operand's range.  Cancellation
that slips through (sums of mixed-sign values, `m + s - s`) is allowed for: each output may
also be off by `NOISE_FACTOR` times its rounding noise, the distance between the float64
reference and the reference with every intermediate rounded to its storage type.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import random
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mirage_xdsl.bench.fuzz_check import Outcome, ReadyCase, failed_outcome, is_rejection, lower_case, reference_of, run_emulated, run_gpu
from mirage_xdsl.bench.fuzz_graphs import Draws, FuzzCase, random_graph
from mirage_xdsl.bench.fuzz_tc import tc_case


def case_of(seed: int, index: int, family: str = "mixed") -> FuzzCase:
    """Graph `index` of run `seed` (the command's numbering).

    Raises:
        FuzzGenerationError: the generator found no valid graph for this draw (`random_graph`).
    """
    if family == "gemm":  # half kn graphs for the default pipeline, half mx.einsum with a random schedule
        rng = random.Random(f"gemm:{seed}:{index}")
        kind = "einsum" if rng.random() < 0.5 else "gemm"
        return random_graph(rng, name=_graph_name(seed, index, family), kind=kind, draws=Draws.of_seed(seed, family))
    if family == "tc":
        return tc_case(random.Random(f"tc:{seed}:{index}"), _graph_name(seed, index, family), Draws.of_seed(seed, family))
    if family == "attention":
        rng = random.Random(f"attention:{seed}:{index}")
        return random_graph(rng, name=_graph_name(seed, index, family), kind="attention")
    return random_graph(random.Random(f"{seed}:{index}"), name=_graph_name(seed, index, family), draws=Draws.of_seed(seed))


def _graph_name(seed: int, index: int, family: str) -> str:
    """The function name of graph `index` of run `seed` in `family` (its index last)."""
    return f"fuzz_{seed}_{index}" if family == "mixed" else f"fuzz_{family}_{seed}_{index}"


def _input_seed(seed: int, index: int) -> int:
    return (seed * 1_000_003 + index) % 2**32


def _work_batch(args: tuple[int, list[int], bool, str, str | None, str]) -> tuple[list[Outcome], list[ReadyCase]]:
    """Worker: build, lower and print the batch's graphs as ONE translation unit (host C++
    or nvcc), then emulate them here (`emulate`) or return them ready for the GPU."""
    seed, indices, emulate, arch, cache_dir, family = args
    from xdsl.dialects.builtin import ModuleOp

    from mirage_xdsl.codegen.cuda_target import emit_cuda

    outcomes: list[Outcome] = []
    lowered: list[tuple[FuzzCase, Any, Outcome]] = []
    for i in indices:
        try:
            case = case_of(seed, i, family)
        except Exception as err:  # noqa: BLE001 - a generator bug is reported like a crash
            outcomes.append(failed_outcome(Outcome(_graph_name(seed, i, family), "crash"), err, rejected=False))
            continue
        if case.kind == "tc":  # the TC source and its sizes, as comment lines
            schedule = "".join(f"// {line}\n" for line in [f"tc sizes: {case.options['sizes']}", *case.options["tc"].splitlines()])
        else:
            schedule = f"// {case.kind} options: {case.options}\n" if case.options else ""
        out = Outcome(case.name, "ok", dtype=case.dtype, kind=case.kind, mlir=schedule + str(case.module))
        try:
            mod = lower_case(case)
            lowered.append((case, mod, out))
        except Exception as err:  # noqa: BLE001 - classified
            outcomes.append(failed_outcome(out, err, rejected=is_rejection(err)))
    groups: list[tuple[list[tuple[FuzzCase, Any, Outcome]], Any]] = []
    try:
        funcs = [op.clone() for _, mod, _ in lowered for op in mod.body.block.ops]
        groups.append((lowered, emit_cuda(ModuleOp(funcs), arch)))
    except Exception:  # noqa: BLE001 - print one graph at a time to find the one at fault
        for item in lowered:
            try:
                groups.append(([item], emit_cuda(item[1], arch)))
            except Exception as err:  # noqa: BLE001 - classified
                outcomes.append(failed_outcome(item[2], err, rejected=is_rejection(err)))
    ready: list[ReadyCase] = []
    for items, program in groups:
        if emulate:
            for case, _, out in items:
                outcomes.append(run_emulated(out, case, program, _input_seed(seed, int(case.name.rsplit("_", 1)[1])), cache_dir))
            continue
        from mirage_xdsl.driver.nvcc import compile_cuda

        try:
            cubin = str(compile_cuda(program.source, program.arch, cache_dir=cache_dir))
        except Exception as err:  # noqa: BLE001 - generated CUDA nvcc rejects: a crash of every graph in it
            if len(items) > 1:
                for item in items:  # which one: compile them alone
                    sub_out, sub_ready = _compile_one(seed, item, arch, cache_dir)
                    outcomes += sub_out
                    ready += sub_ready
            else:
                outcomes.append(failed_outcome(items[0][2], err, rejected=False))
            continue
        for case, _, out in items:
            index = int(case.name.rsplit("_", 1)[1])
            try:
                inputs, refs = reference_of(case, program.plans[case.name], _input_seed(seed, index))
            except Exception as err:  # noqa: BLE001 - the reference refused the generated graph
                outcomes.append(failed_outcome(out, err, rejected=False))
                continue
            out.compiled = True
            outcomes.append(out)  # status 'ok' until the GPU run says otherwise
            ready.append(ReadyCase(index, program.plans[case.name], cubin, program.source, inputs, refs))
    return outcomes, ready


def _compile_one(seed: int, item: tuple[FuzzCase, Any, Outcome], arch: str, cache_dir: str | None) -> tuple[list[Outcome], list[ReadyCase]]:
    from mirage_xdsl.codegen.cuda_target import emit_cuda
    from mirage_xdsl.driver.nvcc import compile_cuda

    case, mod, out = item
    index = int(case.name.rsplit("_", 1)[1])
    try:
        program = emit_cuda(mod, arch)
        cubin = str(compile_cuda(program.source, program.arch, cache_dir=cache_dir))
        inputs, refs = reference_of(case, program.plans[case.name], _input_seed(seed, index))
    except Exception as err:  # noqa: BLE001 - classified
        return [failed_outcome(out, err, rejected=is_rejection(err))], []
    out.compiled = True
    return [out], [ReadyCase(index, program.plans[case.name], cubin, program.source, inputs, refs)]


def _run_gpu_isolated(ready: ReadyCase, out: Outcome) -> Outcome:
    run_gpu(ready, out)
    return out


GPU_RUN_TIMEOUT_S = 120.0
"""Seconds one graph may run on the GPU (load, launch, copy back) before it counts as hung."""


class _GpuRunner:
    """Runs each compiled graph in a separate GPU process (driver/isolated.py), so a kernel
    that faults, hangs or kills its process is one crash, not the end of the run: after a
    crash the process is replaced.  It only starts once a graph needs it (`--emulate` never)."""

    def __init__(self, ctx: Any):
        from mirage_xdsl.driver.isolated import IsolatedWorker

        self.worker = IsolatedWorker(ctx)

    def run(self, ready: ReadyCase, out: Outcome) -> Outcome:
        """The Outcome of `ready` run and judged in the GPU process (`run_gpu`), or `out` as a crash
        ("GPU process lost") when the process died or took longer than `GPU_RUN_TIMEOUT_S`; after
        any crash the process is ended, so the next graph starts a fresh one (sticky CUDA errors)."""
        from mirage_xdsl.driver.isolated import WorkerLost

        try:
            result: Outcome = self.worker.call(_run_gpu_isolated, ready, out, timeout=GPU_RUN_TIMEOUT_S)
        except WorkerLost as err:
            out.status, out.reason = "crash", "GPU process lost"
            out.message = f"the GPU run did not come back within {GPU_RUN_TIMEOUT_S:.0f} s or its process died ({err})"
            return out
        if result.status == "crash":
            self.worker.close()  # the context may be poisoned (sticky CUDA error)
        return result

    def close(self) -> None:
        """End the GPU process now (killed, not waited for); a later `run` starts a new one."""
        self.worker.close()


def _summary(outcomes: Sequence[Outcome], count: int, elapsed: float) -> str:
    rejected = [o for o in outcomes if o.status == "rejected"]
    bad = [o for o in outcomes if o.status in ("mismatch", "crash")]
    compiled = sum(1 for o in outcomes if o.compiled)
    reasons = Counter(o.reason.split(":")[0] for o in rejected)
    why = ", ".join(f"{k} {v}" for k, v in reasons.most_common()) or "none"
    crashes = sum(1 for o in bad if o.status == "crash")
    partial = sum(1 for o in outcomes if o.unjudged)
    graphs = f"{count}" if len(outcomes) == count else f"{len(outcomes)} of {count}"
    return (
        f"fuzz: {graphs} graphs, {compiled} compiled, {len(rejected)} rejected ({why}), "
        f"{sum(1 for o in bad if o.status == 'mismatch')} mismatches, {crashes} crashes in {elapsed:.0f} s"
        f" ({partial} graphs with ill-conditioned rows left unjudged)"
    )


def _write_failure(directory: Path, seed: int, out: Outcome, family: str = "mixed") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{out.name}.mlir"
    index = out.name.rsplit("_", 1)[1]
    header = [
        f"// {out.status}: {out.reason}",
        f"// reproduce: python -m mirage_xdsl.bench.fuzz --seed {seed} --only {index} "
        + ("[--emulate]" if family == "mixed" else f"--family {family}" + (" [--emulate]" if family == "tc" else "")),
        f"// dtype {out.dtype}, {out.kind} graph, relative error {out.error:.3g}",
    ]
    header += [f"// {line}" for line in (out.message or "").splitlines()[-25:]]
    path.write_text("\n".join(header) + "\n" + (out.mlir or str(case_of(seed, int(index), family).module)) + "\n")
    return path


def run_fuzz(
    count: int,
    seed: int,
    *,
    batch: int = 8,
    jobs: int | None = None,
    emulate: bool = False,
    arch: str | None = None,
    failures_dir: str | os.PathLike[str] = "fuzz-failures",
    only: Sequence[int] | None = None,
    timeout_s: float = 600.0,
    family: str = "mixed",
    log: Callable[[str], None] = print,
    time_budget_s: float | None = None,
) -> list[Outcome]:
    """Generate, compile, run and check graphs `0..count-1` of run `seed` (or `only` those);
    return one Outcome per graph and write the failing ones to `failures_dir`.

    A graph's failure is its `Outcome` (a hung or killed worker: a crash of every graph of
    its batch), never raised.

    Args:
        count: graphs to generate (ignored when `only` is given).
        seed: the run seed (graph i is `case_of(seed, i)`).
        batch: graphs per translation unit (one nvcc or host C++ build).
        jobs: worker processes (None: the CPUs, minus one with a GPU).
        emulate: run on the CPU through the host emulator instead of the GPU.
        arch: the nvcc architecture (None: sm_90 with `emulate`, else the GPU's).
        failures_dir: the folder for the failing graphs (`.mlir` files).
        only: run only these graph indices.
        timeout_s: seconds a batch may take, plus 60 s times `batch`.
        family: "mixed" (kernel and threadblock graphs, `fuzz_graphs.py`), "gemm" (graphs
            the default pipeline gives the sm_90a GEMM, `fuzz_gemms.py`) or "attention"
            (attention for the flash and decode kernels, `fuzz_attention.py`), both GPU only,
            or "tc" (Tensor Comprehensions definitions, `fuzz_tc.py`).
        log: progress and failure lines.
        time_budget_s: stop once this many seconds have passed (None: no limit) -- the batches
            not collected by then are not run and have no Outcome; a batch cut short by the
            budget is not a crash.

    Raises:
        KeyboardInterrupt: Ctrl-C (or SIGTERM, with `main`'s handler), passed on after the
            workers and the GPU process were ended.
        OSError: a failing graph cannot be written to `failures_dir`.
    """
    start = time.monotonic()
    indices = list(only) if only else list(range(count))
    if arch is None:
        from mirage_xdsl.runtime.interop import detect_arch

        arch = "sm_90" if emulate else detect_arch()
    jobs = jobs or max(1, (os.cpu_count() or 2) - (0 if emulate else 1))
    batches = [indices[i : i + batch] for i in range(0, len(indices), batch)]
    outcomes: dict[int, Outcome] = {}
    with tempfile.TemporaryDirectory(prefix="mx-fuzz-") as tmp:
        cache_dir = os.environ.get("MIRAGE_XDSL_FUZZ_CACHE") or tmp
        ctx = multiprocessing.get_context("spawn")
        pool = ctx.Pool(jobs, maxtasksperchild=4)
        gpu = _GpuRunner(ctx)
        try:
            pending = [(b, pool.apply_async(_work_batch, ((seed, b, emulate, arch, cache_dir, family),))) for b in batches]
            deadline_per = timeout_s + 60.0 * batch
            for b, res in pending:
                left = None if time_budget_s is None else time_budget_s - (time.monotonic() - start)
                if left is not None and left <= 0:
                    break
                try:
                    outs, ready = res.get(timeout=deadline_per if left is None else min(deadline_per, left))
                except Exception as err:  # noqa: BLE001 - a hung or killed worker: every graph of its batch
                    if isinstance(err, multiprocessing.TimeoutError) and left is not None and left < deadline_per:
                        break  # the time budget ran out, not the batch's deadline
                    for i in b:
                        o = Outcome(_graph_name(seed, i, family), "crash", reason=f"worker: {type(err).__name__}", message=repr(err))
                        outcomes[i] = o
                    continue
                by_index = {int(o.name.rsplit("_", 1)[1]): o for o in outs}
                for r in ready:
                    by_index[r.index] = gpu.run(r, by_index[r.index])
                for i, o in by_index.items():
                    outcomes[i] = o
                    if o.status in ("mismatch", "crash"):
                        path = _write_failure(Path(failures_dir), seed, o, family)
                        log(f"fuzz: {o.name}: {o.status}: {o.reason} ({o.message.splitlines()[0] if o.message else ''}) -> {path}")
                done = len(outcomes)
                if done % max(batch * 8, 1) < len(b):
                    log(f"fuzz: {done}/{len(indices)} graphs ({time.monotonic() - start:.0f} s)")
        finally:
            gpu.close()
            pool.terminate()
            pool.join()
    result = [outcomes[i] for i in indices if i in outcomes]
    log(_summary(result, len(indices), time.monotonic() - start))
    if time_budget_s is not None and len(result) < len(indices):
        log(f"fuzz: time budget of {time_budget_s:g} s spent: {len(indices) - len(result)} graphs not run")
    return result


def _report(path: str, seed: int, outcomes: Sequence[Outcome]) -> None:
    rows = [
        {k: v for k, v in o.__dict__.items() if k != "mlir"} | {"error": o.error if math.isfinite(o.error) else None}
        for o in outcomes
    ]
    classes = Counter(f"{o.status}: {o.reason}" for o in outcomes if o.status != "ok")
    Path(path).write_text(json.dumps({"seed": seed, "classes": dict(classes.most_common()), "graphs": rows}, indent=1) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m mirage_xdsl.bench.fuzz`: exit 0 when every graph matched or was rejected,
    1 on any mismatch or crash (or no GPU without `--emulate`), 2 on bad arguments, 130 when
    interrupted (Ctrl-C or SIGTERM; the workers are ended).

    Raises:
        SystemExit: bad arguments or `--help` (argparse; status 2 or 0).
    """
    p = argparse.ArgumentParser(prog="mirage_xdsl.bench.fuzz", description=__doc__.split("\n\n")[0])
    p.add_argument("--count", type=int, default=100, help="graphs to generate (0..count-1)")
    p.add_argument("--seed", type=int, default=0, help="run seed: graph i is random_graph(Random(f'{seed}:{i}'))")
    p.add_argument("--batch", type=int, default=8, help="graphs per translation unit (one nvcc / host C++ build)")
    p.add_argument("--jobs", type=int, default=0, help="worker processes (default: CPUs, minus one with a GPU)")
    p.add_argument("--emulate", action="store_true", help="run on the CPU through the host emulator (no GPU needed)")
    p.add_argument("--arch", default=None, help="nvcc architecture (default: the GPU's, sm_90 without one)")
    p.add_argument("--failures", default="fuzz-failures", help="folder for the failing graphs (.mlir)")
    p.add_argument("--report", default=None, help="write every outcome and the failure classes as JSON")
    p.add_argument("--only", type=int, nargs="*", default=None, help="run only these graph indices")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds a batch may take (plus 60 per graph)")
    p.add_argument(
        "--max-seconds",
        type=float,
        default=None,
        help="stop after this many seconds; the summary and the report cover the graphs run by then",
    )
    p.add_argument(
        "--family",
        choices=("mixed", "gemm", "attention", "tc"),
        default="mixed",
        help="mixed: kernel and threadblock graphs; gemm: large matmuls with epilogues for the sm_90a GEMM; "
        "attention: attention for the flash and decode kernels (gemm and attention: GPU only); "
        "tc: Tensor Comprehensions definitions",
    )
    args = p.parse_args(argv)
    if args.count < 0 or args.batch < 1:
        p.error("--count must be >= 0 and --batch >= 1")
    if args.family in ("gemm", "attention") and args.emulate:
        p.error(f"--family {args.family} needs a GPU: the host emulator does not model the sm_90a kernels (drop --emulate)")
    if not args.emulate:
        from mirage_xdsl.runtime.interop import gpu_available

        if not gpu_available():
            print("mirage_xdsl.bench.fuzz: error: no CUDA GPU found (use --emulate to run on the CPU)", file=sys.stderr)
            return 1

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt  # SIGTERM like Ctrl-C: run_fuzz's `finally` ends the workers

    signal.signal(signal.SIGTERM, stop)
    try:
        outcomes = run_fuzz(
            args.count,
            args.seed,
            batch=args.batch,
            jobs=args.jobs or None,
            emulate=args.emulate,
            arch=args.arch,
            failures_dir=args.failures,
            only=args.only,
            timeout_s=args.timeout,
            family=args.family,
            time_budget_s=args.max_seconds,
        )
    except KeyboardInterrupt:
        print("mirage_xdsl.bench.fuzz: interrupted", file=sys.stderr)
        return 130
    if args.report:
        _report(args.report, args.seed, outcomes)
    return 1 if any(o.status in ("mismatch", "crash") for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
