"""A/B of CTA-pair clusters (B multicast by TMA) against the default kernel, with the torch
peers, on the issue's large contractions (one process, interleaved rounds, device time)."""

from mirage_xdsl.bench.contraction import report, run_workload
from mirage_xdsl.bench.workloads import CONTRACTIONS_BY_NAME

VARIANTS = {"ours L2": {}, "ours cluster2": {"cluster": 2}}
results = [
    run_workload(CONTRACTIONS_BY_NAME[name], compile_mode=None, atol_rel=1e-2, variants=VARIANTS)
    for name in ("bmm_4x4096", "bshd_hdn", "gemm_8192_fp16", "gemm_16384_fp16", "bhqd_bkhd", "gemm_4096_bf16")
]
print(report(results, "see nvidia-smi line", "this run"))
