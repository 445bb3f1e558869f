"""The sm_90a GEMM's cooperative schedule (both consumers on one 128 x BN tile) against the
ping-pong schedule (`pingpong=1`: each consumer takes whole 128 x BN tiles in turn, so one's
epilogue overlaps the other's mainloop) on the shapes where the cooperative kernel trails
cuBLAS: few k-tiles per tile (bmm_nt 8 x 1024^3, K = 128 attention scores, square GEMMs of
1024-4096) and the issue #31 contractions, beside torch in the same process; TFLOP/s from
CUDA-graph replays.  Usage: python experiments/hopper_gemm/pingpong_probe.py [NAME ...]"""

import sys

from mirage_xdsl.bench.contraction import probe
from mirage_xdsl.bench.workloads import ContractionWorkload

VARIANTS = {
    "coop": {"pingpong": 0},
    "pp": {"pingpong": 1},
    "pp st16": {"pingpong": 1, "epilogue": "store16"},
    "pp g1": {"pingpong": 1, "group_m": 1},
    "pp g16": {"pingpong": 1, "group_m": 16},
}
WORKLOADS = [
    ContractionWorkload("bmm_nt_8x1024", "cmk,cnk->cmn", ((8, 1024, 1024), (8, 1024, 1024))),
    ContractionWorkload("bmm_nt_8x1024_bf16", "cmk,cnk->cmn", ((8, 1024, 1024), (8, 1024, 1024)), "bfloat16"),
    ContractionWorkload("bmm_nn_8x1024", "cmk,ckn->cmn", ((8, 1024, 1024), (8, 1024, 1024))),
    ContractionWorkload("bhqd_bkhd", "bhqd,bkhd->bhqk", ((8, 32, 1024, 128), (8, 1024, 32, 128))),
    ContractionWorkload("gemm_1024", "mk,kn->mn", ((1024, 1024), (1024, 1024))),
    ContractionWorkload("gemm_2048", "mk,kn->mn", ((2048, 2048), (2048, 2048))),
    ContractionWorkload("gemm_4096", "mk,kn->mn", ((4096, 4096), (4096, 4096))),
    ContractionWorkload("abcd_cde", "abcd,cde->abe", ((8, 256, 64, 64), (64, 64, 1024))),
    ContractionWorkload("bshd_hdn", "bshd,hdn->bsn", ((4, 4096, 32, 128), (32, 128, 4096))),
    ContractionWorkload("bmm_4x4096", "cmk,ckn->cmn", ((4, 4096, 4096), (4, 4096, 4096))),
    ContractionWorkload("gemm_8192", "mk,kn->mn", ((8192, 8192), (8192, 8192))),
    ContractionWorkload("gemm_16384", "mk,kn->mn", ((16384, 16384), (16384, 16384))),
]
probe(WORKLOADS, VARIANTS, sys.argv[1:])
