"""bmm_nt 8 x 1024^3 fp16 (issue #30's GEMM gap): our default ping-pong kernel, our 256 x 128
tiles in CTA pairs sharing A (cuBLAS's tile and cluster shape) and torch's cuBLAS kernel, one
launch each after compiling, for ncu's per-PC stall sampling:

    ncu --clock-control none --section WarpStateStats --section SourceCounters \\
        --section SpeedOfLight --metrics lts__t_bytes.sum,smsp__inst_executed.sum \\
        -k regex:"gemm|nvjet" python experiments/hopper_gemm/stall_probe.py

(EXPERIMENTS.md, 2026-11-28: with cuBLAS's own tile and pairs ours takes 33.3 vs 27.3 us,
46.4 K vs 41.0 K SM-active cycles, and our multicast shows no L2 saving.)
"""

import torch

from mirage_xdsl.driver.einsum import compile_einsum

SHAPES = ((8, 1024, 1024), (8, 1024, 1024))
VARIANTS = ({}, {"tile_m": 256, "tile_n": 128, "cluster": 2, "share_a": 1, "epilogue": "store16"})

a, b = (torch.randn(s, device="cuda", dtype=torch.float16) for s in SHAPES)
graphs = [compile_einsum("cmk,cnk->cmn", SHAPES, "float16", **v) for v in VARIANTS]
torch.cuda.synchronize()
for graph in graphs:
    graph(a, b)
    torch.cuda.synchronize()
torch.matmul(a, b.transpose(1, 2))
torch.cuda.synchronize()
