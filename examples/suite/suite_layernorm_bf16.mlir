// suite_layernorm_bf16: LayerNorm over the last dim of X [rows, cols], mean and variance written out: `(X - mean) / sqrt(mean((X - mean)^2)) * G + B` (G, B: [1, cols]; no epsilon).
// bfloat16, rows=4096, cols=4096; written by python -m mirage_xdsl.bench.suite.write
builtin.module {
  func.func @suite_layernorm_bf16(%X: tensor<4096x4096xbf16> {kn.strides = array<i64: 4096, 1>}, %G: tensor<1x4096xbf16> {kn.strides = array<i64: 4096, 1>, kn.weight}, %B: tensor<1x4096xbf16> {kn.strides = array<i64: 4096, 1>, kn.weight}) -> (tensor<4096x4096xbf16>) {
    %0 = kn.reduction %X {dim = 1 : i64, size = 1 : i64} : tensor<4096x4096xbf16> -> tensor<4096x1xbf16>
    %1 = kn.mul_scalar %0 {scalar = 0.000244140625 : f64} : tensor<4096x1xbf16>
    %2 = kn.sub %X, %1 : tensor<4096x4096xbf16>, tensor<4096x1xbf16> -> tensor<4096x4096xbf16>
    %3 = kn.square %2 : tensor<4096x4096xbf16>
    %4 = kn.reduction %3 {dim = 1 : i64, size = 1 : i64} : tensor<4096x4096xbf16> -> tensor<4096x1xbf16>
    %5 = kn.mul_scalar %4 {scalar = 0.000244140625 : f64} : tensor<4096x1xbf16>
    %6 = kn.sqrt %5 : tensor<4096x1xbf16>
    %7 = kn.div %2, %6 : tensor<4096x4096xbf16>, tensor<4096x1xbf16> -> tensor<4096x4096xbf16>
    %8 = kn.mul %7, %G : tensor<4096x4096xbf16>, tensor<1x4096xbf16> -> tensor<4096x4096xbf16>
    %9 = kn.add %8, %B : tensor<4096x4096xbf16>, tensor<1x4096xbf16> -> tensor<4096x4096xbf16>
    func.return %9 : tensor<4096x4096xbf16>
  }
}
