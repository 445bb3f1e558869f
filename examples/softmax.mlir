// softmax over the last dim, numerically stable: exp(X - max(X)) / sum(exp(X - max(X))), X [64, 4096] fp16.
// kn.reduction_max is our kernel-level max reduction (not in Mirage); built by examples/build_examples.py softmax.
builtin.module {
  func.func @softmax(%X: tensor<64x4096xf16> {kn.strides = array<i64: 4096, 1>}) -> (tensor<64x4096xf16>) {
    %0 = kn.reduction_max %X {dim = 1 : i64} : tensor<64x4096xf16> -> tensor<64x1xf16>
    %1 = kn.sub %X, %0 : tensor<64x4096xf16>, tensor<64x1xf16> -> tensor<64x4096xf16>
    %2 = kn.exp %1 : tensor<64x4096xf16>
    %3 = kn.reduction %2 {dim = 1 : i64, size = 1 : i64} : tensor<64x4096xf16> -> tensor<64x1xf16>
    %4 = kn.div %2, %3 : tensor<64x4096xf16>, tensor<64x1xf16> -> tensor<64x4096xf16>
    func.return %4 : tensor<64x4096xf16>
  }
}
