// suite_cross_entropy_bf16: Cross-entropy forward per row with target probabilities P (torch's `cross_entropy(X, P, reduction="none")`): `-sum(P * log_softmax(X)) = logsumexp(X) * sum(P) - sum(P * X)`, logsumexp stable (`max + log(sum(exp(X - max)))`); X, P [rows, vocab] -> [rows, 1].
// bfloat16, rows=1024, vocab=32768; written by python -m mirage_xdsl.bench.suite.write
builtin.module {
  func.func @suite_cross_entropy_bf16(%X: tensor<1024x32768xbf16> {kn.strides = array<i64: 32768, 1>}, %P: tensor<1024x32768xbf16> {kn.strides = array<i64: 32768, 1>}) -> (tensor<1024x1xbf16>) {
    %0 = kn.reduction_max %X {dim = 1 : i64} : tensor<1024x32768xbf16> -> tensor<1024x1xbf16>
    %1 = kn.sub %X, %0 : tensor<1024x32768xbf16>, tensor<1024x1xbf16> -> tensor<1024x32768xbf16>
    %2 = kn.exp %1 : tensor<1024x32768xbf16>
    %3 = kn.reduction %2 {dim = 1 : i64, size = 1 : i64} : tensor<1024x32768xbf16> -> tensor<1024x1xbf16>
    %4 = kn.log %3 : tensor<1024x1xbf16>
    %5 = kn.add %0, %4 : tensor<1024x1xbf16>, tensor<1024x1xbf16> -> tensor<1024x1xbf16>
    %6 = kn.reduction %P {dim = 1 : i64, size = 1 : i64} : tensor<1024x32768xbf16> -> tensor<1024x1xbf16>
    %7 = kn.mul %5, %6 : tensor<1024x1xbf16>, tensor<1024x1xbf16> -> tensor<1024x1xbf16>
    %8 = kn.mul %P, %X : tensor<1024x32768xbf16>, tensor<1024x32768xbf16> -> tensor<1024x32768xbf16>
    %9 = kn.reduction %8 {dim = 1 : i64, size = 1 : i64} : tensor<1024x32768xbf16> -> tensor<1024x1xbf16>
    %10 = kn.sub %7, %9 : tensor<1024x1xbf16>, tensor<1024x1xbf16> -> tensor<1024x1xbf16>
    func.return %10 : tensor<1024x1xbf16>
  }
}
