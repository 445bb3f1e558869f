"""Standalone check and timing of the sm_90a warp-specialised GEMM (hopper_gemm.cuh) on the
batched matmul `cmk,ckn->cmn` against torch.bmm in the same process.

    python experiments/hopper_gemm/bench_bmm.py DIR   # DIR holds gemm_v*.cubin + variants.json

Correctness: random fp16/bf16 inputs, output poisoned with NaN, compared with torch.bmm in fp32
(max abs error relative to max |ref|).  Timing: CUDA events around 20 launches after 3 warm-ups.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import cupy
import torch

from mirage_xdsl.runtime.tensor_map import encode_tiled, launch, pack_param

DT = {"half": torch.float16, "__nv_bfloat16": torch.bfloat16}
DN = {"half": "float16", "__nv_bfloat16": "bfloat16"}


def maps(a, b, dtype, bm, bn, trans_b):
    c, m, k = a.shape
    es = 2
    ma = encode_tiled(a.data_ptr(), dtype, [k, m, c, 1], [k * es, m * k * es, c * m * k * es], [64, bm, 1, 1])
    if trans_b:  # b: [c, k, n]
        n = b.shape[2]
        mb = encode_tiled(b.data_ptr(), dtype, [n, k, c, 1], [n * es, k * n * es, c * k * n * es], [64, 64, 1, 1])
    else:  # b: [c, n, k]
        n = b.shape[1]
        mb = encode_tiled(b.data_ptr(), dtype, [k, n, c, 1], [k * es, n * k * es, c * n * k * es], [64, bn, 1, 1])
    return ma, mb


def run(fn, smem, nc, a, b, out, trans_b, bm, bn, group_m, sms):
    c, m, k = a.shape
    n = out.shape[2]
    ma, mb = maps(a, b, DN_T[a.dtype], bm, bn, trans_b)
    tiles = c * ((m + bm - 1) // bm) * ((n + bn - 1) // bn)
    params = [pack_param(ma, "map"), pack_param(mb, "map"), pack_param(out.data_ptr(), "ptr")]
    params += [pack_param(v, "i32") for v in (m, n, k, c, c)]
    params += [pack_param(v, "i64") for v in (n, m * n, 0)]
    params += [pack_param(group_m, "i32")]
    stream = torch.cuda.current_stream().cuda_stream
    return lambda: launch(int(getattr(fn, "kernel", fn).ptr), (min(tiles, sms), 1, 1), (128 * (nc + 1), 1, 1), smem, stream, params)


DN_T = {torch.float16: "float16", torch.bfloat16: "bfloat16"}


def timeit(f, reps=20):
    for _ in range(3):
        f()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(reps):
        f()
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) / reps * 1e3  # us


def main() -> None:
    d = Path(sys.argv[1])
    variants = json.loads((d / "variants.json").read_text())
    torch.backends.cuda.matmul.allow_tf32 = False
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(torch.cuda.get_device_name(0), "SMs", sms)
    rows = []
    for cub in sorted(d.glob("gemm_*.cubin")):
        mod = cupy.RawModule(path=str(cub))
        for name, tname, bn, stages, nc, tb, smem in variants:
            fn = mod.get_function("k_" + name)
            fn.max_dynamic_shared_size_bytes = smem
            dt = DT[tname]
            bm = 64 * nc
            errs = []
            for c, m, n, k in ((2, 200, 136, 104), (4, 4096, 4096, 4096)):
                torch.manual_seed(0)
                a = torch.randn(c, m, k, device="cuda", dtype=dt)
                b = torch.randn(c, k, n, device="cuda", dtype=dt)
                ref = torch.bmm(a.float(), b.float())
                bb = b if tb else b.transpose(1, 2).contiguous()
                out = torch.full((c, m, n), float("nan"), device="cuda", dtype=dt)
                f = run(fn, smem, nc, a, bb, out, tb, bm, bn, 8, sms)
                f()
                torch.cuda.synchronize()
                err = ((out.float() - ref).abs().max() / ref.abs().max()).item()
                errs.append(err)
            flops = 2 * c * m * n * k
            res = {"cubin": cub.name, "v": name, "err_small": errs[0], "err_big": errs[1]}
            times: dict[str, list[float]] = {}
            for _ in range(3):  # interleaved rounds, median kept
                times.setdefault("torch_bmm", []).append(timeit(lambda: torch.bmm(a, b)))
                if errs[1] < 1e-2:
                    for gm in (1, 8):
                        times.setdefault(f"tf_g{gm}", []).append(timeit(run(fn, smem, nc, a, bb, out, tb, bm, bn, gm, sms)))
            for key, ts in times.items():
                res[key] = round(flops / sorted(ts)[1] / 1e6, 1)
            rows.append(res)
            print(json.dumps(res), flush=True)
    print("summary")
    for r in rows:
        print(r)


if __name__ == "__main__":
    main()
