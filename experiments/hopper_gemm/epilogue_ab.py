"""A/B of the sm_90a kernel's epilogues and block orders on the issue's contractions (one
process, interleaved rounds; device time of CUDA-graph replays).  Prints one line per workload."""

from mirage_xdsl.bench.contraction import run_workload
from mirage_xdsl.bench.workloads import CONTRACTIONS_BY_NAME

VARIANTS = {
    "tma g-auto": {},
    "tma g1": {"group_m": 1},
    "st16 g-auto": {"epilogue": "store16"},
    "st16 s3": {"epilogue": "store16", "stages": 3},
}
for name in ("bmm_4x4096", "gemm_8192_fp16", "bshd_hdn", "bhqd_bkhd", "abcd_cde", "gemm_4096_bf16"):
    run_workload(CONTRACTIONS_BY_NAME[name], compile_mode=None, atol_rel=1e-2, variants=VARIANTS)
