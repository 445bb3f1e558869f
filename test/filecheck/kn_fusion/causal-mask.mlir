// kn.causal_mask through the stack: round trip, verifier rules, kn-fuse's tb.causal_mask
// (grid axis and loop flag of the masked dims), convert-tb-to-cute's cute.causal_mask and the
// flash chain's in-register mask, and the CUDA the printer writes for each (the generated
// kernels: without the sm_90a flash kernel, kn-partition-hopper-attention.mlir).
// RUN: mirage-opt %s --split-input-file | filecheck %s --check-prefix=ROUND
// RUN: mirage-opt %s --split-input-file -p 'kn-fuse{hopper-attention=false}' | filecheck %s --check-prefix=FUSE
// RUN: mirage-opt %s --split-input-file -p 'mirage-transpile{tuning="flash_attention=false"}' -t cuda | filecheck %s --check-prefix=CUDA
// RUN: mirage-opt %S/Inputs/causal-mask-invalid.mlir --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %S/Inputs/causal-mask-invalid.mlir --check-prefix=BAD

// Small prefill (2 heads x 256 x 128): the key dim stays whole (for-loop 1), the mask runs
// after the loop on a [1, 16, 256] tile whose rows come from grid axis y (f32: kn-widen-sums
// keeps attention scores in f32 up to exp).
func.func @small(%Q: tensor<2x256x128xf16>, %K: tensor<2x128x256xf16> {kn.strides = array<i64: 32768, 1, 128>}, %V: tensor<2x256x128xf16>) -> tensor<2x256x128xf16> {
  %0 = kn.matmul %Q, %K : tensor<2x256x128xf16>, tensor<2x128x256xf16> -> tensor<2x256x256xf16>
  %1 = kn.mul_scalar %0 {scalar = 0.088388347648318433 : f64} : tensor<2x256x256xf16>
  %2 = kn.causal_mask %1 {offset = 0 : i64} : tensor<2x256x256xf16>
  %3 = kn.reduction_max %2 {dim = 2 : i64} : tensor<2x256x256xf16> -> tensor<2x256x1xf16>
  %4 = kn.sub %2, %3 : tensor<2x256x256xf16>, tensor<2x256x1xf16> -> tensor<2x256x256xf16>
  %5 = kn.exp %4 : tensor<2x256x256xf16>
  %6 = kn.reduction %5 {dim = 2 : i64, size = 1 : i64} : tensor<2x256x256xf16> -> tensor<2x256x1xf16>
  %7 = kn.matmul %5, %V : tensor<2x256x256xf16>, tensor<2x256x128xf16> -> tensor<2x256x128xf16>
  %8 = kn.div %7, %6 : tensor<2x256x128xf16>, tensor<2x256x1xf16> -> tensor<2x256x128xf16>
  func.return %8 : tensor<2x256x128xf16>
}
// ROUND-LABEL: func.func @small
// ROUND: kn.causal_mask %{{.*}} {offset = 0 : i64} : tensor<2x256x256xf16>
// FUSE-LABEL: func.func @small
// FUSE: tb.causal_mask %{{.*}} {offset = 0 : i64, grid_dims = array<i64: 1, -1>, forloop_dims = array<i64: 0, 0>} : !tb.stensor<1x16x256xf32, after_accum>
// CUDA-LABEL: small_k0
// CUDA: mx::causal_mask<128, {{.*}}, 1, 16, 16, 256, false>({{.*}}, (int)blockIdx.y * 16, 0, 0, tid,

// -----

// The suite's 8 x 1024 x 1024 x 128 causal prefill: one flash kernel (online softmax over
// 64-key tiles, grid x over 64-row query blocks); the mask is applied to the scores in
// registers, its diagonal from the block's rows and the iteration's keys.
func.func @prefill(%Q: tensor<8x1024x128xf16>, %K: tensor<8x128x1024xf16> {kn.strides = array<i64: 131072, 1, 128>}, %V: tensor<8x1024x128xf16>) -> tensor<8x1024x128xf16> {
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
// FUSE-LABEL: func.func @prefill
// FUSE: tb.causal_mask %{{.*}} {offset = 0 : i64, grid_dims = array<i64: 1, -1>, forloop_dims = array<i64: 0, 1>} : !tb.stensor<1x64x64xf32>
// CUDA-LABEL: prefill_k0
// CUDA: for (int it = 0; it < cs_trips; ++it) {
// CUDA: if (it < cs_unmasked0) {
// CUDA-NEXT: mx::mma_chain_online_run<
// CUDA-NEXT: [](float v)
// CUDA-NEXT: } else {
// CUDA-NEXT: mx::mma_chain_online_run<
// CUDA-NEXT: [](float v)
// CUDA-NEXT: mx::CausalMask{(int)blockIdx.y * 64 + 0 - (it * 64)});
