// suite_prefill_s1024_f16: Prefill attention, not causal: Q [heads, seq, head_dim], K [heads, head_dim, seq] (stored [heads, seq, head_dim]: `key_strides`), V [heads, seq, head_dim].
// float16, heads=8, seq=1024, head_dim=128; written by python -m mirage_xdsl.bench.suite.write
builtin.module {
  func.func @suite_prefill_s1024_f16(%Q: tensor<8x1024x128xf16> {kn.strides = array<i64: 131072, 128, 1>}, %K: tensor<8x128x1024xf16> {kn.strides = array<i64: 131072, 1, 128>}, %V: tensor<8x1024x128xf16> {kn.strides = array<i64: 131072, 128, 1>}) -> (tensor<8x1024x128xf16>) {
    %0 = kn.matmul %Q, %K : tensor<8x1024x128xf16>, tensor<8x128x1024xf16> -> tensor<8x1024x1024xf16>
    %1 = kn.mul_scalar %0 {scalar = 0.088388347648318433 : f64} : tensor<8x1024x1024xf16>
    %2 = kn.reduction_max %1 {dim = 2 : i64} : tensor<8x1024x1024xf16> -> tensor<8x1024x1xf16>
    %3 = kn.sub %1, %2 : tensor<8x1024x1024xf16>, tensor<8x1024x1xf16> -> tensor<8x1024x1024xf16>
    %4 = kn.exp %3 : tensor<8x1024x1024xf16>
    %5 = kn.reduction %4 {dim = 2 : i64, size = 1 : i64} : tensor<8x1024x1024xf16> -> tensor<8x1024x1xf16>
    %6 = kn.matmul %4, %V : tensor<8x1024x1024xf16>, tensor<8x1024x128xf16> -> tensor<8x1024x128xf16>
    %7 = kn.div %6, %5 : tensor<8x1024x128xf16>, tensor<8x1024x1xf16> -> tensor<8x1024x128xf16>
    func.return %7 : tensor<8x1024x128xf16>
  }
}
