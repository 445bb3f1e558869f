// Found by `python -m mirage_xdsl.bench.fuzz --seed 2 --only 446` on an H200 (2026-11-25); see issue #29.
// compute-sanitizer: "Invalid __shared__ read of size 2 bytes" past the 24832-byte plan in fuzz_k0 (threads 104.. of block 0):
// a ptxas (CUDA 13.0) miscompile around the ldmatrix zero-row select, avoided in mma.cuh (mma_fragments); GPU test in test_fuzz_differential.py.
builtin.module {
  func.func @fuzz(%X: tensor<64x64xbf16> {kn.strides = array<i64: 64, 1>}, %W: tensor<64x256xbf16> {kn.strides = array<i64: 256, 1>, kn.weight}) -> (tensor<64x256xbf16>) {
    %0 = kn.customized(%X, %W) attributes {grid_dim = array<i64: 4, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 16 : i64} : (tensor<64x64xbf16>, tensor<64x256xbf16>) -> tensor<64x256xbf16> {
    ^bb0(%x: tensor<64x64xbf16>, %w: tensor<64x256xbf16>):
      %1 = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = 1 : i64} : tensor<64x64xbf16> -> !tb.stensor<64x64xbf16>
      %2 = tb.input %w {input_map = array<i64: 1, -1, -1>, forloop_dim = 0 : i64} : tensor<64x256xbf16> -> !tb.stensor<64x64xbf16>
      %3 = tb.matmul %1, %2 : !tb.stensor<64x64xbf16>, !tb.stensor<64x64xbf16> -> !tb.stensor<64x64xbf16>
      %4 = tb.forloop_accum nored %3 : !tb.stensor<64x64xbf16> -> !tb.stensor<64x64xbf16, after_accum>
      %5 = tb.forloop_accum red_ld_rms %1 : !tb.stensor<64x64xbf16> -> !tb.stensor<64x1xbf16, after_accum>
      %6 = tb.div %4, %5 : !tb.stensor<64x64xbf16, after_accum>, !tb.stensor<64x1xbf16, after_accum> -> !tb.stensor<64x64xbf16, after_accum>
      %7 = tb.mul_scalar %4 {scalar = -5.000000e-01 : f64} : !tb.stensor<64x64xbf16, after_accum>
      tb.output %7 {output_map = array<i64: 1, 0, -1>} : !tb.stensor<64x64xbf16, after_accum>
    }
    func.return %0 : tensor<64x256xbf16>
  }
}
