// suite_reduce_sum_d1_f16: Sum of X [d0, d1, d2] over `dim` (kept as a dim of size 1).
// float16, dim=1, d0=16, d1=1024, d2=4096; written by python -m mirage_xdsl.bench.suite.write
builtin.module {
  func.func @suite_reduce_sum_d1_f16(%X: tensor<16x1024x4096xf16> {kn.strides = array<i64: 4194304, 4096, 1>}) -> (tensor<16x1x4096xf16>) {
    %0 = kn.reduction %X {dim = 1 : i64, size = 1 : i64} : tensor<16x1024x4096xf16> -> tensor<16x1x4096xf16>
    func.return %0 : tensor<16x1x4096xf16>
  }
}
