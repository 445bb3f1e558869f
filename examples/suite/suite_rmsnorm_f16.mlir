// suite_rmsnorm_f16: RMSNorm over the last dim of X [rows, cols] with a gain G [1, cols]: `rms_norm(X) * G`.
// float16, rows=4096, cols=4096; written by python -m mirage_xdsl.bench.suite.write
builtin.module {
  func.func @suite_rmsnorm_f16(%X: tensor<4096x4096xf16> {kn.strides = array<i64: 4096, 1>}, %G: tensor<1x4096xf16> {kn.strides = array<i64: 4096, 1>, kn.weight}) -> (tensor<4096x4096xf16>) {
    %0 = kn.rms_norm %X {normalized_shape = array<i64: 4096>} : tensor<4096x4096xf16>
    %1 = kn.mul %0, %G : tensor<4096x4096xf16>, tensor<1x4096xf16> -> tensor<4096x4096xf16>
    func.return %1 : tensor<4096x4096xf16>
  }
}
