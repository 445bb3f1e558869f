"""One-off GPU experiment (issue #30): the split-key decode kernel of
codegen/include/mirage_xdsl/decode_attention.cuh under template variants, beside torch's SDPA,
without the compiler (nvcc + CuPy + torch only).

Each variant is `WARPS,STAGES,SPLITS`; every kernel is checked against a float32 torch reference
on random inputs with a NaN-poisoned output, then timed (CUDA events around 20 launches, median
of 9 repeats; the K / V caches are larger than the L2, so each launch streams them from HBM).
Usage on the device: python experiments/decode_probe.py --heads 32 --group 1 --keys 32768 V1 V2 ...
"""

from __future__ import annotations

import argparse
import math
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import cupy  # type: ignore[import-not-found]
import torch  # type: ignore[import-not-found]
from attention_probe import time_it  # the same folder: run as python experiments/decode_probe.py

ROOT = Path(__file__).resolve().parents[1]


def source(variants: list[str], group: int, d: int) -> str:
    lines = ['#include "mirage_xdsl/decode_attention.cuh"']
    for i, v in enumerate(variants):
        warps, stages, _ = (int(x) for x in v.split(","))
        lines += [
            f'extern "C" __global__ void __launch_bounds__({32 * warps})',
            f"k{i}(half* o, const half* q, const half* k, const half* v, float* ws, unsigned* c, int n, int per, long long qh,"
            " long long kh, float sl2) {",
            f"  mx::hopper::decode_attention<half, {d}, {group}, {warps}, {stages}>(q, k, v, o, ws, c,"
            f" mx::hopper::DecodeShape{{n, per, qh, {d}, kh, {d}, kh, {d}, qh, {d}, sl2}});",
            "}",
        ]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("variants", nargs="+")
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--group", type=int, default=1)
    ap.add_argument("--keys", type=int, default=32768)
    args = ap.parse_args()
    d, h, g, n = 128, args.heads, args.group, args.keys
    with tempfile.TemporaryDirectory() as tmp:
        cu, cubin = Path(tmp) / "a.cu", Path(tmp) / "a.cubin"
        cu.write_text(source(args.variants, g, d))
        r = subprocess.run(
            ["nvcc", "-gencode=arch=compute_90a,code=sm_90a", "-std=c++17", "-O3", f"-I{ROOT / 'codegen/include'}",
             "-cubin", "-o", str(cubin), str(cu)],
            capture_output=True, text=True,
        )
        if r.returncode:
            print(r.stderr[-3000:])
            raise SystemExit(1)
        mod = cupy.RawModule(path=str(cubin))
        torch.manual_seed(0)
        q = torch.randn(h, g, d, device="cuda", dtype=torch.float16)
        k = torch.randn(h, n, d, device="cuda", dtype=torch.float16)
        v = torch.randn(h, n, d, device="cuda", dtype=torch.float16)
        scale = 1 / math.sqrt(d)
        s = torch.einsum("hgd,hnd->hgn", q.float(), k.float()) * scale
        ref = torch.einsum("hgn,hnd->hgd", torch.softmax(s, -1), v.float())
        nbytes = 2 * h * n * d * 2
        rows = []
        for i, var in enumerate(args.variants):
            warps, stages, splits = (int(x) for x in var.split(","))
            fn = mod.get_function(f"k{i}")
            smem = max(warps * stages * 2 * 16 * d * 2, warps * 16 * (d + 2) * 4) + 128
            fn.max_dynamic_shared_size_bytes = smem
            o = torch.full_like(q, float("nan"))
            ws = torch.empty(h * splits * g * (d + 2), device="cuda", dtype=torch.float32)
            cnt = torch.zeros(h, device="cuda", dtype=torch.int32)
            a = (o.data_ptr(), q.data_ptr(), k.data_ptr(), v.data_ptr(), ws.data_ptr(), cnt.data_ptr(), np.int32(n),
                 np.int32(n // splits), np.int64(g * d), np.int64(n * d), np.float32(scale * math.log2(math.e)))

            def launch() -> None:
                fn((h, splits, 1), (32 * warps, 1, 1), a, shared_mem=smem)  # noqa: B023

            launch()
            torch.cuda.synchronize()
            err = ((o.float() - ref).abs().max() / ref.abs().max()).item()
            launch()
            torch.cuda.synchronize()
            err2 = ((o.float() - ref).abs().max() / ref.abs().max()).item()  # counters reset: a second launch agrees
            us = time_it(launch)
            rows.append((var, us, nbytes / us / 1e3, max(err, err2)))
        qt, kt, vt = q.view(1, h, g, d), k.view(1, h, n, d), v.view(1, h, n, d)
        f = lambda: torch.nn.functional.scaled_dot_product_attention(qt, kt, vt)  # noqa: E731
        f()
        us = time_it(f)
        rows.append(("torch sdpa", us, nbytes / us / 1e3, 0.0))
        print(f"{torch.cuda.get_device_name()} heads {h} group {g} keys {n} d {d}")
        print("| variant (warps, stages, splits) | µs | GB/s (K + V) | max rel err |")
        for name, us, bw, err in rows:
            print(f"| {name} | {us:.1f} | {bw:.0f} | {err:.1e} |")


if __name__ == "__main__":
    main()
