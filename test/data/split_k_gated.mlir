// Split-K gated MLP in ONE kernel: silu(X @ W1) * (X @ W2).  Grid x tiles N, grid y splits K
// four ways (2 iterations of 32 rows each), tb.grid_sum adds up the four blocks' two partial
// matmul tiles, and the last block of each group applies silu and the product -- in
// registers (passes/cute/grid_sum_epilogue.py).  X [8, 256], W1, W2 [256, 64], fp16.
func.func @split_k_gated(%X: tensor<8x256xf16> {kn.strides = array<i64: 256, 1>}, %W1: tensor<256x64xf16> {kn.strides = array<i64: 64, 1>}, %W2: tensor<256x64xf16> {kn.strides = array<i64: 64, 1>}) -> (tensor<8x64xf16> {kn.strides = array<i64: 64, 1>}) {
  %O = kn.customized(%X, %W1, %W2) attributes {grid_dim = array<i64: 2, 4, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 2 : i64, reduction_dimx = 64 : i64} : (tensor<8x256xf16>, tensor<256x64xf16>, tensor<256x64xf16>) -> tensor<8x64xf16> {
  ^bb0(%x: tensor<8x256xf16>, %w1: tensor<256x64xf16>, %w2: tensor<256x64xf16>):
    %tx = tb.input %x {input_map = array<i64: -1, 1, -1>, forloop_dim = 1 : i64} : tensor<8x256xf16> -> !tb.stensor<8x32xf16>
    %t1 = tb.input %w1 {input_map = array<i64: 1, 0, -1>, forloop_dim = 0 : i64} : tensor<256x64xf16> -> !tb.stensor<32x32xf16>
    %t2 = tb.input %w2 {input_map = array<i64: 1, 0, -1>, forloop_dim = 0 : i64} : tensor<256x64xf16> -> !tb.stensor<32x32xf16>
    %m1 = tb.matmul %tx, %t1 : !tb.stensor<8x32xf16>, !tb.stensor<32x32xf16> -> !tb.stensor<8x32xf16>
    %m2 = tb.matmul %tx, %t2 : !tb.stensor<8x32xf16>, !tb.stensor<32x32xf16> -> !tb.stensor<8x32xf16>
    %a1 = tb.forloop_accum nored %m1 : !tb.stensor<8x32xf16> -> !tb.stensor<8x32xf16, after_accum>
    %a2 = tb.forloop_accum nored %m2 : !tb.stensor<8x32xf16> -> !tb.stensor<8x32xf16, after_accum>
    %g1 = tb.grid_sum %a1 {dim = 1 : i64} : !tb.stensor<8x32xf16, after_accum> -> !tb.stensor<8x32xf16, after_accum>
    %g2 = tb.grid_sum %a2 {dim = 1 : i64} : !tb.stensor<8x32xf16, after_accum> -> !tb.stensor<8x32xf16, after_accum>
    %s = tb.silu %g1 : !tb.stensor<8x32xf16, after_accum>
    %y = tb.mul %s, %g2 : !tb.stensor<8x32xf16, after_accum>, !tb.stensor<8x32xf16, after_accum> -> !tb.stensor<8x32xf16, after_accum>
    tb.output %y {output_map = array<i64: 1, -1, -1>} : !tb.stensor<8x32xf16, after_accum>
  }
  func.return %O : tensor<8x64xf16>
}
