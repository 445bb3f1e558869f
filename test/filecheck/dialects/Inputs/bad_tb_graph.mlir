// A threadblock graph whose tile is not divisible by the grid (used by ../cli-errors.mlir).
func.func @bad(%X: tensor<6x64xf16>) -> tensor<6x64xf16> {
  %O = kn.customized(%X) attributes {grid_dim = array<i64: 4, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<6x64xf16>) -> tensor<6x64xf16> {
  ^bb0(%x: tensor<6x64xf16>):
    %t = tb.input %x {input_map = array<i64: 0, -1, -1>, forloop_dim = -1 : i64} : tensor<6x64xf16> -> !tb.stensor<1x64xf16>
    %a = tb.forloop_accum nored %t : !tb.stensor<1x64xf16> -> !tb.stensor<1x64xf16, after_accum>
    tb.output %a {output_map = array<i64: 0, -1, -1>} : !tb.stensor<1x64xf16, after_accum>
  }
  func.return %O : tensor<6x64xf16>
}
