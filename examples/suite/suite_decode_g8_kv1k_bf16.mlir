// suite_decode_g8_kv1k_bf16: Decode attention (one new token, grouped-query): the `group` query heads of each of `kv_heads` KV heads are the rows of Q [kv_heads, group, head_dim]; the KV cache is K [kv_heads, head_dim, kv_len] (stored [kv_heads, kv_len, head_dim]: `key_strides`) and V [kv_heads, kv_len, head_dim].
// bfloat16, kv_heads=4, group=8, kv_len=1024, head_dim=128; written by python -m mirage_xdsl.bench.suite.write
builtin.module {
  func.func @suite_decode_g8_kv1k_bf16(%Q: tensor<4x8x128xbf16> {kn.strides = array<i64: 1024, 128, 1>}, %K: tensor<4x128x1024xbf16> {kn.strides = array<i64: 131072, 1, 128>}, %V: tensor<4x1024x128xbf16> {kn.strides = array<i64: 131072, 128, 1>}) -> (tensor<4x8x128xbf16>) {
    %0 = kn.matmul %Q, %K : tensor<4x8x128xbf16>, tensor<4x128x1024xbf16> -> tensor<4x8x1024xbf16>
    %1 = kn.mul_scalar %0 {scalar = 0.088388347648318433 : f64} : tensor<4x8x1024xbf16>
    %2 = kn.reduction_max %1 {dim = 2 : i64} : tensor<4x8x1024xbf16> -> tensor<4x8x1xbf16>
    %3 = kn.sub %1, %2 : tensor<4x8x1024xbf16>, tensor<4x8x1xbf16> -> tensor<4x8x1024xbf16>
    %4 = kn.exp %3 : tensor<4x8x1024xbf16>
    %5 = kn.reduction %4 {dim = 2 : i64, size = 1 : i64} : tensor<4x8x1024xbf16> -> tensor<4x8x1xbf16>
    %6 = kn.matmul %4, %V : tensor<4x8x1024xbf16>, tensor<4x1024x128xbf16> -> tensor<4x8x128xbf16>
    %7 = kn.div %6, %5 : tensor<4x8x128xbf16>, tensor<4x8x1xbf16> -> tensor<4x8x128xbf16>
    func.return %7 : tensor<4x8x128xbf16>
  }
}
