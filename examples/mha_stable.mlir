// Multi-head decode attention at mha.mlir's shapes (Q [32, 16, 64], K [32, 64, 4096], V [32, 4096, 64], fp16),
// numerically stable: softmax(Q K / sqrt(64)) with the row max subtracted, then @ V.  Built by examples/build_examples.py mha_stable.
builtin.module {
  func.func @mha_stable(%Q: tensor<32x16x64xf16> {kn.strides = array<i64: 1024, 64, 1>}, %K: tensor<32x64x4096xf16> {kn.strides = array<i64: 262144, 4096, 1>}, %V: tensor<32x4096x64xf16> {kn.strides = array<i64: 262144, 64, 1>}) -> (tensor<32x16x64xf16>) {
    %0 = kn.matmul %Q, %K : tensor<32x16x64xf16>, tensor<32x64x4096xf16> -> tensor<32x16x4096xf16>
    %1 = kn.mul_scalar %0 {scalar = 1.250000e-01 : f64} : tensor<32x16x4096xf16>
    %2 = kn.reduction_max %1 {dim = 2 : i64} : tensor<32x16x4096xf16> -> tensor<32x16x1xf16>
    %3 = kn.sub %1, %2 : tensor<32x16x4096xf16>, tensor<32x16x1xf16> -> tensor<32x16x4096xf16>
    %4 = kn.exp %3 : tensor<32x16x4096xf16>
    %5 = kn.matmul %4, %V : tensor<32x16x4096xf16>, tensor<32x4096x64xf16> -> tensor<32x16x64xf16>
    %6 = kn.reduction %4 {dim = 2 : i64, size = 1 : i64} : tensor<32x16x4096xf16> -> tensor<32x16x1xf16>
    %7 = kn.div %5, %6 : tensor<32x16x64xf16>, tensor<32x16x1xf16> -> tensor<32x16x64xf16>
    func.return %7 : tensor<32x16x64xf16>
  }
}
