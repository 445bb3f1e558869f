"""`mirage-verify A B`: does every graph of A compute program B?

    mirage-verify examples/mugraphs/rmsnorm_bs1.json examples/rmsnorm_linear.mlir
    mirage-verify lora.json my_lora.py              # a Python file defining program(*inputs)
    mirage-verify gqa_bs1.json gqa                  # a workload's torch program (needs torch)

A is a muGraph JSON or IR file (every graph, or `--graph`). B is a kernel graph in IR or
muGraph JSON (its only function, or `--program-graph`), a Python file defining
`program(*inputs)` on float64 numpy arrays (returning an array or a list of arrays), or the
name of a benchmark workload whose torch program `bench/workloads.py` holds. Both run in
float64 on the same random inputs over several seeds and scales (reference/equivalence.py);
a graph is accepted when every output agrees within `--rtol`.

Exit status: 0 when every graph is equivalent, 1 when one is not or on bad input (one line
`mirage-verify: error: ...`, no traceback), 130 on Ctrl-C.
"""

from __future__ import annotations

import argparse
import runpy
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mirage_xdsl.driver.load import ModuleLoadError, functions, load_module
from mirage_xdsl.reference.equivalence import (
    DEFAULT_RTOL,
    DEFAULT_SCALES,
    EquivalenceError,
    EquivalenceReport,
    Program,
    compare,
    graph_runner,
    specs_of,
)

PROG = "mirage-verify"


class VerifyError(Exception):
    """Bad input to mirage-verify; the message says what and how to fix it."""


def _select(funcs: list[Any], graph: str | None, path: Path) -> list[Any]:
    if not funcs:
        raise VerifyError(f"{path}: holds no kernel graph (func.func)")
    if graph is None:
        return funcs
    names = [f.sym_name.data for f in funcs]
    if graph in names:
        return [funcs[names.index(graph)]]
    if graph.isdigit() and int(graph) < len(funcs):
        return [funcs[int(graph)]]
    raise VerifyError(f"--graph {graph}: {path} has graphs 0..{len(funcs) - 1} ({', '.join(names[:6])})")


def _as_outputs(result: Any) -> list[np.ndarray]:
    items = list(result) if isinstance(result, (list, tuple)) else [result]
    return [np.asarray(_to_numpy(x), dtype=np.float64) for x in items]


def _to_numpy(x: Any) -> Any:
    return x.detach().cpu().numpy() if hasattr(x, "detach") else x


def python_program(path: Path, entry: str) -> Program:
    """The function `entry` of a Python file, as a `Program` on float64 numpy arrays.

    Raises:
        VerifyError: the file does not run or defines no callable `entry`.
    """
    try:
        namespace = runpy.run_path(str(path))
    except Exception as err:  # noqa: BLE001 - the user's file: report, never a traceback
        raise VerifyError(f"{path}: running it failed: {type(err).__name__}: {err}") from None
    fn = namespace.get(entry)
    if not callable(fn):
        raise VerifyError(f"{path}: defines no function '{entry}' (write def {entry}(*inputs) or pass --entry)")
    return lambda inputs: _as_outputs(fn(*inputs))


def workload_program(name: str) -> Program:
    """The torch program of benchmark workload `name`, run on the CPU in float64.

    Raises:
        VerifyError: unknown name, or torch is not installed.
    """
    try:
        import torch  # type: ignore[import-not-found]
    except ImportError:
        raise VerifyError(f"'{name}' names a workload whose program is written in torch; install torch") from None
    from mirage_xdsl.bench.workloads import torch_workload_program

    fn = torch_workload_program(name)
    if fn is None:
        raise VerifyError(f"'{name}' is neither a file nor a known workload (rmsnorm, gated_mlp, gqa, mha, mqa, lora, ntrans)")
    return lambda inputs: _as_outputs(fn(*[torch.from_numpy(x) for x in inputs]))


def load_program(spec: str, graph: str | None, entry: str) -> Program:
    """Program B from a file (IR, muGraph JSON, Python) or a workload name.

    Raises:
        VerifyError: as `python_program`, `workload_program`; an IR file with several graphs
            and no `--program-graph`.
    """
    path = Path(spec)
    if not path.is_file():
        return workload_program(spec)
    if path.suffix == ".py":
        return python_program(path, entry)
    module = load_module(path)
    funcs = functions(module)
    if graph is None and len(funcs) != 1:
        raise VerifyError(f"{path}: holds {len(funcs)} graphs; pick one with --program-graph NAME")
    (func,) = _select(funcs, graph, path)
    return graph_runner(module, func.sym_name.data)


def describe(name: str, report: EquivalenceReport) -> str:
    """One line: the verdict of one graph with its largest error and where it occurred."""
    n = len(report.trials)
    if report.equivalent:
        return f"{name}: equivalent (max rel error {report.max_error:.2g} over {n} trials)"
    worst = report.worst()
    assert worst is not None
    trial, out = worst
    return (
        f"{name}: DIFFERS: output {out} rel error {trial.errors[out]:.3g} "
        f"(seed {trial.seed}, inputs in +-{trial.scale:g}; tolerance {report.rtol:g})"
    )


def build_parser() -> argparse.ArgumentParser:
    """The `mirage-verify` command-line parser (plain argparse: usage errors exit with status 2)."""
    p = argparse.ArgumentParser(prog=PROG, description="Check by random testing that kernel graphs compute a program.")
    p.add_argument("graphs", type=Path, help="muGraph JSON or IR file whose graphs are checked")
    p.add_argument("program", help="IR/JSON file, Python file defining program(*inputs), or a workload name")
    p.add_argument("--graph", metavar="N", help="check only this graph of A (index or function name)")
    p.add_argument("--program-graph", metavar="NAME", help="the graph of B to use when B holds several")
    p.add_argument("--entry", default="program", help="function of a Python program file (default: program)")
    p.add_argument("--seeds", type=int, default=3, help="random input sets per scale (default 3)")
    p.add_argument(
        "--scales", default=",".join(f"{s:g}" for s in DEFAULT_SCALES), help="input magnitudes, comma-separated (default 0.5,4)"
    )
    p.add_argument("--rtol", type=float, default=DEFAULT_RTOL, help=f"max relative error accepted (default {DEFAULT_RTOL:g})")
    return p


def _scales(text: str) -> list[float]:
    try:
        scales = [float(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise VerifyError(f"--scales {text}: expected positive numbers separated by commas, e.g. 0.5,4") from None
    if not scales or any(not s > 0 for s in scales):
        raise VerifyError(f"--scales {text}: expected positive numbers separated by commas, e.g. 0.5,4")
    return scales


def run(args: argparse.Namespace) -> int:
    """Check every selected graph; print one line each; 0 if all are equivalent, else 1.

    Raises:
        VerifyError, ModuleLoadError, EquivalenceError: bad input (reported as one line).
    """
    if args.seeds < 1 or not args.rtol > 0:
        raise VerifyError("--seeds must be >= 1 and --rtol positive")
    scales = _scales(args.scales)
    program = load_program(args.program, args.program_graph, args.entry)
    module = load_module(args.graphs)
    bad = 0
    for func in _select(functions(module), args.graph, args.graphs):
        name = func.sym_name.data
        try:
            report = compare(graph_runner(module, name), program, specs_of(func), range(args.seeds), scales, args.rtol)
        except EquivalenceError as err:
            raise VerifyError(f"{name}: cannot be compared with the program: {err}") from None
        print(describe(name, report), flush=True)
        bad += not report.equivalent
    return 1 if bad else 0


def main(argv: Sequence[str] | None = None) -> None:
    """Console entry point: run `mirage-verify` on `argv` (default `sys.argv[1:]`) and exit.

    Exit status 0 when every graph is equivalent to the program, 1 when one is not or on bad input
    (one line on stderr, no traceback), 2 on usage errors (argparse), 130 on Ctrl-C.

    Raises:
        SystemExit: always, with that status (0 for --help).
    """
    args = build_parser().parse_args(argv)
    try:
        code = run(args)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        sys.exit(130)
    except (VerifyError, ModuleLoadError) as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        sys.exit(1)
    except Exception as err:  # noqa: BLE001 - parser/importer/executor errors: one line, no traceback
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        print(f"{PROG}: error: {first}", file=sys.stderr)
        sys.exit(1)
    sys.exit(code)


if __name__ == "__main__":
    main()
