"""Check and time the persistent megakernel against the same per-op kernels in one CUDA graph.

    python -m mirage_xdsl.bench.megakernel [chain3 chain40 ...]

For each workload of examples/megakernel/ (issue #32): compile it (a) with `mirage-megakernel`
(one persistent kernel) and (b) as our per-kernel graph: the same per-op kernels launched one after the other
(kn-fuse{per-op, block-threads=128} + mirage-transpile, PDL on), or for a layer
(`PER_OP` false) the default pipeline's fused kernels; check both against the reference
executor on fresh random inputs with NaN-poisoned outputs; time both with
`runtime.measure.device_us` (CUDA-graph replays over rotated input sets) and the torch peers
(bench/peers.py: CUDA graph, torch.compile) on the same sets.  Prints one table row per
workload: errors, µs of each and the megakernel's speedup over our per-kernel graph.  Needs a GPU, CuPy and nvcc.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from collections.abc import Sequence
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


def per_kernel_graph(module: Any, per_op: bool, arch: str | None = None, threads: int = 0) -> Any:
    """Our per-kernel version of `module` as a CompiledGraph launching its kernels one after
    the other (PDL on sm_90): the megakernel's own per-op kernels (`per_op`), else the
    default pipeline's fused kernels (`mx.compile`; with `threads`, kn-fuse's kernels with
    that many threads per block: the megakernel's own)."""
    from mirage_xdsl.codegen.cuda_target import emit_cuda
    from mirage_xdsl.driver.compile import Prepared, _compiled, compile, make_context
    from mirage_xdsl.driver.nvcc import normalize_arch
    from mirage_xdsl.passes.pipeline import MirageTranspilePass, fuse_plain_graphs
    from mirage_xdsl.runtime.interop import detect_arch

    if not per_op and not threads:
        return compile(module, poison_outputs=True)
    m = module.clone()
    ctx = make_context()
    fuse_plain_graphs(ctx, m, per_op=per_op, block_threads=threads or 128)
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
    from mirage_xdsl.runtime.measure import relative_error, to_device
    from mirage_xdsl.runtime.megakernel import check_megakernel
    from mirage_xdsl.runtime.random_inputs import numpy_values, random_inputs

    plan = graph.plan
    inputs = random_inputs(plan.inputs, seed)
    refs = run_reference(module, [numpy_values(x, s.dtype) for x, s in zip(inputs, plan.inputs)])
    graph.poison_outputs = True
    outs = graph(*[to_device(cupy, x) for x in inputs])
    cupy.cuda.runtime.deviceSynchronize()
    check_megakernel(graph)
    host = [numpy_values(cupy.asnumpy(o), s.dtype) for o, s in zip(outs, plan.outputs)]
    return relative_error(host, refs)


PER_OP = {
    "chain3": True,
    "chain40": True,
    "decoder_mlp": False,
    "decoder_layer": False,
    "decoder_layer_bs8": False,
    "decoder_4layers": False,
}
"""Whether the workload's megakernel runs one task per op's block (seed 003's microbenchmark)
or kn-fuse's fused kernels (a layer: fewer, larger tasks)."""


def trace_summary(graph: Any, path: str) -> str:
    """Run `graph` (compiled with trace=true) once more, write its Chrome trace JSON to `path`
    and summarise it: span, per-worker busy time (min / median / max, µs) and the kernels'
    task windows (first start, last end, µs from the first start)."""
    import statistics

    from mirage_xdsl.runtime.megakernel import megakernel_info, read_trace, write_chrome_trace

    write_chrome_trace(graph, path)
    info = megakernel_info(graph)
    assert info is not None
    records = read_trace(graph)  # (task, worker, start ns, end ns)
    t0 = min(r[2] for r in records)
    span = (max(r[3] for r in records) - t0) / 1e3
    busy: dict[int, float] = {}
    windows: dict[str, list[float]] = {}
    for task, worker, start, end in records:
        busy[worker] = busy.get(worker, 0.0) + (end - start) / 1e3
        kernel = info.tasks[task].split(" block")[0]
        w = windows.setdefault(kernel, [float("inf"), 0.0, 0])
        w[0], w[1], w[2] = min(w[0], (start - t0) / 1e3), max(w[1], (end - t0) / 1e3), w[2] + 1
    vals = [busy.get(w, 0.0) for w in range(info.workers)]
    lines = [
        f"trace: {len(records)} tasks on {info.workers} workers, span {span:.1f} us; busy per worker "
        f"min {min(vals):.1f} / median {statistics.median(vals):.1f} / max {max(vals):.1f} us"
    ]
    lines += [f"  {k}: {int(n)} tasks, {a:.1f}-{b:.1f} us" for k, (a, b, n) in windows.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Check and time each workload named in `argv` (default chain3, chain40); print a table:
    megakernel, our per-kernel graph (CUDA graph + PDL), torch CUDA graph and torch.compile
    (bench/peers.py), µs of device time each, and the megakernel's GB/s over the bytes of
    its inputs, also as a share of the GPU's device-to-device copy bandwidth measured in the
    same run (`runtime.measure.copy_bandwidth_gbs`).  `--no-compile NAME` skips torch.compile
    for that workload (its compile time);
    `--trace NAME=PATH` writes the Chrome trace of NAME's megakernel to PATH and prints
    `trace_summary`; `--compile-mode MODE` picks torch.compile's mode (bench/peers.py
    `COMPILE_MODES`, default `COMPILE_MODE`); `--dispatch MODE` the megakernel's dispatch
    (kn-to-task-graph `dispatch`, default `auto`)."""
    from mirage_xdsl.bench.peers import COMPILE_MODE, COMPILE_MODES

    args = _parser(COMPILE_MODE, COMPILE_MODES).parse_args(argv)
    traces: dict[str, str] = {}
    for spec in args.trace:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            print(f"megakernel bench: --trace {spec}: expected NAME=PATH (e.g. decoder_layer=trace.json)", file=sys.stderr)
            return 2
        traces[name] = path
    no_compile, mode = set(args.no_compile), args.compile_mode

    import cupy

    from mirage_xdsl.bench.peers import time_peers
    from mirage_xdsl.driver.compile import compile
    from mirage_xdsl.reference.executor import run_reference
    from mirage_xdsl.runtime.measure import (
        copy_bandwidth_gbs,
        device_sets,
        device_us,
        plan_bytes,
        rotation_sets,
        to_device,
    )
    from mirage_xdsl.runtime.random_inputs import numpy_values, random_inputs

    names = args.workloads
    names = names or ["chain3", "chain40"]
    dev = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    copy_gbs = copy_bandwidth_gbs(cupy)
    print(
        f"device: {dev}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
        f"device-to-device copy bandwidth (read + write) {copy_gbs:.0f} GB/s; torch {_torch_version()}, "
        f"torch.compile mode {mode}; megakernel dispatch {args.dispatch}"
    )
    heads = ("mk us", "ops us", "torch gr", "t.compil")
    cols = " ".join(f"{h:>8}" for h in heads)
    print(f"{'workload':17} {'tasks':>6} {'err mk':>9} {'err ops':>9} {cols} {'mk/ops':>7} {'mk GB/s':>8} {'% copy':>7}")
    stream = cupy.cuda.get_current_stream()
    for name in names:
        module = workload(name)
        per_op = PER_OP.get(name, True)
        mk = compile(module, megakernel={"per_op": per_op, "dispatch": args.dispatch}, poison_outputs=True)
        ops = per_kernel_graph(module, per_op)
        err_mk = check(mk, module, 1)
        err_ops = check(ops, module, 1)
        sets = device_sets(cupy, mk.plan.inputs, rotation_sets(plan_bytes(mk.plan.inputs)))
        mk.poison_outputs = ops.poison_outputs = False
        t_mk = device_us(mk, sets, stream)
        t_ops = device_us(ops, sets, stream)
        inputs = random_inputs(mk.plan.inputs, 2)
        refs = run_reference(module, [numpy_values(x, s.dtype) for x, s in zip(inputs, mk.plan.inputs)])
        peers = time_peers(
            cupy,
            name,
            mk.plan.inputs,
            sets,
            [to_device(cupy, x) for x in inputs],
            refs,
            atol_rel=1e-2,
            compile_mode=None if name in no_compile else mode,
        )
        gbs = plan_bytes(mk.plan.inputs) / (t_mk * 1e3) if t_mk else float("nan")
        tasks = len(mk.plan.megakernel["tasks"]) if mk.plan.megakernel else 0
        speed = (t_ops / t_mk) if t_mk and t_ops else float("nan")
        nan = float("nan")
        cells = [t_mk or nan, t_ops or nan, peers.graph_us or nan, peers.compile_us or nan]
        print(
            f"{name:17} {tasks:>6} {err_mk:>9.2e} {err_ops:>9.2e} "
            + " ".join(f"{c:>8.2f}" for c in cells)
            + f" {speed:>6.2f}x {gbs:>8.0f} {100 * gbs / copy_gbs:>6.0f}%",
            flush=True,
        )
        for peer, note in peers.notes.items():
            print(f"  {peer}: {note}")
        if name in traces:
            traced = compile(module, megakernel={"per_op": per_op, "trace": True, "dispatch": args.dispatch})
            traced(*[to_device(cupy, x) for x in inputs])
            cupy.cuda.runtime.deviceSynchronize()
            print(trace_summary(traced, traces[name]), flush=True)
    return 0


def _parser(default_mode: str, modes: Sequence[str]) -> argparse.ArgumentParser:
    """The command line of `main`."""
    from mirage_xdsl.dialects.mpk import DISPATCH_MODES

    p = argparse.ArgumentParser(
        prog="python -m mirage_xdsl.bench.megakernel",
        description="Check and time workloads as one persistent megakernel against our per-kernel graph and torch.",
    )
    p.add_argument("workloads", nargs="*", help="workload names (default: chain3 chain40)")
    p.add_argument("--no-compile", action="append", default=[], metavar="NAME", help="skip torch.compile for NAME")
    p.add_argument("--compile-mode", default=default_mode, choices=list(modes), help="torch.compile mode")
    p.add_argument("--dispatch", default="auto", choices=["auto", *DISPATCH_MODES],
                   help="the megakernel's dispatch (kn-to-task-graph dispatch; default auto)")
    p.add_argument("--trace", action="append", default=[], metavar="NAME=PATH",
                   help="write NAME's per-task timeline as Chrome trace JSON to PATH")
    return p


def _torch_version() -> str:
    """torch.__version__, or `absent`."""
    try:
        import torch
    except ImportError:
        return "absent"
    return str(torch.__version__)


if __name__ == "__main__":
    raise SystemExit(main())
