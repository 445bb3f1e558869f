"""Two schedules cuBLAS picks that our sm_90a GEMM lacked, against its default on the shapes
where the suite trails torch (issue #30), torch in the same process (TFLOP/s, device time of
CUDA-graph replays):

- 256 x 128 cooperative tiles (`tile_m=256`: two m64 slabs per consumer; cuBLAS's
  `nvjet_sm90_hsh_256x128_64x4_1x2` for the suite's bmm_nt, 8 x 1024^3);
- CTA pairs of 64-row tiles sharing one weight tile by TMA multicast (`tile_m=64, cluster=2`;
  cuBLAS's `192x64_64x6_1x2` / `128x64_64x8_1x2` for a 128-row MLP's projections), so each
  weight byte is read from DRAM once for both row halves while 128 SMs stream.
"""

import sys

from mirage_xdsl.bench.contraction import probe
from mirage_xdsl.bench.workloads import CONTRACTIONS_BY_NAME, ContractionWorkload

SQUARE = {
    "default": {},
    "256x128 tma": {"tile_m": 256, "tile_n": 128},
    "256x128 st16": {"tile_m": 256, "tile_n": 128, "epilogue": "store16"},
    "pp 128x128": {"pingpong": 1, "tile_n": 128},
    "c2 128x256": {"cluster": 2},
    "c2 128x128": {"cluster": 2, "tile_n": 128},
    "c2 256x128 st16": {"cluster": 2, "tile_m": 256, "tile_n": 128, "epilogue": "store16"},
    "c2 256x128 tma": {"cluster": 2, "tile_m": 256, "tile_n": 128},
}
SKINNY_UP = {
    "default": {},
    "128x128 st16 s7": {"tile_n": 128, "stages": 7, "epilogue": "store16"},
    "64x192 st16 s7": {"tile_m": 64, "tile_n": 192, "stages": 7, "epilogue": "store16"},
    "64x192 c2": {"tile_m": 64, "tile_n": 192, "cluster": 2},
    "64x256 c2": {"tile_m": 64, "tile_n": 256, "cluster": 2},
    "64x192 c2 st16": {"tile_m": 64, "tile_n": 192, "cluster": 2, "epilogue": "store16"},
    "64x192": {"tile_m": 64, "tile_n": 192},
    "128x256 k2": {"tile_n": 256, "split_k": 2},
    "64x256": {"tile_m": 64, "tile_n": 256},
}
SKINNY_DOWN = {
    "default": {},
    "128x64 k2 s8": {"tile_n": 64, "split_k": 2, "stages": 8},
    "128x64 k2 st16 s9": {"tile_n": 64, "split_k": 2, "stages": 9, "epilogue": "store16"},
    "128x64 k4 s8": {"tile_n": 64, "split_k": 4, "stages": 8},
    "128x128 k4": {"tile_n": 128, "split_k": 4},
    "128x128 k4 st16 s7": {"tile_n": 128, "split_k": 4, "epilogue": "store16", "stages": 7},
    "128x128 k3": {"tile_n": 128, "split_k": 3},
    "64x64 c2": {"tile_m": 64, "tile_n": 64, "cluster": 2},
    "64x64 c2 st16": {"tile_m": 64, "tile_n": 64, "cluster": 2, "epilogue": "store16"},
    "64x64 c2 s10": {"tile_m": 64, "tile_n": 64, "cluster": 2, "stages": 10},
    "64x128 c2": {"tile_m": 64, "tile_n": 128, "cluster": 2},
}
WORK = [
    (ContractionWorkload("bmm_nt_8x1024", "cmk,cnk->cmn", ((8, 1024, 1024), (8, 1024, 1024))), SQUARE),
    (ContractionWorkload("bmm_nt_8x1024_bf16", "cmk,cnk->cmn", ((8, 1024, 1024), (8, 1024, 1024)), "bfloat16"), SQUARE),
    (ContractionWorkload("gemm_2048", "mk,kn->mn", ((2048, 2048), (2048, 2048))), SQUARE),
    (CONTRACTIONS_BY_NAME["gemm_4096_fp16"], SQUARE),
    (CONTRACTIONS_BY_NAME["bshd_hdn"], SQUARE),
    (ContractionWorkload("mlp_up_128", "mk,kn->mn", ((128, 4096), (4096, 12288))), SKINNY_UP),
    (ContractionWorkload("mlp_down_128", "mk,kn->mn", ((128, 12288), (12288, 4096))), SKINNY_DOWN),
    (ContractionWorkload("mlp_up_128_bf16", "mk,kn->mn", ((128, 4096), (4096, 12288)), "bfloat16"), SKINNY_UP),
    (ContractionWorkload("mlp_down_128_bf16", "mk,kn->mn", ((128, 12288), (12288, 4096)), "bfloat16"), SKINNY_DOWN),
    (ContractionWorkload("mlp_down_128_11008", "mk,kn->mn", ((128, 11008), (11008, 4096))), SKINNY_DOWN),
]
only = [a for a in sys.argv[1:] if not a.startswith("-")]
skip = {a[1:] for a in sys.argv[1:] if a.startswith("-")}  # "-label": leave that variant out
work = [(w, {k: o for k, o in v.items() if k not in skip}) for w, v in WORK if not only or w.name in only]


def _compile_all() -> None:
    """nvcc for every variant at once (the disk cache then serves `run_workload`)."""
    from concurrent.futures import ThreadPoolExecutor

    from mirage_xdsl.driver.compile import prepare
    from mirage_xdsl.driver.einsum import ARCH, make_context
    from mirage_xdsl.driver.nvcc import compile_cuda
    from mirage_xdsl.frontends.einsum import einsum_module
    from mirage_xdsl.passes.contraction.permute_operands import PermuteOperandsPass
    from mirage_xdsl.passes.contraction.to_copy import ConvertPermuteToCutePass
    from mirage_xdsl.passes.contraction.to_hopper import ConvertContractionToHopperPass
    from mirage_xdsl.passes.kn.plan_workspace import PlanWorkspacePass

    jobs = []
    for w, variants in work:
        for opts in variants.values():
            module = einsum_module(w.equation, w.shapes, w.dtype)
            ctx = make_context()
            for p in (PermuteOperandsPass(), PlanWorkspacePass(), ConvertContractionToHopperPass(**opts), ConvertPermuteToCutePass()):
                p.apply(ctx, module)
            prepared = prepare(module, arch=ARCH)
            jobs.append((prepared.program.source, prepared.arch))
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda j: compile_cuda(*j), jobs))


_compile_all()
for w, variants in work:
    probe([w], variants)
