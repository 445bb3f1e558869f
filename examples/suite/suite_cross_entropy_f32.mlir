// suite_cross_entropy_f32: Cross-entropy forward per row with target probabilities P (torch's `cross_entropy(X, P, reduction="none")`): `-sum(P * log_softmax(X)) = logsumexp(X) * sum(P) - sum(P * X)`, logsumexp stable (`max + log(sum(exp(X - max)))`); X, P [rows, vocab] -> [rows, 1].
// float32, rows=1024, vocab=32768; written by python -m mirage_xdsl.bench.suite.write
builtin.module {
  func.func @suite_cross_entropy_f32(%X: tensor<1024x32768xf32> {kn.strides = array<i64: 32768, 1>}, %P: tensor<1024x32768xf32> {kn.strides = array<i64: 32768, 1>}) -> (tensor<1024x1xf32>) {
    %0 = kn.reduction_max %X {dim = 1 : i64} : tensor<1024x32768xf32> -> tensor<1024x1xf32>
    %1 = kn.sub %X, %0 : tensor<1024x32768xf32>, tensor<1024x1xf32> -> tensor<1024x32768xf32>
    %2 = kn.exp %1 : tensor<1024x32768xf32>
    %3 = kn.reduction %2 {dim = 1 : i64, size = 1 : i64} : tensor<1024x32768xf32> -> tensor<1024x1xf32>
    %4 = kn.log %3 : tensor<1024x1xf32>
    %5 = kn.add %0, %4 : tensor<1024x1xf32>, tensor<1024x1xf32> -> tensor<1024x1xf32>
    %6 = kn.reduction %P {dim = 1 : i64, size = 1 : i64} : tensor<1024x32768xf32> -> tensor<1024x1xf32>
    %7 = kn.mul %5, %6 : tensor<1024x1xf32>, tensor<1024x1xf32> -> tensor<1024x1xf32>
    %8 = kn.mul %P, %X : tensor<1024x32768xf32>, tensor<1024x32768xf32> -> tensor<1024x32768xf32>
    %9 = kn.reduction %8 {dim = 1 : i64, size = 1 : i64} : tensor<1024x32768xf32> -> tensor<1024x1xf32>
    %10 = kn.sub %7, %9 : tensor<1024x1xf32>, tensor<1024x1xf32> -> tensor<1024x1xf32>
    func.return %10 : tensor<1024x1xf32>
  }
}
