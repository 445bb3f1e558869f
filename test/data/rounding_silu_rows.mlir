// A hand-written fp16 threadblock graph whose f32 sum rounds to f16 (tb.silu : f32 -> f16) and
// feeds a row sum and a division, both outputs; test_widen_sums.py runs it in the host emulator.
builtin.module {
  func.func @rounding_silu_rows(%X: tensor<32x256xf16> {kn.strides = array<i64: 256, 1>}) -> (tensor<32x1xf16>, tensor<32x64xf16>) {
    %0, %9 = kn.customized(%X) attributes {grid_dim = array<i64: 2, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 4 : i64, reduction_dimx = 64 : i64} : (tensor<32x256xf16>) -> (tensor<32x1xf16>, tensor<32x64xf16>) {
    ^bb0(%x: tensor<32x256xf16>):
      %1 = tb.input %x {input_map = array<i64: 0, -1, -1>, forloop_dim = 1 : i64} : tensor<32x256xf16> -> !tb.stensor<16x64xf16>
      %2 = tb.forloop_accum nored %1 : !tb.stensor<16x64xf16> -> !tb.stensor<16x64xf32, after_accum>
      %3 = tb.silu %2 : !tb.stensor<16x64xf32, after_accum> -> !tb.stensor<16x64xf16, after_accum>
      %4 = tb.reduction %3 {dim = 1 : i64} : !tb.stensor<16x64xf16, after_accum> -> !tb.stensor<16x1xf16, after_accum>
      %5 = tb.div %3, %4 : !tb.stensor<16x64xf16, after_accum>, !tb.stensor<16x1xf16, after_accum> -> !tb.stensor<16x64xf16, after_accum>
      tb.output %4 {output_map = array<i64: 0, -1, -1>} : !tb.stensor<16x1xf16, after_accum>
      tb.output %5 {output_map = array<i64: 0, -1, -1>} : !tb.stensor<16x64xf16, after_accum>
    }
    func.return %0, %9 : tensor<32x1xf16>, tensor<32x64xf16>
  }
}
