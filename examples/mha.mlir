// Multi-head attention for decoding (Mirage benchmark/multi_head_attention.py, batch 1:
// Q [32, 16, 64], K [32, 64, 4096], V [32, 4096, 64], fp16), Mirage's softmax without max subtraction.
func.func @mha(%Q: tensor<32x16x64xf16> {kn.strides = array<i64: 1024, 64, 1>},
               %K: tensor<32x64x4096xf16> {kn.strides = array<i64: 262144, 4096, 1>},
               %V: tensor<32x4096x64xf16> {kn.strides = array<i64: 262144, 64, 1>}) -> tensor<32x16x64xf16> {
  %s = kn.matmul %Q, %K : tensor<32x16x64xf16>, tensor<32x64x4096xf16> -> tensor<32x16x4096xf16>
  %e = kn.exp %s : tensor<32x16x4096xf16>
  %z = kn.reduction %e {dim = 2 : i64, size = 1 : i64} : tensor<32x16x4096xf16> -> tensor<32x16x1xf16>
  %p = kn.div %e, %z : tensor<32x16x4096xf16>, tensor<32x16x1xf16> -> tensor<32x16x4096xf16>
  %o = kn.matmul %p, %V : tensor<32x16x4096xf16>, tensor<32x4096x64xf16> -> tensor<32x16x64xf16>
  func.return %o : tensor<32x16x64xf16>
}
