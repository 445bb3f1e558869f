// suite_rotary_f16: Rotary position embedding (RoFormer, rotate-half form, as in Llama): with X [tokens, heads, head_dim] split into halves x1, x2 and C, S [tokens, 1, head_dim/2] the cosines and sines of each token's angles, `concat(x1 C - x2 S, x2 C + x1 S)`.
// float16, tokens=4096, heads=32, head_dim=128; written by python -m mirage_xdsl.bench.suite.write
builtin.module {
  func.func @suite_rotary_f16(%X: tensor<4096x32x128xf16> {kn.strides = array<i64: 4096, 128, 1>}, %C: tensor<4096x1x64xf16> {kn.strides = array<i64: 64, 64, 1>, kn.weight}, %S: tensor<4096x1x64xf16> {kn.strides = array<i64: 64, 64, 1>, kn.weight}) -> (tensor<4096x32x128xf16>) {
    %0, %1 = kn.chunk %X {dim = 2 : i64} : tensor<4096x32x128xf16> -> tensor<4096x32x64xf16>, tensor<4096x32x64xf16>
    %2 = kn.mul %0, %C : tensor<4096x32x64xf16>, tensor<4096x1x64xf16> -> tensor<4096x32x64xf16>
    %3 = kn.mul %1, %S : tensor<4096x32x64xf16>, tensor<4096x1x64xf16> -> tensor<4096x32x64xf16>
    %4 = kn.sub %2, %3 : tensor<4096x32x64xf16>, tensor<4096x32x64xf16> -> tensor<4096x32x64xf16>
    %5 = kn.mul %1, %C : tensor<4096x32x64xf16>, tensor<4096x1x64xf16> -> tensor<4096x32x64xf16>
    %6 = kn.mul %0, %S : tensor<4096x32x64xf16>, tensor<4096x1x64xf16> -> tensor<4096x32x64xf16>
    %7 = kn.add %5, %6 : tensor<4096x32x64xf16>, tensor<4096x32x64xf16> -> tensor<4096x32x64xf16>
    %8 = kn.concat %4, %7 {dim = 2 : i64} : tensor<4096x32x64xf16>, tensor<4096x32x64xf16> -> tensor<4096x32x128xf16>
    func.return %8 : tensor<4096x32x128xf16>
  }
}
