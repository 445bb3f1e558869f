// Group-query attention for decoding, Mirage's form without max subtraction or scaling:
// exp(Q @ K) / sum(exp(Q @ K), -1) @ V (benchmark/group_query_attention.py, batch 8:
// Q [16, 256, 64], K [16, 64, 4096], V [16, 4096, 64], fp16).
func.func @gqa_bs8(%Q: tensor<16x256x64xf16> {kn.strides = array<i64: 16384, 64, 1>},
                   %K: tensor<16x64x4096xf16> {kn.strides = array<i64: 262144, 4096, 1>},
                   %V: tensor<16x4096x64xf16> {kn.strides = array<i64: 262144, 64, 1>}) -> tensor<16x256x64xf16> {
  %s = kn.matmul %Q, %K : tensor<16x256x64xf16>, tensor<16x64x4096xf16> -> tensor<16x256x4096xf16>
  %e = kn.exp %s : tensor<16x256x4096xf16>
  %z = kn.reduction %e {dim = 2 : i64, size = 1 : i64} : tensor<16x256x4096xf16> -> tensor<16x256x1xf16>
  %p = kn.div %e, %z : tensor<16x256x4096xf16>, tensor<16x256x1xf16> -> tensor<16x256x4096xf16>
  %o = kn.matmul %p, %V : tensor<16x256x4096xf16>, tensor<16x4096x64xf16> -> tensor<16x256x64xf16>
  func.return %o : tensor<16x256x64xf16>
}
