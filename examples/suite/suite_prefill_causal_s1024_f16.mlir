// suite_prefill_causal_s1024_f16: Prefill attention, causal: as `prefill_attention`, the scaled scores masked by `kn.causal_mask` (query i sees keys 0..i).
// float16, heads=8, seq=1024, head_dim=128; written by python -m mirage_xdsl.bench.suite.write
builtin.module {
  func.func @suite_prefill_causal_s1024_f16(%Q: tensor<8x1024x128xf16> {kn.strides = array<i64: 131072, 128, 1>}, %K: tensor<8x128x1024xf16> {kn.strides = array<i64: 131072, 1, 128>}, %V: tensor<8x1024x128xf16> {kn.strides = array<i64: 131072, 128, 1>}) -> (tensor<8x1024x128xf16>) {
    %0 = kn.matmul %Q, %K : tensor<8x1024x128xf16>, tensor<8x128x1024xf16> -> tensor<8x1024x1024xf16>
    %1 = kn.mul_scalar %0 {scalar = 0.088388347648318433 : f64} : tensor<8x1024x1024xf16>
    %2 = kn.causal_mask %1 {offset = 0 : i64} : tensor<8x1024x1024xf16>
    %3 = kn.reduction_max %2 {dim = 2 : i64} : tensor<8x1024x1024xf16> -> tensor<8x1024x1xf16>
    %4 = kn.sub %2, %3 : tensor<8x1024x1024xf16>, tensor<8x1024x1xf16> -> tensor<8x1024x1024xf16>
    %5 = kn.exp %4 : tensor<8x1024x1024xf16>
    %6 = kn.reduction %5 {dim = 2 : i64, size = 1 : i64} : tensor<8x1024x1024xf16> -> tensor<8x1024x1xf16>
    %7 = kn.matmul %5, %V : tensor<8x1024x1024xf16>, tensor<8x1024x128xf16> -> tensor<8x1024x128xf16>
    %8 = kn.div %7, %6 : tensor<8x1024x128xf16>, tensor<8x1024x1xf16> -> tensor<8x1024x128xf16>
    func.return %8 : tensor<8x1024x128xf16>
  }
}
