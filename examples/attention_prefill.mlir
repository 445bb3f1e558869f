// Prefill attention, not causal: 8 heads x 1024 tokens, head dim 64, fp16; softmax(Q K / 8) @ V with the
// row max subtracted.  Built by examples/build_examples.py attention_prefill.
builtin.module {
  func.func @attention_prefill(%Q: tensor<8x1024x64xf16> {kn.strides = array<i64: 65536, 64, 1>}, %K: tensor<8x64x1024xf16> {kn.strides = array<i64: 65536, 1024, 1>}, %V: tensor<8x1024x64xf16> {kn.strides = array<i64: 65536, 64, 1>}) -> (tensor<8x1024x64xf16>) {
    %0 = kn.matmul %Q, %K : tensor<8x1024x64xf16>, tensor<8x64x1024xf16> -> tensor<8x1024x1024xf16>
    %1 = kn.mul_scalar %0 {scalar = 1.250000e-01 : f64} : tensor<8x1024x1024xf16>
    %2 = kn.reduction_max %1 {dim = 2 : i64} : tensor<8x1024x1024xf16> -> tensor<8x1024x1xf16>
    %3 = kn.sub %1, %2 : tensor<8x1024x1024xf16>, tensor<8x1024x1xf16> -> tensor<8x1024x1024xf16>
    %4 = kn.exp %3 : tensor<8x1024x1024xf16>
    %5 = kn.matmul %4, %V : tensor<8x1024x1024xf16>, tensor<8x1024x64xf16> -> tensor<8x1024x64xf16>
    %6 = kn.reduction %4 {dim = 2 : i64, size = 1 : i64} : tensor<8x1024x1024xf16> -> tensor<8x1024x1xf16>
    %7 = kn.div %5, %6 : tensor<8x1024x64xf16>, tensor<8x1024x1xf16> -> tensor<8x1024x64xf16>
    func.return %7 : tensor<8x1024x64xf16>
  }
}
