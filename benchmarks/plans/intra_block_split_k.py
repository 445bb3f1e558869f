"""Add the hand-written intra-block split-K kernels of rmsnorm bs8 to a prepared bench directory.

    mirage-bench --prepare-only prep/ --workloads rmsnorm_bs8 --files examples/rmsnorm_linear_bs8.mlir --variants c0xr
    python benchmarks/plans/intra_block_split_k.py prep/ [--ablate]   # here: nvcc builds the cubins
    python tools/mirage_bench.py report.md --from prep/ --no-compile-peer   # on the GPU

Each configuration of `intra_block_split_k.cuh` becomes a candidate `rmsnorm_linear_bs8@ibsk-<name>`
beside the prepared c0xr plan (same inputs, reference and check): grid 6144 / N, KW * WGT
threads, PDL with the weight prologue before the wait like the generated weight-streaming
kernels, `one_wave` or not (whether the runtime raises the shared memory so that one block
fits per SM).  `--ablate` adds timing-only copies (wrong results) of ABLATED without the X
loads, the sum of squares, the MMAs, or all three (`W only`).  Record: benchmarks/results/intra-block-split-k-h200-2026-11-25.md.
"""
import sys
from pathlib import Path

from prepared_candidates import PreparedWorkload  # this directory is on sys.path when run as a script

CONFIGS = [  # name, N columns, KW warp groups, WGT threads per group, S stages, one_wave
    ("n48k4t64s5", 48, 4, 64, 5, True),
    ("n48k4t96s5", 48, 4, 96, 5, True),
    ("n48k4t64s4", 48, 4, 64, 4, True),
    ("n48k4t64s3", 48, 4, 64, 3, True),
    ("n48k4t64s2", 48, 4, 64, 2, True),
    ("n48k8t64s2", 48, 8, 64, 2, True),
    ("n48k2t64s8", 48, 2, 64, 8, True),
    ("n64k4t128s4", 64, 4, 128, 4, True),
    ("n64k4t128s3", 64, 4, 128, 3, True),
    ("n64k4t64s4", 64, 4, 64, 4, True),
    ("n64k8t64s2", 64, 8, 64, 2, True),
    ("n64k2t128s8", 64, 2, 128, 8, True),
    ("n32k4t64s3", 32, 4, 64, 3, True),
    ("n32k4t64s2", 32, 4, 64, 2, True),
    ("n32k2t64s6", 32, 2, 64, 6, True),
    ("n64k4t64s2w2", 64, 4, 64, 2, False),
    ("n64k2t64s4w2", 64, 2, 64, 4, False),
    ("n64k2t128s4w2", 64, 2, 128, 4, False),
    ("n64k4t128s2w2", 64, 4, 128, 2, False),
    ("n48k4t64s2w2", 48, 4, 64, 2, False),
    ("n48k2t64s4w2", 48, 2, 64, 4, False),
]
ABLATED = ("n64k4t64s4", "n48k4t64s5")
ABLATIONS = {"noX": 1, "noSq": 2, "noMma": 4, "Wonly": 7}  # the header's ABLATE bits
W_ROW_PAD = 8  # halves after each W row of a stage (the header's WS = N + 8)


def smem_bytes(n: int, kw: int, s: int) -> int:
    """The kernel's dynamic shared memory, laid out as the header's body() does: 128-byte
    header, KW rings of S stages (X [16, 64] + W [64, N + pad], fp16), the warp groups'
    fp32 partial tiles, their row partials and the 16 row sums."""
    stage = (16 * 64 + 64 * (n + W_ROW_PAD)) * 2
    return 128 + kw * s * stage + kw * 16 * n * 4 + kw * 64 * 4 + 16 * 4


def main(prep: Path, ablate: bool = False) -> None:
    header = (Path(__file__).parent / "intra_block_split_k.cuh").read_text()
    workload = PreparedWorkload(prep, "rmsnorm_bs8", "rmsnorm_linear_bs8@c0xr")
    builds = [(name, n, kw, wgt, s, ow, 0) for name, n, kw, wgt, s, ow in CONFIGS]
    if ablate:
        builds += [(f"{name}-{what}", n, kw, wgt, s, ow, bits) for name, n, kw, wgt, s, ow in CONFIGS if name in ABLATED
                   for what, bits in ABLATIONS.items()]
    for name, n, kw, wgt, s, one_wave, bits in builds:
        kernel = f"ibsk_{name}".replace("-", "_")
        src = header + f"\nIBSK_KERNEL_ABLATED({kernel}, {n}, {kw}, {wgt}, {s}, {bits})\n"
        workload.add(f"ibsk-{name}", kernel, src,
                     launch=dict(grid=[6144 // n, 1, 1], block=[kw * wgt, 1, 1], smem_bytes=smem_bytes(n, kw, s), one_wave=one_wave))
    workload.save()


if __name__ == "__main__":
    main(Path(sys.argv[1]), "--ablate" in sys.argv[2:])
