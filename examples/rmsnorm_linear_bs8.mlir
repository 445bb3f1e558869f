// RMSNorm followed by a linear layer, as a plain kernel graph: rms_norm(X) @ W
// (Mirage benchmark/rmsnorm.py, batch 8: X [16, 4096], W [4096, 6144], fp16, no epsilon, no gain).
func.func @rmsnorm_linear_bs8(%X: tensor<16x4096xf16> {kn.strides = array<i64: 4096, 1>},
                              %W: tensor<4096x6144xf16> {kn.strides = array<i64: 6144, 1>, kn.weight}) -> tensor<16x6144xf16> {
  %n = kn.rms_norm %X {normalized_shape = array<i64: 4096>} : tensor<16x4096xf16>
  %o = kn.matmul %n, %W : tensor<16x4096xf16>, tensor<4096x6144xf16> -> tensor<16x6144xf16>
  func.return %o : tensor<16x6144xf16>
}
