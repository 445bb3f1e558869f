// suite_gelu_mlp_bs1_f16: GELU MLP (GPT-style feed-forward): `gelu(X @ W1) @ W2`, X [batch, hidden], W1 [hidden, ffn], W2 [ffn, hidden].
// float16, batch=1, hidden=4096, ffn=12288; written by python -m mirage_xdsl.bench.suite.write
builtin.module {
  func.func @suite_gelu_mlp_bs1_f16(%X: tensor<1x4096xf16> {kn.strides = array<i64: 4096, 1>}, %W1: tensor<4096x12288xf16> {kn.strides = array<i64: 12288, 1>, kn.weight}, %W2: tensor<12288x4096xf16> {kn.strides = array<i64: 4096, 1>, kn.weight}) -> (tensor<1x4096xf16>) {
    %0 = kn.matmul %X, %W1 : tensor<1x4096xf16>, tensor<4096x12288xf16> -> tensor<1x12288xf16>
    %1 = kn.gelu %0 : tensor<1x12288xf16>
    %2 = kn.matmul %1, %W2 : tensor<1x12288xf16>, tensor<12288x4096xf16> -> tensor<1x4096xf16>
    func.return %2 : tensor<1x4096xf16>
  }
}
