// suite_prefill_s4096_bf16: Prefill attention, not causal: Q [heads, seq, head_dim], K [heads, head_dim, seq] (stored [heads, seq, head_dim]: `key_strides`), V [heads, seq, head_dim].
// bfloat16, heads=8, seq=4096, head_dim=128; written by python -m mirage_xdsl.bench.suite.write
builtin.module {
  func.func @suite_prefill_s4096_bf16(%Q: tensor<8x4096x128xbf16> {kn.strides = array<i64: 524288, 128, 1>}, %K: tensor<8x128x4096xbf16> {kn.strides = array<i64: 524288, 1, 128>}, %V: tensor<8x4096x128xbf16> {kn.strides = array<i64: 524288, 128, 1>}) -> (tensor<8x4096x128xbf16>) {
    %0 = kn.matmul %Q, %K : tensor<8x4096x128xbf16>, tensor<8x128x4096xbf16> -> tensor<8x4096x4096xbf16>
    %1 = kn.mul_scalar %0 {scalar = 0.088388347648318433 : f64} : tensor<8x4096x4096xbf16>
    %2 = kn.reduction_max %1 {dim = 2 : i64} : tensor<8x4096x4096xbf16> -> tensor<8x4096x1xbf16>
    %3 = kn.sub %1, %2 : tensor<8x4096x4096xbf16>, tensor<8x4096x1xbf16> -> tensor<8x4096x4096xbf16>
    %4 = kn.exp %3 : tensor<8x4096x4096xbf16>
    %5 = kn.reduction %4 {dim = 2 : i64, size = 1 : i64} : tensor<8x4096x4096xbf16> -> tensor<8x4096x1xbf16>
    %6 = kn.matmul %4, %V : tensor<8x4096x4096xbf16>, tensor<8x4096x128xbf16> -> tensor<8x4096x128xbf16>
    %7 = kn.div %6, %5 : tensor<8x4096x128xbf16>, tensor<8x4096x1xbf16> -> tensor<8x4096x128xbf16>
    func.return %7 : tensor<8x4096x128xbf16>
  }
}
