// RUN: mirage-opt %s -p kn-decompose-rms-norm --split-input-file | filecheck %s

// One normalized dim: square -> mul_scalar(1/n) -> reduction -> sqrt -> div (broadcast).
// The scale comes BEFORE the sum (unlike the op list of the pass contract, like Mirage's
// tb.rms_norm rebuild): sums of x^2/n stay below max(x^2), sums of x^2 overflow fp16.
func.func @one_dim(%x: tensor<16x4096xf16>) -> tensor<16x4096xf16> {
  %y = kn.rms_norm %x {normalized_shape = array<i64: 4096>} : tensor<16x4096xf16>
  func.return %y : tensor<16x4096xf16>
}

// CHECK-LABEL: func.func @one_dim
// CHECK-NEXT:    %[[SQ:.*]] = kn.square %x : tensor<16x4096xf16>
// CHECK-NEXT:    %[[SC:.*]] = kn.mul_scalar %[[SQ]] {scalar = 0.000244140625 : f64} : tensor<16x4096xf16>
// CHECK-NEXT:    %[[RED:.*]] = kn.reduction %[[SC]] {dim = 1 : i64, size = 1 : i64} : tensor<16x4096xf16> -> tensor<16x1xf16>
// CHECK-NEXT:    %[[RMS:.*]] = kn.sqrt %[[RED]] : tensor<16x1xf16>
// CHECK-NEXT:    %[[Y:.*]] = kn.div %x, %[[RMS]] : tensor<16x4096xf16>, tensor<16x1xf16> -> tensor<16x4096xf16>
// CHECK-NEXT:    func.return %[[Y]] : tensor<16x4096xf16>
// CHECK-NOT:     kn.rms_norm

// -----

// Two normalized dims (n = 8*64 = 512): one size-1 reduction per dim, last dim first, so no
// reshape is needed.
func.func @two_dims(%x: tensor<4x8x64xf32>) -> tensor<4x8x64xf32> {
  %y = kn.rms_norm %x {normalized_shape = array<i64: 8, 64>} : tensor<4x8x64xf32>
  %z = kn.exp %y : tensor<4x8x64xf32>
  func.return %z : tensor<4x8x64xf32>
}

// CHECK-LABEL: func.func @two_dims
// CHECK-NEXT:    %[[SQ:.*]] = kn.square %x : tensor<4x8x64xf32>
// CHECK-NEXT:    %[[SC:.*]] = kn.mul_scalar %[[SQ]] {scalar = 0.001953125 : f64} : tensor<4x8x64xf32>
// CHECK-NEXT:    %[[R2:.*]] = kn.reduction %[[SC]] {dim = 2 : i64, size = 1 : i64} : tensor<4x8x64xf32> -> tensor<4x8x1xf32>
// CHECK-NEXT:    %[[R1:.*]] = kn.reduction %[[R2]] {dim = 1 : i64, size = 1 : i64} : tensor<4x8x1xf32> -> tensor<4x1x1xf32>
// CHECK-NEXT:    %[[RMS:.*]] = kn.sqrt %[[R1]] : tensor<4x1x1xf32>
// CHECK-NEXT:    %[[Y:.*]] = kn.div %x, %[[RMS]] : tensor<4x8x64xf32>, tensor<4x1x1xf32> -> tensor<4x8x64xf32>
// CHECK-NEXT:    %{{.*}} = kn.exp %[[Y]] : tensor<4x8x64xf32>

// -----

// Graphs without kn.rms_norm are left alone.
func.func @untouched(%x: tensor<2x8xf16>) -> tensor<2x8xf16> {
  %y = kn.sqrt %x : tensor<2x8xf16>
  func.return %y : tensor<2x8xf16>
}

// CHECK-LABEL: func.func @untouched
// CHECK-NEXT:    %y = kn.sqrt %x : tensor<2x8xf16>
// CHECK-NEXT:    func.return %y
