"""Run the bmm_4x4096 kernel once in grouped (L2) and once in plain block order, for ncu:

    ncu --metrics lts__t_sector_hit_rate.pct -k regex:hopper_gemm python experiments/hopper_gemm/l2_ncu.py
"""

import torch

from mirage_xdsl.driver.einsum import compile_einsum

shapes = ((4, 4096, 4096), (4, 4096, 4096))
a, b = (torch.randn(s, device="cuda", dtype=torch.float16) for s in shapes)
for group_m in (-1, 1):  # L2 order first, then plain
    compile_einsum("cmk,ckn->cmn", shapes, "float16", group_m=group_m)(a, b)
torch.cuda.synchronize()
