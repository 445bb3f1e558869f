"""Where a grid-sum kernel's time goes: per-block `%globaltimer` stamps of its phases.

A split-K kernel that combines its partials itself (`tb.grid_sum`) runs: the loop, the
partial stores, the arrival on the group's counter, the last block's partial sums, the
epilogue.  This builds a copy of one plain-graph candidate whose thread 0 of every block
writes the global timer (ns) at each of those points over the kernel's first output (the
results are wrong; the output buffer must hold 8 x 8 bytes per block), runs it on the GPU
and prints, in µs from the first block's start (medians over 20 runs): the spread of the
blocks' starts, the median and the latest end of the loop, and the latest time each later
phase ends in the last blocks.

    # CPU machine (xDSL + nvcc): plain-graph candidates of examples/, variants as mirage-bench's
    python experiments/kernel_timeline.py prepare DIR examples/rmsnorm_linear_bs8.mlir c3s2xr c3s2x
    # GPU machine (CuPy; mirage_xdsl importable)
    python experiments/kernel_timeline.py run DIR

Record: benchmarks/results/reduce-partials-h200-2026-11-24.md (kept; what it found: a small
tile's partial sum issuing its loads one L2 round trip at a time).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

STAMPS = ("start", "loop end", "partials stored", "arrived", "sums done", "end")
TIMER = (
    "__device__ __forceinline__ unsigned long long mx_timeline_now() {\n"
    '  unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t;\n}\n'
)


def _stamp(k: int) -> str:
    return f"  if (tid == 0) mx_timeline_ts[mx_timeline_block * 8 + {k}] = mx_timeline_now();\n"


def instrument(source: str) -> str:
    """`source` (one grid-sum kernel as the CUDA printer writes it) with the stamps; raises
    ValueError when the kernel lacks one of the points (no loop, no grid sum, no 16-byte
    output store)."""
    head = source.find("#include")
    if head < 0 or "  const int tid = threadIdx.x;\n" not in source or "    if (!mx::grid_arrive" not in source:
        raise ValueError("not a grid-sum kernel of the CUDA printer (no tid, no grid_arrive)")
    out = source.replace('#include "mirage_xdsl/runtime.cuh"\n', '#include "mirage_xdsl/runtime.cuh"\n' + TIMER, 1)
    out = out.replace(
        "  const int tid = threadIdx.x;\n",
        "  const int tid = threadIdx.x;\n"
        "  unsigned long long* mx_timeline_ts = reinterpret_cast<unsigned long long*>(o0);\n"
        "  const int mx_timeline_block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);\n"
        "  if (tid == 0) mx_timeline_ts[mx_timeline_block * 8 + 3] = 0;\n" + _stamp(0),
        1,
    )
    loop = out.index("  #pragma unroll 1")
    after_loop = out.index("\n  }\n", loop) + 5
    out = out[:after_loop] + _stamp(1) + out[after_loop:]
    arrive = out.index("    if (!mx::grid_arrive")
    out = out[:arrive] + "    __syncthreads();\n  " + _stamp(2) + out[arrive:]
    arrived = out.index("\n", out.index("    if (!mx::grid_arrive")) + 1
    out = out[:arrived] + "  " + _stamp(3) + out[arrived:]
    sums_end = out.index("\n  }\n", arrived) + 1
    out = out[:sums_end] + "    __syncthreads();\n  " + _stamp(4) + out[sums_end:]
    store = re.search(r"(?m)^  mx::s2g_chunked<[^\n]*\(o0[^,]*, (s\d+), tid\);\n", out)
    if store is None:
        raise ValueError("no 16-byte store of the first output at the end of the kernel")
    keep = f"  if (tid == 0 && mx::to_f({store.group(1)}[0]) == 1.2345f) mx_timeline_ts[mx_timeline_block * 8 + 6] = 1;\n"
    return out[: store.start()] + "  __syncthreads();\n" + _stamp(5) + keep + out[store.end() :]


def prepare(directory: Path, path: Path, variants: list[str]) -> None:
    from mirage_xdsl.bench.prepare import _variant_module, parse_variant
    from mirage_xdsl.driver.compile import prepare as prepare_graph
    from mirage_xdsl.driver.load import functions, load_module
    from mirage_xdsl.driver.nvcc import compile_cuda

    directory.mkdir(parents=True, exist_ok=True)
    module = load_module(path)
    entries = []
    for func in functions(module):
        name = func.sym_name.data
        for variant in variants:
            parse_variant(variant)
            prepared = prepare_graph(_variant_module(module, name, variant), name, "sm_90")
            cubin = compile_cuda(instrument(prepared.program.source), prepared.arch)
            target = directory / f"{name}@{variant}.cubin"
            target.write_bytes(Path(cubin).read_bytes())
            entries.append({"graph": f"{name}@{variant}", "cubin": target.name, "plan": prepared.plan.to_json()})
            print("built", name, variant, flush=True)
    (directory / "timeline.json").write_text(json.dumps(entries))


def run(directory: Path) -> None:
    import cupy
    import numpy as np

    from mirage_xdsl.bench.check import device_sets, plan_bytes
    from mirage_xdsl.bench.timing import rotation_sets
    from mirage_xdsl.codegen.launch_plan import LaunchPlan
    from mirage_xdsl.runtime.executable import CompiledGraph

    print("times in µs from the first block's start; later phases: the latest last block")
    for entry in json.loads((directory / "timeline.json").read_text()):
        plan = LaunchPlan.from_json(entry["plan"])
        grid = plan.steps[0].grid
        blocks = grid[0] * grid[1] * grid[2]
        sets = device_sets(cupy, plan.inputs, rotation_sets(plan_bytes(plan.inputs)))
        graph = CompiledGraph(plan, str(directory / entry["cubin"])).load()
        rows = []
        for i in range(40):
            (out,) = graph(*sets[i % len(sets)])
            if i < 20:
                continue
            ts = cupy.asnumpy(out).view(np.uint64).reshape(-1)[: blocks * 8].reshape(blocks, 8).astype(np.int64)
            rel = (ts - ts[:, 0].min()) / 1000.0
            last = ts[:, 3] > 0
            rows.append([rel[:, 0].max(), np.median(rel[:, 1]), rel[:, 1].max(), *(rel[last, k].max() for k in (2, 3, 4, 5))])
        r = np.median(np.array(rows), axis=0)
        print(
            f"{entry['graph']:32s} starts within {r[0]:5.2f}  loop end median {r[1]:5.2f} latest {r[2]:5.2f}"
            f"  stored {r[3]:5.2f}  arrived {r[4]:5.2f}  summed {r[5]:5.2f}  end {r[6]:5.2f}",
            flush=True,
        )


if __name__ == "__main__":
    if len(sys.argv) >= 5 and sys.argv[1] == "prepare":
        prepare(Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4:])
    elif len(sys.argv) == 3 and sys.argv[1] == "run":
        run(Path(sys.argv[2]))
    else:
        sys.exit(__doc__)
