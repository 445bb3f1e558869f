"""Variants of a layer-sized megakernel (issue #32): threads per task and workers per SM,
device time against our per-kernel graph.  Run on a GPU: python experiments/mpk_layer.py decoder_mlp"""

from __future__ import annotations

import sys

import cupy

from mirage_xdsl.bench.megakernel import check, per_kernel_graph, workload
from mirage_xdsl.driver.compile import compile
from mirage_xdsl.runtime.measure import device_sets, device_us, plan_bytes, rotation_sets
from mirage_xdsl.runtime.megakernel import read_trace


def main() -> None:
    name = sys.argv[1] if len(sys.argv) > 1 else "decoder_mlp"
    module = workload(name)
    stream = cupy.cuda.get_current_stream()
    ops = per_kernel_graph(module, False)
    sets = device_sets(cupy, ops.plan.inputs, rotation_sets(plan_bytes(ops.plan.inputs)))
    print(f"per-kernel graph: {device_us(ops, sets, stream):.2f} us")
    same = per_kernel_graph(module, False, threads=128)
    print(f"per-kernel graph of the megakernel's kernels (128 threads): {device_us(same, sets, stream):.2f} us, {len(same.kernel_names)} kernels")
    variants = [
        {"per_op": False, "threads": 128},
        {"per_op": False, "threads": 128, "trace": True},
    ]
    for opts in variants:
        try:
            mk = compile(module, megakernel=opts, poison_outputs=True)
            err = check(mk, module, 1)
            mk.poison_outputs = False
            us = device_us(mk, sets, stream)
            info = mk.plan.megakernel or {}
            print(f"{opts}: {us:.2f} us, err {err:.1e}, {len(info.get('tasks', []))} tasks on {info.get('workers')} workers")
            if opts.get("trace"):
                mk(*sets[0])
                rec = read_trace(mk)
                t0 = min(r[2] for r in rec)
                windows: dict[str, list[float]] = {}
                for t, _w, s_, e in rec:
                    k = info["tasks"][t].split(" ")[0]
                    windows.setdefault(k, []).append(((s_ - t0) / 1e3, (e - t0) / 1e3))
                for k, ws in windows.items():
                    starts = sorted(a for a, _ in ws)
                    ends = sorted(b for _, b in ws)
                    durs = sorted(b - a for a, b in ws)
                    print(f"  {k}: {len(ws)} tasks, start {starts[0]:.1f}..{starts[len(starts) // 2]:.1f}..{starts[-1]:.1f}, "
                          f"end {ends[0]:.1f}..{ends[len(ends) // 2]:.1f}..{ends[-1]:.1f}, dur {durs[0]:.1f}/{durs[len(durs) // 2]:.1f}/{durs[-1]:.1f} us")
        except Exception as e:  # noqa: BLE001
            print(f"{opts}: {type(e).__name__}: {str(e)[:300]}")


if __name__ == "__main__":
    main()
