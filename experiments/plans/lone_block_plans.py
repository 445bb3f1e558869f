"""Hand-written unsplit ("lone block") plans of the GEMV workloads, as textual IR.

    python experiments/plans/lone_block_plans.py OUT/
    mirage-bench --prepare-only prep/ --files OUT/*.mlir --variants c0s2,c0s3,c0s4,c0s6
    python tools/mirage_bench.py report.md --from prep/ --no-compile-peer   # on the GPU

Each file is one `kn.customized` graph: grid over W's columns (n per block), for-loop over K
(k rows per iteration), t threads per block, no split-K.  `gemv_*` files leave rms_norm out
(X @ W alone).  Record: benchmarks/results/lone-blocks-h200-2026-11-25.md (kept).
"""
import sys
from pathlib import Path

RMS = """func.func @{name}(%X: tensor<{m}x4096xf16> {{kn.strides = array<i64: 4096, 1>}},
                   %W: tensor<4096x6144xf16> {{kn.strides = array<i64: 6144, 1>}})
    -> (tensor<{m}x6144xf16> {{kn.strides = array<i64: 6144, 1>}}) {{
  %O = kn.customized(%X, %W) attributes {{grid_dim = array<i64: {grid}, 1, 1>, block_dim = array<i64: {threads}, 1, 1>,
                                         forloop_range = {R} : i64, reduction_dimx = 64 : i64}}
      : (tensor<{m}x4096xf16>, tensor<4096x6144xf16>) -> tensor<{m}x6144xf16> {{
  ^bb0(%x: tensor<{m}x4096xf16>, %w: tensor<4096x6144xf16>):
    %t1 = tb.input %x {{input_map = array<i64: -1, -1, -1>, forloop_dim = 1 : i64}} : tensor<{m}x4096xf16> -> !tb.stensor<{m}x{k}xf16>
    %t2 = tb.input %w {{input_map = array<i64: 1, -1, -1>, forloop_dim = 0 : i64}} : tensor<4096x6144xf16> -> !tb.stensor<{k}x{n}xf16>
    %t3 = tb.forloop_accum red_ld_rms %t1 : !tb.stensor<{m}x{k}xf16> -> !tb.stensor<{m}x1xf16, after_accum>
    %t4 = tb.matmul %t1, %t2 : !tb.stensor<{m}x{k}xf16>, !tb.stensor<{k}x{n}xf16> -> !tb.stensor<{m}x{n}xf16>
    %t5 = tb.forloop_accum nored %t4 : !tb.stensor<{m}x{n}xf16> -> !tb.stensor<{m}x{n}xf16, after_accum>
    %t6 = tb.div %t5, %t3 : !tb.stensor<{m}x{n}xf16, after_accum>, !tb.stensor<{m}x1xf16, after_accum> -> !tb.stensor<{m}x{n}xf16, after_accum>
    tb.output %t6 {{output_map = array<i64: 1, -1, -1>}} : !tb.stensor<{m}x{n}xf16, after_accum>
  }}
  func.return %O : tensor<{m}x6144xf16>
}}
"""

GATED = """func.func @{name}(%X: tensor<8x4096xf16> {{kn.strides = array<i64: 4096, 1>}},
                   %W1: tensor<4096x4096xf16> {{kn.strides = array<i64: 4096, 1>}},
                   %W2: tensor<4096x4096xf16> {{kn.strides = array<i64: 4096, 1>}})
    -> (tensor<8x4096xf16> {{kn.strides = array<i64: 4096, 1>}}) {{
  %O = kn.customized(%X, %W1, %W2) attributes {{grid_dim = array<i64: {grid}, 1, 1>, block_dim = array<i64: {threads}, 1, 1>,
                                         forloop_range = {R} : i64, reduction_dimx = 64 : i64}}
      : (tensor<8x4096xf16>, tensor<4096x4096xf16>, tensor<4096x4096xf16>) -> tensor<8x4096xf16> {{
  ^bb0(%x: tensor<8x4096xf16>, %w1: tensor<4096x4096xf16>, %w2: tensor<4096x4096xf16>):
    %a = tb.input %x {{input_map = array<i64: -1, -1, -1>, forloop_dim = 1 : i64}} : tensor<8x4096xf16> -> !tb.stensor<8x{k}xf16>
    %b = tb.input %w1 {{input_map = array<i64: 1, -1, -1>, forloop_dim = 0 : i64}} : tensor<4096x4096xf16> -> !tb.stensor<{k}x{n}xf16>
    %c = tb.input %w2 {{input_map = array<i64: 1, -1, -1>, forloop_dim = 0 : i64}} : tensor<4096x4096xf16> -> !tb.stensor<{k}x{n}xf16>
    %d = tb.matmul %a, %b : !tb.stensor<8x{k}xf16>, !tb.stensor<{k}x{n}xf16> -> !tb.stensor<8x{n}xf16>
    %e = tb.matmul %a, %c : !tb.stensor<8x{k}xf16>, !tb.stensor<{k}x{n}xf16> -> !tb.stensor<8x{n}xf16>
    %f = tb.forloop_accum nored %d : !tb.stensor<8x{n}xf16> -> !tb.stensor<8x{n}xf16, after_accum>
    %g = tb.forloop_accum nored %e : !tb.stensor<8x{n}xf16> -> !tb.stensor<8x{n}xf16, after_accum>
    %h = tb.silu %f : !tb.stensor<8x{n}xf16, after_accum>
    %i = tb.mul %h, %g : !tb.stensor<8x{n}xf16, after_accum>, !tb.stensor<8x{n}xf16, after_accum> -> !tb.stensor<8x{n}xf16, after_accum>
    tb.output %i {{output_map = array<i64: 1, -1, -1>}} : !tb.stensor<8x{n}xf16, after_accum>
  }}
  func.return %O : tensor<8x4096xf16>
}}
"""

# X @ W: the rms_norm graph without its sum of squares and division
GEMV = "\n".join(line for line in RMS.splitlines() if "%t3 =" not in line and "%t6 =" not in line).replace(
    "tb.output %t6", "tb.output %t5"
) + "\n"


def rms(bs: int, n: int, k: int, threads: int = 128) -> tuple[str, str]:
    """rms_norm(X) @ W, X [2 (bs1) or 16 (bs8), 4096], W [4096, 6144]."""
    m = 2 if bs == 1 else 16
    return f"rmsnorm_bs{bs}_n{n}_k{k}_t{threads}", RMS.format(name="g", m=m, n=n, k=k, grid=6144 // n, R=4096 // k, threads=threads)


def gemv(bs: int, n: int, k: int, threads: int = 128) -> tuple[str, str]:
    """X @ W with the shapes of `rms`."""
    m = 2 if bs == 1 else 16
    return f"gemv_bs{bs}_n{n}_k{k}_t{threads}", GEMV.format(name="g", m=m, n=n, k=k, grid=6144 // n, R=4096 // k, threads=threads)


def gated(n: int, k: int, threads: int = 128) -> tuple[str, str]:
    """silu(X @ W1) * (X @ W2), X [8, 4096], W1, W2 [4096, 4096]."""
    return f"gated_mlp_n{n}_k{k}_t{threads}", GATED.format(name="g", n=n, k=k, grid=4096 // n, R=4096 // k, threads=threads)


PLANS = [
    *(gated(32, 128, t) for t in (128, 256, 384, 512, 1024)),
    gated(32, 256, 256), gated(32, 256, 512), gated(32, 64, 256), gated(32, 64, 512), gated(16, 128, 256), gated(64, 128, 512),
    *(rms(8, 48, 128, t) for t in (128, 192, 384)), rms(8, 48, 256, 384), rms(8, 64, 128, 512), rms(8, 64, 256, 512),
    rms(8, 24, 128), rms(8, 16, 256), *(rms(1, 48, 128, t) for t in (128, 192, 384)), rms(1, 64, 256, 512),
    *(gemv(8, 48, 128, t) for t in (128, 384)), gemv(8, 48, 256, 384), gemv(8, 64, 128, 512), gemv(8, 64, 256, 512),
    gemv(8, 32, 128, 256), gemv(1, 64, 256, 512),
]


def write_plans(plans: list[tuple[str, str]], out: Path) -> None:
    """Each (name, text) of `plans` to `out`/name.mlir (also used by split_k_plans.py)."""
    out.mkdir(parents=True, exist_ok=True)
    for name, text in plans:
        (out / f"{name}.mlir").write_text(text)


def main(out: Path) -> None:
    write_plans(PLANS, out)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
