"""One-off GPU experiment (cute-causal-skip): the suite's causal prefill kernels (fp16) timed
with the key loop walking every tile (`full`), bounded by the diagonal in the natural block
order (`skip`), every bounded tile masked (`allmask`), heaviest query blocks first
(`reverse`) and the pass's `cute.heavy_first` order (`zigzag`: the heavier half of the
query-block axis heaviest first, then the light ones ascending, so that two co-resident
blocks of an SM pair a heavy and a light block); the non-causal kernel beside them.
Prints median device times (CUDA events around a CUDA graph of 20 launches, 15 repeats).
Usage on the device: python experiments/causal_order.py
"""

from __future__ import annotations

import re
import statistics

import cupy  # type: ignore[import-not-found]
from xdsl.dialects.builtin import IntegerAttr, i64

from mirage_xdsl.bench.suite import graphs
from mirage_xdsl.codegen.cuda_target import emit_cuda
from mirage_xdsl.dialects import cute
from mirage_xdsl.dialects.cute.causal_skip import CAUSAL_TRIPS, HEAVY_FIRST, MASK_FROM
from mirage_xdsl.driver.compile import make_context
from mirage_xdsl.driver.nvcc import compile_cuda
from mirage_xdsl.passes.pipeline import MirageTranspilePass
from mirage_xdsl.runtime.executable import CompiledGraph
from mirage_xdsl.runtime.interop import detect_arch


def variant_source(seq: int, variant: str) -> tuple[str, object]:
    causal = variant != "noncausal"
    build = graphs.prefill_attention_causal if causal else graphs.prefill_attention
    module = build("float16", "p", heads=8, seq=seq, head_dim=128)
    MirageTranspilePass().apply(make_context(), module)
    (kernel,) = [op for op in module.walk() if isinstance(op, cute.KernelOp)]
    g = kernel.grid[1]
    if variant in ("full", "skip", "allmask"):
        kernel.attributes.pop(HEAVY_FIRST, None)
    for op in module.walk():
        if variant == "full":
            op.attributes.pop(CAUSAL_TRIPS, None)
        if variant in ("full", "allmask"):
            op.attributes.pop(MASK_FROM, None)
    if variant in ("reverse", "zigzag"):
        kernel.attributes[HEAVY_FIRST] = IntegerAttr(1, i64)
    prog = emit_cuda(module, detect_arch())
    src = prog.source
    if variant == "reverse":
        src, n = re.subn(r"const unsigned mx_by = .*;", f"const unsigned mx_by = {g - 1}u - blockIdx.y;", src)
        assert n == 1
    return src, prog.plans["p"]


VARIANTS = {1024: ("full", "noncausal", "skip", "allmask"), 4096: ("full", "skip", "reverse", "zigzag")}
"""`noncausal`: the suite's non-causal prefill; `allmask`: bounded loop, every tile masked."""


def time_us(graph: CompiledGraph, args: list) -> float:
    for _ in range(3):
        graph(*args)
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:  # 20 launches in one CUDA graph: no host launch gaps
        stream.begin_capture()
        for _ in range(20):
            graph(*args)
        captured = stream.end_capture()
    times = []
    for _ in range(15):
        a, b = cupy.cuda.Event(), cupy.cuda.Event()
        a.record(stream)
        captured.launch(stream)
        b.record(stream)
        b.synchronize()
        times.append(cupy.cuda.get_elapsed_time(a, b) * 1000 / 20)
    return statistics.median(times)


def main() -> None:
    from concurrent.futures import ThreadPoolExecutor

    rows = []
    keys = [(1024, v) for v in VARIANTS[1024]] + [(4096, v) for v in VARIANTS[4096]]
    sources = {key: variant_source(*key) for key in keys}
    with ThreadPoolExecutor(8) as pool:  # nvcc runs as a subprocess: one per variant at once
        cubins = dict(zip(keys, pool.map(lambda key: compile_cuda(sources[key][0], detect_arch()), keys)))
    for seq in (1024, 4096):
        rng = cupy.random.default_rng(1)
        ref = None
        for variant in VARIANTS[seq]:
            src, plan = sources[(seq, variant)]
            graph = CompiledGraph(plan, cubins[(seq, variant)], source=src).load()
            if ref is None:
                q = (rng.random((8, seq, 128), dtype=cupy.float32) - 0.5).astype(cupy.float16)
                k = (rng.random((8, seq, 128), dtype=cupy.float32) - 0.5).astype(cupy.float16)
                v = (rng.random((8, seq, 128), dtype=cupy.float32) - 0.5).astype(cupy.float16)
                kt = k.transpose(0, 2, 1)  # [heads, head_dim, keys] with strides (keys*d, 1, d)
                args = [q, kt, v]
            (out,) = graph(*args)
            if ref is None:
                ref = out.copy()
            diff = float(cupy.abs(out.astype(cupy.float32) - ref.astype(cupy.float32)).max())
            rows.append((seq, variant, time_us(graph, args), diff))
    print("| seq | variant | us | max diff vs full |")
    for seq, variant, us, diff in rows:
        print(f"| {seq} | {variant} | {us:.1f} | {diff:.2e} |")


if __name__ == "__main__":
    main()
