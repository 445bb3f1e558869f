"""Hand-written split-K grid-sum plans of rms_norm(X) @ W with few blocks per SM, as textual IR.

    python benchmarks/plans/split_k_plans.py OUT/
    mirage-bench --prepare-only prep/ --files OUT/*.mlir --variants c0r,c0s3r,c2x
    python tools/mirage_bench.py report.md --from prep/ --no-compile-peer   # on the GPU

Each file is one `kn.customized` graph like kn-fuse's "split_k_grid_sum" template: grid
(6144 / n column tiles, s K splits), for-loop over k-row tiles of the split's K range, t
threads per block, the partials (matmul accumulator and sum of squares) combined by
`tb.grid_sum`.  The grids hold 128 blocks (at most one per SM of an H200) or 256 (two),
where kn-fuse's fastest plans run three 128-thread blocks per SM.
Record: benchmarks/results/few-blocks-per-sm-h200-2026-11-25.md.
"""
import sys
from pathlib import Path

from lone_block_plans import write_plans  # this directory is on sys.path when run as a script

RMS = """func.func @g(%X: tensor<{m}x4096xf16> {{kn.strides = array<i64: 4096, 1>}},
                   %W: tensor<4096x6144xf16> {{kn.strides = array<i64: 6144, 1>}})
    -> (tensor<{m}x6144xf16> {{kn.strides = array<i64: 6144, 1>}}) {{
  %O = kn.customized(%X, %W) attributes {{grid_dim = array<i64: {gx}, {s}, 1>, block_dim = array<i64: {t}, 1, 1>,
                                         forloop_range = {R} : i64, reduction_dimx = 64 : i64}}
      : (tensor<{m}x4096xf16>, tensor<4096x6144xf16>) -> tensor<{m}x6144xf16> {{
  ^bb0(%x: tensor<{m}x4096xf16>, %w: tensor<4096x6144xf16>):
    %0 = tb.input %x {{input_map = array<i64: -1, 1, -1>, forloop_dim = 1 : i64}} : tensor<{m}x4096xf16> -> !tb.stensor<{m}x{k}xf16>
    %1 = tb.input %w {{input_map = array<i64: 1, 0, -1>, forloop_dim = 0 : i64}} : tensor<4096x6144xf16> -> !tb.stensor<{k}x{n}xf16>
    %2 = tb.square %0 : !tb.stensor<{m}x{k}xf16>
    %3 = tb.mul_scalar %2 {{scalar = 0.000244140625 : f64}} : !tb.stensor<{m}x{k}xf16>
    %4 = tb.forloop_accum red_ld_sum %3 : !tb.stensor<{m}x{k}xf16> -> !tb.stensor<{m}x1xf16, after_accum>
    %5 = tb.grid_sum %4 {{dim = 1 : i64}} : !tb.stensor<{m}x1xf16, after_accum> -> !tb.stensor<{m}x1xf16, after_accum>
    %6 = tb.sqrt %5 : !tb.stensor<{m}x1xf16, after_accum>
    %7 = tb.matmul %0, %1 : !tb.stensor<{m}x{k}xf16>, !tb.stensor<{k}x{n}xf16> -> !tb.stensor<{m}x{n}xf16>
    %8 = tb.forloop_accum nored %7 : !tb.stensor<{m}x{n}xf16> -> !tb.stensor<{m}x{n}xf16, after_accum>
    %9 = tb.grid_sum %8 {{dim = 1 : i64}} : !tb.stensor<{m}x{n}xf16, after_accum> -> !tb.stensor<{m}x{n}xf16, after_accum>
    %10 = tb.div %9, %6 : !tb.stensor<{m}x{n}xf16, after_accum>, !tb.stensor<{m}x1xf16, after_accum> -> !tb.stensor<{m}x{n}xf16, after_accum>
    tb.output %10 {{output_map = array<i64: 1, -1, -1>}} : !tb.stensor<{m}x{n}xf16, after_accum>
  }}
  func.return %O : tensor<{m}x6144xf16>
}}
"""

ONE_PER_SM = ((192, 4), (96, 2), (128, 2))
"""(n, s) of 128 blocks (96 for n = 128)"""
TWO_PER_SM = ((96, 4), (192, 8), (64, 4), (128, 8))
"""(n, s) of 256 blocks (384 for n = 64 and n = 128: kn-fuse's own tilings, for comparison)"""


def plan(bs: int, n: int, s: int, k: int, threads: int) -> tuple[str, str]:
    """X [2 (bs1) or 16 (bs8), 4096], W [4096, 6144]: n columns and 4096 / s K rows per block."""
    m = 2 if bs == 1 else 16
    text = RMS.format(m=m, n=n, s=s, k=k, t=threads, gx=6144 // n, R=4096 // s // k)
    return f"rmsnorm_bs{bs}_n{n}_s{s}_k{k}_t{threads}", text


PLANS = [
    *(plan(bs, n, s, k, t) for bs in (1, 8) for n, s in ONE_PER_SM for k in (64, 128) for t in (256, 512)),
    *(plan(bs, n, s, k, t) for bs in (1, 8) for n, s in TWO_PER_SM for k in (64, 128) for t in (128, 256)),
]


def main(out: Path) -> None:
    write_plans(PLANS, out)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
