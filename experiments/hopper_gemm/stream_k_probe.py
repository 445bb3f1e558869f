"""The sm_90a GEMM's stream-K sweep (`stream_k=1`: the tiles x k-tiles iterations cut into one
equal range per SM) against the tiled sweeps on the skinny (weight-streaming) GEMMs of the
suite's batch-128 MLPs, whose 86-96 tiles leave SMs idle, beside torch in the same process;
TFLOP/s from CUDA-graph replays.  Usage: python experiments/hopper_gemm/stream_k_probe.py [NAME ...]"""

import sys

from mirage_xdsl.bench.contraction import probe
from mirage_xdsl.bench.workloads import ContractionWorkload

VARIANTS = {
    "tiled": {"stream_k": 0},
    "stream": {"stream_k": 1},
    "stream bn64": {"stream_k": 1, "tile_n": 64},
    "bn64 split2": {"stream_k": 0, "tile_n": 64, "split_k": 2},
}
WORKLOADS = [
    ContractionWorkload("up_12288", "mk,kn->mn", ((128, 4096), (4096, 12288))),
    ContractionWorkload("down_12288", "mk,kn->mn", ((128, 12288), (12288, 4096))),
    ContractionWorkload("up_11008", "mk,kn->mn", ((128, 4096), (4096, 11008))),
    ContractionWorkload("down_11008", "mk,kn->mn", ((128, 11008), (11008, 4096))),
    ContractionWorkload("up_12288_bf16", "mk,kn->mn", ((128, 4096), (4096, 12288)), "bfloat16"),
    ContractionWorkload("m256_4096", "mk,kn->mn", ((256, 4096), (4096, 4096))),
]
probe(WORKLOADS, VARIANTS, sys.argv[1:])
