// suite_lora_r64_bf16: A linear layer with a LoRA adapter: `X @ W + (X @ A) @ B`, X [batch, hidden], W [hidden, hidden], A [hidden, rank], B [rank, hidden].
// bfloat16, batch=16, hidden=4096, rank=64; written by python -m mirage_xdsl.bench.suite.write
builtin.module {
  func.func @suite_lora_r64_bf16(%X: tensor<16x4096xbf16> {kn.strides = array<i64: 4096, 1>}, %W: tensor<4096x4096xbf16> {kn.strides = array<i64: 4096, 1>, kn.weight}, %A: tensor<4096x64xbf16> {kn.strides = array<i64: 64, 1>, kn.weight}, %B: tensor<64x4096xbf16> {kn.strides = array<i64: 4096, 1>, kn.weight}) -> (tensor<16x4096xbf16>) {
    %0 = kn.matmul %X, %W : tensor<16x4096xbf16>, tensor<4096x4096xbf16> -> tensor<16x4096xbf16>
    %1 = kn.matmul %X, %A : tensor<16x4096xbf16>, tensor<4096x64xbf16> -> tensor<16x64xbf16>
    %2 = kn.matmul %1, %B : tensor<16x64xbf16>, tensor<64x4096xbf16> -> tensor<16x4096xbf16>
    %3 = kn.add %0, %2 : tensor<16x4096xbf16>, tensor<16x4096xbf16> -> tensor<16x4096xbf16>
    func.return %3 : tensor<16x4096xbf16>
  }
}
