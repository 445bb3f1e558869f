// Multi-query attention for decoding (Mirage benchmark/multi_query_attention.py, batch 1:
// Q [1, 1024, 64], K [1, 64, 4096], V [1, 4096, 64], fp16), Mirage's softmax without max subtraction.
func.func @mqa(%Q: tensor<1x1024x64xf16> {kn.strides = array<i64: 65536, 64, 1>},
               %K: tensor<1x64x4096xf16> {kn.strides = array<i64: 262144, 4096, 1>},
               %V: tensor<1x4096x64xf16> {kn.strides = array<i64: 262144, 64, 1>}) -> tensor<1x1024x64xf16> {
  %s = kn.matmul %Q, %K : tensor<1x1024x64xf16>, tensor<1x64x4096xf16> -> tensor<1x1024x4096xf16>
  %e = kn.exp %s : tensor<1x1024x4096xf16>
  %z = kn.reduction %e {dim = 2 : i64, size = 1 : i64} : tensor<1x1024x4096xf16> -> tensor<1x1024x1xf16>
  %p = kn.div %e, %z : tensor<1x1024x4096xf16>, tensor<1x1024x1xf16> -> tensor<1x1024x4096xf16>
  %o = kn.matmul %p, %V : tensor<1x1024x4096xf16>, tensor<1x4096x64xf16> -> tensor<1x1024x64xf16>
  func.return %o : tensor<1x1024x64xf16>
}
