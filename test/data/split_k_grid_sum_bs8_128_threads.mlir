// Hand-written split-K grid-sum plan of rms_norm(X) @ W (bs8): 64 x 4 blocks of 128 threads;
// the pipeline must keep its grid and block size.
func.func @g(%X: tensor<16x4096xf16> {kn.strides = array<i64: 4096, 1>},
                   %W: tensor<4096x6144xf16> {kn.strides = array<i64: 6144, 1>})
    -> (tensor<16x6144xf16> {kn.strides = array<i64: 6144, 1>}) {
  %O = kn.customized(%X, %W) attributes {grid_dim = array<i64: 64, 4, 1>, block_dim = array<i64: 128, 1, 1>,
                                         forloop_range = 16 : i64, reduction_dimx = 64 : i64}
      : (tensor<16x4096xf16>, tensor<4096x6144xf16>) -> tensor<16x6144xf16> {
  ^bb0(%x: tensor<16x4096xf16>, %w: tensor<4096x6144xf16>):
    %0 = tb.input %x {input_map = array<i64: -1, 1, -1>, forloop_dim = 1 : i64} : tensor<16x4096xf16> -> !tb.stensor<16x64xf16>
    %1 = tb.input %w {input_map = array<i64: 1, 0, -1>, forloop_dim = 0 : i64} : tensor<4096x6144xf16> -> !tb.stensor<64x96xf16>
    %2 = tb.square %0 : !tb.stensor<16x64xf16>
    %3 = tb.mul_scalar %2 {scalar = 0.000244140625 : f64} : !tb.stensor<16x64xf16>
    %4 = tb.forloop_accum red_ld_sum %3 : !tb.stensor<16x64xf16> -> !tb.stensor<16x1xf16, after_accum>
    %5 = tb.grid_sum %4 {dim = 1 : i64} : !tb.stensor<16x1xf16, after_accum> -> !tb.stensor<16x1xf16, after_accum>
    %6 = tb.sqrt %5 : !tb.stensor<16x1xf16, after_accum>
    %7 = tb.matmul %0, %1 : !tb.stensor<16x64xf16>, !tb.stensor<64x96xf16> -> !tb.stensor<16x96xf16>
    %8 = tb.forloop_accum nored %7 : !tb.stensor<16x96xf16> -> !tb.stensor<16x96xf16, after_accum>
    %9 = tb.grid_sum %8 {dim = 1 : i64} : !tb.stensor<16x96xf16, after_accum> -> !tb.stensor<16x96xf16, after_accum>
    %10 = tb.div %9, %6 : !tb.stensor<16x96xf16, after_accum>, !tb.stensor<16x1xf16, after_accum> -> !tb.stensor<16x96xf16, after_accum>
    tb.output %10 {output_map = array<i64: 1, -1, -1>} : !tb.stensor<16x96xf16, after_accum>
  }
  func.return %O : tensor<16x6144xf16>
}
