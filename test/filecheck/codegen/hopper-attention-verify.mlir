// RUN: mirage-opt %s --split-input-file --verify-diagnostics | filecheck %s

// cute.hopper_attention: a well-formed op prints back as written (cute-roundtrip.mlir also
// round-trips it through the generic form); each verifier rule names the op and
// the rule (dialects/cute/hopper_attention.py).

func.func @ok(%q: tensor<2x128x64xbf16>, %k: tensor<2x64x256xbf16>, %v: tensor<2x256x64xbf16>) -> tensor<2x128x64xbf16> {
  %o = cute.hopper_attention(%q, %k, %v) {kernel_name = "ok_flash_attention_0", scale = 1.250000e-01 : f64, consumers = 1 : i64, key_tile = 64 : i64, stages = 2 : i64, causal_offset = 128 : i64} : (tensor<2x128x64xbf16>, tensor<2x64x256xbf16>, tensor<2x256x64xbf16>) -> tensor<2x128x64xbf16>
  func.return %o : tensor<2x128x64xbf16>
}
// CHECK: cute.hopper_attention(%{{.*}}, %{{.*}}, %{{.*}}) {kernel_name = "ok_flash_attention_0", scale = 1.250000e-01 : f64, consumers = 1 : i64, key_tile = 64 : i64, stages = 2 : i64, causal_offset = 128 : i64}

// -----

func.func @head_dim(%q: tensor<128x96xf16>, %k: tensor<96x256xf16>, %v: tensor<256x96xf16>) -> tensor<128x96xf16> {
  %o = cute.hopper_attention(%q, %k, %v) {kernel_name = "k", scale = 1.0e-01 : f64, consumers = 1 : i64, key_tile = 64 : i64, stages = 2 : i64} : (tensor<128x96xf16>, tensor<96x256xf16>, tensor<256x96xf16>) -> tensor<128x96xf16>
  func.return %o : tensor<128x96xf16>
}
// CHECK: cute.hopper_attention: head dim 96 is not one of (64, 128) (hopper_attention.cuh)

// -----

func.func @key_tile(%q: tensor<128x64xf16>, %k: tensor<64x192xf16>, %v: tensor<192x64xf16>) -> tensor<128x64xf16> {
  %o = cute.hopper_attention(%q, %k, %v) {kernel_name = "k", scale = 1.0e-01 : f64, consumers = 1 : i64, key_tile = 128 : i64, stages = 2 : i64} : (tensor<128x64xf16>, tensor<64x192xf16>, tensor<192x64xf16>) -> tensor<128x64xf16>
  func.return %o : tensor<128x64xf16>
}
// CHECK: cute.hopper_attention: key_tile 128 must be one of (64, 128) and divide seq_k = 192

// -----

func.func @types(%q: tensor<128x64xf32>, %k: tensor<64x128xf32>, %v: tensor<128x64xf32>) -> tensor<128x64xf32> {
  %o = cute.hopper_attention(%q, %k, %v) {kernel_name = "k", scale = 1.0e-01 : f64, consumers = 1 : i64, key_tile = 64 : i64, stages = 2 : i64} : (tensor<128x64xf32>, tensor<64x128xf32>, tensor<128x64xf32>) -> tensor<128x64xf32>
  func.return %o : tensor<128x64xf32>
}
// CHECK: cute.hopper_attention: Q, K, V and the result must share one element type, f16 or bf16

// -----

func.func @wide_tile_one_consumer(%q: tensor<128x64xf16>, %k: tensor<64x256xf16>, %v: tensor<256x64xf16>) -> tensor<128x64xf16> {
  %o = cute.hopper_attention(%q, %k, %v) {kernel_name = "k", scale = 1.0e-01 : f64, consumers = 1 : i64, key_tile = 128 : i64, stages = 2 : i64} : (tensor<128x64xf16>, tensor<64x256xf16>, tensor<256x64xf16>) -> tensor<128x64xf16>
  func.return %o : tensor<128x64xf16>
}
// CHECK: cute.hopper_attention: key_tile 128 needs consumers = 2 (a consumer of one-consumer blocks has too few registers for 128-key tiles); set consumers = 2 or key_tile = 64

// -----

func.func @smem(%q: tensor<128x128xf16>, %k: tensor<128x256xf16>, %v: tensor<256x128xf16>) -> tensor<128x128xf16> {
  %o = cute.hopper_attention(%q, %k, %v) {kernel_name = "k", scale = 1.0e-01 : f64, consumers = 2 : i64, key_tile = 128 : i64, stages = 4 : i64} : (tensor<128x128xf16>, tensor<128x256xf16>, tensor<256x128xf16>) -> tensor<128x128xf16>
  func.return %o : tensor<128x128xf16>
}
// CHECK: cute.hopper_attention: 296072 bytes of shared memory exceed the block limit of 232448; use fewer stages or a smaller key_tile

// -----

func.func @scale(%q: tensor<128x64xf16>, %k: tensor<64x256xf16>, %v: tensor<256x64xf16>) -> tensor<128x64xf16> {
  %o = cute.hopper_attention(%q, %k, %v) {kernel_name = "k", scale = -1.0e-01 : f64, consumers = 1 : i64, key_tile = 64 : i64, stages = 2 : i64} : (tensor<128x64xf16>, tensor<64x256xf16>, tensor<256x64xf16>) -> tensor<128x64xf16>
  func.return %o : tensor<128x64xf16>
}
// CHECK: cute.hopper_attention: scale -0.1 must be positive (the kernel scales the row maximum of the raw scores); lower such a group to the generated attention kernels
