// Found by `python -m mirage_xdsl.bench.fuzz --seed 12 --only 1566` on an H200 (2026-11-26): a register row chain
// started with the sum of a shared tile whose row was shorter than the block (0 elements per
// thread: nvcc rejected `float x0[0]`); cute-row-chains now checks the row length there too.
builtin.module {
  func.func @fuzz_12_1566(%X: tensor<1x256xf16> {kn.strides = array<i64: 256, 1>}, %Y: tensor<1x256xf16> {kn.strides = array<i64: 256, 1>}, %C: tensor<1x128xf16> {kn.strides = array<i64: 128, 1>}) -> (tensor<1x2xf16>, tensor<1x2xf16>) {
    %0, %1 = kn.customized(%X, %Y, %C) attributes {grid_dim = array<i64: 1, 2, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<1x256xf16>, tensor<1x256xf16>, tensor<1x128xf16>) -> (tensor<1x2xf16>, tensor<1x2xf16>) {
    ^bb0(%x: tensor<1x256xf16>, %y: tensor<1x256xf16>, %c: tensor<1x128xf16>):
      %2 = tb.input %x {input_map = array<i64: 0, 1, -1>, forloop_dim = 1 : i64} : tensor<1x256xf16> -> !tb.stensor<1x128xf16>
      %3 = tb.input %y {input_map = array<i64: 0, 1, -1>, forloop_dim = 1 : i64} : tensor<1x256xf16> -> !tb.stensor<1x128xf16>
      %4 = tb.input %c {input_map = array<i64: 0, -1, -1>, forloop_dim = -1 : i64} : tensor<1x128xf16> -> !tb.stensor<1x128xf16>
      %5 = tb.sub %4, %2 : !tb.stensor<1x128xf16>, !tb.stensor<1x128xf16> -> !tb.stensor<1x128xf16>
      %6 = tb.reduction %3 {dim = 1 : i64} : !tb.stensor<1x128xf16> -> !tb.stensor<1x1xf16>
      %7 = tb.reduction %3 {dim = 1 : i64} : !tb.stensor<1x128xf16> -> !tb.stensor<1x1xf16>
      %8 = tb.forloop_accum max %7 : !tb.stensor<1x1xf16> -> !tb.stensor<1x1xf16, after_accum>
      %9 = tb.forloop_accum red_ld_mean %6 : !tb.stensor<1x1xf16> -> !tb.stensor<1x1xf16, after_accum>
      %10 = tb.forloop_accum red_ld_mean %7 : !tb.stensor<1x1xf16> -> !tb.stensor<1x1xf16, after_accum>
      %11 = tb.add %10, %8 : !tb.stensor<1x1xf16, after_accum>, !tb.stensor<1x1xf16, after_accum> -> !tb.stensor<1x1xf16, after_accum>
      %12 = tb.add %8, %10 : !tb.stensor<1x1xf16, after_accum>, !tb.stensor<1x1xf16, after_accum> -> !tb.stensor<1x1xf16, after_accum>
      %13 = tb.square %11 : !tb.stensor<1x1xf16, after_accum>
      tb.output %13 {output_map = array<i64: 0, 1, -1>} : !tb.stensor<1x1xf16, after_accum>
      tb.output %11 {output_map = array<i64: 0, 1, -1>} : !tb.stensor<1x1xf16, after_accum>
    }
    func.return %0, %1 : tensor<1x2xf16>, tensor<1x2xf16>
  }
}
