"""`mirage-run`: import a kernel graph, compile it, run it on the GPU, check and time it.

    mirage-run rmsnorm_bs1.json --all --check          # every candidate vs the reference
    mirage-run gqa_bs1.json --graph 3 --check --bench  # one candidate, timed against torch
    mirage-run graph.mlir --check

Steps per graph: import (`.json`: Mirage muGraph file; `.tc`: Tensor Comprehensions, sizes
from its `# sizes:` line or `--tc-sizes`; anything else: textual IR with our dialects), the
default pipeline (`mirage-transpile`), `emit_cuda`, nvcc (disk cache), then on the GPU one
run on fresh seeded random inputs with NaN-poisoned outputs.  `--check` compares with the
float64 reference executor: error = max|out - ref| / max|ref| over the outputs, passing at
`--atol-rel` (1e-2, right for fp16).  `--bench` times the graph with CUDA events
(warm-up, then the median of many timed sweeps over several rotated input sets):
"ours" = a call of the compiled graph (checks, allocation, launches), "ours graph" = a call
in CUDA-graph mode, "ours dev" = device time alone (one CUDA graph over all input sets,
replayed), and the torch program of the same workload in the same run (eager and CUDA
graph: the kn ops of the graph interpreted in torch, or, for graphs made of customized ops,
the workload's program known from the muGraph file name).

Without a GPU it does what it can: generates the CUDA, compiles it when nvcc is found, runs
the reference executor, and says so ("no GPU found: compiled N kernels, reference executed,
GPU run skipped"); exit 0.  Errors are one line on stderr, exit 1; a failed check also exits 1;
Ctrl-C prints `mirage-run: interrupted` and exits 130.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Checking, timing and the torch programs of the workloads are shared with `mirage-bench`.
from mirage_xdsl.bench.check import relative_error
from mirage_xdsl.bench.check import to_device as _to_device
from mirage_xdsl.bench.timing import (
    L2_BYTES,  # noqa: F401 - re-exported
    bench_us,
    device_us,
    rotation_sets,
    torch_graph_runner,
)
from mirage_xdsl.bench.workloads import torch_rms as _torch_rms
from mirage_xdsl.bench.workloads import torch_workload_program as _workload
from mirage_xdsl.driver.load import ModuleLoadError, functions
from mirage_xdsl.driver.load import load_module as _load_module

PROG = "mirage-run"


class RunError(Exception):
    """A user-facing error: printed as one line, exit code 1."""


# ---------------------------------------------------------------------------------------
# Import


def load_module(path: Path, era: str | None = None, tc_sizes: str | None = None) -> Any:
    """`driver.load.load_module`, its file errors (and those of a `.tc` file or of
    `tc_sizes`, the `--tc-sizes` text) as `RunError`."""
    from mirage_xdsl.frontends.tc import TcError, parse_sizes

    try:
        sizes = parse_sizes(tc_sizes or "")
    except ValueError as err:
        raise RunError(f"--tc-sizes: {err}") from None
    try:
        return _load_module(path, era, sizes=sizes)
    except TcError as err:
        raise RunError(f"{err.location}: {err.message}") from None
    except ModuleLoadError as err:
        raise RunError(str(err)) from None


def select(funcs: Sequence[Any], graph: str | None, all_graphs: bool) -> tuple[list[Any], str | None]:
    """The functions to run and a note for the user (None when nothing needs saying)."""
    if not funcs:
        raise RunError("the input holds no kernel graph (func.func)")
    if all_graphs:
        return list(funcs), None
    if graph is None:
        if len(funcs) == 1:
            return list(funcs), None
        return [funcs[0]], f"{len(funcs)} graphs in the file; running graph 0 (--graph N or --all for others)"
    names = [f.sym_name.data for f in funcs]
    if graph in names:
        return [funcs[names.index(graph)]], None
    try:
        index = int(graph)
    except ValueError:
        raise RunError(f"--graph {graph}: no such graph (names: {', '.join(names[:6])}{', ...' if len(names) > 6 else ''})") from None
    if not 0 <= index < len(funcs):
        raise RunError(f"--graph {index}: the file has {len(funcs)} graphs (0..{len(funcs) - 1})")
    return [funcs[index]], None


# ---------------------------------------------------------------------------------------
# The torch program of a graph


def torch_kn_program(func: Any) -> Callable[..., list[Any]] | None:
    """A torch-eager interpreter of the kn ops of `func` (None if it holds customized ops)."""
    import torch  # type: ignore[import-not-found]

    ops = list(func.body.block.ops)
    if any(op.name == "kn.customized" for op in func.walk()):
        return None
    F = torch.nn.functional
    unary: dict[str, Callable[[Any, Any], Any]] = {
        "kn.exp": lambda op, x: torch.exp(x),
        "kn.square": lambda op, x: x * x,
        "kn.sqrt": lambda op, x: torch.sqrt(x),
        "kn.silu": lambda op, x: F.silu(x),
        "kn.sigmoid": lambda op, x: torch.sigmoid(x),
        "kn.gelu": lambda op, x: F.gelu(x),
        "kn.relu": lambda op, x: torch.relu(x),
        "kn.log": lambda op, x: torch.log(x),
        "kn.clamp": lambda op, x: torch.clamp(x, op.min_value.value.data, op.max_value.value.data),
        "kn.mul_scalar": lambda op, x: x * op.scalar.value.data,
        "kn.add_scalar": lambda op, x: x + op.scalar.value.data,
        "kn.all_reduce": lambda op, x: x,
    }
    binary: dict[str, Callable[[Any, Any], Any]] = {
        "kn.add": torch.add,
        "kn.sub": torch.sub,
        "kn.mul": torch.mul,
        "kn.div": torch.div,
        "kn.pow": torch.pow,
        "kn.matmul": torch.matmul,
    }

    def run(*inputs: Any) -> list[Any]:
        env: dict[Any, Any] = dict(zip(func.body.block.args, inputs))
        for op in ops:
            xs = [env[v] for v in op.operands]
            if op.name in unary:
                ys = [unary[op.name](op, xs[0])]
            elif op.name in binary:
                ys = [binary[op.name](xs[0], xs[1])]
            elif op.name == "kn.reduction":
                dim, size = op.dim.value.data, op.size.value.data
                x = xs[0]
                shape = x.shape[:dim] + (x.shape[dim] // size, size) + x.shape[dim + 1 :]
                ys = [x.reshape(shape).sum(dim)]
            elif op.name == "kn.rms_norm":
                ys = [_torch_rms(xs[0], len(op.normalized_shape.get_values()))]
            elif op.name == "kn.concat":
                ys = [torch.cat(xs, dim=op.dim.value.data)]
            elif op.name == "kn.reshape":
                ys = [xs[0].reshape(tuple(op.results[0].type.get_shape()))]
            elif op.name == "kn.chunk":
                ys = list(torch.chunk(xs[0], len(op.results), dim=op.dim.value.data))
            elif op.name == "func.return":
                return xs
            else:
                raise RunError(f"torch interpreter: unsupported op {op.name}")
            env.update(zip(op.results, ys))
        return []

    return run


def torch_program(func: Any, stem: str) -> Callable[..., list[Any]] | None:
    """The torch program to time beside a graph, or None if none is known."""
    try:
        import torch  # noqa: F401  # type: ignore[import-not-found]
    except ImportError:
        return None
    kn = torch_kn_program(func)
    if kn is not None:
        return kn
    fn = _workload(stem)
    if fn is None:
        return None
    return lambda *xs: [fn(*xs)]


# ---------------------------------------------------------------------------------------
# One graph


@dataclass
class Row:
    """The result of one graph, one line of the table: its status (e.g. `compiled`, `ok`, `FAIL`, `error`,
    `rejected`), relative error, times in µs (None when not measured), kernel count and error message."""

    graph: str
    status: str = "-"
    error: float | None = None
    ours_us: float | None = None
    ours_graph_us: float | None = None
    ours_dev_us: float | None = None
    torch_us: float | None = None
    torch_graph_us: float | None = None
    kernels: int = 0
    message: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


_INTERNAL = (LookupError, AttributeError, TypeError, AssertionError, RecursionError, MemoryError)
"""Exceptions no check raises on purpose: their text alone (a KeyError's is a bare key) tells
a user nothing, so they are reported as internal errors."""


def _one_line(err: BaseException) -> str:
    lines = [ln.strip() for ln in str(err).strip().splitlines() if ln.strip()]
    if isinstance(err, _INTERNAL):
        detail = f"{type(err).__name__}: {lines[0]}" if lines else type(err).__name__
        return f"internal error ({detail}); the input passed the checks but could not be handled: please report this with the input file"
    if not lines:
        return type(err).__name__
    from mirage_xdsl.driver.nvcc import CudaCompileError

    try:
        from xdsl.utils.exceptions import ParseError
    except ImportError:  # a device machine running saved plans has no xDSL
        ParseError = ()  # type: ignore[assignment,misc]  # noqa: N806

    if isinstance(err, CudaCompileError) and len(lines) > 1:
        return f"{lines[0].rstrip(':')}: {lines[1]}"
    if isinstance(err, ParseError) and len(lines) > 1:
        return f"{lines[0]}: {lines[-1]}"  # location, then the message under the caret
    return lines[0]


def run_graph(
    module: Any,
    func: Any,
    *,
    stem: str,
    seed: int,
    arch: str,
    gpu: bool,
    nvcc: str | None,
    check: bool,
    bench: bool,
    atol_rel: float,
    cache_dir: str | None,
    autotune: int = 0,
    megakernel: bool = False,
    trace: str | None = None,
) -> Row:
    """Compile and run one graph; failures are reported in the row, not raised.  With
    `autotune` > 1 on a GPU, plain kernel graphs are compiled through
    `compile(..., autotune=autotune)` (the fastest of that many plan ranks).  `megakernel`:
    compile with `mirage-megakernel` (one persistent kernel; a watchdog stop is the row's
    error); `trace`: also record its per-task times and write them to this Chrome trace file."""
    from mirage_xdsl.driver.compile import compile, prepare
    from mirage_xdsl.driver.nvcc import compile_cuda
    from mirage_xdsl.runtime.executable import CompiledGraph
    from mirage_xdsl.runtime.random_inputs import numpy_values, random_inputs

    name = func.sym_name.data
    row = Row(name)
    try:
        if autotune > 1 and gpu and not megakernel:
            graph = compile(module, name, arch, cache_dir=cache_dir, autotune=autotune)
            plan = graph.plan
            row.kernels = len(graph.kernel_names)
            row.status = "compiled"
        else:
            mk: bool | dict[str, Any] = {"trace": True} if megakernel and trace else megakernel
            prepared = prepare(module, name, arch, megakernel=mk)
            plan = prepared.plan
            graph = CompiledGraph(plan, None, source=prepared.program.source, input_names=prepared.input_names)
            row.kernels = len(graph.kernel_names)
            row.status = "generated"
            if nvcc is not None and row.kernels:
                graph.cubin_path = compile_cuda(prepared.program.source, prepared.arch, cache_dir=cache_dir, nvcc=nvcc)
                row.status = "compiled"
            elif nvcc is not None:
                row.status = "compiled"
        inputs = random_inputs(plan.inputs, seed)
        refs = None
        if check or not gpu:
            from mirage_xdsl.reference.executor import run_reference

            refs = run_reference(module, [numpy_values(x, s.dtype) for x, s in zip(inputs, plan.inputs)], func_name=name)
            if not gpu:
                row.status += "+ref"
        if not gpu:
            if row.kernels == 0 and refs is not None:
                # a plan of library calls only runs on the host too: check it there
                graph.poison_outputs = True
                outs = graph.run_host(*inputs)
                row.error = relative_error([numpy_values(o, s.dtype) for o, s in zip(outs, plan.outputs)], refs)
                row.status = "host ok" if row.error <= atol_rel else "host FAIL"
            return row
        import cupy  # type: ignore[import-not-found]

        graph.poison_outputs = True
        dev_inputs = [_to_device(cupy, x) for x in inputs]
        outs = graph(*dev_inputs)
        cupy.cuda.get_current_stream().synchronize()
        if megakernel:
            from mirage_xdsl.runtime.megakernel import check_megakernel, write_chrome_trace

            check_megakernel(graph)
            if trace:
                write_chrome_trace(graph, trace)
        row.status = "ran"
        if refs is not None:
            host = [numpy_values(cupy.asnumpy(o), s.dtype) for o, s in zip(outs, plan.outputs)]
            row.error = relative_error(host, refs)
            row.status = "ok" if row.error <= atol_rel else "FAIL"
        if bench:
            _bench(row, graph, plan, func, stem, seed)
    except Exception as err:  # noqa: BLE001 - reported per graph; the run goes on
        row.message = _one_line(err)
        from mirage_xdsl.target.errors import SharedMemoryExceeded

        # more shared memory than the GPU has: Mirage rejects such candidates too; reported,
        # but not a failure of the run
        row.status = "rejected" if isinstance(err, SharedMemoryExceeded) else "error"
    return row


def _bench(row: Row, graph: Any, plan: Any, func: Any, stem: str, seed: int) -> None:
    import cupy  # type: ignore[import-not-found]

    from mirage_xdsl.runtime.executable import CompiledGraph
    from mirage_xdsl.runtime.interop import external_stream
    from mirage_xdsl.runtime.library_ops import storage_dtype
    from mirage_xdsl.runtime.random_inputs import random_inputs
    from mirage_xdsl.runtime.validate import alloc_elements

    in_bytes = sum(alloc_elements(s.shape, s.strides) * storage_dtype(s.dtype).itemsize for s in plan.inputs)
    n_sets = rotation_sets(in_bytes)
    sets_np = [random_inputs(plan.inputs, seed + 1 + k) for k in range(n_sets)]
    sets = [[_to_device(cupy, x) for x in xs] for xs in sets_np]
    stream = cupy.cuda.get_current_stream()
    eager = CompiledGraph(plan, graph.cubin_path, input_names=graph.input_names).load()
    row.ours_us = bench_us(lambda i: eager(*sets[i]), n_sets, stream)
    replay = CompiledGraph(plan, graph.cubin_path, input_names=graph.input_names, cuda_graph=True).load()
    row.ours_graph_us = bench_us(lambda i: replay(*sets[i]), n_sets, stream)
    row.ours_dev_us = device_us(eager, sets, stream)
    fn = torch_program(func, stem)
    if fn is None:
        return
    import torch  # type: ignore[import-not-found]

    from mirage_xdsl.runtime.interop import to_torch

    tsets = [[to_torch(cupy, x, s.dtype) for x, s in zip(xs, plan.inputs)] for xs in sets]
    tstream = external_stream(cupy, torch.cuda.current_stream().cuda_stream)
    with torch.no_grad():
        row.torch_us = bench_us(lambda i: fn(*tsets[i]), n_sets, tstream)
        try:
            runner = torch_graph_runner(fn, tsets)
            row.torch_graph_us = bench_us(runner, n_sets, tstream)
        except Exception:  # noqa: BLE001 - a program torch cannot capture keeps its eager time
            row.torch_graph_us = None


# ---------------------------------------------------------------------------------------
# Output


def _fmt(value: float | None, spec: str) -> str:
    if value is None:
        return "-"
    if math.isinf(value) or math.isnan(value):
        return "nan/inf"
    return format(value, spec)


COLUMNS = ("graph", "status", "error", "ours µs", "ours graph µs", "ours dev µs", "torch µs", "torch graph µs")


def format_row(row: Row) -> list[str]:
    """The table cells of `row`, in the order of `COLUMNS` (`-` for a value not measured)."""
    return [
        row.graph,
        row.status,
        _fmt(row.error, ".1e"),
        _fmt(row.ours_us, ".1f"),
        _fmt(row.ours_graph_us, ".1f"),
        _fmt(row.ours_dev_us, ".1f"),
        _fmt(row.torch_us, ".1f"),
        _fmt(row.torch_graph_us, ".1f"),
    ]


WIDTHS = [12, 13, 8, 8, 13, 11, 9, 14]


def print_line(cells: Sequence[str]) -> None:
    """Print one table line: `cells` left-aligned in the column `WIDTHS`, flushed."""
    print("  ".join(c.ljust(w) for c, w in zip(cells, WIDTHS)).rstrip(), flush=True)


def fit_names(names: Sequence[str]) -> None:
    """Widen the first column to the longest graph name."""
    WIDTHS[0] = max([12] + [len(n) for n in names])


# ---------------------------------------------------------------------------------------
# main


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors as one line and exit code 1 like every other error."""

    def error(self, message: str) -> None:  # type: ignore[override]
        """Print the usage error as one line on stderr (`mirage-run: error: ... (see --help)`) and exit with status 1."""
        print(f"{self.prog}: error: {message} (see --help)", file=sys.stderr)
        sys.exit(1)


def build_parser() -> argparse.ArgumentParser:
    """The `mirage-run` command-line parser."""
    p = _Parser(
        prog=PROG,
        description="Compile a Mirage kernel graph (muGraph .json, .mlir or TC .tc), run it on the GPU, check and time it.",
    )
    p.add_argument("file", type=Path, help="a Mirage muGraph JSON file, a textual IR (.mlir) file or a Tensor "
                   "Comprehensions file (.tc, sizes from its '# sizes:' line)")
    p.add_argument("--tc-sizes", metavar="N=64,...", help="sizes of a .tc file, overriding its '# sizes:' line")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--graph", metavar="N", help="graph index in the file (or function name); default 0")
    which.add_argument("--all", action="store_true", help="run every graph of the file")
    p.add_argument("--check", action="store_true", help="compare with the float64 reference executor")
    p.add_argument(
        "--against",
        metavar="PROGRAM",
        help="also check that each graph computes PROGRAM (kn graph in IR/JSON, Python file defining program(*inputs), "
        "or a workload name) by random testing in float64",
    )
    p.add_argument("--program-graph", metavar="NAME", help="with --against: the graph of PROGRAM to use when it holds several")
    p.add_argument("--bench", action="store_true", help="time the graph and the torch program of the workload")
    p.add_argument("--era", choices=("A", "B", "C"), help="muGraph schema era (default: detected, else C)")
    p.add_argument("--cache-dir", help="cubin cache directory (default $MIRAGE_XDSL_CACHE_DIR or ~/.cache/mirage_xdsl)")
    p.add_argument("--atol-rel", type=float, default=1e-2, help="max |out-ref| / max |ref| that passes (default 1e-2)")
    p.add_argument("--seed", type=int, help="seed of the random inputs (default: fresh, printed)")
    p.add_argument("--arch", help="CUDA architecture (default: the GPU's, else sm_90)")
    p.add_argument(
        "--autotune",
        type=int,
        default=0,
        metavar="K",
        help="on a GPU, plain kernel graphs: time the K cheapest plans and keep the fastest",
    )
    p.add_argument(
        "--megakernel",
        action="store_true",
        help="compile each graph as ONE persistent kernel (mirage-megakernel: per-op tasks ordered by events)",
    )
    p.add_argument("--trace", metavar="FILE", help="with --megakernel: write the per-task timeline as Chrome trace JSON")
    return p


def main(argv: Sequence[str] | None = None) -> None:
    """Console entry point: run `mirage-run` on `argv` (default `sys.argv[1:]`) and exit.

    Exit status 0 when no graph failed (an error, a failed `--check` or `--against`; a graph rejected for
    needing more shared memory than the GPU has is no failure), 1 when one did, on usage errors and on
    any other error (one line on stderr, no traceback), 130 on Ctrl-C.

    Raises:
        SystemExit: always, with that status (0 for --help).
    """
    args = build_parser().parse_args(argv)
    try:
        code = _main(args)
    except KeyboardInterrupt:  # nvcc is killed by subprocess.run; cache writes are atomic
        print(f"{PROG}: interrupted", file=sys.stderr)
        sys.exit(130)
    except RunError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        sys.exit(1)
    except Exception as err:  # noqa: BLE001 - importer/parser/pipeline errors: one line, no traceback
        print(f"{PROG}: error: {_one_line(err)}", file=sys.stderr)
        sys.exit(1)
    sys.exit(code)


def _main(args: argparse.Namespace) -> int:
    from mirage_xdsl.driver.nvcc import find_nvcc, normalize_arch
    from mirage_xdsl.runtime.interop import detect_arch, gpu_available

    if args.atol_rel <= 0:
        raise RunError("--atol-rel must be positive")
    module = load_module(args.file, args.era, args.tc_sizes)
    funcs, note = select(functions(module), args.graph, args.all)
    gpu = gpu_available()
    nvcc = find_nvcc()
    arch = normalize_arch(args.arch) if args.arch else detect_arch()
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little") % (2**31)
    stem = args.file.stem
    print(f"{args.file.name}: {len(funcs)} graph(s), {arch}, seed {seed}" + (f" ({note})" if note else ""), flush=True)
    wrong_program = check_against(module, funcs, args.against, args.program_graph) if args.against else 0
    fit_names([f.sym_name.data for f in funcs])
    print_line(COLUMNS)
    rows = []
    start = time.perf_counter()
    for func in funcs:
        row = run_graph(
            module,
            func,
            stem=stem,
            seed=seed,
            arch=arch,
            gpu=gpu,
            nvcc=nvcc,
            check=args.check,
            bench=args.bench,
            atol_rel=args.atol_rel,
            cache_dir=args.cache_dir,
            autotune=args.autotune,
            megakernel=args.megakernel,
            trace=args.trace,
        )
        rows.append(row)
        print_line(format_row(row))
    for row in rows:
        if row.message:
            print(f"{row.graph}: {row.message}", file=sys.stderr)
    kernels = sum(r.kernels for r in rows if r.status != "error")
    elapsed = time.perf_counter() - start
    errors = sum(r.status == "error" for r in rows)
    failed_note = f"; {errors} of {len(rows)} graph(s) failed (messages above)" if errors else ""
    rejected = sum(r.status == "rejected" for r in rows)
    if rejected:
        failed_note += f"; {rejected} rejected: more shared memory than the GPU has"
    if not gpu:
        if nvcc is not None:
            print(f"no GPU found: compiled {kernels} kernels, reference executed, GPU run skipped{failed_note} ({elapsed:.1f} s)")
        else:
            print(
                f"no GPU found and no nvcc: generated {kernels} kernels (not compiled), reference executed, "
                f"GPU run skipped{failed_note}"
            )
    else:
        failed = sum(r.status == "FAIL" for r in rows)
        summary = f"{len(rows)} graph(s) run in {elapsed:.1f} s"
        if args.check:
            summary += f", {len(rows) - failed - errors - rejected} passed the check (atol-rel {args.atol_rel:g})"
        print(summary + failed_note)
    return 1 if wrong_program or any(r.status in ("error", "FAIL", "host FAIL") for r in rows) else 0


def check_against(module: Any, funcs: Sequence[Any], program_spec: str, program_graph: str | None) -> int:
    """`--against`: check by random testing (float64, reference executor) that each graph
    computes the program, print one verdict line per graph, return how many do not.

    `--check` alone compares the kernels with the reference of the SAME graph, so a graph
    that does not compute its program (a saved candidate with a wrong op) would pass it.

    Raises:
        VerifyError: the program cannot be loaded (see `mirage_verify.load_program`).
    """
    from mirage_xdsl.reference.equivalence import compare, graph_runner, specs_of
    from mirage_xdsl.tools.mirage_verify import VerifyError, describe, load_program

    try:
        program = load_program(program_spec, program_graph, "program")
    except VerifyError as err:
        raise RunError(f"--against {program_spec}: {err}") from None
    wrong = 0
    for func in funcs:
        name = func.sym_name.data
        report = compare(graph_runner(module, name), program, specs_of(func))
        print(describe(name, report).replace(": equivalent", f": computes {program_spec}"), flush=True)
        wrong += not report.equivalent
    return wrong


if __name__ == "__main__":
    main()
