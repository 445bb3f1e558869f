"""One-off GPU experiment (issue #30): the sm_90a flash-attention kernel of
codegen/include/mirage_xdsl/hopper_attention.cuh under template variants, beside torch's SDPA
backends, without the compiler (nvcc + CuPy + torch only, so it runs on a bare GPU machine).

Each variant is `NC,BN,STAGES[,EXTRA...]` (consumer warpgroups, key tile, ring depth, then any
extra template arguments the header takes); every kernel is checked against torch's SDPA on
random inputs with a NaN-poisoned output, then timed (CUDA events around 20 launches, median of
9 repeats).  `--ncu V` launches variant V a few times only (run it under `ncu`).
Usage on the device: python experiments/attention_probe.py --seq 4096 [--causal] V1 V2 ...
"""

from __future__ import annotations

import argparse
import math
import statistics
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import cupy  # type: ignore[import-not-found]
import torch  # type: ignore[import-not-found]

ROOT = Path(__file__).resolve().parents[1]


def source(variants: list[str], causal: bool) -> str:
    lines = ['#include "mirage_xdsl/hopper_attention.cuh"']
    for i, v in enumerate(variants):
        nc = int(v.split(",")[0])
        extra = v.split(",")[3:]
        tmpl = ", ".join(["half", "128", *v.split(",")[:3], "true" if causal else "false", *extra])
        lines += [
            f'extern "C" __global__ void __launch_bounds__({128 * (nc + 1)}, {2 if nc == 1 else 1})',
            f"k{i}(half* o, const half* q, const half* k, const half* v, int n, int rb, long long hs, long long rs, float sl2) {{",
            f"  mx::hopper::flash_attention<{tmpl}>(q, k, v, o, mx::hopper::AttnShape{{n, n, rb, hs, rs, hs, rs, hs, rs, hs, rs, sl2, 0}});",
            "}",
        ]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("variants", nargs="+")
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--ncu", default=None)
    args = ap.parse_args()
    d, h, s = 128, args.heads, args.seq
    variants = args.variants
    with tempfile.TemporaryDirectory() as tmp:
        cu, cubin = Path(tmp) / "a.cu", Path(tmp) / "a.cubin"
        cu.write_text(source(variants, args.causal))
        r = subprocess.run(
            ["nvcc", "-gencode=arch=compute_90a,code=sm_90a", "-std=c++17", "-O3", f"-I{ROOT / 'codegen/include'}",
             "-cubin", "-o", str(cubin), str(cu), "-Xptxas", "-v"],
            capture_output=True, text=True,
        )
        for line in r.stderr.splitlines():
            if "registers" in line or "spill" in line or "error" in line or "C75" in line:
                print("ptxas:", line.strip())
        if r.returncode:
            print(r.stderr[-3000:])
            raise SystemExit(1)
        mod = cupy.RawModule(path=str(cubin))
        torch.manual_seed(0)
        q, k, v = (torch.randn(h, s, d, device="cuda", dtype=torch.float16) for _ in range(3))
        scale = 1 / math.sqrt(d)
        ref = torch.nn.functional.scaled_dot_product_attention(q[None].float(), k[None].float(), v[None].float(), is_causal=args.causal)[0]
        flops = 4 * h * s * s * d / (2 if args.causal else 1)
        rows = []
        for i, var in enumerate(variants):
            if args.ncu and var != args.ncu:
                continue
            nc, bn, st = (int(x) for x in var.split(",")[:3])
            fn = mod.get_function(f"k{i}")
            smem = (64 * nc * d + 2 * st * bn * d) * 2 + (1 + 4 * st) * 8 + 1024
            fn.max_dynamic_shared_size_bytes = smem
            o = torch.full_like(q, float("nan"))
            grid = (h, -(-s // (64 * nc)), 1)
            block = (128 * (nc + 1), 1, 1)

            def launch() -> None:
                fn(grid, block, (o.data_ptr(), q.data_ptr(), k.data_ptr(), v.data_ptr(), np.int32(s), np.int32(grid[1]), np.int64(s * d), np.int64(d), np.float32(scale * math.log2(math.e))), shared_mem=smem)

            launch()
            torch.cuda.synchronize()
            err = ((o.float() - ref).abs().max() / ref.abs().max()).item()
            if args.ncu:
                for _ in range(3):
                    launch()
                torch.cuda.synchronize()
                print(var, "err", err)
                return
            us = time_it(launch)
            rows.append((var, us, flops / us / 1e6, err))
        for name, backend in (("flash", "FLASH_ATTENTION"), ("cudnn", "CUDNN_ATTENTION"), ("efficient", "EFFICIENT_ATTENTION")):
            from torch.nn.attention import SDPBackend, sdpa_kernel

            try:
                with sdpa_kernel(getattr(SDPBackend, backend)):
                    f = lambda: torch.nn.functional.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=args.causal)  # noqa: E731
                    f()
                    us = time_it(f)
                rows.append((f"torch {name}", us, flops / us / 1e6, 0.0))
            except Exception as e:  # noqa: BLE001
                rows.append((f"torch {name}: {type(e).__name__}", float("nan"), float("nan"), 0.0))
        print(f"{torch.cuda.get_device_name()} seq {s} heads {h} causal {args.causal}")
        print("| variant | µs | TFLOP/s | max rel err |")
        for name, us, tf, err in rows:
            print(f"| {name} | {us:.1f} | {tf:.0f} | {err:.1e} |")


def time_it(fn) -> float:  # noqa: ANN001
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(9):
        start.record()
        for _ in range(20):
            fn()
        stop.record()
        stop.synchronize()
        ts.append(start.elapsed_time(stop) * 1e3 / 20)
    return statistics.median(ts)


if __name__ == "__main__":
    main()
