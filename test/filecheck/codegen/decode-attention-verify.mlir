// RUN: mirage-opt %s --split-input-file --verify-diagnostics | filecheck %s

// cute.decode_attention: a well-formed op prints back as written; each verifier rule names the
// op and the rule (dialects/cute/decode_attention.py; the operand rules are
// cute.hopper_attention's, hopper-attention-verify.mlir).

func.func @ok(%q: tensor<2x4x64xbf16>, %k: tensor<2x64x1024xbf16>, %v: tensor<2x1024x64xbf16>) -> tensor<2x4x64xbf16> {
  %o = cute.decode_attention(%q, %k, %v) {kernel_name = "ok_decode_attention_0", scale = 1.250000e-01 : f64, splits = 4 : i64, warps = 8 : i64, stages = 3 : i64, scratch_offset = 256 : i64} : (tensor<2x4x64xbf16>, tensor<2x64x1024xbf16>, tensor<2x1024x64xbf16>) -> tensor<2x4x64xbf16>
  func.return %o : tensor<2x4x64xbf16>
}
// CHECK: cute.decode_attention(%{{.*}}, %{{.*}}, %{{.*}}) {kernel_name = "ok_decode_attention_0", scale = 1.250000e-01 : f64, splits = 4 : i64, warps = 8 : i64, stages = 3 : i64, scratch_offset = 256 : i64}

// -----

func.func @rows(%q: tensor<32x64xf16>, %k: tensor<64x1024xf16>, %v: tensor<1024x64xf16>) -> tensor<32x64xf16> {
  %o = cute.decode_attention(%q, %k, %v) {kernel_name = "k", scale = 1.0e-01 : f64, splits = 1 : i64, warps = 4 : i64, stages = 2 : i64} : (tensor<32x64xf16>, tensor<64x1024xf16>, tensor<1024x64xf16>) -> tensor<32x64xf16>
  func.return %o : tensor<32x64xf16>
}
// CHECK: cute.decode_attention: 32 query rows per head, at most 16 (one m16 MMA tile)

// -----

func.func @splits(%q: tensor<1x64xf16>, %k: tensor<64x1024xf16>, %v: tensor<1024x64xf16>) -> tensor<1x64xf16> {
  %o = cute.decode_attention(%q, %k, %v) {kernel_name = "k", scale = 1.0e-01 : f64, splits = 32 : i64, warps = 4 : i64, stages = 2 : i64} : (tensor<1x64xf16>, tensor<64x1024xf16>, tensor<1024x64xf16>) -> tensor<1x64xf16>
  func.return %o : tensor<1x64xf16>
}
// CHECK: cute.decode_attention: seq_k = 1024 must be a multiple of 16 keys x 4 warps x 32 splits; choose fewer splits

// -----

func.func @smem(%q: tensor<1x128xf16>, %k: tensor<128x1024xf16>, %v: tensor<1024x128xf16>) -> tensor<1x128xf16> {
  %o = cute.decode_attention(%q, %k, %v) {kernel_name = "k", scale = 1.0e-01 : f64, splits = 1 : i64, warps = 8 : i64, stages = 4 : i64} : (tensor<1x128xf16>, tensor<128x1024xf16>, tensor<1024x128xf16>) -> tensor<1x128xf16>
  func.return %o : tensor<1x128xf16>
}
// CHECK: cute.decode_attention: 262272 bytes of shared memory exceed the block limit of 232448; use fewer stages or warps
