"""Probe of the megakernel's per-task overhead (issue #32): single-launch times and the trace
of chain40 under variants of the printed source.  Run on a GPU: python -m mirage_xdsl.experiments.mpk_probe"""

from __future__ import annotations

import json
import os
import statistics
import sys

import cupy

from mirage_xdsl.bench.megakernel import workload
from mirage_xdsl.codegen.cuda_target import emit_cuda
from mirage_xdsl.driver.compile import make_context
from mirage_xdsl.driver.nvcc import compile_cuda
from mirage_xdsl.passes.mpk.pipeline import MirageMegakernelPass
from mirage_xdsl.runtime.executable import CompiledGraph, random_inputs
from mirage_xdsl.runtime.measure import to_device
from mirage_xdsl.runtime.megakernel import check_megakernel, read_trace


def build(name: str, edit=lambda s: s, **opts):  # noqa: ANN001, ANN201
    m = workload(name)
    MirageMegakernelPass(trace=True, **opts).apply(make_context(), m)
    prog = emit_cuda(m, "sm_90a")
    src = edit(prog.source)
    g = CompiledGraph(prog.plans[name], compile_cuda(src, "sm_90a"), source=src)
    return g.load()


def time_launch(g, xs, n=30):  # noqa: ANN001, ANN201
    ts = []
    for _ in range(n):
        a, b = cupy.cuda.Event(), cupy.cuda.Event()
        a.record()
        g(*xs)
        b.record()
        b.synchronize()
        ts.append(cupy.cuda.get_elapsed_time(a, b) * 1e3)
    return statistics.median(ts[5:])


def main() -> None:
    out = os.environ.get("OUT", ".")
    name = sys.argv[1] if len(sys.argv) > 1 else "chain40"
    variants = {
        "as printed": ({}, lambda s: s),
        "spin": ({}, lambda s: "#define MX_MPK_SPIN\n" + s),
        "nofence": ({}, lambda s: s.replace("__threadfence();\n      (void)mx::mpk_add_release", "(void)mx::mpk_add_release")),
        "spin_nofence": ({}, lambda s: "#define MX_MPK_SPIN\n" + s.replace("__threadfence();\n      (void)mx::mpk_add_release", "(void)mx::mpk_add_release")),
        "workers=1": ({"workers": 1}, lambda s: s),
        "workers=132": ({"workers": 132}, lambda s: s),
    }
    wanted = sys.argv[2].split(",") if len(sys.argv) > 2 else list(variants)
    for label, (opts, edit) in variants.items():
        if label.replace(" ", "_") not in wanted:
            continue
        g = build(name, edit, **opts)
        xs = [to_device(cupy, x) for x in random_inputs(g.plan.inputs, 1)]
        us = time_launch(g, xs)
        check_megakernel(g)
        rec = read_trace(g)
        durs = [(e - s) / 1e3 for _, _, s, e in rec]
        starts = sorted(rec, key=lambda r: r[2])
        span = (max(e for *_, e in rec) - min(s for _, _, s, _ in rec)) / 1e3
        gaps = [(b[2] - a[3]) / 1e3 for a, b in zip(starts, starts[1:])]
        print(f"{label:12} launch {us:8.2f} us  span {span:8.2f} us  task median {statistics.median(durs):6.2f} us max {max(durs):6.2f}  gap median {statistics.median(gaps) if gaps else 0:6.2f}")
        labels = g.plan.megakernel["tasks"]
        t0 = min(s_ for _, _, s_, _ in rec)
        per_kernel = {}
        for t, _, s_, e in rec:
            k = labels[t].split(" ")[0]
            lo, hi = per_kernel.get(k, (s_, e))
            per_kernel[k] = (min(lo, s_), max(hi, e))
        if len(per_kernel) <= 8:
            print("   " + "  ".join(f"{k}: {(a - t0) / 1e3:.2f}-{(b - t0) / 1e3:.2f}" for k, (a, b) in per_kernel.items()))
        with open(os.path.join(out, f"trace-{name}-{label.replace(' ', '_').replace('=', '')}.json"), "w") as f:
            json.dump([list(r) for r in rec], f)


if __name__ == "__main__":
    main()
