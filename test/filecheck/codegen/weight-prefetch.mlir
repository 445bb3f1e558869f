// RUN: mirage-opt %s -p 'mirage-transpile{tuning="always_split=true"}' -t cuda | filecheck %s
// A kernel-graph input marked kn.weight is loaded by the cp.async ring prologue before the
// PDL wait (codegen/weight_prefetch.py); X is loaded after it, and the kernel lets its
// dependent grid launch right before that wait.

func.func @rmsnorm_linear(%X: tensor<2x4096xf16> {kn.strides = array<i64: 4096, 1>},
                          %W: tensor<4096x6144xf16> {kn.strides = array<i64: 6144, 1>, kn.weight}) -> tensor<2x6144xf16> {
  %n = kn.rms_norm %X {normalized_shape = array<i64: 4096>} : tensor<2x4096xf16>
  %o = kn.matmul %n, %W : tensor<2x4096xf16>, tensor<4096x6144xf16> -> tensor<2x6144xf16>
  func.return %o : tensor<2x6144xf16>
}

// Only the weight keeps `const __restrict__` (ld.global.nc): X may be written by the previous
// grid while this one already runs.
// CHECK:      const mx::f16* i0,
// CHECK-NEXT: const mx::f16* __restrict__ i1,
// CHECK:      // kn.weight loads of the ring prologue, issued while the previous grid finishes
// CHECK-NOT:  i0 +
// CHECK:      mx::g2s_async<{{.*}}>(s{{[0-9]+}}_0, i1 + {{.*}});
// CHECK-NOT:  i0 +
// CHECK:      mx::allow_dependent_launch();
// CHECK-NEXT: mx::wait_for_prior_grids();
// CHECK:      mx::g2s_async<{{.*}}, i0 + {{.*}});
// CHECK:      mx::cp_async_commit();
// CHECK:      for (int it = 0;
// CHECK-NOT:  mx::allow_dependent_launch();
// CHECK:      "one_wave": true
