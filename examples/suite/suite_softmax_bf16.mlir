// suite_softmax_bf16: softmax over the last dim of X [rows, cols] (max subtracted).
// bfloat16, rows=4096, cols=4096; written by python -m mirage_xdsl.bench.suite.write
builtin.module {
  func.func @suite_softmax_bf16(%X: tensor<4096x4096xbf16> {kn.strides = array<i64: 4096, 1>}) -> (tensor<4096x4096xbf16>) {
    %0 = kn.reduction_max %X {dim = 1 : i64} : tensor<4096x4096xbf16> -> tensor<4096x1xbf16>
    %1 = kn.sub %X, %0 : tensor<4096x4096xbf16>, tensor<4096x1xbf16> -> tensor<4096x4096xbf16>
    %2 = kn.exp %1 : tensor<4096x4096xbf16>
    %3 = kn.reduction %2 {dim = 1 : i64, size = 1 : i64} : tensor<4096x4096xbf16> -> tensor<4096x1xbf16>
    %4 = kn.div %2, %3 : tensor<4096x4096xbf16>, tensor<4096x1xbf16> -> tensor<4096x4096xbf16>
    func.return %4 : tensor<4096x4096xbf16>
  }
}
