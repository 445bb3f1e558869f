// suite_swiglu_mlp_bs16_bf16: SwiGLU MLP (Llama's feed-forward): `(silu(X @ W1) * (X @ W3)) @ W2`, X [batch, hidden], W1, W3 [hidden, ffn], W2 [ffn, hidden].
// bfloat16, batch=16, hidden=4096, ffn=11008; written by python -m mirage_xdsl.bench.suite.write
builtin.module {
  func.func @suite_swiglu_mlp_bs16_bf16(%X: tensor<16x4096xbf16> {kn.strides = array<i64: 4096, 1>}, %W1: tensor<4096x11008xbf16> {kn.strides = array<i64: 11008, 1>, kn.weight}, %W3: tensor<4096x11008xbf16> {kn.strides = array<i64: 11008, 1>, kn.weight}, %W2: tensor<11008x4096xbf16> {kn.strides = array<i64: 4096, 1>, kn.weight}) -> (tensor<16x4096xbf16>) {
    %0 = kn.matmul %X, %W1 : tensor<16x4096xbf16>, tensor<4096x11008xbf16> -> tensor<16x11008xbf16>
    %1 = kn.silu %0 : tensor<16x11008xbf16>
    %2 = kn.matmul %X, %W3 : tensor<16x4096xbf16>, tensor<4096x11008xbf16> -> tensor<16x11008xbf16>
    %3 = kn.mul %1, %2 : tensor<16x11008xbf16>, tensor<16x11008xbf16> -> tensor<16x11008xbf16>
    %4 = kn.matmul %3, %W2 : tensor<16x11008xbf16>, tensor<11008x4096xbf16> -> tensor<16x4096xbf16>
    func.return %4 : tensor<16x4096xbf16>
  }
}
