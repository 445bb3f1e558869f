"""Check and time the persistent megakernel against the same per-op kernels in one CUDA graph.

    python -m mirage_xdsl.bench.megakernel [chain3 chain40 ...]

For each workload of examples/megakernel/ (issue #32): compile it (a) with `mirage-megakernel`
(one persistent kernel) and (b) as the same per-op kernels launched one after the other
(kn-fuse{per-op, block-threads=128} + mirage-transpile, PDL on); check both against the
reference executor on fresh random inputs with NaN-poisoned outputs; time both with
`runtime.measure.device_us` (CUDA-graph replays over rotated input sets).  Prints one table
row per workload: errors, µs of each and the speedup.  Needs a GPU, CuPy and nvcc.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path
from typing import Any

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "megakernel"


def workload(name: str) -> Any:
    """The kernel-graph module of examples/megakernel/<name> (built by its builder)."""
    spec = importlib.util.spec_from_file_location("build_megakernel_examples", EXAMPLES / "build_megakernel_examples.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.EXAMPLES[name]()


def per_op_graph(module: Any, arch: str | None = None) -> Any:
    """The per-op kernels of `module` (what the megakernel's tasks are) as a CompiledGraph
    launching them one after the other (PDL on sm_90)."""
    from mirage_xdsl.codegen.cuda_target import emit_cuda
    from mirage_xdsl.driver.compile import Prepared, _compiled, make_context
    from mirage_xdsl.driver.nvcc import normalize_arch
    from mirage_xdsl.passes.pipeline import MirageTranspilePass, fuse_plain_graphs
    from mirage_xdsl.runtime.executable import detect_arch

    m = module.clone()
    ctx = make_context()
    fuse_plain_graphs(ctx, m, per_op=True, block_threads=128)
    MirageTranspilePass(fuse=False).apply(ctx, m)
    arch = normalize_arch(arch or detect_arch())
    program = emit_cuda(m, arch)
    (fn,) = [op for op in m.walk() if op.name == "func.func"]
    name = fn.sym_name.data
    prepared = Prepared(name, m, program, program.plans[name], arch, [a.name_hint for a in fn.body.block.args])
    return _compiled(prepared, None, False, True)


def check(graph: Any, module: Any, seed: int) -> float:
    """Relative error of one poisoned run on fresh inputs against the reference."""
    import cupy

    from mirage_xdsl.reference.executor import run_reference
    from mirage_xdsl.runtime.executable import numpy_values, random_inputs
    from mirage_xdsl.runtime.measure import relative_error, to_device
    from mirage_xdsl.runtime.megakernel import check_megakernel

    plan = graph.plan
    inputs = random_inputs(plan.inputs, seed)
    refs = run_reference(module, [numpy_values(x, s.dtype) for x, s in zip(inputs, plan.inputs)])
    graph.poison_outputs = True
    outs = graph(*[to_device(cupy, x) for x in inputs])
    cupy.cuda.runtime.deviceSynchronize()
    check_megakernel(graph)
    host = [numpy_values(cupy.asnumpy(o), s.dtype) for o, s in zip(outs, plan.outputs)]
    return relative_error(host, refs)


def main(argv: list[str] | None = None) -> int:
    """Check and time each workload named in `argv` (default chain3, chain40); print a table."""
    import cupy

    from mirage_xdsl.driver.compile import compile
    from mirage_xdsl.runtime.measure import device_sets, device_us

    names = (sys.argv[1:] if argv is None else argv) or ["chain3", "chain40"]
    dev = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"device: {dev}, {time.strftime('%Y-%m-%d')}")
    print(f"{'workload':10} {'tasks':>6} {'err mk':>9} {'err ops':>9} {'mk us':>8} {'ops us':>8} {'speedup':>8}")
    stream = cupy.cuda.get_current_stream()
    for name in names:
        module = workload(name)
        mk = compile(module, megakernel=True, poison_outputs=True)
        ops = per_op_graph(module)
        err_mk = check(mk, module, 1)
        err_ops = check(ops, module, 1)
        sets = device_sets(cupy, mk.plan.inputs, 4)
        mk.poison_outputs = ops.poison_outputs = False
        t_mk = device_us(mk, sets, stream)
        t_ops = device_us(ops, sets, stream)
        tasks = len(mk.plan.megakernel["tasks"]) if mk.plan.megakernel else 0
        speed = (t_ops / t_mk) if t_mk and t_ops else float("nan")
        mk_us, ops_us = t_mk or float("nan"), t_ops or float("nan")
        print(f"{name:10} {tasks:>6} {err_mk:>9.2e} {err_ops:>9.2e} {mk_us:>8.2f} {ops_us:>8.2f} {speed:>7.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
