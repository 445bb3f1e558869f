"""Device time of each kernel of every prepared candidate, alone and in its plan.

For a plan of two kernels (split-K partials + the combine kernel) `mirage-bench` reports
only the sum; this prints the plan's time and each kernel's alone (one CUDA graph over the
rotated input sets, replayed, as `ours dev`), to see what a combine costs.

    mirage-bench --prepare-only prep/ --files examples/rmsnorm_linear.mlir --variants c0s2x,c1s2x
    python experiments/kernel_times.py prep/      # on the GPU machine (mirage_xdsl importable)

Record: benchmarks/results/grid-sum-h200-2026-11-22.md (kept).
"""

import dataclasses
import sys
from pathlib import Path

import cupy

from mirage_xdsl.bench.check import device_sets, plan_bytes
from mirage_xdsl.bench.prepare import load_prepared
from mirage_xdsl.bench.timing import device_us, rotation_sets
from mirage_xdsl.codegen.launch_plan import LaunchPlan
from mirage_xdsl.runtime.executable import CompiledGraph


def main(directory: str) -> None:
    prepared, _refs, _manifest = load_prepared(Path(directory))
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        for prep in prepared:
            if prep.cubin is None or prep.plan_json is None:
                continue
            plan = LaunchPlan.from_json(prep.plan_json)
            sets = device_sets(cupy, plan.inputs, rotation_sets(plan_bytes(plan.inputs)))
            whole = device_us(CompiledGraph(plan, prep.cubin).load(), sets, stream)
            parts = []
            for step in plan.steps:
                alone = CompiledGraph(dataclasses.replace(plan, steps=(step,)), prep.cubin).load()
                parts.append(f"{step.kernel} grid {tuple(step.grid)} {device_us(alone, sets, stream):.1f}")
            print(f"{whole:6.1f}  {prep.workload} {prep.graph}  " + " + ".join(parts), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
