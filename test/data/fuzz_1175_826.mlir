builtin.module {
  func.func @fuzz_1175_826(%X: tensor<2x32x64xf16> {kn.strides = array<i64: 2048, 64, 1>}, %0: tensor<64x64xf16> {kn.strides = array<i64: 64, 1>}, %1: tensor<64x64xf16> {kn.strides = array<i64: 64, 1>}) -> (tensor<64x2x32xf16>, tensor<64x64xf16>) {
    %2 = kn.reshape %X : tensor<2x32x64xf16> -> tensor<64x64xf16>
    %3, %4 = kn.chunk %2 {dim = 1 : i64} : tensor<64x64xf16> -> tensor<64x32xf16>, tensor<64x32xf16>
    %5 = kn.mul_scalar %4 {scalar = -1.000000e+00 : f64} : tensor<64x32xf16>
    %6 = kn.concat %5, %3 {dim = 1 : i64} : tensor<64x32xf16>, tensor<64x32xf16> -> tensor<64x64xf16>
    %7 = kn.mul %2, %0 : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf16>
    %8 = kn.mul %6, %1 : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf16>
    %9 = kn.add %7, %8 : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf16>
    %10 = kn.reshape %9 : tensor<64x64xf16> -> tensor<64x2x32xf16>
    func.return %10, %9 : tensor<64x2x32xf16>, tensor<64x64xf16>
  }
}
