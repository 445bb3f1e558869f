"""Issue #31's new contractions on the device: aebf,dfce->abcd (two operand transposes by our
copy kernels + the wgmma GEMM), bshd_hdn_mul (ELWISE_MUL epilogue) and bhqd,bkhd->bhqk under
other tile widths / epilogues / stage counts; with the torch peers, one process, device time;
then the two copy kernels of aebf alone (GB/s)."""

import sys

from mirage_xdsl.bench.peers import COMPILE_MODE
from mirage_xdsl.bench.contraction import report, run_workload
from mirage_xdsl.bench.workloads import CONTRACTIONS_BY_NAME

BHQD = {
    "ours L2": {},
    "ours plain": {"group_m": 1},
    "bn128": {"tile_n": 128},
    "bn128 store16": {"tile_n": 128, "epilogue": "store16"},
    "bn256 store16": {"epilogue": "store16"},
    "bn64": {"tile_n": 64},
    "bn128 s4": {"tile_n": 128, "stages": 4},
}
compile_peer = "--compile" in sys.argv
results = [
    run_workload(CONTRACTIONS_BY_NAME[n], compile_mode=COMPILE_MODE if compile_peer else None, atol_rel=1e-2) for n in ("aebf_dfce", "bshd_hdn_mul")
]
results.append(run_workload(CONTRACTIONS_BY_NAME["bhqd_bkhd"], compile_mode=None, atol_rel=1e-2, variants=BHQD))
print(report(results, "see nvidia-smi line", "this run"))


def copy_rates() -> None:
    """The aebf graph's copy kernels alone: device time of each launch (CUDA events)."""
    import cupy

    from mirage_xdsl.driver.einsum import compile_einsum

    graph = compile_einsum("aebf,dfce->abcd", ((64,) * 4, (64,) * 4), "float16")
    a, b = (cupy.random.standard_normal((64,) * 4, dtype=cupy.float32).astype(cupy.float16) for _ in range(2))
    steps = list(graph.plan.steps)
    for i, step in enumerate(steps):
        graph(a, b)
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        outs = [cupy.empty((64,) * 4, cupy.float16)]
        ws = cupy.empty(graph.plan.workspace_bytes, cupy.uint8)
        start.record()
        for _ in range(20):
            graph._run_steps(cupy, [a, b], outs, ws, steps=[step])
        end.record()
        end.synchronize()
        us = cupy.cuda.get_elapsed_time(start, end) * 1e3 / 20
        print(f"{step.kernel}: {us:.1f} us" + (f", {2 * 2 * 64**4 / us / 1e3:.0f} GB/s" if "permute" in step.kernel else ""))


try:
    copy_rates()
except Exception as err:  # noqa: BLE001 - a probe
    print("copy_rates:", type(err).__name__, err)
