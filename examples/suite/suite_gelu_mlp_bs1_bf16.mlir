// suite_gelu_mlp_bs1_bf16: GELU MLP (GPT-style feed-forward): `gelu(X @ W1) @ W2`, X [batch, hidden], W1 [hidden, ffn], W2 [ffn, hidden].
// bfloat16, batch=1, hidden=4096, ffn=12288; written by python -m mirage_xdsl.bench.suite.write
builtin.module {
  func.func @suite_gelu_mlp_bs1_bf16(%X: tensor<1x4096xbf16> {kn.strides = array<i64: 4096, 1>}, %W1: tensor<4096x12288xbf16> {kn.strides = array<i64: 12288, 1>, kn.weight}, %W2: tensor<12288x4096xbf16> {kn.strides = array<i64: 4096, 1>, kn.weight}) -> (tensor<1x4096xbf16>) {
    %0 = kn.matmul %X, %W1 : tensor<1x4096xbf16>, tensor<4096x12288xbf16> -> tensor<1x12288xbf16>
    %1 = kn.gelu %0 : tensor<1x12288xbf16>
    %2 = kn.matmul %1, %W2 : tensor<1x12288xbf16>, tensor<12288x4096xbf16> -> tensor<1x4096xbf16>
    func.return %2 : tensor<1x4096xbf16>
  }
}
