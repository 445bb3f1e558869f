// kn-partition{hopper-attention}: an attention group over at most 16 query rows per head (no
// causal mask) becomes one split-key decode kernel, cute.decode_attention, when its estimate is
// below the group's generated flash-decoding plan; kn-plan-workspace gives the splits' partials
// workspace (scratch_offset) and the cuda target prints a call of mx::hopper::decode_attention.
// RUN: mirage-opt %s -p kn-partition | filecheck %s
// RUN: mirage-opt %s -p 'kn-partition{hopper-attention=false}' | filecheck %s --check-prefix=OFF
// RUN: mirage-opt %s -p mirage-transpile | filecheck %s --check-prefix=WS
// RUN: mirage-opt %s -p mirage-transpile -t cuda | filecheck %s --check-prefix=CUDA

// Decode over 32 heads x 32768 keys, one query row per head, d = 128: 8 splits per head.
func.func @decode(%Q: tensor<32x1x128xf16>, %K: tensor<32x128x32768xf16> {kn.strides = array<i64: 4194304, 1, 128>}, %V: tensor<32x32768x128xf16>) -> tensor<32x1x128xf16> {
  %0 = kn.matmul %Q, %K : tensor<32x1x128xf16>, tensor<32x128x32768xf16> -> tensor<32x1x32768xf16>
  %1 = kn.mul_scalar %0 {scalar = 0.088388347648318433 : f64} : tensor<32x1x32768xf16>
  %2 = kn.reduction_max %1 {dim = 2 : i64} : tensor<32x1x32768xf16> -> tensor<32x1x1xf16>
  %3 = kn.sub %1, %2 : tensor<32x1x32768xf16>, tensor<32x1x1xf16> -> tensor<32x1x32768xf16>
  %4 = kn.exp %3 : tensor<32x1x32768xf16>
  %5 = kn.reduction %4 {dim = 2 : i64, size = 1 : i64} : tensor<32x1x32768xf16> -> tensor<32x1x1xf16>
  %6 = kn.matmul %4, %V : tensor<32x1x32768xf16>, tensor<32x32768x128xf16> -> tensor<32x1x128xf16>
  %7 = kn.div %6, %5 : tensor<32x1x128xf16>, tensor<32x1x1xf16> -> tensor<32x1x128xf16>
  func.return %7 : tensor<32x1x128xf16>
}
// CHECK-LABEL: func.func @decode
// CHECK-NEXT:    %{{.*}} = cute.decode_attention(%Q, %K, %V) {kernel_name = "decode_decode_attention_0", scale = 0.088388347648318433 : f64, splits = 8 : i64, warps = 4 : i64, stages = 4 : i64} : (tensor<32x1x128xf16>, tensor<32x128x32768xf16>, tensor<32x32768x128xf16>) -> tensor<32x1x128xf16>
// CHECK-NEXT:    func.return
// OFF-LABEL: func.func @decode
// OFF:         kn.customized
// OFF-NOT:     cute.decode_attention
// WS:          kn.workspace_size = 133120 : i64
// WS:          cute.decode_attention(%Q, %K, %V) {{{.*}}stages = 4 : i64, scratch_offset = 0 : i64}
// CUDA: extern "C" __global__ void __launch_bounds__(128)
// CUDA-NEXT: decode_decode_attention_0(half* __restrict__ o, const half* __restrict__ q, const half* __restrict__ k, const half* __restrict__ v, float* __restrict__ ws, unsigned* __restrict__ counters) {
// CUDA-NEXT: mx::hopper::decode_attention<half, 128, 1, 4, 4>(q, k, v, o, ws, counters, mx::hopper::DecodeShape{32768, 4096, 128LL, 128LL, 4194304LL, 128LL, 4194304LL, 128LL, 128LL, 128LL, 0.12751743082459868f});
