// An unknown accumulator kind is a parse error (used by ../cli-errors.mlir).
func.func @bad(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
    %a = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
    %s = tb.forloop_accum red_ld_avg %a : !tb.stensor<8x64xf16> -> !tb.stensor<8x1xf16, after_accum>
  }
  func.return
}
