// suite_add_rmsnorm_f16: Residual add + RMSNorm (a transformer block's pre-norm): `H = X + R`, outputs `(rms_norm(H) * G, H)` -- the normalised input of the next layer and the new residual.
// float16, rows=4096, cols=4096; written by python -m mirage_xdsl.bench.suite.write
builtin.module {
  func.func @suite_add_rmsnorm_f16(%X: tensor<4096x4096xf16> {kn.strides = array<i64: 4096, 1>}, %R: tensor<4096x4096xf16> {kn.strides = array<i64: 4096, 1>}, %G: tensor<1x4096xf16> {kn.strides = array<i64: 4096, 1>, kn.weight}) -> (tensor<4096x4096xf16>, tensor<4096x4096xf16>) {
    %0 = kn.add %X, %R : tensor<4096x4096xf16>, tensor<4096x4096xf16> -> tensor<4096x4096xf16>
    %1 = kn.rms_norm %0 {normalized_shape = array<i64: 4096>} : tensor<4096x4096xf16>
    %2 = kn.mul %1, %G : tensor<4096x4096xf16>, tensor<1x4096xf16> -> tensor<4096x4096xf16>
    func.return %2, %0 : tensor<4096x4096xf16>, tensor<4096x4096xf16>
  }
}
