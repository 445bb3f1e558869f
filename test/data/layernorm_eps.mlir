// A LayerNorm with epsilon (kn.add_scalar) before a matmul, and an add_scalar epilogue of a
// second matmul: test/e2e/test_add_scalar.py.
builtin.module {
  func.func @layernorm_eps(%X: tensor<64x512xf16> {kn.strides = array<i64: 512, 1>}, %W: tensor<512x256xf16> {kn.strides = array<i64: 256, 1>}) -> (tensor<64x256xf16>, tensor<64x256xf16>) {
    %0 = kn.reduction %X {dim = 1 : i64, size = 1 : i64} : tensor<64x512xf16> -> tensor<64x1xf16>
    %1 = kn.mul_scalar %0 {scalar = 0.001953125 : f64} : tensor<64x1xf16>
    %2 = kn.sub %X, %1 : tensor<64x512xf16>, tensor<64x1xf16> -> tensor<64x512xf16>
    %3 = kn.square %2 : tensor<64x512xf16>
    %4 = kn.reduction %3 {dim = 1 : i64, size = 1 : i64} : tensor<64x512xf16> -> tensor<64x1xf16>
    %5 = kn.mul_scalar %4 {scalar = 0.001953125 : f64} : tensor<64x1xf16>
    %6 = kn.add_scalar %5 {scalar = 1.000000e-05 : f64} : tensor<64x1xf16>
    %7 = kn.sqrt %6 : tensor<64x1xf16>
    %8 = kn.div %2, %7 : tensor<64x512xf16>, tensor<64x1xf16> -> tensor<64x512xf16>
    %9 = kn.matmul %8, %W : tensor<64x512xf16>, tensor<512x256xf16> -> tensor<64x256xf16>
    %10 = kn.matmul %X, %W : tensor<64x512xf16>, tensor<512x256xf16> -> tensor<64x256xf16>
    %11 = kn.relu %10 : tensor<64x256xf16>
    %12 = kn.add_scalar %11 {scalar = -2.500000e-01 : f64} : tensor<64x256xf16>
    func.return %9, %12 : tensor<64x256xf16>, tensor<64x256xf16>
  }
}
