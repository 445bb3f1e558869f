// Gated MLP: silu(X @ W1) * (X @ W2) (Mirage benchmark/gated_mlp.py: X [8, 4096], W1, W2 [4096, 4096], fp16).
func.func @gated_mlp(%X: tensor<8x4096xf16> {kn.strides = array<i64: 4096, 1>},
                     %W1: tensor<4096x4096xf16> {kn.strides = array<i64: 4096, 1>, kn.weight},
                     %W2: tensor<4096x4096xf16> {kn.strides = array<i64: 4096, 1>, kn.weight}) -> tensor<8x4096xf16> {
  %a = kn.matmul %X, %W1 : tensor<8x4096xf16>, tensor<4096x4096xf16> -> tensor<8x4096xf16>
  %s = kn.silu %a : tensor<8x4096xf16>
  %b = kn.matmul %X, %W2 : tensor<8x4096xf16>, tensor<4096x4096xf16> -> tensor<8x4096xf16>
  %o = kn.mul %s, %b : tensor<8x4096xf16>, tensor<8x4096xf16> -> tensor<8x4096xf16>
  func.return %o : tensor<8x4096xf16>
}
