// LoRA: X @ W + (X @ A) @ B (Mirage benchmark/lora.py: X [16, 256], W [256, 4096], A [256, 16], B [16, 4096], fp16).
func.func @lora(%X: tensor<16x256xf16> {kn.strides = array<i64: 256, 1>},
                %W: tensor<256x4096xf16> {kn.strides = array<i64: 4096, 1>, kn.weight},
                %A: tensor<256x16xf16> {kn.strides = array<i64: 16, 1>, kn.weight},
                %B: tensor<16x4096xf16> {kn.strides = array<i64: 4096, 1>, kn.weight}) -> tensor<16x4096xf16> {
  %xw = kn.matmul %X, %W : tensor<16x256xf16>, tensor<256x4096xf16> -> tensor<16x4096xf16>
  %xa = kn.matmul %X, %A : tensor<16x256xf16>, tensor<256x16xf16> -> tensor<16x16xf16>
  %xab = kn.matmul %xa, %B : tensor<16x16xf16>, tensor<16x4096xf16> -> tensor<16x4096xf16>
  %o = kn.add %xw, %xab : tensor<16x4096xf16>, tensor<16x4096xf16> -> tensor<16x4096xf16>
  func.return %o : tensor<16x4096xf16>
}
