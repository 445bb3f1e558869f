// Split-K rms_norm(X) @ W in ONE kernel: grid x tiles N, grid y splits K four ways, each
// block accumulates its K slice (2 iterations of 32), then tb.grid_sum adds up the four
// blocks' partial matmul and sum-of-squares tiles and the last block of each group divides
// and stores.  X [2, 256], W [256, 64], fp16.
func.func @split_k_rms(%X: tensor<2x256xf16> {kn.strides = array<i64: 256, 1>}, %W: tensor<256x64xf16> {kn.strides = array<i64: 64, 1>}) -> (tensor<2x64xf16> {kn.strides = array<i64: 64, 1>}) {
  %O = kn.customized(%X, %W) attributes {grid_dim = array<i64: 2, 4, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 2 : i64, reduction_dimx = 64 : i64} : (tensor<2x256xf16>, tensor<256x64xf16>) -> tensor<2x64xf16> {
  ^bb0(%x: tensor<2x256xf16>, %w: tensor<256x64xf16>):
    %tx = tb.input %x {input_map = array<i64: -1, 1, -1>, forloop_dim = 1 : i64} : tensor<2x256xf16> -> !tb.stensor<2x32xf16>
    %tw = tb.input %w {input_map = array<i64: 1, 0, -1>, forloop_dim = 0 : i64} : tensor<256x64xf16> -> !tb.stensor<32x32xf16>
    %mm = tb.matmul %tx, %tw : !tb.stensor<2x32xf16>, !tb.stensor<32x32xf16> -> !tb.stensor<2x32xf16>
    %acc = tb.forloop_accum nored %mm : !tb.stensor<2x32xf16> -> !tb.stensor<2x32xf16, after_accum>
    %sq = tb.square %tx : !tb.stensor<2x32xf16>
    %ss = tb.forloop_accum red_ld_sum %sq : !tb.stensor<2x32xf16> -> !tb.stensor<2x1xf16, after_accum>
    %gacc = tb.grid_sum %acc {dim = 1 : i64} : !tb.stensor<2x32xf16, after_accum> -> !tb.stensor<2x32xf16, after_accum>
    %gss = tb.grid_sum %ss {dim = 1 : i64} : !tb.stensor<2x1xf16, after_accum> -> !tb.stensor<2x1xf16, after_accum>
    %ms = tb.mul_scalar %gss {scalar = 3.906250e-03 : f64} : !tb.stensor<2x1xf16, after_accum>
    %rms = tb.sqrt %ms : !tb.stensor<2x1xf16, after_accum>
    %y = tb.div %gacc, %rms : !tb.stensor<2x32xf16, after_accum>, !tb.stensor<2x1xf16, after_accum> -> !tb.stensor<2x32xf16, after_accum>
    tb.output %y {output_map = array<i64: 1, -1, -1>} : !tb.stensor<2x32xf16, after_accum>
  }
  func.return %O : tensor<2x64xf16>
}
