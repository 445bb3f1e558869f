// RUN: mirage-opt %s -p mirage-transpile | filecheck %s
// RUN: mirage-opt %s -p mirage-transpile -t cuda | filecheck %s --check-prefix=CUDA

// An rms_norm row as a register row chain: its squares, which only the chain's row sum reads,
// stay fp32 registers (`cute.row_chain_fp32`), so values near 1e-6 do not square to an fp16 zero.
// The sum X + R, a second output, is stored straight from registers (`cute.row_chain_global`
// on its fill and copy), not only the chain's last op.

// CHECK:      cute.kernel(%X, %R, %G) attributes {{{.*}}cute.row_chains = 1 : i64
// CHECK:      cute.elementwise "id"(%{{.*}}) [#cute.fn<square>] "store" %{{.*}} {cute.row_chain = 0 : i64, cute.row_chain_fp32
// CHECK-NOT:  cute.copy_s2g "chunked" {{.*}}cute.row_chain = 
// CUDA:       __launch_bounds__(512)
// CUDA:       = [](float o, float a, float b, float c) { return mx::f_square(a); }
// CUDA:       mx::store_row<8>(&(o0
// CUDA:       mx::store_row<8>(&(o1

builtin.module {
  func.func @add_rms(%X: tensor<64x4096xf16> {kn.strides = array<i64: 4096, 1>}, %R: tensor<64x4096xf16> {kn.strides = array<i64: 4096, 1>}, %G: tensor<1x4096xf16> {kn.strides = array<i64: 4096, 1>, kn.weight}) -> (tensor<64x4096xf16>, tensor<64x4096xf16>) {
    %0 = kn.add %X, %R : tensor<64x4096xf16>, tensor<64x4096xf16> -> tensor<64x4096xf16>
    %1 = kn.rms_norm %0 {normalized_shape = array<i64: 4096>} : tensor<64x4096xf16>
    %2 = kn.mul %1, %G : tensor<64x4096xf16>, tensor<1x4096xf16> -> tensor<64x4096xf16>
    func.return %2, %0 : tensor<64x4096xf16>, tensor<64x4096xf16>
  }
}
