// suite_prefill_causal_s4096_bf16: Prefill attention, causal: as `prefill_attention`, the scaled scores masked by `kn.causal_mask` (query i sees keys 0..i).
// bfloat16, heads=8, seq=4096, head_dim=128; written by python -m mirage_xdsl.bench.suite.write
builtin.module {
  func.func @suite_prefill_causal_s4096_bf16(%Q: tensor<8x4096x128xbf16> {kn.strides = array<i64: 524288, 128, 1>}, %K: tensor<8x128x4096xbf16> {kn.strides = array<i64: 524288, 1, 128>}, %V: tensor<8x4096x128xbf16> {kn.strides = array<i64: 524288, 128, 1>}) -> (tensor<8x4096x128xbf16>) {
    %0 = kn.matmul %Q, %K : tensor<8x4096x128xbf16>, tensor<8x128x4096xbf16> -> tensor<8x4096x4096xbf16>
    %1 = kn.mul_scalar %0 {scalar = 0.088388347648318433 : f64} : tensor<8x4096x4096xbf16>
    %2 = kn.causal_mask %1 {offset = 0 : i64} : tensor<8x4096x4096xbf16>
    %3 = kn.reduction_max %2 {dim = 2 : i64} : tensor<8x4096x4096xbf16> -> tensor<8x4096x1xbf16>
    %4 = kn.sub %2, %3 : tensor<8x4096x4096xbf16>, tensor<8x4096x1xbf16> -> tensor<8x4096x4096xbf16>
    %5 = kn.exp %4 : tensor<8x4096x4096xbf16>
    %6 = kn.reduction %5 {dim = 2 : i64, size = 1 : i64} : tensor<8x4096x4096xbf16> -> tensor<8x4096x1xbf16>
    %7 = kn.matmul %5, %V : tensor<8x4096x4096xbf16>, tensor<8x4096x128xbf16> -> tensor<8x4096x128xbf16>
    %8 = kn.div %7, %6 : tensor<8x4096x128xbf16>, tensor<8x4096x1xbf16> -> tensor<8x4096x128xbf16>
    func.return %8 : tensor<8x4096x128xbf16>
  }
}
