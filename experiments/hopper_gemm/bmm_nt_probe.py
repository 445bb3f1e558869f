"""The suite's bmm_nt shape (`cmk,cnk->cmn`, c = 8, m = n = k = 1024) and a square 1024 / 2048 GEMM
under the sm_90a kernel's schedule overrides (tile N, stages, block order, epilogue, split-K), beside
torch (issue #30's bmm_nt at 0.76x).  One process; device time of CUDA-graph replays."""

from mirage_xdsl.bench.contraction import run_workload
from mirage_xdsl.bench.workloads import ContractionWorkload

VARIANTS = {
    "default": {},
    "bn128": {"tile_n": 128},
    "s4": {"stages": 4},
    "bn128 s5": {"tile_n": 128, "stages": 5},
    "g1": {"group_m": 1},
    "st16": {"epilogue": "store16"},
    "bn128 st16 s4": {"tile_n": 128, "epilogue": "store16", "stages": 4},
}
for w in (
    ContractionWorkload("bmm_nt_8x1024", "cmk,cnk->cmn", ((8, 1024, 1024), (8, 1024, 1024))),
    ContractionWorkload("bmm_nn_8x1024", "cmk,ckn->cmn", ((8, 1024, 1024), (8, 1024, 1024))),
    ContractionWorkload("gemm_2048", "mk,kn->mn", ((2048, 2048), (2048, 2048))),
):
    run_workload(w, compile_mode=None, atol_rel=1e-2, variants=VARIANTS)
