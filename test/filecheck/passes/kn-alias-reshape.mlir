// RUN: mirage-opt %s -p kn-alias-reshape | filecheck %s

// A row-major [1, 512] read as heads [2, 2, 128] is a view (strides 256, 128, 1); a
// reshape of that view is a view too.  A column-major input has no view of [1024]: it stays
// a copy, as does a reshape whose result is a graph output (its own buffer) of a value that
// is no kernel's result (a kernel's result read by nothing else is written straight into the
// output instead, `kn.output_view`: test/test_reshape.py).
func.func @views(%x: tensor<1x512xf16> {kn.strides = array<i64: 512, 1>},
                 %c: tensor<8x128xf16> {kn.strides = array<i64: 1, 8>}) -> (tensor<2x2x128xf16>, tensor<1024xf16>, tensor<4x128xf16>) {
  %h = kn.reshape %x : tensor<1x512xf16> -> tensor<2x2x128xf16>
  %r = kn.relu %h : tensor<2x2x128xf16>
  %f = kn.reshape %h : tensor<2x2x128xf16> -> tensor<4x128xf16>
  %g = kn.relu %f : tensor<4x128xf16>
  %o = kn.reshape %g : tensor<4x128xf16> -> tensor<4x128xf16>
  %t = kn.reshape %c : tensor<8x128xf16> -> tensor<1024xf16>
  func.return %r, %t, %o : tensor<2x2x128xf16>, tensor<1024xf16>, tensor<4x128xf16>
}

// CHECK-LABEL: func.func @views
// CHECK:       %h = kn.reshape %x {kn.strides = [array<i64: 256, 128, 1>], kn.alias} : tensor<1x512xf16> -> tensor<2x2x128xf16>
// CHECK:       %f = kn.reshape %h {kn.strides = [array<i64: 128, 1>], kn.alias} : tensor<2x2x128xf16> -> tensor<4x128xf16>
// CHECK:       %o = kn.reshape %g : tensor<4x128xf16> -> tensor<4x128xf16>
// CHECK-NEXT:  %t = kn.reshape %c : tensor<8x128xf16> -> tensor<1024xf16>
